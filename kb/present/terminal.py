"""A terminal (TTY): the plain layout with colour and highlighted snippets, via rich.

Nothing is hard-wrapped: lines are printed with ``soft_wrap`` so the terminal folds them for the eye
while a copy keeps each command and name whole. Returns the text with ANSI codes; the caller prints it.
"""

from __future__ import annotations

import io
from typing import Any

from kb.present.doc import Block, answer_blocks, result_blocks

STYLES = {
    "title": "bold",
    "heading": "bold",
    "ok": "green",
    "bad": "red",
    "warn": "yellow",
    "dim": "dim",
    "param": "cyan",
    "": "",
}


def blocks_ansi(blocks: list[Block], color_system: str | None = "standard") -> str:
    from rich.console import Console
    from rich.syntax import Syntax
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=color_system is not None, color_system=color_system, width=10_000)
    first = True
    for b in blocks:
        if b.kind == "rule":
            if not first:
                con.print()
            continue
        first = False
        if b.kind == "title":
            t = Text(b.text, style="bold")
            if b.meta:
                t.append(f"  [{b.meta}]", style="dim")
            con.print(t, soft_wrap=True)
        elif b.kind == "heading":
            con.print()
            con.print(Text(b.text, style=f"bold {STYLES.get(b.style, '')}".strip()), soft_wrap=True)
        elif b.kind == "code":
            con.print()
            con.print(Syntax(b.text, b.lang or "text", theme="ansi_dark").highlight(b.text), soft_wrap=True, end="")
            con.print()
        else:
            con.print(Text("  " * b.level + b.text, style=STYLES.get(b.style, "")), soft_wrap=True)
    return buf.getvalue()


def answer(
    ans: Any, site_url: str = "", color_system: str | None = "standard", long: bool = True, all_fronts: bool = False
) -> str:
    return blocks_ansi(answer_blocks(ans, site_url, long, all_fronts), color_system)


def entry(result: dict[str, Any], lang: str, site_url: str = "", color_system: str | None = "standard") -> str:
    return blocks_ansi(result_blocks(result, lang, site_url=site_url), color_system)
