"""Discord: the neutral ``bot.layout.Layout`` as a message body. Pure functions, no I/O.

``render(reply)`` returns the JSON body a bot posts (``content``, ``embeds``, ``components``,
``allowed_mentions``) and, when something did not fit, ``files``: ``[(filename, text)]`` with the whole
reply as Markdown. What is shown, in which order, what is dropped first and the buttons come from
``bot.layout``; this module only says how Discord writes text (``DiscordMarkup``), gives Discord's limits
as data, and maps a layout to its body:

- one embed per card (the config findings, the memory verdict, notes on names, the "no confident answer"
  message, one per result: title linked to the entry page, parts in the description, sources as a field,
  id and score in the footer); a part that does not fit an embed's description continues in another;
- the reason, the thank-you or the "did not fit" notice is the message content;
- every text from an entry or a user goes through ``safe`` (pings and ``` defused), and
  ``allowed_mentions`` is always ``{"parse": []}``: nothing in a reply can ping.

The dicts are exactly what discord.py 2.7 serialises for the same embeds and items.
"""

from __future__ import annotations

import re
from typing import Any

from bot.layout import (
    Control,
    Layout,
    Limits,
    Markup,
    Platform,
    defuse_fences,
    fit,
    notice_layout,
    reason_prompt_layout,
)
from bot.layout import render as render_layout

NO_MENTIONS: dict[str, list[str]] = {"parse": []}
BODY_KEYS = ("content", "embeds", "components", "allowed_mentions")

# https://discord.com/developers/docs/resources/message#embed-object-embed-limits and the component limits
LIMITS = {
    "content": 2000,
    "embeds": 10,
    "title": 256,
    "description": 4096,
    "fields": 25,
    "field_name": 256,
    "field_value": 1024,
    "footer": 2048,
    "total": 6000,  # every embed's title, description, field names and values, footer (and author) together
    "custom_id": 100,
    "rows": 5,  # action rows of a message
    "row_buttons": 5,  # buttons of one row (a select fills a row alone)
    "label": 80,
    "placeholder": 150,
    "option_label": 100,
}
COLOR = {"result": 0x5865F2, "error": 0xED4245, "warning": 0xFEE75C, "ok": 0x57F287, "dim": 0x95A5A6}
STYLE = {"primary": 1, "secondary": 2, "success": 3, "danger": 4}

# Discord: @everyone / @here and <@id>, <@!id>, <@&role>
_PINGS = re.compile(r"@(everyone|here)|<@[!&]?\d+>")
_URL_ESCAPES = {c: f"%{ord(c):02X}" for c in " ()<>[]`@\n\r\t"}


def safe(text: str | None) -> str:
    """Entry or user text for Discord: no pings (beside AllowedMentions.none()), and no ``` fence."""
    return _PINGS.sub(lambda m: m.group(0).replace("@", "@\u200b", 1), defuse_fences(text or ""))


class DiscordMarkup(Markup):
    def text(self, s: str) -> str:
        return safe(s)

    def bold(self, s: str) -> str:
        return f"**{s}**" if s else s

    def code(self, code: str, lang: str) -> str:
        return code_block(code, lang)

    def link(self, label: str, url: str | None) -> str:
        text = safe(label).replace("[", "(").replace("]", ")")
        if not url or not url.startswith(("https://", "http://")):
            return text
        # what would end the link target early, open a code span or fence, or look like a ping
        return f"[{text}]({''.join(_URL_ESCAPES.get(c, c) for c in url)})"


def code_block(code: str, lang: str = "") -> str:
    """A fenced code block, whole; the code is shown as is except that pings and ``` are defused."""
    return f"```{lang if lang and lang != 'text' else ''}\n{safe(code)}\n```"


# ---------------------------------------------------------------- layout -> body


def _embed(card: Any, cont: bool) -> dict[str, Any]:
    e: dict[str, Any] = {"type": "rich", "color": COLOR.get(card.tone, COLOR["result"]), "flags": 0}
    if not cont:
        if card.title:
            e["title"] = card.title
            if card.url:
                e["url"] = card.url
        if card.meta:
            e["footer"] = {"text": card.meta[: LIMITS["footer"]]}
    return e


