"""The text of every report command (lint, factcheck, mem, eval, stats, build, check, registry lookup).

Pure functions: core result in, text out (no colour, no wrapping; the CLI prints it as it is).
"""

from __future__ import annotations

from typing import Any


def _lines(*parts: str) -> str:
    return "\n".join(p for p in parts if p is not None) + "\n"


# ---------------------------------------------------------------- kb lint / kb factcheck


def lint(name: str, kind: str, fmt: str, findings: list[dict[str, Any]], lang: str = "en") -> str:
    zh = lang == "zh"
    out = [f"{name}: {kind} config ({fmt}), {len(findings)} finding(s)"]
    for f in findings:
        msg = (f.get("message_zh") if zh else None) or f["message"]
        sug = (f.get("suggestion_zh") if zh else None) or f.get("suggestion")
        loc = f"{name}:{f['line']}" if f.get("line") else name
        out.append(f"{loc}: {f['code']} {f['severity']} {f['path']}: {msg}")
        if sug:
            out.append(f"    {'修改' if zh else 'fix'}: {sug}")
        if f.get("entry"):
            out.append(f"    {'参见' if zh else 'see'}: kb show {f['entry']}")
    return _lines(*out)


def factcheck(name: str, names: list[dict[str, Any]], note: str | None = None, lang: str = "en") -> str:
    from collections import Counter

    from kb.present.labels import L

    lb = L(lang)
    out = [f"note: {note}"] if note else []
    out += [f"{name}:{n['line']}: {n['verdict']:16} {n['message']}" for n in names]
    if not names:
        out.append(f"{name}: {lb['fc_none']}")
        return _lines(*out)
    counts = Counter(n["verdict"] for n in names)
    from kb.registry.factcheck import VERDICTS as order

    sep = "，" if lang == "zh" else ", "
    parts = sep.join(f"{counts[v]} {lb['verdict.' + v]}" for v in order if counts[v])
    out.append(f"{name}: {lb['fc_summary'].format(n=len(names), counts=parts)}")
    if counts["unverified"]:
        out.append(f"{name}: {lb['fc_unverified_note']}")
    return _lines(*out)


# ---------------------------------------------------------------- kb mem


def memory(e: dict[str, Any], explain: bool = False) -> str:
    """``kb mem``: the terms alive at the peak phase, the phase totals, the verdicts, DeepSpeed's estimator for
    reference, notes and the cheapest changes. ``explain``: every term of every phase with its formula and source."""
    s = e["setup"]
    what = s["shape"] or f"{e['params'] / 1e9:.2f}B params"
    mode = f"ZeRO-{s['stage']}, offload {s['offload']}"
    if s["lora_rank"] or s["qlora"]:
        mode = f"LoRA r={s['lora_rank'] or 16}" + (" (QLoRA)" if s["qlora"] else "") + f", {mode}"
    out = [
        f"{what}: {e['params']:,} parameters ({e['trainable_params']:,} trainable), {mode}, "
        f"{s['gpus']} GPU(s) x {s['nodes']} node(s), {s['precision']}, seq {s['seq']}, micro-batch "
        f"{s['micro_batch']}, activation checkpointing {'on' if s['activation_checkpointing'] else 'off'}, "
        f"optimizer {s.get('optimizer', 'torch')}" + (", expandable_segments" if s.get("expandable_segments") else ""),
    ]
    terms = e.get("terms") or []
    if explain:
        out.append("Per GPU, every term (bytes = formula; source) and the phases it is alive in")
        for t in terms:
            out.append(f"  {t['gib']:9.2f} GiB  {t['label']}  [{', '.join(t['phases'])}]")
            out.append(f"               = {t['formula']}")
            out.append(f"               source: {t['source']}")
    else:
        out.append(f"Per GPU, at the peak ({e.get('peak_phase') or '-'})")
        out += [f"  {v:9.2f} GiB  {k}" for k, v in e["gpu"].items()]
    if e.get("phases"):
        out.append("  by phase: " + ", ".join(f"{p['phase']} {p['gib']:.2f}" for p in e["phases"]))
    out.append(
        f"  {e['gpu_total_gib']:9.2f} GiB  estimated peak allocated (torch.cuda.max_memory_allocated), in "
        f"{e.get('peak_phase') or '-'}"
    )
    verdict = {"fits": "fits", "tight": "TIGHT (fits by allocation only)", "does not fit": "DOES NOT FIT"}[
        e.get("gpu_verdict") or ("fits" if e["fits_gpu"] else "does not fit")
    ]
    out.append(
        f"  {e['gpu_needed_gib']:9.2f} GiB  with 1 GiB CUDA context, vs {s['gpu_mem_gib']:g} GiB: {verdict}; "
        f"expected peak reserved ~{e.get('reserved_gib', 0):.1f} GiB"
    )
    if e["host"]:
        out.append("Per node (host RAM)")
        if explain:
            for t in e.get("host_terms") or []:
                out.append(f"  {t['gib']:9.2f} GiB  {t['label']}")
                out.append(f"               = {t['formula']}")
                out.append(f"               source: {t['source']}")
        else:
            out += [f"  {v:9.2f} GiB  {k}" for k, v in e["host"].items()]
        hv = ""
        if s["cpu_mem_gib"] is not None:
            hv = f" vs {s['cpu_mem_gib']:g} GiB: " + {
                "fits": "fits",
                "tight": "TIGHT",
                "does not fit": "DOES NOT FIT",
            }.get(e["host_verdict"], e["host_verdict"])
        out.append(f"  {e['host_total_gib']:9.2f} GiB  total{hv}")
    d = e.get("deepspeed_estimator")
    if d:
        out.append(
            f"DeepSpeed's estimator says: {d['gpu_gib']:.2f} GiB per GPU, {d['cpu_gib']:.2f} GiB per node "
            f"({d['function']}: model states only, with its 1.5x host buffer; it prints GiB labelled GB)"
        )
    out += [f"note: {n}" for n in e["notes"]]
    if e["changes"]:
        out.append("Cheapest changes that make it fit")
        out += [
            f"  {i}. {c['change']}: {c['gpu_needed_gib']:.1f} GiB per GPU, host {c['host_total_gib']:.1f} GiB ({c['cost']})"
            for i, c in enumerate(e["changes"], 1)
        ]
    if not explain:
        out.append("(kb mem --explain: every term with its formula and source)")
    return _lines(*out)


