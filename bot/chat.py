"""What both chat renderers share: the answer's blocks (kb.present.doc), grouped into sections that
are never split, packed into a platform's budget, with mentions neutralised.

A *section* is a heading with what follows it, or one fix with its snippet: the unit a renderer may
drop when the message is full (it is dropped whole, never cut), and the unit a code block always stays
inside. ``pack`` keeps sections in order while they fit and reports how many it dropped, so the
renderer can say so (and point at ``kb show ID`` or the site) instead of cutting silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kb.present.doc import EQUIVALENTS, Block, answer_blocks, as_dict, result_blocks

# Discord: @everyone / @here and <@id>, <@!id>, <@&role>; Slack: <!everyone>, <!here>, <!channel>, <@U..>, <!subteam^..>
_DISCORD_PINGS = re.compile(r"@(everyone|here)|<@[!&]?\d+>")


def neutralise_discord(text: str) -> str:
    """Text that shows the same but can never ping (belt and braces beside AllowedMentions.none())."""
    return _DISCORD_PINGS.sub(lambda m: m.group(0).replace("@", "@\u200b", 1), text)


def escape_slack(text: str) -> str:
    """Slack mrkdwn escaping: &, <, > (this also defuses <!everyone>, <!here>, <@U123> and link syntax)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@dataclass
class Section:
    blocks: list[Block] = field(default_factory=list)
    result: int | None = (
        None  # which result (1-based) it belongs to; None: before the results (findings, memory, notes)
    )
    kind: str = "body"  # title | findings | memory | notes | fix | equivalent | params | myths | sources | message | closest | body


def sections(answer: Any) -> list[Section]:
    """The answer's blocks grouped into unsplittable sections, in display order."""
    a = as_dict(answer)
    out: list[Section] = []
    result: int | None = None
    for b in answer_blocks(a):
        if b.kind == "rule":
            result = (result or 0) + 1
            continue
        starts = (
            b.kind in ("title", "heading")
            or (b.kind == "item" and b.style == "ok" and b.level == 1 and _is_fix(b))
            or b.meta == EQUIVALENTS  # a fix's snippet for another front end: its own, droppable section
            or (result is None and b.kind == "text" and b.style == "title")  # the "no confident answer" message
        )
        if starts or not out:
            out.append(Section([b], result, _kind(b, result)))
        else:
            out[-1].blocks.append(b)
    return out


def entry_sections(result: dict[str, Any], lang: str) -> list[Section]:
    out: list[Section] = []
    for b in result_blocks(result, lang):
        if b.kind in ("title", "heading") or not out or (b.kind == "item" and _is_fix(b)) or b.meta == EQUIVALENTS:
            out.append(Section([b], 1, _kind(b, 1)))
        else:
            out[-1].blocks.append(b)
    return out


def _is_fix(b: Block) -> bool:
    return bool(re.match(r"^\d+\. ", b.text)) and b.style == "ok"


def _kind(b: Block, result: int | None) -> str:
    """What a section is, from its first block (headings before the results: findings, memory, notes)."""
    if b.kind == "title":
        return "title"
    if b.kind == "item" and _is_fix(b):
        return "fix"
    if b.meta == EQUIVALENTS:
        return "equivalent"
    if result is None and b.kind == "heading":
        from kb.present.labels import LABELS

        for lang in LABELS.values():
            if b.text == lang["findings"]:
                return "findings"
            if b.text == lang["notes"]:
                return "notes"
            if b.text == lang["closest"]:
                return "closest"
            if b.text.startswith(lang["memory"]):
                return "memory"
    return "message" if result is None and b.kind == "text" else "body"


def pack(items: list[Any], budget: int, cost: Callable[[Any], int]) -> tuple[list[Any], int]:
    """Keep items in order while the total cost fits ``budget``; return (kept, number dropped).

    Stops at the first item that does not fit, so nothing after a gap is shown out of context."""
    kept: list[Any] = []
    used = 0
    for i, it in enumerate(items):
        c = cost(it)
        if used + c > budget:
            return kept, len(items) - i
        kept.append(it)
        used += c
    return kept, 0
