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
        "memory": "Memory (kb mem)",
        "score": "score",
        "touched": "Your query repeats this myth",
    },
    "zh": {
        "closest": "最接近的条目（匹配度不够，仅供参考）",
        "why": "匹配依据",
        "notes": "关于你提到的参数名",
        "findings": "你的配置（kb lint）",
        "memory": "显存估算（kb mem）",
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
    if ans.get("memory"):
        m = ans["memory"]
        verdict = "fits" if m["fits_gpu"] else "does NOT fit"
        console.print(
            Text(
                f"{AL['memory']} ({m['model']}): {m['gpu_needed_gib']:.1f} GiB per GPU needed: {verdict}; "
                f"host {m['host_total_gib']:.1f} GiB",
                style="bold green" if m["fits_gpu"] else "bold red",
            )
        )
        for k, v in m["gpu"].items():
            console.print(Text(f"  {v:8.2f} GiB  {k}", style="dim"))
        for c in m["changes"][:3]:
            console.print(Text(f"  -> {c['change']}: {c['gpu_needed_gib']:.1f} GiB per GPU", style="green"))
        console.print(Text("  assuming " + "; ".join(m["assumptions"]), style="dim"))
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


def render_memory(e, console: Console | None = None) -> None:
    """Print a kb mem estimate: per-GPU and per-node terms, verdicts, cheapest changes."""
    console = console or Console()
    s = e.setup
    what = s["shape"] or f"{e.params / 1e9:.2f}B params"
    mode = (
        (f"LoRA r={s['lora_rank']}" + (" (QLoRA)" if s["qlora"] else ""))
        if (s["lora_rank"] or s["qlora"])
        else (f"ZeRO-{s['stage']}, offload {s['offload']}")
    )
    console.print(
        Text(
            f"{what}: {e.params:,} parameters ({e.trainable_params:,} trainable), {mode}, "
            f"{s['gpus']} GPU(s) x {s['nodes']} node(s), {s['precision']}, seq {s['seq']}, micro-batch "
            f"{s['micro_batch']}, activation checkpointing {'on' if s['activation_checkpointing'] else 'off'}",
            style="bold",
        )
    )
    console.print(Text("Per GPU", style="bold"))
    for k, v in e.gpu.items():
        console.print(Text(f"  {v:9.2f} GiB  {k}"))
    console.print(
        Text(f"  {e.gpu_total_gib:9.2f} GiB  estimated peak allocated (torch.cuda.max_memory_allocated)", style="bold")
    )
    console.print(
        Text(
            f"  {e.gpu_needed_gib:9.2f} GiB  with 10% allocator fragmentation + 1 GiB CUDA context, vs "
            f"{s['gpu_mem_gib']:g} GiB: {'fits' if e.fits_gpu else 'DOES NOT FIT'}",
            style="green" if e.fits_gpu else "bold red",
        )
    )
    if e.host:
        console.print(Text("Per node (host RAM)", style="bold"))
        for k, v in e.host.items():
            console.print(Text(f"  {v:9.2f} GiB  {k}"))
        verdict = (
            ""
            if s["cpu_mem_gib"] is None
            else (
                f" vs {s['cpu_mem_gib']:g} GiB: "
                + {
                    "fits": "fits",
                    "tight": f"TIGHT ({e.host_min_gib:.0f} GiB without the 1.5x buffer)",
                    "does not fit": "DOES NOT FIT",
                }.get(e.host_verdict, e.host_verdict)
            )
        )
        console.print(Text(f"  {e.host_total_gib:9.2f} GiB  total{verdict}", style="bold"))
    if e.deepspeed_estimator:
        d = e.deepspeed_estimator
        console.print(
            Text(
                f"DeepSpeed's {d['function']}: {d['gpu_gib']:.2f} GiB per GPU, {d['cpu_gib']:.2f} GiB per node "
                "(model states only; it prints GiB labelled GB)",
                style="dim",
            )
        )
    for n in e.notes:
        console.print(Text(f"note: {n}", style="dim"))
    if e.changes:
        console.print(Text("Cheapest changes that make it fit", style="bold"))
        for i, c in enumerate(e.changes, 1):
            console.print(
                Text(
                    f"  {i}. {c['change']}: {c['gpu_needed_gib']:.1f} GiB per GPU, host {c['host_total_gib']:.1f} GiB"
                    f" ({c['cost']})"
                )
            )