# ---------------------------------------------------------------- kb eval / kb stats / kb build / kb check


def evaluation(rep: dict[str, Any], show_misses: bool = False) -> str:
    out = []
    for lang, s in rep["by_lang"].items():
        out.append(
            f"{lang}: n={s['n']}  hit@1={s['hit@1']:.3f}  hit@3={s['hit@3']:.3f}  MRR={s['mrr']:.3f}"
            + (f"  params named={s['params_named']:.2f}" if s["params_named"] is not None else "")
        )
    o = rep["out_of_scope"]
    if o["declined"] or o["answered"]:
        out.append(f"out of scope: declined {o['declined']}, answered {o['answered']}")
    nm = rep["near_misses"]
    if nm["n"]:
        out.append(f"near misses (not_queries): {nm['n']}, wrongly in the top 3: {nm['in_top3']}")
    if rep["not_covered"]:
        out.append(
            f"not covered by any entry topic ({len(rep['not_covered'])}): {', '.join(map(str, rep['not_covered']))}"
        )
    if show_misses:
        for r in rep["items"]:
            miss = (
                (r.get("oos") and r["answered"])
                or (r.get("covered") and (r["rank"] is None or r["rank"] > 3))
                or r.get("violated")
            )
            if miss:
                out.append(f"  MISS {r['id']} ({r['lang']}): rank={r.get('rank')} top={r['top']}")
    return _lines(*out)


def stats(rep: dict[str, Any], list_unused: bool = False) -> str:
    lg = rep["languages"]
    out = [
        f"entries: {rep['entries']} ({rep['withdrawn']} withdrawn), topics: {rep['topics']}",
        "by area: " + ", ".join(f"{a} {n}" for a, n in rep["by_area"].items()),
        f"symptoms: en {lg['symptoms_en']}, zh {lg['symptoms_zh']}; test queries: en {lg['queries_en']}, "
        f"zh {lg['queries_zh']}; entries with >= 2 zh queries: {lg['entries_with_2plus_zh_queries']}/{lg['entries']}; "
        f"with >= 2 symptoms per language: {lg['entries_with_2plus_symptoms_each_language']}/{lg['entries']}",
        f"registry ids used by entries: {rep['params_used']} of {rep['registry_records']} records "
        f"({', '.join(f'{k} {v}' for k, v in rep['params_used_by_package'].items())})",
        f"DeepSpeed config keys never used by an entry: {rep['deepspeed_config_keys_unused']} of "
        f"{rep['deepspeed_config_keys']}",
    ]
    if list_unused:
        out += [f"  {rid}" for rid in rep["deepspeed_config_keys_unused_list"]]
    out.append(f"myths: {rep['myths']} (names: {', '.join(f'{k} {v}' for k, v in sorted(rep['myth_names'].items()))})")
    out.append("sources: " + ", ".join(f"{k} {v}" for k, v in sorted(rep["sources"].items())))
    return _lines(*out)


