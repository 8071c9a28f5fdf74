"""Slack: the neutral ``bot.layout.Layout`` as the exact ``chat.postMessage`` body. Pure functions, no I/O.

``render(reply)`` returns ``{"text": fallback, "blocks": [Block Kit dicts]}`` and, when part of a reply did
not fit, ``"file": {"filename", "title", "content"}`` (the whole reply as Markdown, for the bot to upload
beside the message; pop it before posting). What is shown, in which order, what is dropped first and the
buttons come from ``bot.layout``; this module says how Slack writes text (``SlackMarkup``: mrkdwn), gives
Slack's limits as data, and maps a layout to blocks: a header (the headline), a context line (the
question, the lint summary), per card a divider before a later result, its title and meta (the entry id
linked to its page on the site), one section per part (a code block never split), the notice, the
buttons and the reasons select, and the "Full answer N" buttons in an actions block of their own.

- Blocks are built with ``slack_sdk.models.blocks`` classes, whose ``to_dict()`` raises above Slack's
  limits; on top of that ``problems(body)`` checks every limit this module keeps.
- Every text from the user or an entry is escaped (``&``, ``<``, ``>``), so ``<!everyone>``, ``<!here>``
  and ``<@U123>`` show as text and never ping; ``mrkdwn`` objects are ``verbatim``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    Option,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.models.blocks import Block as SlackBlock

from bot.layout import Control, Layout, Limits, Markup, Platform, chunks, defuse_fences, shorten
from bot.layout import render as render_layout
from bot.messages import msg

# Slack's limits (Block Kit reference; slack_sdk.models.blocks validates the same numbers)
MAX_BLOCKS = 50
SECTION_MAX = 3000  # a section's text
HEADER_MAX = 150  # a header's plain_text
CONTEXT_ELEMENTS_MAX = 10
CONTEXT_TEXT_MAX = 2000  # kept well under the text object's limit
ACTIONS_ELEMENTS_MAX = 25
BUTTON_TEXT_MAX = 75
BUTTON_VALUE_MAX = 2000
ACTION_ID_MAX = 255
BLOCK_ID_MAX = 255
OPTIONS_MAX = 100
OPTION_TEXT_MAX = 75
OPTION_VALUE_MAX = 150
PLACEHOLDER_MAX = 150
TEXT_MAX = 40_000  # chat.postMessage truncates the top-level text beyond this
# ours, not Slack's: the notification fallback stays short, and all the blocks' text together stays
# well under what Slack accepts in one message (it answers msg_blocks_too_long long before 50 x 3000)
FALLBACK_MAX = 300
BLOCKS_CHARS = 11_000
PER_BLOCK = BLOCKS_CHARS // MAX_BLOCKS  # what one block costs at least: 50 blocks exhaust the budget
RESERVE = 1500  # the header, the question, the buttons and the notice


def escape_slack(text: str) -> str:
    """Slack mrkdwn escaping: &, <, > (this also defuses <!everyone>, <!here>, <@U123> and link syntax)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def esc(text: Any) -> str:
    """User or entry text for mrkdwn: escaped, and a stray ``` can never open a code block."""
    return defuse_fences(escape_slack(str(text)))


def esc_short(text: str, limit: int) -> str:
    """``shorten`` then ``esc``, so that the escaped text (what Slack counts) is at most ``limit``."""
    n = limit
    while True:
        out = esc(shorten(text, n))
        if len(out) <= limit or n <= 1:
            return out[:limit] if len(out) > limit else out
        n -= max(1, len(out) - limit)


class SlackMarkup(Markup):
    def text(self, s: str) -> str:
        return esc(s)

    def bold(self, s: str) -> str:
        t = " ".join(s.split())
        return f"*{t}*" if t and len(t) + 2 <= SECTION_MAX else t

    def code(self, code: str, lang: str) -> str | None:
        body = escape_slack(code)
        return None if "```" in body else f"```\n{body}\n```"  # a ``` inside would close it early

    def link(self, label: str, url: str | None) -> str:
        if not url or urlsplit(url).scheme not in ("http", "https"):
            return esc(label)
        target = quote(url, safe="/:?#[]@!$&'()*+,;=%~-._").replace("&", "&amp;")
        return f"<{target}|{esc(label)}>"

    def item(self, s: str, level: int = 1, bullet: str = "- ") -> str:
        if bullet != "- ":
            return "    " * max(0, level - 1) + bullet + s
        return ("\u2022 " if level <= 1 else "    \u25e6 ") + s


