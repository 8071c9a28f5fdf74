"""Markdown (GitHub / Discord / Slack-compatible subset): headings, lists, fenced code blocks."""

from __future__ import annotations

from typing import Any

from kb.present.doc import Block, answer_blocks, result_blocks


def blocks_markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for b in blocks:
        if b.kind == "rule":
            lines.append("")
        elif b.kind == "title":
            lines += [f"### {b.text}", f"`{b.meta}`" if b.meta else ""]
        elif b.kind == "heading":
            lines += ["", f"**{b.text}**"]
        elif b.kind == "code":
            pad = "  " * max(0, b.level - 1)
            lines += [f"{pad}```{b.lang}", *(pad + ln for ln in b.text.splitlines()), f"{pad}```"]
        elif b.kind == "item":
            lines.append("  " * max(0, b.level - 1) + f"- {b.text}")
        else:
            text = f"_{b.text}_" if b.style == "dim" and b.level == 0 else b.text
            lines.append("  " * max(0, b.level - 1) + text)
    return "\n".join(lines).strip("\n") + "\n"


def answer(ans: Any, site_url: str = "", long: bool = True, all_fronts: bool = False) -> str:
    return blocks_markdown(answer_blocks(ans, site_url, long, all_fronts))


def entry(result: dict[str, Any], lang: str, site_url: str = "") -> str:
    return blocks_markdown(result_blocks(result, lang, site_url=site_url))