def build(rep: dict[str, Any]) -> str:
    out = [
        f"built {rep['path']}: {rep['entries']} entries, {rep['units']} units, embedded {rep['embedded']}, "
        f"reused {rep['reused']} ({rep['embedder']}) in {rep['seconds']:.2f}s"
    ]
    if rep["changed_entries"]:
        more = " ..." if len(rep["changed_entries"]) > 10 else ""
        out.append(f"changed entries: {', '.join(rep['changed_entries'][:10])}{more}")
    return _lines(*out)


def skipped(paths: list[str]) -> str:
    return _lines(*(f"skipped invalid entry (see `kb check`): {p}" for p in paths))


def build_started(reason: str) -> str:
    return {
        "missing": "no index yet: building it (first run only; vectors of the shipped entries come from data/embeddings/) ...",
        "stale": "entries changed since the last build: updating the index ...",
    }.get(reason, f"building the index ({reason}) ...")


def check(n_files: int, problems: list[str]) -> str:
    status = "ok" if not problems else f"{len(problems)} problem(s)"
    return _lines(*problems, f"checked {n_files} entries: {status}")


def check_fix(proposals: list[dict[str, Any]], written: bool = False) -> str:
    """`kb check --fix`: per entry, the registry ids to add to each params list and the names to declare."""
    out: list[str] = []
    n_ids = sum(len(ids) for p in proposals for ids in p["add"].values())
    n_ext = sum(len(p["external"]) + len(p["misplaced"]) for p in proposals)
    for p in proposals:
        out.append(f"{p['file']}:")
        for fld, ids in p["add"].items():
            for rid in ids:
                alts = p["alternatives"].get(rid)
                alt = f" (or {', '.join(alts)})" if alts else ""
                out.append(f"  {fld} += {rid}{alt}    named in {', '.join(p['fields'][rid])}")
        for name in p["external"]:
            out.append(
                f"  external += {name}    not in the registry: declare it with a source (named in {', '.join(p['fields'][name])})"
            )
        for name in p["misplaced"]:
            out.append(
                f"  {name}: not where the registry has it: fix the name or make it a myth name "
                f"(named in {', '.join(p['fields'][name])})"
            )
        if written:
            state = "params written" if p.get("written") else ("params NOT written (not safe)" if p["add"] else "")
            if state:
                out.append(f"  -> {state}")
    tail = f"{len(proposals)} entries need links: {n_ids} registry id(s) to add, {n_ext} name(s) to declare or fix"
    return _lines(*out, tail if proposals else "every shown name is linked")


def progress_line(what: str, done: int, total: int) -> str:
    return f"{what}: {done}/{total}"


# ---------------------------------------------------------------- kb registry build / lookup


def introspecting(package: str) -> str:
    return f"introspecting {package} ...\n"


def registry_files(manifest: dict[str, Any]) -> str:
    if manifest.get("format", 1) < 2:
        return _lines(*(f"{fname}: {info['records']} records" for fname, info in manifest["files"].items()))
    out = []
    for pkg, info in manifest["packages"].items():
        out.append(f"{pkg}.jsonl: {info['records']} records over {len(info['releases'])} release(s)")
        for v in info["releases"]:
            skipped = info.get("skipped", {}).get(v, [])
            note = f", {len(skipped)} part(s) skipped" if skipped else ""
            out.append(f"  {v}: {info['per_release'][v]} records ({info['built'][v]}{note})")
            out += [f"    skipped: {s}" for s in skipped]
    return _lines(*out)