def _section(text: str) -> SectionBlock:
    return SectionBlock(text=MarkdownTextObject(text=text, verbatim=True))


def _context(text: str) -> ContextBlock:
    return ContextBlock(elements=[MarkdownTextObject(text=text, verbatim=True)])


def actions(controls: list[Control], block_id: str = "kb_controls") -> ActionsBlock | None:
    """The buttons and the reasons select; each element's action_id is the control id (``bot.layout``)."""
    els: list[Any] = []
    for c in controls:
        if c.kind == "button":
            text = PlainTextObject(text=shorten(c.label, BUTTON_TEXT_MAX), emoji=True)
            style = "primary" if c.style == "success" else None
            els.append(ButtonElement(text=text, action_id=c.id, value=c.id, style=style))
        else:
            options = [Option(value=v, text=PlainTextObject(text=shorten(t, OPTION_TEXT_MAX))) for v, t in c.options]
            placeholder = PlainTextObject(text=shorten(c.label, PLACEHOLDER_MAX))
            els.append(StaticSelectElement(action_id=c.id, placeholder=placeholder, options=options))
    return ActionsBlock(block_id=block_id, elements=els) if els else None


class Slack(Platform):
    name = "Slack"
    markup = SlackMarkup()
    limits = Limits(total=BLOCKS_CHARS, block=SECTION_MAX, title=2000, min_block=PER_BLOCK, reserve=RESERVE)
    inline_reasons = True

    def draw(self, layout: Layout) -> dict[str, Any]:
        m = self.markup
        blocks: list[SlackBlock] = []
        header = esc_short(layout.headline, HEADER_MAX) if layout.headline else ""
        full = bool(header) and header == esc(" ".join(layout.headline.split()))  # the header says it all
        if header:
            blocks.append(HeaderBlock(text=PlainTextObject(text=header, emoji=False)))
        if layout.subtitle:
            blocks.append(_context(esc_short(layout.subtitle, 400)))
        for text in chunks([(layout.text, False)], SECTION_MAX) or []:
            blocks.append(_section(text))
        if layout.error_id:
            blocks.append(_context(f"{esc(msg(layout.lang, 'error_id'))} `{esc_short(layout.error_id, 100)}`"))
        for card in layout.cards:
            if card.divider:
                blocks.append(DividerBlock())
            head = [m.bold(card.title)] if card.title and not (card.heads and full) else []
            if card.meta:
                meta, rid = card.meta, m.text(card.entry or "")
                if rid and meta.startswith(rid):
                    meta = (m.link(card.entry or "", card.url) if card.url else f"`{rid}`") + meta[len(rid) :]
                head.append(meta)
            if head:
                blocks.append(_section("\n".join(head)))
            for p in card.parts:
                for k, chunk in enumerate(p.chunks or []):
                    blocks.append(_section(f"{m.bold(p.field)}\n{chunk}" if p.field and k == 0 else chunk))
        if layout.notice:
            blocks.append(_context(layout.notice))
        for group, block_id in (("", "kb_controls"), ("expand", "kb_expand")):
            acts = actions([c for c in layout.controls if c.group == group], block_id)
            if acts is not None:
                blocks.append(acts)
        body: dict[str, Any] = {
            "text": esc_short(layout.fallback, FALLBACK_MAX) or "kb",
            "blocks": [b.to_dict() for b in blocks],
        }
        if layout.file:
            body["file"] = {"filename": layout.file.name, "title": layout.file.title, "content": layout.file.content}
        return body

    def problems(self, body: dict[str, Any]) -> list[str]:
        return problems(body)


