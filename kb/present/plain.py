"""Plain text: no colour, no box, no wrapping (a pipe or a file gets every line whole, so commands and
names copy-paste intact)."""

from __future__ import annotations

from typing import Any

from kb.present.doc import Block, answer_blocks, result_blocks

INDENT = "  "


def blocks_text(blocks: list[Block]) -> str:
    lines: list[str] = []
    for b in blocks:
        if b.kind == "rule":
            if lines:
                lines.append("")
        elif b.kind == "title":
            lines.append(f"{b.text}  [{b.meta}]" if b.meta else b.text)
        elif b.kind == "heading":
            lines += ["", b.text]
        elif b.kind == "code":
            lines += ["", *b.text.splitlines(), ""]  # unindented: pastes as it is
        else:
            lines.extend(INDENT * b.level + ln for ln in (b.text.splitlines() or [""]))
    return "\n".join(lines).strip("\n") + "\n"


def answer(ans: Any, site_url: str = "", long: bool = True, all_fronts: bool = False) -> str:
    return blocks_text(answer_blocks(ans, site_url, long, all_fronts))


def entry(result: dict[str, Any], lang: str, site_url: str = "") -> str:
    return blocks_text(result_blocks(result, lang, site_url=site_url))