def lookup(
    name: str,
    lk: dict[str, Any],
    history: list[tuple[str, dict[str, Any] | None]] = (),  # type: ignore[assignment]
    spellings: list[dict[str, Any]] = (),  # type: ignore[assignment]
    judged_by: dict[str, str] | None = None,
) -> str:
    by = f"  (judged by {', '.join(f'{p} {v}' for p, v in sorted(judged_by.items()))})" if judged_by else ""
    out = [f"{name}: {lk['status']}{by}"]
    for r in lk["records"]:
        dep = f"  deprecated -> {r['replacement']}{' (no-op)' if r['noop'] else ''}" if r["deprecated"] else ""
        out.append(f"  {r['id']}  [{r['kind']}] type={r['type'] or '-'} default={r['default']}{dep}")
        out.append(f"    {r['package']} {r['version']} {r['source_file']}:{r['source_line']}")
        if r.get("status") == "absent":
            out.append(f"    not in this release: recorded in {r['since']} .. {r['until']}")
    if history:
        out.append("  history (recorded releases):")
        for rel, h in history:
            if h is None:
                out.append(f"    {rel:<10} -")
                continue
            dep = "  deprecated" if h.get("deprecated") else ""
            out.append(f"    {rel:<10} default={h['default']}{dep}  {h['source_file']}:{h['source_line']}")
    if len(spellings) > 1:
        out.append("  spellings: " + "; ".join(f"{s['name']} ({s['since']}..{s['until']})" for s in spellings))
    if lk["suggestions"]:
        out.append(f"  did you mean: {', '.join(lk['suggestions'])}")
    return _lines(*out)


# ---------------------------------------------------------------- kb env


def versions(d: dict[str, Any], lang: str = "en", name: str | None = None) -> str:
    """``kb env``: the versions read (kb.registry.versions.Versions.to_dict()), from ``name`` or, when None, the environment."""
    from kb.i18n import t
    from kb.present.labels import L

    lb = L(lang)

    def where(p: dict[str, Any]) -> str:
        at = lb["versions_line"].format(n=p["line_no"]) if p.get("line_no") else ""
        return f"{p['source']}, {at}{p['line']}" if p.get("line") else p["source"]

    def shown(p: dict[str, Any]) -> str:
        return lb["versions_partial"].format(version=p["version"]) if p["partial"] else p["version"]

    out = [lb["versions_env"] if name is None else lb["versions_found"].format(name=name)]
    pkgs = d["packages"]
    if not pkgs:
        from kb.registry.versions import packages

        out.append("  " + lb["versions_none"].format(packages=", ".join(packages()), name=name or lb["versions_here"]))
    width = max((len(shown(p)) for p in (*pkgs.values(), *d["facts"].values())), default=0)
    out += [f"  {pkg:13} {shown(p):{width}}  ({where(p)})" for pkg, p in pkgs.items()]
    if d["facts"]:
        out.append(lb["versions_facts"])
        out += [f"  {k:13} {f['version']:{width}}  ({where(f)})" for k, f in d["facts"].items()]
    if d["conflicts"]:
        out.append(lb["versions_conflicts"])
        for c in d["conflicts"]:
            k, x = c["kept"], c["dropped"]
            msg = t(
                lang,
                "versions.conflict",
                name=c["name"],
                kept=k["version"],
                kept_source=where(k),
                dropped=x["version"],
                dropped_source=where(x),
            )
            out.append(f"  {msg}")
    if d["ambiguous"]:
        out.append(lb["versions_ambiguous"])
        for n, pins in d["ambiguous"].items():
            found = ", ".join(dict.fromkeys(p["version"] for p in pins))
            out.append("  " + t(lang, "versions.ambiguous", name=n, found=found))
    return _lines(*out)


# ---------------------------------------------------------------- bots


def missing_tokens(platform: str, names: list[str]) -> str:
    return f"cannot start the {platform} bot: set {' and '.join(names)} in the environment (see docs/{platform}.md)"


def gaps(rep: dict[str, Any]) -> str:
    if not rep["groups"]:
        return _lines("no unanswered, low-score or down-voted questions" + (" in that period" if rep["since"] else ""))
    out = [f"{rep['questions']} question(s) in {len(rep['groups'])} group(s)"]
    for i, g in enumerate(rep["groups"], 1):
        why = ", ".join(f"{k} {v}" for k, v in g["why"].items())
        out.append(f"{i}. {g['count']} question(s) ({why})")
        for lang in ("en", "zh"):
            out += [f"     {lang}: {q}" for q in g["examples"].get(lang, [])]
        if g["closest_entries"]:
            out.append(f"     closest entries: {', '.join(g['closest_entries'])}")
        if g["downvote_reasons"]:
            out.append("     down-vote reasons: " + ", ".join(f"{k} {v}" for k, v in g["downvote_reasons"].items()))
    return _lines(*out)


def exported(n: int, path: str) -> str:
    return f"wrote {n} question(s) to {path}\n"