SLACK = Slack()


def render(reply: Any, files: bool = True) -> dict[str, Any]:
    """Any Reply kind -> the chat.postMessage body (``text``, ``blocks``; ``file`` when something did not fit
    and ``files`` is true: the caller uploads it)."""
    return render_layout(reply, SLACK, files=files)


# ---------------------------------------------------------------- checks (tests and the bot's last guard)


def _texts(obj: Any) -> list[str]:
    """Every mrkdwn / plain_text string inside a block dict."""
    out: list[str] = []
    if isinstance(obj, dict):
        if obj.get("type") in ("mrkdwn", "plain_text") and isinstance(obj.get("text"), str):
            out.append(obj["text"])
        for v in obj.values():
            out += _texts(v)
    elif isinstance(obj, list):
        for v in obj:
            out += _texts(v)
    return out


def problems(body: dict[str, Any]) -> list[str]:
    """Every Slack limit this renderer keeps, checked on a body; [] when it may be sent as it is."""
    out: list[str] = []
    blocks = body.get("blocks") or []
    text = body.get("text")
    if not isinstance(text, str) or not text:
        out.append("no fallback text")
    elif len(text) > TEXT_MAX:
        out.append(f"text has {len(text)} > {TEXT_MAX} characters")
    if len(blocks) > MAX_BLOCKS:
        out.append(f"{len(blocks)} > {MAX_BLOCKS} blocks")
    chars = sum(len(t) for b in blocks for t in _texts(b))
    if chars > BLOCKS_CHARS:
        out.append(f"blocks hold {chars} characters")
    block_ids = [b["block_id"] for b in blocks if b.get("block_id")]
    if len(block_ids) != len(set(block_ids)):
        out.append("a block_id is used twice")
    for i, b in enumerate(blocks):
        t = b.get("type")
        if len(b.get("block_id") or "") > BLOCK_ID_MAX:
            out.append(f"block {i}: block_id too long")
        if t == "header":
            if b["text"]["type"] != "plain_text" or len(b["text"]["text"]) > HEADER_MAX:
                out.append(f"block {i}: header over {HEADER_MAX} or not plain_text")
        elif t == "section":
            if len(b["text"]["text"]) > SECTION_MAX:
                out.append(f"block {i}: section text {len(b['text']['text'])} > {SECTION_MAX}")
        elif t == "context":
            els = b.get("elements") or []
            if not els or len(els) > CONTEXT_ELEMENTS_MAX:
                out.append(f"block {i}: {len(els)} context elements")
            if any(len(e.get("text", "")) > CONTEXT_TEXT_MAX for e in els):
                out.append(f"block {i}: context text too long")
        elif t == "actions":
            els = b.get("elements") or []
            if not els or len(els) > ACTIONS_ELEMENTS_MAX:
                out.append(f"block {i}: {len(els)} action elements")
            for e in els:
                if len(e.get("action_id") or "") > ACTION_ID_MAX:
                    out.append(f"block {i}: action_id too long")
                if e.get("type") == "button":
                    if len(e["text"]["text"]) > BUTTON_TEXT_MAX or len(e.get("value") or "") > BUTTON_VALUE_MAX:
                        out.append(f"block {i}: button text or value too long")
                if e.get("type") == "static_select":
                    opts = e.get("options") or []
                    if not opts or len(opts) > OPTIONS_MAX:
                        out.append(f"block {i}: {len(opts)} options")
                    for o in opts:
                        if len(o["text"]["text"]) > OPTION_TEXT_MAX or len(o["value"]) > OPTION_VALUE_MAX:
                            out.append(f"block {i}: option text or value too long")
                    if len(e.get("placeholder", {}).get("text", "")) > PLACEHOLDER_MAX:
                        out.append(f"block {i}: placeholder too long")
        elif t != "divider":
            out.append(f"block {i}: unexpected type {t}")
    for s in _texts(blocks) + ([text] if isinstance(text, str) else []):
        if s.count("```") % 2:
            out.append("a code block is opened and not closed in one text")
            break
    return out
