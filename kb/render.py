"""Terminal rendering (rich). Pure presentation: takes core objects, prints them."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.syntax import Syntax
from rich.text import Text

from kb.entries import Entry, Source
from kb.registry import Registry

LABELS = {
    "en": {
        "cause": "Cause",
        "fixes": "Fixes",
        "params": "Verified parameters",
        "myths": "Myths",
        "sources": "Sources",
        "applies": "Applies to",
        "wrong": "Wrong",
        "right": "Right",
        "withdrawn": "WITHDRAWN",
    },
    "zh": {
        "cause": "原因",
        "fixes": "解决办法",
        "params": "已核实的参数",
        "myths": "常见误区",
        "sources": "来源",
        "applies": "适用版本",
        "wrong": "错误说法",
        "right": "正确做法",
        "withdrawn": "已撤回",
    },
}


def source_line(s: Source) -> str:
    if s.type == "code":
        return f"[code] {s.package} {s.version} {s.file}:{s.line}" + (f"  {s.url}" if s.url else "")
    if s.type == "measurement":
        return f"[measurement] {s.file or s.url}: {s.note}"
    return f"[{s.type}] {s.url}" + (f"  ({s.note})" if s.note else "")


def param_line(reg: Registry, rid: str) -> str:
    r = reg.get(rid)
    if r is None:
        return f"{rid} (not in registry)"
    default = f" default={r['default']}" if r["default"] not in (None, "null") else ""
    return f"{rid}{default}  ({r['package']} {r['version']} {r['source_file']}:{r['source_line']})"


def entry_blocks(e: Entry, reg: Registry, lang: str, fixes: list[Any] | None = None) -> list[Any]:
    L = LABELS[lang]
    parts: list[Any] = [Text(e.summary.get(lang))]
    if e.withdrawn:
        parts.append(Text(f"{L['withdrawn']} {e.withdrawn.date}: {e.withdrawn.reason}", style="bold red"))
    parts.append(Text(f"\n{L['cause']}", style="bold"))
    for c in e.causes:
        parts.append(Text(f"  - {c.get(lang)}"))
    parts.append(Text(f"\n{L['fixes']}", style="bold"))
    for i, f in enumerate(fixes if fixes is not None else e.fixes, 1):
        parts.append(Text(f"  {i}. {f.title.get(lang)}", style="bold green"))
        parts.append(Text(f"     {f.text.get(lang)}"))
        if f.snippet:
            parts.append(Syntax(f.snippet.code.rstrip(), f.snippet.lang, theme="ansi_dark", indent_guides=False))
    ids = e.all_params()
    if ids:
        parts.append(Text(f"\n{L['params']}", style="bold"))
        for rid in ids:
            parts.append(Text(f"  {param_line(reg, rid)}", style="cyan"))
    if e.myths:
        parts.append(Text(f"\n{L['myths']}", style="bold"))
        for m in e.myths:
            parts.append(Text(f"  ✗ {L['wrong']}: {m.claim.get(lang)}", style="red"))
            parts.append(Text(f"  ✓ {L['right']}: {m.correction.get(lang)}", style="green"))
    if e.applies_to:
        parts.append(Text(f"\n{L['applies']}: " + ", ".join(f"{k} {v}" for k, v in e.applies_to.items()), style="dim"))
    parts.append(Text(f"\n{L['sources']}", style="bold"))
    for s in e.sources:
        parts.append(Text(f"  {source_line(s)}", style="dim"))
    return parts


def render_entry(e: Entry, reg: Registry, lang: str = "en", console: Console | None = None) -> None:
    console = console or Console()
    console.print(Panel(Group(*entry_blocks(e, reg, lang)), title=f"[bold]{e.title.get(lang)}[/]  [dim]{e.id}[/]"))


ANSWER_LABELS = {
    "en": {
        "closest": "Closest entries (not a confident match)",
        "why": "why",
        "notes": "About the names you used",
        "findings": "Your config (kb lint)",
        "score": "score",
        "touched": "Your query repeats this myth",
    },
    "zh": {
        "closest": "最接近的条目（匹配度不够，仅供参考）",
        "why": "匹配依据",
        "notes": "关于你提到的参数名",
        "findings": "你的配置（kb lint）",
        "score": "得分",
        "touched": "你的问题里提到了这个误区",
    },
}


def render_answer(ans: dict[str, Any], reg: Registry, console: Console | None = None) -> None:
    """Print a ``kb ask`` answer: notes, findings, then each result with fixes, params, myths, sources."""
    console = console or Console()
    lang = ans["lang"]
    L, AL = LABELS[lang], ANSWER_LABELS[lang]
    if ans.get("findings"):
        console.print(Text(AL["findings"], style="bold red"))
        style = {"error": "red", "warning": "yellow", "info": "dim"}
        for f in ans["findings"]:
            loc = f"line {f['line']} " if f.get("line") else ""
            console.print(
                Text(f"  {f['code']} {f['severity']} {loc}{f['path']}: {f['message']}", style=style[f["severity"]])
            )
            if f.get("suggestion"):
                console.print(Text(f"      fix: {f['suggestion']}", style="dim"))
    if ans.get("notes"):
        console.print(Text(AL["notes"], style="bold yellow"))
        for n in ans["notes"]:
            ok = n.get("verdict") == "valid"
            console.print(Text(f"  {'✓' if ok else '!'} {n['message']}", style="dim" if ok else "yellow"))
    if not ans["answered"]:
        console.print(Text(ans["message"], style="bold"))
        if ans["closest"]:
            console.print(Text(AL["closest"], style="dim"))
            for c in ans["closest"]:
                console.print(Text(f"  ? {c['title']}  [{c['id']}, {AL['score']} {c['score']}]", style="dim"))
        return
    for i, r in enumerate(ans["results"], 1):
        parts: list[Any] = [Text(r["summary"])]
        parts.append(Text(f"\n{L['fixes']}", style="bold"))
        for j, f in enumerate(r["fixes"], 1):
            parts.append(Text(f"  {j}. {f['title']}", style="bold green"))
            parts.append(Text(f"     {f['text']}"))
            if f.get("snippet"):
                parts.append(Syntax(f["snippet"]["code"].rstrip(), f["snippet"]["lang"], theme="ansi_dark"))
        if r["params"]:
            parts.append(Text(f"\n{L['params']}", style="bold"))
            parts.extend(Text(f"  {param_line(reg, rid)}", style="cyan") for rid in r["params"])
        myths = [m for m in r["myths"] if m["touched"]] or (r["myths"] if i == 1 else [])
        if myths:
            parts.append(Text(f"\n{L['myths']}", style="bold"))
            for m in myths:
                flag = f"  ({AL['touched']})" if m["touched"] else ""
                parts.append(Text(f"  \u2717 {L['wrong']}: {m['claim']}{flag}", style="red"))
                parts.append(Text(f"  \u2713 {L['right']}: {m['correction']}", style="green"))
        parts.append(Text(f"\n{L['sources']}", style="bold"))
        parts.extend(Text(f"  {source_line(Source(**s))}", style="dim") for s in r["sources"])
        parts.append(Text(f"\n{AL['why']}: {r['why']}", style="dim italic"))
        console.print(
            Panel(
                Group(*parts), title=f"[bold]{i}. {r['title']}[/]  [dim]{r['id']} \u00b7 {AL['score']} {r['score']}[/]"
            )
        )