def embeds(cards: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for card in cards:
        e = _embed(card, cont=False)
        group = [e]
        for p in card.parts:
            for k, chunk in enumerate(p.chunks or []):
                fields = e.setdefault("fields", [])
                one = p.field and len(p.chunks or []) == 1 and 0 < len(chunk) <= LIMITS["field_value"]
                if one and len(fields) < LIMITS["fields"]:
                    fields.append({"name": p.field, "value": chunk, "inline": False})
                    continue
                text = f"**{p.field}**\n{chunk}" if p.field and k == 0 else chunk
                desc = e.get("description", "")
                if not fields and len(desc) + 2 + len(text) <= LIMITS["description"]:
                    e["description"] = f"{desc}\n\n{text}" if desc else text
                else:
                    e = _embed(card, cont=True)
                    e["description"] = text
                    group.append(e)
        for ge in group:
            if not ge.get("fields"):
                ge.pop("fields", None)
            if any(k in ge for k in ("title", "description", "fields")):
                out.append(ge)
    return out


def components(controls: list[Control]) -> list[dict[str, Any]]:
    """The buttons of each group in action rows of at most five (the answer's own buttons first, then the
    "Full answer N" ones); a select in a row of its own."""
    rows: list[dict[str, Any]] = []
    groups: dict[str, list[dict[str, Any]]] = {}
    for c in controls:
        if c.kind == "button":
            groups.setdefault(c.group, []).append(
                {
                    "type": 2,
                    "style": STYLE.get(c.style, 2),
                    "disabled": False,
                    "label": c.label[: LIMITS["label"]],
                    "custom_id": c.id,
                }
            )
    for buttons in groups.values():
        for i in range(0, len(buttons), LIMITS["row_buttons"]):
            rows.append({"type": 1, "components": buttons[i : i + LIMITS["row_buttons"]]})
    for c in controls:
        if c.kind == "select":
            select = {
                "type": 3,
                "custom_id": c.id,
                "min_values": 1,
                "max_values": 1,
                "disabled": False,
                "required": True,  # discord.py 2.7 serialises it for every select; messages ignore it
                "placeholder": c.label[: LIMITS["placeholder"]],
                "options": [{"label": t[: LIMITS["option_label"]], "value": v, "default": False} for v, t in c.options],
            }
            rows.append({"type": 1, "components": [select]})
    return rows


def fit_content(text: str) -> str:
    """Content is a reason or a notice (never a code block): cut at a line or word when it is too long."""
    limit = LIMITS["content"]
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = max(cut.rfind("\n"), cut.rfind(" "))
    if space > limit // 2:
        cut = cut[:space]
    if cut.count("```") % 2:
        cut = cut[: cut.rfind("```")]
    return cut + "\u2026"


class Discord(Platform):
    name = "Discord"
    markup = DiscordMarkup()
    limits = Limits(
        total=LIMITS["total"], block=LIMITS["description"], title=LIMITS["title"], field=LIMITS["field_value"]
    )
    inline_reasons = False  # a select needs a row of its own: the reasons follow a "not helpful"

    def draw(self, layout: Layout) -> dict[str, Any]:
        body: dict[str, Any] = {
            "content": fit_content(" ".join(t for t in (layout.text, layout.notice) if t)),
            "embeds": embeds(layout.cards),
            "components": components(layout.controls),
            "allowed_mentions": dict(NO_MENTIONS),
        }
        if layout.file:
            body["files"] = [(layout.file.name, layout.file.content)]
        return body

    def problems(self, body: dict[str, Any]) -> list[str]:
        return problems(body)


DISCORD = Discord()


def embed_length(e: dict[str, Any]) -> int:
    """What Discord counts towards the 6,000 characters of a message's embeds."""
    n = len(e.get("title", "")) + len(e.get("description", ""))
    n += sum(len(f["name"]) + len(f["value"]) for f in e.get("fields", []))
    return n + len((e.get("footer") or {}).get("text", "")) + len((e.get("author") or {}).get("name", ""))


def problems(body: dict[str, Any]) -> list[str]:
    """Every Discord limit this renderer keeps, checked on a body; [] when it may be sent as it is."""
    out: list[str] = []
    es = body.get("embeds") or []
    if len(body.get("content") or "") > LIMITS["content"]:
        out.append("content too long")
    if not body.get("content") and not es:
        out.append("an empty message")
    if len(es) > LIMITS["embeds"] or sum(embed_length(e) for e in es) > LIMITS["total"]:
        out.append(f"{len(es)} embeds of {sum(embed_length(e) for e in es)} characters")
    for i, e in enumerate(es):
        fs = e.get("fields") or []
        if len(e.get("title", "")) > LIMITS["title"] or len(e.get("description", "")) > LIMITS["description"]:
            out.append(f"embed {i}: title or description too long")
        if len(fs) > LIMITS["fields"] or any(
            not 0 < len(f["name"]) <= LIMITS["field_name"] or not 0 < len(f["value"]) <= LIMITS["field_value"]
            for f in fs
        ):
            out.append(f"embed {i}: fields")
        texts = [e.get("description", ""), *(f["value"] for f in fs)]
        if any(t.count("```") % 2 for t in texts):
            out.append(f"embed {i}: a code block opened and not closed")
    rows = body.get("components") or []
    if len(rows) > LIMITS["rows"]:
        out.append(f"{len(rows)} action rows")
    for i, row in enumerate(rows):
        items = row.get("components") or []
        selects = [c for c in items if c.get("type") == 3]
        if not items or len(items) > LIMITS["row_buttons"] or (selects and len(items) > 1):
            out.append(f"row {i}: {len(items)} components")
        for c in items:
            if not 0 < len(c.get("custom_id") or "") <= LIMITS["custom_id"]:
                out.append(f"row {i}: custom_id")
            if len(c.get("label") or "") > LIMITS["label"] or len(c.get("placeholder") or "") > LIMITS["placeholder"]:
                out.append(f"row {i}: label or placeholder too long")
    return out


def render(reply: Any) -> dict[str, Any]:
    """``bot.service.Reply`` (or its dict) -> the Discord message body (plus ``files`` when something moved there)."""
    return render_layout(reply, DISCORD)


def render_notice(text: str, lang: str = "en") -> dict[str, Any]:
    """A reason (rate limited, refused, internal error with its id) or a thank-you: content only."""
    return fit(notice_layout(text, lang, DISCORD), DISCORD)


def render_reason_prompt(ask_id: str, lang: str) -> dict[str, Any]:
    """The ephemeral reply to "not helpful": thanks, and the select with the reasons."""
    return fit(reason_prompt_layout(ask_id, lang, DISCORD), DISCORD)


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON part of a body (without ``files``)."""
    return {k: body[k] for k in BODY_KEYS}
