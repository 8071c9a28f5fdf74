"""The text of every report command (lint, factcheck, mem, gaps, eval, stats, build, check, registry lookup).

Pure functions: a report in (lint, factcheck, mem and gaps take the contract's typed reports, kb.contract),
text out in the report's language (no colour, no wrapping; the CLI prints it as it is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kb.present.labels import L

if TYPE_CHECKING:  # annotations only: the report commands (stats, build, check) do not import the contract for them
    from kb.contract import FactcheckReport, GapsReport, LintReport, MemoryTerm, MemReport


def _lines(*parts: str) -> str:
    return "\n".join(p for p in parts if p is not None) + "\n"


# ---------------------------------------------------------------- kb lint / kb factcheck


def lint(r: LintReport) -> str:
    """``kb lint``: one line per finding (file:line, code, severity, path, message), its fix and its entry."""
    lb = L(r.lang)
    out = [lb["lint_head"].format(name=r.file, kind=r.config_kind, fmt=r.config_format, n=len(r.findings))]
    if r.versions:
        sep = "；" if r.lang == "zh" else "; "
        zh = r.lang == "zh"
        parts = [
            f"{v.package} {v.version}"
            + (
                (f"（{lb['lint_assumed']}：{v.reason}）" if zh else f" ({lb['lint_assumed']}: {v.reason})")
                if v.origin == "assumed"
                else ""
            )
            for v in r.versions
        ]
        out.append(f"{r.file}{'：' if zh else ': '}{lb['lint_versions']}{'：' if zh else ': '}{sep.join(parts)}")
    for f in r.findings:
        loc = f"{r.file}:{f.line}" if f.line else r.file
        out.append(f"{loc}: {f.code} {f.severity} {f.path}: {f.message}")
        if f.suggestion:
            out.append(f"    {lb['fix']}: {f.suggestion}")
        if f.entry:
            out.append(f"    {lb['see']}: kb show {f.entry}")
    return _lines(*out)


def factcheck(r: FactcheckReport) -> str:
    """``kb factcheck``: one line per name (file:line, verdict, message), then the count by verdict."""
    lb = L(r.lang)
    out = [f"{lb['note']}: {lb['fc_truncated'].format(n=r.truncated_at)}"] if r.truncated_at else []
    out += [f"{r.file}:{n.line}: {n.verdict:16} {n.message}" for n in r.names]
    if not r.names:
        out.append(f"{r.file}: {lb['fc_none']}")
        return _lines(*out)
    sep = "，" if r.lang == "zh" else ", "
    from kb.registry.factcheck import VERDICTS  # the order the summary counts them in

    parts = sep.join(f"{r.counts[v]} {lb['verdict.' + v]}" for v in VERDICTS if r.counts.get(v))
    out.append(f"{r.file}: {lb['fc_summary'].format(n=len(r.names), counts=parts)}")
    if r.counts.get("unverified"):
        out.append(f"{r.file}: {lb['fc_unverified_note']}")
    return _lines(*out)


# ---------------------------------------------------------------- kb mem


def memory(r: MemReport, explain: bool = False) -> str:
    """``kb mem``: the terms alive at the peak phase, the phase totals, the verdicts, DeepSpeed's estimator for
    reference, notes and the cheapest changes. ``explain``: every term with its formula, source and phases."""
    lb = L(r.lang)
    v = {x.name: x for x in r.setup}
    val = {k: x.value for k, x in v.items()}
    phase = {p.phase: p.label for p in r.phases}
    peak = phase.get(r.peak_phase, r.peak_phase) or "-"
    mode = lb["mem_mode"].format(stage=val["stage"], offload=val["offload"])
    if val["lora_rank"] or val["qlora"]:
        q = lb["mem_qlora"] if val["qlora"] else ""
        mode = lb["mem_lora"].format(rank=val["lora_rank"] or 16, qlora=q, mode=mode)
    out = [
        lb["mem_head"].format(
            what=r.shape or lb["mem_count"].format(b=r.params / 1e9),
            params=r.params,
            trainable=r.trainable_params,
            mode=mode,
            gpus=val["gpus"],
            nodes=val["nodes"],
            precision=val["precision"],
            seq=val["seq"],
            mb=val["micro_batch"],
            ckpt=v["activation_checkpointing"].text,
            optimizer=val["optimizer"],
            expandable=lb["mem_expandable"] if val["expandable_segments"] else "",
        )
    ]
    if explain:
        out.append(lb["mem_every_term"])
        for t in r.terms:
            out.append(f"  {t.gib:9.2f} GiB  {t.label}  [{', '.join(phase.get(p, p) for p in t.phases)}]")
            out += _explained(t, lb)
    else:
        out.append(lb["mem_at_peak"].format(phase=peak))
        out += [f"  {t.gib:9.2f} GiB  {t.label}" for t in r.gpu]
    if r.phases:
        out.append(f"  {lb['phases']}: " + ", ".join(f"{p.label} {p.gib:.2f}" for p in r.phases))
    out.append(f"  {r.gpu_total_gib:9.2f} GiB  " + lb["mem_peak"].format(phase=peak))
    verdict = {"fits": lb["mem_v_fits"], "tight": lb["mem_v_tight"], "does not fit": lb["mem_v_no"]}[
        r.gpu_verdict or ("fits" if r.fits_gpu else "does not fit")
    ]
    out.append(
        f"  {r.gpu_needed_gib:9.2f} GiB  "
        + lb["mem_needed"].format(card=r.gpu_mem_gib, verdict=verdict, reserved=r.reserved_gib)
    )
    if r.host:
        out.append(lb["mem_host"])
        for t in r.host:
            out.append(f"  {t.gib:9.2f} GiB  {t.label}")
            if explain:
                out += _explained(t, lb)
        hv = ""
        if val["cpu_mem"] is not None:
            word = {"fits": lb["mem_v_fits"], "tight": lb["mem_h_tight"], "does not fit": lb["mem_v_no"]}
            hv = lb["mem_host_vs"].format(card=val["cpu_mem"], verdict=word.get(r.host_verdict, r.host_verdict))
        out.append(f"  {r.host_total_gib:9.2f} GiB  {lb['mem_total']}{hv}")
    d = r.deepspeed_estimator
    if d:
        out.append(lb["mem_ds"].format(gpu=d.gpu_gib, cpu=d.cpu_gib, function=d.function))
    out += [f"{lb['note']}: {n}" for n in r.notes]
    if r.changes:
        out.append(lb["mem_changes"])
        out += [
            f"  {i}. "
            + lb["mem_change"].format(change=c.change, gpu=c.gpu_needed_gib, host=c.host_total_gib, cost=c.cost)
            for i, c in enumerate(r.changes, 1)
        ]
    if not explain:
        out.append(lb["mem_explain"])
    return _lines(*out)


def _explained(t: MemoryTerm, lb: dict[str, str]) -> list[str]:
    return [f"               = {t.formula}", f"               {lb['mem_source']}: {t.source}"]


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


def check(n_files: int, problems: list[str], info: list[str] | tuple[str, ...] = ()) -> str:
    """`kb check`: each problem, info lines (the code sources CHK008 could not check, one line per reason: not
    problems), and the count."""
    status = "ok" if not problems else f"{len(problems)} problem(s)"
    return _lines(*problems, *info, f"checked {n_files} entries: {status}")


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
    releases: dict[str, Any] | None = None,
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
    if releases:
        w0, w1 = releases["window"]
        out.append(f"  every minor release of {releases['package']} ({releases['minors']} from {w0} to {w1}):")
        spans = ", ".join(f"{a}..{b}" for a, b in releases["spans"])
        gone = f"; removed in {releases['removed_in']}" if releases.get("removed_in") else ""
        first = f" (default {releases['first_default']} at first)" if releases.get("first_default") is not None else ""
        out.append(f"    present in {spans}{first}{gone}")
        for e in releases["events"]:
            if e["event"] == "default":
                out.append(f"    {e['release']:<10} default -> {e['default']}")
            elif e["event"] == "deprecated":
                out.append(f"    {e['release']:<10} deprecated: {e['message']}")
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


def gaps(r: GapsReport) -> str:
    if not r.groups:
        return _lines("no unanswered, low-score or down-voted questions" + (" in that period" if r.since else ""))
    out = [f"{r.questions} question(s) in {len(r.groups)} group(s)"]
    for i, g in enumerate(r.groups, 1):
        why = ", ".join(f"{k} {v}" for k, v in g.why.items())
        out.append(f"{i}. {g.count} question(s) ({why})")
        for lang in ("en", "zh"):
            out += [f"     {lang}: {q}" for q in g.examples.get(lang, [])]
        if g.closest_entries:
            out.append(f"     closest entries: {', '.join(g.closest_entries)}")
        if g.downvote_reasons:
            out.append("     down-vote reasons: " + ", ".join(f"{k} {v}" for k, v in g.downvote_reasons.items()))
    return _lines(*out)


def exported(n: int, path: str) -> str:
    return f"wrote {n} question(s) to {path}\n"
