"""What an answer shows, in which order, decided once: answer dict -> a flat list of blocks.

Every presenter (terminal, plain, markdown, and the chat and site renderers) walks these blocks, so
the choice of what to show (config findings first, the memory verdict, the notes about names, each
result with its fixes, verified parameters, myths, versions and sources, or "no confident answer"
with the closest entries marked as such) lives here and only here. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kb.present.labels import L

Style = str  # "" | title | heading | ok | bad | warn | dim | param | code
EQUIVALENTS = "equivalents"  # meta of the block that starts a fix's equivalent for another front end


@dataclass(frozen=True)
class Block:
    kind: str  # title | heading | text | item | code | rule
    text: str = ""
    style: Style = ""
    level: int = 0  # indentation level of text / item
    lang: str = ""  # code language (json, yaml, python, bash, text)
    meta: str = ""  # secondary text of a title (id, score)


def as_dict(obj: Any) -> dict[str, Any]:
    """Presenters accept the Answer dataclass or its JSON dict (a bot may get it over the wire)."""
    to = getattr(obj, "to_dict", None)
    return to() if callable(to) else obj


def source_text(s: dict[str, Any]) -> str:
    if s["type"] == "code":
        return f"[code] {s['package']} {s['version']} {s['file']}:{s['line']}" + (
            f"  {s['url']}" if s.get("url") else ""
        )
    if s["type"] == "measurement":
        return f"[measurement] {s.get('file') or s.get('url')}: {s.get('note')}"
    return f"[{s['type']}] {s['url']}" + (f"  ({s['note']})" if s.get("note") else "")


def param_text(p: dict[str, Any], lang: str) -> str:
    lb = L(lang)
    if not p.get("known", True):
        return f"{p['id']} ({lb['not_in_registry']})"
    default = f" {lb['default']}={p['default']}" if p.get("default") is not None else ""
    dep = ""
    if p.get("deprecated"):
        dep = (
            f" [{lb['deprecated']}"
            + (f", {lb['use_instead'].format(name=p['replacement'])}" if p.get("replacement") else "")
            + "]"
        )
    shown = f"{p['shown_name']} \u2190 " if p.get("shown_name") else ""
    return f"{shown}{p['id']}{default}{dep}  ({p['package']} {p['version']} {p['source_file']}:{p['source_line']})"


def front_label(front: str, lang: str) -> str:
    return L(lang).get(f"fe.{front}", front)


def finding_blocks(findings: list[dict[str, Any]], lang: str) -> list[Block]:
    lb = L(lang)
    out: list[Block] = []
    style = {"error": "bad", "warning": "warn", "info": "dim"}
    for f in findings:
        loc = f"{lb['at_line'].format(n=f['line'])} " if f.get("line") else ""
        out.append(
            Block("item", f"{f['code']} {f['severity']} {loc}{f['path']}: {f['message']}", style[f["severity"]], 1)
        )
        if f.get("suggestion"):
            out.append(Block("text", f"{lb['fix']}: {f['suggestion']}", "dim", 2))
        if f.get("entry"):
            out.append(Block("text", f"{lb['see']}: kb show {f['entry']}", "dim", 2))
    return out


def memory_blocks(m: dict[str, Any], lang: str) -> list[Block]:
    """The memory verdict, the terms alive at the peak (each with its formula and source), the phases, DeepSpeed's
    estimator for reference, the cheapest changes."""
    lb = L(lang)
    v = m.get("gpu_verdict") or ("fits" if m["fits_gpu"] else "does not fit")
    verdict = {"fits": lb["fits"], "does not fit": lb["does_not_fit"]}.get(
        v, lb["tight"].format(reserved=m.get("reserved_gib") or 0)
    )
    phase = next((p["label"] for p in m.get("phases") or [] if p["phase"] == m.get("peak_phase")), "")
    head = (
        f"{lb['memory']} ({m['model']}, {m['gpus']} GPU): "
        f"{lb['per_gpu_needed'].format(gib=m['gpu_needed_gib'], card=m['gpu_mem_gib'])}"
        + (f", {lb['peak_in'].format(phase=phase)}" if phase else "")
        + f": {verdict}"
    )
    tone = {"fits": "ok", "tight": "warn"}.get(v, "bad")
    out = [Block("heading", head, tone)]
    for t in m["gpu"]:
        out.append(Block("item", f"{t['gib']:8.2f} GiB  {t['label']}", "dim", 1))
        if t.get("formula"):
            out.append(
                Block(
                    "text", f"= {t['formula']}  [{t['source']}]" if t.get("source") else f"= {t['formula']}", "dim", 2
                )
            )
    if m.get("phases"):
        out.append(
            Block(
                "text", f"{lb['phases']}: " + ", ".join(f"{p['label']} {p['gib']:.1f}" for p in m["phases"]), "dim", 1
            )
        )
    if m["host"]:
        out.append(Block("text", lb["host"].format(gib=m["host_total_gib"]), "", 1))
    if m.get("deepspeed_estimator_gib") is not None:
        out.append(Block("text", lb["ds_estimator"].format(gib=m["deepspeed_estimator_gib"]), "dim", 1))
    out += [
        Block("item", "-> " + lb["change"].format(change=c["change"], gib=c["gpu_needed_gib"]), "ok", 1)
        for c in m["changes"][:3]
    ]
    if m["assumptions"]:
        out.append(Block("text", f"{lb['assuming']}: " + "; ".join(m["assumptions"]), "dim", 1))
    out += [Block("text", f"{lb['note']}: {n}", "dim", 1) for n in m.get("notes", [])]
    return out


def result_blocks(
    r: dict[str, Any], lang: str, n: int | None = None, all_myths: bool = True, site_url: str = ""
) -> list[Block]:
    """One entry: the same blocks for `kb ask` (numbered results) and `kb show` (one entry, everything)."""
    lb = L(lang)
    title = f"{n}. {r['title']}" if n is not None else r["title"]
    meta = f"{r['id']} \u00b7 {lb['score']} {r['score']}" if n is not None else r["id"]
    out = [Block("title", title, "title", meta=meta), Block("text", r["summary"])]
    if r.get("withdrawn"):
        out.append(Block("text", f"{lb['withdrawn']} {r['withdrawn']}", "bad"))
    if r.get("causes") and n is None:
        out.append(Block("heading", lb["cause"]))
        out += [Block("item", c, "", 1) for c in r["causes"]]
    out.append(Block("heading", lb["fixes"]))
    for j, f in enumerate(r["fixes"], 1):
        out.append(Block("item", f"{j}. {f['title']}", "ok", 1))
        out.append(Block("text", f["text"], "", 2))
        if f.get("snippet"):
            out.append(Block("code", f["snippet"]["code"].rstrip("\n"), "code", 2, lang=f["snippet"]["lang"]))
        out += [Block("text", n, "dim", 2) for n in f.get("version_notes", [])]
        for eq in f.get("equivalents", []):
            label = lb["same_in"].format(front=front_label(eq["front_end"], lang)) + ":"
            out.append(Block("text", label, "dim", 2, meta=EQUIVALENTS))  # chat surfaces rank these last
            if eq.get("snippet"):
                out.append(Block("code", eq["snippet"]["code"].rstrip("\n"), "code", 2, lang=eq["snippet"]["lang"]))
            out += [Block("text", n, "dim", 3) for n in eq.get("notes", [])]
    if r.get("param_facts"):
        out.append(Block("heading", lb["params"]))
        for p in r["param_facts"]:
            out.append(Block("item", param_text(p, lang), "param", 1))
            if p.get("note"):
                out.append(Block("text", p["note"], "dim", 2))
    myths = r["myths"] if all_myths else [m for m in r["myths"] if m["touched"]]
    if myths:
        out.append(Block("heading", lb["myths"]))
        for m in myths:
            flag = f"  ({lb['touched']})" if m["touched"] else ""
            out.append(Block("item", f"\u2717 {lb['wrong']}: {m['claim']}{flag}", "bad", 1))
            out.append(Block("item", f"\u2713 {lb['right']}: {m['correction']}", "ok", 1))
    if r.get("applies_to"):
        out.append(
            Block("text", f"{lb['applies']}: " + ", ".join(f"{k} {v}" for k, v in r["applies_to"].items()), "dim")
        )
    if r.get("applies") is False:
        out.append(Block("text", f"{lb['version_demoted']}: {r.get('version_note') or ''}", "warn"))
    out.append(Block("heading", lb["sources"]))
    out += [Block("item", source_text(s), "dim", 1) for s in r["sources"]]
    if r.get("related") and n is None:
        out.append(Block("text", f"{lb['related']}: " + ", ".join(r["related"]), "dim"))
    if site_url and r.get("path"):
        out.append(Block("text", f"{lb['page']}: {site_url.rstrip('/')}{r['path']}", "dim"))
    if r.get("why"):
        out.append(Block("text", f"{lb['why']}: {r['why']}", "dim"))
    return out


# the short answer (the default of `kb ask`): the first result with what a user acts on, the next ones compact,
# the rest one line each; --long (``long=True``) and `kb show` keep everything
SHORT_DETAILED = 1  # results shown with their first fix's text and snippet
SHORT_COMPACT = 3  # results up to this one get their summary's first sentence and fix titles
SHORT_FIXES = 3  # fix titles shown per result
SHORT_WHY = 110  # characters of the "why" line
LOG_LINES_SHOWN = 12  # lines of each used log block shown (its first and last lines)


def _sentences(text: str, n: int = 1, limit: int = 240) -> str:
    """The first ``n`` sentences of ``text`` (English or Chinese), cut at ``limit`` characters each."""
    out, rest = [], text
    for _ in range(n):
        cut = min((i + len(sep) for sep in (". ", "。", "；") if 0 < (i := rest.find(sep)) < limit), default=None)
        if cut is None:
            out.append(rest if len(rest) <= limit else rest[: limit - 3].rstrip() + "...")
            break
        out.append(rest[:cut].strip())
        rest = rest[cut:].lstrip()
        if not rest:
            break
    return " ".join(out) if out and out[0][-1:] not in "。；" else "".join(out)


def log_blocks(log: dict[str, Any], lang: str) -> list[Block]:
    """The lines of a pasted log the answer was built on (kb.ask.logs), each block cut to LOG_LINES_SHOWN lines."""
    lb = L(lang)
    out = [Block("heading", lb["log_used"])]
    for b in log.get("used") or []:
        rank = f", rank {b['rank']}" if b.get("rank") is not None else ""
        rep = f", {lb['log_repeats'].format(n=b['repeats'])}" if b.get("repeats", 1) > 1 else ""
        out.append(
            Block("text", lb["log_lines"].format(start=b["start_line"], end=b["end_line"]) + rank + rep, "dim", 1)
        )
        lines = b["text"].splitlines()
        if len(lines) > LOG_LINES_SHOWN:
            lines = [*lines[:2], "...", *lines[-(LOG_LINES_SHOWN - 3) :]]
        out.append(Block("code", "\n".join(lines), "code", 1, lang="text"))
    return out


def short_result_blocks(r: dict[str, Any], lang: str, n: int, front_end: str | None, site_url: str = "") -> list[Block]:
    """One result of a short answer: title, summary, the first fixes; the first result also its first fix's text and
    snippet (with the equivalent for the user's front end when the question or config names one), the myths the
    question repeats, and one line each for what --long adds."""
    lb = L(lang)
    out = [Block("title", f"{n}. {r['title']}", "title", meta=f"{r['id']} \u00b7 {lb['score']} {r['score']}")]
    if n > SHORT_COMPACT:
        return out
    detailed = n <= SHORT_DETAILED
    out.append(Block("text", r["summary"] if detailed else _sentences(r["summary"])))
    if r.get("withdrawn"):
        out.append(Block("text", f"{lb['withdrawn']} {r['withdrawn']}", "bad"))
    fixes = r["fixes"]
    if fixes:
        out.append(Block("heading", lb["fixes"]))
    hidden_fronts: list[str] = []
    for j, f in enumerate(fixes[:SHORT_FIXES], 1):
        out.append(Block("item", f"{j}. {f['title']}", "ok", 1))
        if not (detailed and j == 1):
            continue
        out.append(Block("text", _sentences(f["text"], 2), "", 2))
        if f.get("snippet"):
            out.append(Block("code", f["snippet"]["code"].rstrip("\n"), "code", 2, lang=f["snippet"]["lang"]))
        out += [Block("text", v, "dim", 2) for v in f.get("version_notes", [])]
        for eq in f.get("equivalents", []):
            if front_end is None:
                hidden_fronts.append(eq["front_end"])  # the --front-end value that shows it
                continue
            out.append(Block("text", lb["same_in"].format(front=front_label(eq["front_end"], lang)) + ":", "dim", 2))
            if eq.get("snippet"):
                out.append(Block("code", eq["snippet"]["code"].rstrip("\n"), "code", 2, lang=eq["snippet"]["lang"]))
            out += [Block("text", x, "dim", 3) for x in eq.get("notes", [])[:2]]
    if len(fixes) > SHORT_FIXES:
        out.append(Block("text", lb["more_fixes"].format(n=len(fixes) - SHORT_FIXES), "dim", 1))
    if hidden_fronts:
        out.append(Block("text", lb["other_fronts"].format(fronts=" | ".join(dict.fromkeys(hidden_fronts))), "dim", 1))
    if detailed:
        for m in [m for m in r["myths"] if m["touched"]]:
            out.append(Block("item", f"\u2717 {lb['wrong']}: {m['claim']}  ({lb['touched']})", "bad", 1))
            out.append(Block("item", f"\u2713 {lb['right']}: {m['correction']}", "ok", 1))
        if r.get("applies") is False:
            out.append(Block("text", f"{lb['version_demoted']}: {r.get('version_note') or ''}", "warn"))
        more = lb["short_more"].format(
            params=len(r.get("param_facts") or []), myths=len(r["myths"]), sources=len(r["sources"])
        )
        out.append(Block("text", more, "dim"))
    if site_url and r.get("path"):
        out.append(Block("text", f"{lb['page']}: {site_url.rstrip('/')}{r['path']}", "dim"))
    if r.get("why"):  # its strongest evidence first (kb.ask.rank.why); --long has all of it
        why = r["why"] if len(r["why"]) <= SHORT_WHY else r["why"][: SHORT_WHY - 3].rstrip() + "..."
        out.append(Block("text", f"{lb['why']}: {why}", "dim"))
    return out


def answer_blocks(answer: Any, site_url: str = "", long: bool = True, all_fronts: bool = False) -> list[Block]:
    """An answer as blocks: everything (``long``, what `kb ask --long` and the chat layouts start from) or the short
    default of `kb ask` (SHORT_* above; ``all_fronts``: every front end's equivalent, as `--front-end all` asks)."""
    a = as_dict(answer)
    lang = a["lang"]
    lb = L(lang)
    out: list[Block] = []
    if a.get("findings"):
        out.append(Block("heading", lb["findings"], "bad"))
        out += finding_blocks(a["findings"], lang)
    if a.get("memory"):
        out += memory_blocks(a["memory"], lang)
    if a.get("versions"):
        used = ", ".join(
            f"{v['package']} {v['version']}" + ("" if v["exact"] or not v.get("release") else f" (~{v['release']})")
            for v in a["versions"]
        )
        out.append(Block("text", f"{lb['judged_by']}: {used}", "dim"))
    if a.get("notes"):
        about_names = all(n.get("kind") == "param" for n in a["notes"])
        out.append(Block("heading", lb["notes"] if about_names else lb["notes_any"], "warn"))
        for note in a["notes"]:
            ok = note.get("verdict") == "valid"
            out.append(Block("item", f"{'✓' if ok else '!'} {note['message']}", "dim" if ok else "warn", 1))
    if (a.get("log") or {}).get("used"):
        out += log_blocks(a["log"], lang)
    if not a["answered"]:
        out.append(Block("text", a.get("message") or "", "title"))
        if a.get("closest"):
            out.append(Block("heading", lb["closest"], "dim"))
            out += [
                Block("item", f"? {c['title']}  [{c['id']}, {lb['score']} {c['score']}]", "dim", 1)
                for c in a["closest"]
            ]
        return out
    for i, r in enumerate(a["results"], 1):
        if long or i <= SHORT_COMPACT:
            out.append(Block("rule"))
        if long:  # the first result shows all its myths; later ones only those the query repeats
            out += result_blocks(r, lang, n=i, all_myths=(i == 1), site_url=site_url)
        else:
            out += short_result_blocks(r, lang, i, "all" if all_fronts else a.get("front_end"), site_url)
    if not long and a["results"]:
        out.append(Block("rule"))
        out.append(Block("text", lb["short_footer"].format(id=a["results"][0]["id"]), "dim"))
    return out


# ---------------------------------------------------------------- the other commands' reports, as blocks


def lint_blocks(report: Any) -> list[Block]:
    """A ``LintReport`` (or its dict): the file line, then each finding as an answer shows its config findings."""
    r = as_dict(report)
    lb = L(r["lang"])
    head = lb["lint_head"].format(name=r["file"], kind=r["config_kind"], fmt=r["config_format"], n=len(r["findings"]))
    tone = "bad" if r["counts"]["error"] else "warn" if r["counts"]["warning"] else "ok"
    return [Block("heading", head, tone), *finding_blocks(r["findings"], r["lang"])]


# the settings a memory report always shows; any other one only when the user set it
MEM_SHOWN = ("gpus", "nodes", "stage", "offload", "precision", "seq", "micro_batch", "activation_checkpointing")


def mem_blocks(report: Any) -> list[Block]:
    """A ``MemReport`` (or its dict): the memory verdict an answer shows, then the setup it was computed for."""
    r = as_dict(report)
    lb = L(r["lang"])
    shown = [v for v in r["setup"] if v["name"] != "model" and (v["name"] in MEM_SHOWN or v["given"])]
    sep = "，" if r["lang"] == "zh" else ", "
    setup = sep.join(f"{v['label']} {v['text']}" for v in shown)
    return [*memory_blocks(r, r["lang"]), Block("text", f"{lb['mem_setup']}: {setup}", "dim", 1)]


def show_blocks(report: Any, site_url: str = "") -> list[Block]:
    """A ``ShowReport`` (or its dict): the entry with everything (causes, all myths, related)."""
    r = as_dict(report)
    return result_blocks(r["result"], r["lang"], site_url=site_url)


def factcheck_blocks(report: Any) -> list[Block]:
    """A ``FactcheckReport`` (or its dict): each name with its verdict (valid ones dim, the others flagged)."""
    r = as_dict(report)
    lb = L(r["lang"])
    if not r["names"]:
        return [Block("text", lb["fc_none"], "dim")]
    style = {
        "valid": "dim",
        "unverified": "dim",
        "deprecated": "warn",
        "other-version": "warn",
        "not-a-config-key": "warn",
    }
    out = []
    for n in r["names"]:
        mark = "\u2713" if n["verdict"] == "valid" else "?" if n["verdict"] == "unverified" else "!"
        at = lb["at_line"].format(n=n["line"])
        out.append(Block("item", f"{mark} {at}: {n['message']}", style.get(n["verdict"], "bad"), 1))
    return out


def report_blocks(report: Any, site_url: str = "") -> list[Block]:
    """Any report of kb.contract.REPORTS but gaps (a curator's list, not a chat reply), by its ``kind``."""
    r = as_dict(report)
    kinds = {"lint": lint_blocks, "mem": mem_blocks, "factcheck": factcheck_blocks}
    if r["kind"] == "show":
        return show_blocks(r, site_url)
    if r["kind"] not in kinds:
        raise ValueError(f"no blocks for a report of kind {r['kind']!r}")
    return kinds[r["kind"]](r)
