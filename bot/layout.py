"""The platform-neutral chat layout: a ``bot.service.Reply`` -> a ``Layout`` -> a platform's payload.

What a reply shows and in which order comes from ``kb.present.doc`` (one home); this module turns those
blocks into *cards* (the config findings, the memory verdict, the notes on names, the "no confident
answer" message, one card per result) made of *parts* (a heading with what follows it, one fix with its
snippet, one finding). A part is never split across messages and a code block never across blocks, so
a snippet is shown whole or not at all. Each part has a *tier* (what stays when the message is full):

An answer is shown *compact* (``compact_result``): every result (the top three by default) with its title,
its one-line "why" (what matched), its first fix (the title and a short snippet, or one line of its text; a
snippet for the user's front end only, ``Answer.front_end``, never every front end's) and its first source,
and under the answer a button per result ("Full answer N", ``kb:full``) that posts that result whole
(``entry_layout``: everything, as ``kb show`` has it) as a reply in the conversation. The tiers of an answer:

- tier 0: the first finding, the memory verdict, each result's title, "why" and first source (in rank order),
  the "no confident answer" message and the closest entries;
- tier 1: two more findings, the memory terms, the notes, each result's first fix (in rank order);
- tier 2: the other findings, the myths a result corrects that the question repeats.

A whole entry (a "Full answer" click, ``/kb show``) is drawn from ``kb.present.doc.result_blocks``: tier 0 its
title, summary and first source; tier 1 its first fix, myths, causes and other sources; tier 3 its other
fixes; tier 4 its parameters; tier 5 the other front ends' equivalents (the first to go).

A sequence (the findings, the fixes, the results) is kept as a prefix, never with a gap; a result's head
and its first source go together (a result is never shown uncited). What is left out is counted, the user is
told (``bot.messages`` "truncated"; never a command they would have to run elsewhere) and gets the whole reply
as a Markdown file where the platform can attach one, and the entry's page on the site when there is one.

A platform (``Platform``) is data and two functions: its ``name``, its ``Markup`` (how it writes text,
bold, a code block, a link, a list item, and how user text is made harmless), its ``Limits``, whether the
"not helpful" reasons sit under every answer (``inline_reasons``); ``draw(layout) -> payload`` and
``problems(payload) -> [...]``. ``render(reply, platform)`` builds, packs, draws and, while the platform
finds a problem (its own count of blocks or characters), drops the least important part and draws again.

Buttons have one id grammar on every platform (``control_id``): ``kb:more:<ask_id>:<lang>``,
``kb:lang:<ask_id>:<to>``, ``kb:vote:<ask_id>:<up|down>:<lang>``, ``kb:reason:<ask_id>:<lang>`` (the
chosen reason is the select's value), ``kb:full:<ask_id>:<n>:<lang>`` (result n in full). The id carries
all a click needs, so a restarted bot handles it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from bot.feedback import REASONS
from bot.messages import msg
from kb.present.doc import EQUIVALENTS, Block, answer_blocks, as_dict, front_label, result_blocks, source_text
from kb.present.labels import LABELS, L
from kb.present.links import code_url, entry_url

INF = 10**9

# ---------------------------------------------------------------- markup and limits (what a platform gives)

_FENCE_RUN = re.compile(r"`{3,}")


def defuse_fences(text: str) -> str:
    """A run of 3+ backticks with zero-width spaces between them: shows the same, never opens a code block."""
    return _FENCE_RUN.sub(lambda m: "\u200b".join(m.group(0)), text)


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters on one line, cut at a space when there is one, with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    sp = cut.rfind(" ")
    if sp >= limit // 2:
        cut = cut[:sp]
    return cut.rstrip() + "\u2026"


class Markup:
    """How a platform writes text. The defaults are plain text (what a plain-text platform can keep)."""

    def text(self, s: str) -> str:
        """User or entry text as it shows: it can never ping anyone nor open a code block."""
        return defuse_fences(s)

    def bold(self, s: str) -> str:
        return s

    def code(self, code: str, lang: str) -> str | None:
        """A fenced code block, whole; None when this platform cannot show it whole."""
        return None if "```" in code else f"```{lang}\n{code}\n```"

    def link(self, label: str, url: str | None) -> str:
        """``label`` (raw) linked to ``url``; the label alone when there is no http(s) URL."""
        ok = bool(url) and urlsplit(url or "").scheme in ("http", "https")
        return f"{self.text(label)} ({url})" if ok else self.text(label)

    def item(self, s: str, level: int = 1, bullet: str = "- ") -> str:
        """A list item of written text ``s``."""
        return "  " * max(0, level - 1) + bullet + s


@dataclass(frozen=True)
class Limits:
    total: int  # characters of all cards together (titles, meta, parts)
    block: int  # characters of one block of text: a longer part is split at lines, a code block never
    title: int  # a card's title; a longer one is written as the first line of its first part
    min_block: int = 0  # what one block costs at least: the budget then bounds blocks as well as characters
    field: int = 0  # a named part (sources) of up to this many characters may be a field; 0: no fields
    reserve: int = 0  # of ``total``, kept for what the platform adds (a header, the buttons, the notice)


class Platform:
    """A chat platform as the layout sees it; a platform module subclasses it (see tests/test_chat_layer.py)."""

    name = "chat"
    markup = Markup()
    limits = Limits(total=4000, block=2000, title=200)
    inline_reasons = True  # the reasons select sits under every answer (else it follows a "not helpful")

    def draw(self, layout: Layout) -> dict[str, Any]:  # pragma: no cover - every platform has its own
        raise NotImplementedError

    def problems(self, body: dict[str, Any]) -> list[str]:
        return []


# ---------------------------------------------------------------- the layout


@dataclass(frozen=True)
class Control:
    kind: str  # button | select
    id: str  # control_id(...)
    label: str  # raw text: the button's, or the select's placeholder
    style: str = ""  # primary | secondary | success | danger
    options: tuple[tuple[str, str], ...] = ()  # a select's (value, label)
    group: str = ""  # controls of one group go together (a row); "expand": the "Full answer N" buttons
    card: int | None = None  # the card it belongs to: shown only while that card is shown


@dataclass
class Part:
    chunks: list[str] | None  # the written text in blocks of at most Limits.block; None: not showable here
    tier: int = 0
    seq: str = ""  # parts of one sequence are kept as a prefix, never with a gap
    field: str | None = None  # a named part (written name): a platform with fields may show it as one
    bundle: int | None = None  # parts of one bundle are kept or dropped together (a result's head, sources)
    card: int = 0


@dataclass
class Card:
    kind: str  # findings | memory | notes | message | result
    title: str | None = None  # written; None when it did not fit (then it is in the first part)
    url: str | None = None  # the entry's page (a result); the title links to it where it is a title
    meta: str | None = None  # written: "id · score 0.71" (a result), the id (an entry)
    entry: str | None = None  # the entry id ``meta`` starts with
    tone: str = "result"  # result | error | warning | ok | dim
    divider: bool = False  # a later result: a platform may draw a rule before it
    heads: bool = False  # the title is the layout's headline (a platform with a header may skip it)
    rank: int = 0  # a result's rank in the answer (1-based); 0: not a result of an answer
    parts: list[Part] = field(default_factory=list)


@dataclass(frozen=True)
class File:
    name: str
    title: str
    content: str  # Markdown


@dataclass
class Layout:
    lang: str
    cards: list[Card] = field(default_factory=list)
    text: str = ""  # written: the whole reply when it is a reason or a thank-you
    headline: str = ""  # raw: the answer's title, "No confident answer", "Your config (kb lint)", ...
    subtitle: str = ""  # raw: "You asked: ..."
    controls: list[Control] = field(default_factory=list)
    fallback: str = ""  # raw: one short line for notifications
    error_id: str | None = None
    notice: str = ""  # written: what did not fit and where it is (set by ``render``)
    file: File | None = None  # the whole reply, attached when something did not fit (set by ``render``)
    dropped: int = 0
    # what ``render`` needs to say what is missing
    whole: File | None = None
    page: str | None = None  # the page on the site with everything (a whole entry, when the site is set)


# ---------------------------------------------------------------- ids of buttons and selects

MAX_EXPAND = 10  # results with a "Full answer" button (two rows of five on Discord)
ACTIONS: dict[str, tuple[str, ...]] = {
    "more": (),
    "lang": ("en", "zh"),
    "vote": ("up", "down"),
    "reason": (),
    "full": tuple(str(n) for n in range(1, MAX_EXPAND + 1)),  # the result (1-based) to show whole
}
PRIVATE = ("vote", "reason")  # answered to the one who clicked only
_ASK_ID = r"[0-9A-Za-z_-]{1,64}"
CONTROL_ID = re.compile(rf"kb:(?:more|lang|vote|reason|full):{_ASK_ID}(?::[a-z0-9]{{1,4}}){{0,2}}")
ID_MAX = 100


def parse_control_id(cid: str | None) -> tuple[str, str, str | None, str | None] | None:
    """``(action, ask_id, arg, lang)`` of a kb control id, else None. ``lang`` is the message's language
    (None for an id made before it was carried: the platform falls back to the user's)."""
    if not cid or len(cid) > ID_MAX or not CONTROL_ID.fullmatch(cid):
        return None
    _, action, ask_id, *rest = cid.split(":")
    arg = None
    if ACTIONS[action]:
        if not rest or rest[0] not in ACTIONS[action]:
            return None
        arg, rest = rest[0], rest[1:]
    if action == "lang":
        return (action, ask_id, arg, "zh" if arg == "en" else "en") if not rest else None
    if len(rest) > 1 or (rest and rest[0] not in ("en", "zh")):
        return None
    return action, ask_id, arg, rest[0] if rest else None


def control_id(action: str, ask_id: str, arg: str | None = None, lang: str | None = None) -> str:
    cid = ":".join(["kb", action, ask_id, *([arg] if arg else []), *([lang] if lang and action != "lang" else [])])
    if parse_control_id(cid) is None:
        raise ValueError(f"not a kb control id: {cid!r}")
    return cid


def reason_select(ask_id: str, lang: str) -> Control:
    options = tuple((r, msg(lang, f"reason.{r}")) for r in REASONS)
    return Control("select", control_id("reason", ask_id, lang=lang), msg(lang, "reason.placeholder"), options=options)


def expand_controls(ask_id: str | None, lang: str, cards: list[Card]) -> list[Control]:
    """A "Full answer N" button per result card (the first MAX_EXPAND): it posts result N whole."""
    if not ask_id or not re.fullmatch(_ASK_ID, ask_id):
        return []
    out = []
    for ci, c in enumerate(cards):
        if c.kind == "result" and c.rank and c.rank <= MAX_EXPAND:
            cid = control_id("full", ask_id, str(c.rank), lang)
            out.append(Control("button", cid, msg(lang, "button.full", n=c.rank), "secondary", group="expand", card=ci))
    return out


def answer_controls(ask_id: str | None, lang: str, reasons: bool) -> list[Control]:
    """More results, the other language, helpful / not helpful (and the reasons, where they are inline)."""
    if not ask_id or not re.fullmatch(_ASK_ID, ask_id):
        return []
    other = "en" if lang == "zh" else "zh"
    out = [
        Control("button", control_id("more", ask_id, lang=lang), msg(lang, "button.more"), "primary"),
        Control("button", control_id("lang", ask_id, other), msg(lang, "button.lang"), "secondary"),
        Control("button", control_id("vote", ask_id, "up", lang), msg(lang, "button.up"), "success"),
        Control("button", control_id("vote", ask_id, "down", lang), msg(lang, "button.down"), "danger"),
    ]
    return out + ([reason_select(ask_id, lang)] if reasons else [])


# ---------------------------------------------------------------- doc blocks -> sections


@dataclass
class Section:
    blocks: list[Block] = field(default_factory=list)
    result: int | None = None  # which result (1-based) it belongs to; None: before the results
    kind: str = "body"  # title | findings | memory | notes | closest | message | fix | equivalent | body


def _is_fix(b: Block) -> bool:
    return b.kind == "item" and b.style == "ok" and bool(re.match(r"^\d+\. ", b.text))


def _kind(b: Block, result: int | None) -> str:
    if b.kind == "title":
        return "title"
    if _is_fix(b):
        return "fix"
    if b.meta == EQUIVALENTS:
        return "equivalent"
    if result is None and b.kind == "heading":
        for lb in LABELS.values():
            for key in ("findings", "notes", "closest"):
                if b.text == lb[key]:
                    return key
            if b.text.startswith(lb["memory"]):
                return "memory"
    return "message" if result is None and b.kind == "text" else "body"


def _starts(b: Block, result: int | None) -> bool:
    return (
        b.kind in ("title", "heading")
        or (_is_fix(b) and b.level == 1)
        or b.meta == EQUIVALENTS  # a fix's snippet for another front end: its own, droppable section
        or (result is None and b.kind == "text" and b.style == "title")  # the "no confident answer" message
    )


def _sections(blocks: list[Block], result: int | None = None) -> list[Section]:
    out: list[Section] = []
    for b in blocks:
        if b.kind == "rule":
            result = (result or 0) + 1
            continue
        if _starts(b, result) or not out:
            out.append(Section([b], result, _kind(b, result)))
        else:
            out[-1].blocks.append(b)
    return out


def sections(answer: Any) -> list[Section]:
    """The answer's blocks grouped into unsplittable sections, in display order."""
    return _sections(answer_blocks(as_dict(answer)))


def entry_sections(result: dict[str, Any], lang: str) -> list[Section]:
    return _sections(result_blocks(result, lang), 1)


# ---------------------------------------------------------------- the compact view of a result

WHY_CHARS = 160  # the one-line "why"
LINE_CHARS = 220  # a fix's one line of text, a myth, a withdrawal or version note
TITLE_CHARS = 200  # a fix's title
SNIPPET_CHARS = 700  # a snippet shown in the compact view: at most this long ...
SNIPPET_LINES = 16  # ... and this many lines (else the fix's first sentence stands in for it)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`\"'(])|(?<=[。！？；])")


def first_sentence(text: str) -> str:
    """The first sentence of an English or Chinese text (the whole text when it has one sentence)."""
    text = " ".join(str(text).split())
    parts = _SENTENCE_END.split(text, maxsplit=1)
    return parts[0] if parts and parts[0] else text


def user_equivalent(fix: dict[str, Any], front_end: str | None) -> dict[str, Any] | None:
    """The fix's equivalent for the user's front end (``Answer.front_end``): the one for that front end, or the
    first of its family ("accelerate"); None when the front end is unknown (None) or the ds_config itself."""
    from kb.doctor.frontends import DS_CONFIG, FAMILIES

    if not front_end or front_end == DS_CONFIG:
        return None
    wanted = FAMILIES.get(front_end, (front_end,))
    return next((eq for eq in fix.get("equivalents") or [] if eq.get("front_end") in wanted), None)


# ---------------------------------------------------------------- writing blocks in a platform's markup


def _line(b: Block, m: Markup) -> tuple[str, bool] | None:
    """(written text, is code) for one doc block; None when the platform cannot show it whole."""
    if b.kind == "code":
        code = m.code(b.text, "" if b.lang == "text" else b.lang)
        return None if code is None else (code, True)
    if b.kind in ("title", "heading") or _is_fix(b):
        return m.bold(m.text(" ".join(b.text.split()))), False
    if b.kind == "item":
        t = b.text.strip()
        if t.startswith("-> "):  # a memory change: an arrow is its bullet
            return m.item(m.text(t[3:]), b.level, "\u2192 "), False
        return m.item(m.text(t), b.level), False
    return m.text(b.text), False


def _split_text(text: str, limit: int) -> list[str]:
    """Text without a code block in pieces of at most ``limit``, cut at newlines or spaces."""
    out: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit + 1)
        if cut < limit // 2:
            cut = text.rfind(" ", 0, limit + 1)
        if cut < limit // 4:
            cut = limit
            partial = re.search(r"&[a-z]{0,3}$", text[max(0, cut - 4) : cut])
            if partial:
                cut -= len(partial.group(0))  # never inside an entity (&amp; &lt; &gt;)
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip(" \n")
    if text:
        out.append(text)
    return [t for t in out if t]


def chunks(pieces: list[tuple[str, bool] | None], limit: int) -> list[str] | None:
    """Pieces (text, is code) joined into blocks of at most ``limit``; None when a piece cannot be shown
    whole (a code block too long for one block, or one the markup refused)."""
    out: list[str] = []
    cur = ""
    for piece in pieces:
        if piece is None or (piece[1] and len(piece[0]) > limit):
            return None
        for sub in [piece[0]] if piece[1] else _split_text(piece[0], limit):
            if cur and len(cur) + 1 + len(sub) <= limit:
                cur += "\n" + sub
            else:
                if cur:
                    out.append(cur)
                cur = sub
    if cur:
        out.append(cur)
    return out


class _Writer:
    """Doc blocks -> parts and cards, in one platform's markup and limits."""

    def __init__(self, platform: Platform, lang: str, site: str = ""):
        self.m, self.lim, self.lang, self.site, self.lb = platform.markup, platform.limits, lang, site, L(lang)

    def part(self, lines: list[tuple[str, bool] | None], **kw: Any) -> Part:
        return Part(chunks(lines, self.lim.block), **kw)

    def blocks(self, blocks: list[Block], **kw: Any) -> Part:
        return self.part([_line(b, self.m) for b in blocks], **kw)

    def named(self, name: str, lines: list[tuple[str, bool] | None], heading: bool = True, **kw: Any) -> Part:
        """A part under a heading: a field where the platform has fields, else the heading in bold first
        (``heading`` False: a continuation, without it)."""
        written = self.m.text(name)
        if self.lim.field:
            head = len(self.m.bold(written)) + 1  # room for the heading if the platform writes it as text
            return Part(chunks(lines, self.lim.block - head), field=written, **kw)
        return self.part([(self.m.bold(written), False)] * heading + lines, **kw)

    def title(self, card: Card, text: str, url: str | None = None) -> tuple[str, bool] | None:
        """Set the card's title; when it is too long, the bold (linked) line to open its first part with."""
        written = self.m.text(" ".join(text.split()))
        card.url = url
        if 0 < len(written) <= self.lim.title:
            card.title = written
            return None
        return self.m.bold(self.m.link(text, url) if url else written), False

    def source(self, s: dict[str, Any]) -> tuple[str, bool]:
        """One source as a list item: code as file:line linked to the release tag, docs / issues by URL."""
        note = f" ({self.m.text(s['note'])})" if s.get("note") else ""
        if s.get("type") == "code":
            where = f"{s.get('file')}:{s.get('line')}" if s.get("line") else f"{s.get('file')}"
            label = f"{s.get('package')} {s.get('version')} {where}"
        elif s.get("type") == "measurement":
            label = str(s.get("file") or s.get("url") or "")
        else:
            label = short_url(str(s.get("url") or ""))
        return self.m.item(self.m.link(label, code_url(s)) + note), False

    # ------------------------------------------------------------ cards

    def findings(self, sec: Section, ci: int, errors: bool) -> Card:
        card = Card("findings", tone="error" if errors else "warning")
        lead = self.title(card, sec.blocks[0].text)
        groups: list[list[Block]] = []  # one per finding: its item with its fix / see lines
        for b in sec.blocks[1:]:
            if b.kind == "item" or not groups:
                groups.append([b])
            else:
                groups[-1].append(b)
        for j, g in enumerate(groups or [[]]):
            lines = [self.see(b) or _line(b, self.m) for b in g]
            tier = 0 if j == 0 else 1 if j < 3 else 2
            card.parts.append(self.part(([lead] if lead and j == 0 else []) + lines, tier=tier, seq=f"f{ci}", card=ci))
        return card

    def see(self, b: Block) -> tuple[str, bool] | None:
        """A finding's "see: kb show ID" line (a terminal's) as a chat user can follow it: the entry's page on
        the site, else the chat's own ``/kb show ID``; None for any other line."""
        prefix = self.lb["see"] + ": kb show "
        eid = b.text[len(prefix) :] if b.kind == "text" and b.text.startswith(prefix) else ""
        if not eid or not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,99}", eid):
            return None
        url = entry_url(self.site, self.lang, eid)
        sep = "：" if self.lang == "zh" else ": "
        target = self.m.link(eid, url) if url else self.m.text(f"/kb show {eid}")
        return self.m.text(self.lb["see"] + sep) + target, False

    def memory(self, sec: Section, ci: int) -> Card:
        head = sec.blocks[0]
        card = Card("memory", tone={"ok": "ok", "warn": "warning"}.get(head.style, "error"))
        lead = self.title(card, head.text)
        card.parts.append(self.part([lead] if lead else [], tier=0, seq=f"m{ci}", card=ci))  # the verdict
        if len(sec.blocks) > 1:
            card.parts.append(self.blocks(sec.blocks[1:], tier=1, seq=f"m{ci}", card=ci))
        return card

    def notes(self, sec: Section, ci: int) -> Card:
        card = Card("notes", tone="warning")
        lead = self.title(card, sec.blocks[0].text)
        rest = sec.blocks[1:] or [Block("text", "")]
        for j, b in enumerate(rest):
            card.parts.append(self.part(([lead] if lead and j == 0 else []) + [_line(b, self.m)], tier=1, card=ci))
        return card

    def closest(self, sec: Section, closest: list[dict[str, Any]], ci: int) -> Part:
        lines = [_line(sec.blocks[0], self.m)]
        queue = list(closest)
        for b in sec.blocks[1:]:
            if b.kind == "item" and queue:
                c = queue.pop(0)
                title = self.m.link(c["title"], entry_url(self.site, self.lang, c["id"]))
                score = self.m.text(f"{c['id']}, {self.lb['score']} {c['score']}")
                lines.append((self.m.item(f"? {title}  [{score}]"), False))
            else:
                lines.append(_line(b, self.m))
        return self.part(lines, tier=0, card=ci)

    def result(self, secs: list[Section], r: dict[str, Any], ci: int, first: bool, n: int) -> Card:
        """One result (or the entry of ``kb show``): title and summary, fixes, parameters, myths, sources."""
        card = Card("result", entry=str(r["id"]), divider=n > 1, heads=n == 1)
        url = entry_url(self.site, self.lang, str(r["id"]))
        # the top result's head and first source first, then its first fix, myths and other sources; the
        # later results' heads and first sources (in rank order) before the top result's other fixes, its
        # parameters and the rest
        t_head, t_first, t_fixes, t_rest = (0, 1, 3, 4) if first else (2, 5, 5, 5)
        pending: list[Block] = []  # a heading alone ("Fixes") goes with the section after it
        fixes = 0
        for sec in secs:
            head = sec.blocks[0]
            if head.kind == "heading" and len(sec.blocks) == 1:
                pending += sec.blocks
                continue
            blocks, pending = pending + sec.blocks, []
            if head.kind == "title":
                card.meta = self.m.text(head.meta) if head.meta else None
                lead = self.title(card, head.text, url)
                lines = ([lead] if lead else []) + [_line(b, self.m) for b in blocks[1:]]
                card.parts.append(self.part(lines, tier=t_head, seq="results", bundle=ci, card=ci))
            elif head.kind == "heading" and head.text == self.lb["sources"]:
                srcs, lines = list(r.get("sources") or []), []
                for b in sec.blocks[1:]:
                    if b.kind == "item" and srcs and source_text(srcs[0]) == b.text:
                        lines.append(self.source(srcs.pop(0)))
                    else:
                        lines.append(_line(b, self.m))
                # the head goes with its first source; the others follow it when there is room
                card.parts.append(self.named(head.text, lines[:1], tier=t_head, seq="results", bundle=ci, card=ci))
                if lines[1:]:
                    card.parts.append(self.named(head.text, lines[1:], False, tier=t_first, card=ci))
            elif sec.kind == "fix":
                fixes += 1
                card.parts.append(self.blocks(blocks, tier=t_first if fixes == 1 else t_fixes, seq=f"x{ci}", card=ci))
            elif head.kind == "heading" and head.text in (self.lb["myths"], self.lb["cause"]):
                card.parts.append(self.blocks(blocks, tier=t_first, card=ci))
            elif sec.kind == "equivalent":  # the same settings for another front end: the first to go
                card.parts.append(self.blocks(blocks, tier=t_rest + 1, card=ci))
            else:  # verified parameters, anything doc.py adds
                card.parts.append(self.blocks(blocks, tier=t_rest, card=ci))
        if pending:
            card.parts.append(self.blocks(pending, tier=t_rest, card=ci))
        return card

    def compact_result(self, r: dict[str, Any], ci: int, n: int, front_end: str | None) -> Card:
        """One result of an answer, compact: its title (linked to its page), the one-line "why", its first fix
        (``first_fix``), the myths it corrects that the question repeats, and its first source."""
        lb, m, sep = self.lb, self.m, "：" if self.lang == "zh" else ": "
        rid = str(r["id"])
        card = Card("result", entry=rid, divider=n > 1, heads=n == 1, rank=n)
        card.meta = m.text(f"{rid} \u00b7 {lb['score']} {r.get('score')}")
        lead = self.title(card, f"{n}. {r['title']}", entry_url(self.site, self.lang, rid))
        lines: list[tuple[str, bool] | None] = [lead] if lead else []
        if r.get("why"):
            lines.append((m.text(lb["why"] + sep + shorten(r["why"], WHY_CHARS)), False))
        elif r.get("summary"):
            lines.append((m.text(shorten(first_sentence(r["summary"]), WHY_CHARS)), False))
        if r.get("withdrawn"):
            lines.append((m.text(f"{lb['withdrawn']} " + shorten(r["withdrawn"], LINE_CHARS)), False))
        if r.get("applies") is False:
            lines.append(
                (m.text(lb["version_demoted"] + sep + shorten(r.get("version_note") or "", LINE_CHARS)), False)
            )
        card.parts.append(self.part(lines, tier=0, seq="results", bundle=ci, card=ci))
        fixes = r.get("fixes") or []
        if fixes:
            more = [(m.text(msg(self.lang, "more_fixes", n=len(fixes) - 1)), False)] if len(fixes) > 1 else []
            card.parts.append(self.part(self.first_fix(fixes[0], front_end) + more, tier=1, seq="fixes", card=ci))
        for my in [x for x in r.get("myths") or [] if x.get("touched")]:
            wrong = m.text(f"\u2717 {lb['wrong']}{sep}" + shorten(my["claim"], LINE_CHARS))
            right = m.text(f"\u2713 {lb['right']}{sep}" + shorten(my["correction"], LINE_CHARS))
            card.parts.append(self.part([(m.item(wrong), False), (m.item(right), False)], tier=2, card=ci))
        if r.get("sources"):
            first = [self.source(r["sources"][0])]
            card.parts.append(self.named(lb["sources"], first, tier=0, seq="results", bundle=ci, card=ci))
        return card

    def first_fix(self, f: dict[str, Any], front_end: str | None) -> list[tuple[str, bool] | None]:
        """A fix in a few lines: its title, then its snippet when it is short (else the first sentence of its
        text), and the same settings for the user's front end when the answer knows it and has them."""
        m, lb = self.m, self.lb
        lines: list[tuple[str, bool] | None] = [(m.bold(m.text("1. " + shorten(f["title"], TITLE_CHARS))), False)]
        code = self.snippet(f.get("snippet"))
        lines.append(code or (m.text(shorten(first_sentence(f.get("text") or ""), LINE_CHARS)), False))
        eq = user_equivalent(f, front_end)
        eq_code = self.snippet(eq.get("snippet")) if eq else None
        if eq and eq_code:
            label = lb["same_in"].format(front=front_label(eq["front_end"], self.lang))
            lines += [(m.text(label + ("：" if self.lang == "zh" else ":")), False), eq_code]
        return [ln for ln in lines if ln and ln[0]]

    def snippet(self, sn: dict[str, Any] | None) -> tuple[str, bool] | None:
        """A short snippet as a whole code block; None when there is none, it is long, or this platform
        cannot show it whole."""
        if not sn or not sn.get("code"):
            return None
        code = str(sn["code"]).rstrip("\n")
        if len(code) > SNIPPET_CHARS or code.count("\n") >= SNIPPET_LINES:
            return None
        written = self.m.code(code, "" if sn.get("lang") == "text" else str(sn.get("lang") or ""))
        return (written, True) if written and len(written) <= self.lim.block - 200 else None


def short_url(url: str) -> str:
    """Link text for a docs / issue URL: owner/repo#123 for GitHub issues and pulls, else host/path."""
    m = re.match(r"https?://github\.com/([^/]+/[^/]+)/(?:issues|pull|discussions)/(\d+)", url)
    if m:
        return f"{m.group(1)}#{m.group(2)}"
    parts = urlsplit(url)
    text = (parts.netloc + parts.path).rstrip("/") or url
    return text if len(text) <= 70 else text[:69] + "\u2026"


# ---------------------------------------------------------------- replies -> layouts


def answer_layout(answer: Any, platform: Platform, ask_id: str | None = None, site: str = "") -> Layout:
    from kb.present import markdown

    a = as_dict(answer)
    lang = "zh" if a.get("lang") == "zh" else "en"
    w = _Writer(platform, lang, site)
    results = a.get("results") or []
    cards: list[Card] = []
    for sec in [s for s in sections(a) if s.result is None]:
        ci = len(cards)
        if sec.kind == "findings":
            cards.append(w.findings(sec, ci, any(f.get("severity") == "error" for f in a.get("findings") or [])))
        elif sec.kind == "memory":
            cards.append(w.memory(sec, ci))
        elif sec.kind == "notes":
            cards.append(w.notes(sec, ci))
        elif sec.kind == "closest":
            if not cards or cards[-1].kind != "message":
                cards.append(Card("message", tone="dim"))
            cards[-1].parts.append(w.closest(sec, a.get("closest") or [], len(cards) - 1))
        else:  # the "no confident answer" message, or anything doc.py adds before the results
            cards.append(Card("message", tone="dim", parts=[w.blocks(sec.blocks, tier=0, card=ci)]))
    if a.get("answered"):
        for n, r in enumerate(results, 1):
            cards.append(w.compact_result(r, len(cards), n, a.get("front_end")))
    # the whole answer's file is named after the first curated entry (a registry fact has no entry of its own)
    entries = [r for r in results if r.get("kind", "entry") == "entry"]
    closest = [c for c in a.get("closest") or [] if not str(c["id"]).startswith("registry:")]
    top = entries[0]["id"] if entries else "" if results else (closest or [{"id": ""}])[0]["id"]
    title = results[0]["title"] if a.get("answered") and results else msg(lang, "no_answer")
    return Layout(
        lang,
        cards,
        headline=title,
        subtitle=msg(lang, "asked", query=a["query"]) if a.get("query") else "",
        controls=answer_controls(ask_id, lang, platform.inline_reasons) + expand_controls(ask_id, lang, cards),
        fallback=title if a.get("answered") else (a.get("message") or title),
        whole=File(f"kb-answer-{top or 'answer'}.md", shorten(title, 200), markdown.answer(a)),
    )


def entry_layout(report: dict[str, Any], lang: str, platform: Platform, site: str = "") -> Layout:
    """``kb show``, or one result of an answer in full (a "Full answer" click): a ShowReport (or a bare Result)
    with everything in it (causes, all myths, related, every front end's equivalent it carries)."""
    from kb.present import markdown

    result = report["result"] if "result" in report else report
    lang = "zh" if report.get("lang", lang) == "zh" else "en"
    card = _Writer(platform, lang, site).result(entry_sections(result, lang), result, 0, first=True, n=1)
    title = str(result["title"])
    whole = File(f"kb-{result['id']}.md", shorten(title, 200), markdown.entry(result, lang))
    page = entry_url(site, lang, str(result["id"]))
    return Layout(lang, [card], headline=title, fallback=title, whole=whole, page=page)


def lint_layout(report: dict[str, Any], lang: str, platform: Platform) -> Layout:
    """``kb lint`` of a pasted or attached config: a LintReport as ``kb.present.doc.lint_blocks`` shows it
    (the file line, then each finding as a part of its own)."""
    from kb.present import markdown
    from kb.present.doc import lint_blocks

    lang = "zh" if report.get("lang", lang) == "zh" else "en"
    if not report.get("findings"):
        kind, fmt = report.get("config_kind", ""), report.get("config_format", "")
        text = msg(lang, "lint_clean", file=report.get("file", ""), kind=kind, format=fmt)
        return Layout(lang, text=platform.markup.text(text), fallback=text)
    blocks = lint_blocks({**report, "lang": lang})
    errors = any(f.get("severity") == "error" for f in report["findings"])
    card = _Writer(platform, lang).findings(Section(blocks, None, "findings"), 0, errors)
    whole = File("kb-lint.md", shorten(blocks[0].text, 200), markdown.blocks_markdown(blocks))
    return Layout(lang, [card], headline=L(lang)["findings"], fallback=blocks[0].text, whole=whole)


def memory_layout(report: dict[str, Any], lang: str, platform: Platform) -> Layout:
    """``kb mem``: a MemReport as ``kb.present.doc.mem_blocks`` shows it (the verdict, the terms, the cheapest
    changes, the setup it is for, in the report's language); an answer's bare Memory as memory_blocks does."""
    from kb.present import markdown
    from kb.present.doc import mem_blocks, memory_blocks

    lang = "zh" if report.get("lang", lang) == "zh" else "en"
    lb = L(lang)
    report = {**report, "lang": lang}
    blocks = mem_blocks(report) if isinstance(report.get("setup"), list) else memory_blocks(report, lang)
    card = _Writer(platform, lang).memory(Section(blocks, None, "memory"), 0)
    verdict = lb["fits"] if report.get("fits_gpu") else lb["does_not_fit"]
    whole = File("kb-mem.md", lb["memory"], markdown.blocks_markdown(blocks))
    sep = "：" if lang == "zh" else ": "
    fallback = sep.join((lb["memory"], str(report.get("model")), verdict))
    return Layout(lang, [card], headline=lb["memory"], fallback=fallback, whole=whole)


def notice_layout(text: str, lang: str, platform: Platform, error_id: str | None = None) -> Layout:
    """A reason (rate limited, refused, internal error with its id, a usage line) or a thank-you."""
    lang = "zh" if lang == "zh" else "en"
    return Layout(lang, text=platform.markup.text(text or ""), fallback=text, error_id=error_id)


def reason_prompt_layout(ask_id: str, lang: str, platform: Platform) -> Layout:
    """The private reply to "not helpful" where the reasons are not under the answer: thanks, and the select."""
    text = msg(lang, "reason.prompt")
    return Layout(lang, text=platform.markup.text(text), fallback=text, controls=[reason_select(ask_id, lang)])


def layout(reply: Any, platform: Platform) -> Layout:
    """Any ``bot.service.Reply`` (or its dict) -> its layout for ``platform``."""
    r = as_dict(reply)
    kind, lang = r.get("kind"), ("zh" if r.get("lang") == "zh" else "en")
    site = r.get("site_base_url") or ""
    if kind in ("answer", "no_answer") and r.get("answer"):
        return answer_layout(r["answer"], platform, r.get("ask_id"), site)
    if kind == "entry" and r.get("data"):
        return entry_layout(r["data"], lang, platform, site)
    if kind == "lint" and r.get("data") is not None:
        return lint_layout(r["data"], lang, platform)
    if kind == "memory" and r.get("data"):
        return memory_layout(r["data"], lang, platform)
    text = r.get("message") or msg(lang, "internal_error", error_id=r.get("error_id") or "?")
    return notice_layout(text, lang, platform, r.get("error_id"))


# ---------------------------------------------------------------- choosing what fits


def _cost(p: Part, lim: Limits) -> int:
    if p.chunks is None:
        return INF
    return sum(max(lim.min_block, len(c) + 2) for c in p.chunks) + len(p.field or "")


def _opening(c: Card, lim: Limits) -> int:
    """What a card costs before any part: its title and meta (one block on a platform that writes them)."""
    n = len(c.title or "") + len(c.meta or "")
    return max(lim.min_block, n + 2) if n else 0


def choose(cards: list[Card], lim: Limits) -> set[int]:
    """ids of the parts to show: tier by tier (lowest first), each sequence in display order, stopping at
    the first item that does not fit (so a sequence never shows a gap); a bundle is one item. A part that
    cannot be shown on this platform at all (a snippet too long for one block) is left out alone."""
    parts = [p for c in cards for p in c.parts]
    budget, used = lim.total - lim.reserve, 0
    kept: set[int] = set()
    opened: set[int] = set()
    failed: set[Any] = set()
    for tier in sorted({p.tier for p in parts}):
        streams: dict[Any, list[list[Part]]] = {}
        seen: set[int] = set()
        for p in parts:
            if p.tier != tier or id(p) in seen:
                continue
            item = [q for q in parts if q.bundle == p.bundle] if p.bundle is not None else [p]
            seen.update(id(q) for q in item)
            if p.bundle is None and p.chunks is None:
                continue
            key = p.seq or (("bundle", p.bundle) if p.bundle is not None else ("part", id(p)))
            if key not in failed:
                streams.setdefault(key, []).append(item)
        for key, items in streams.items():
            for item in items:
                card = item[0].card
                c = sum(_cost(q, lim) for q in item) + (0 if card in opened else _opening(cards[card], lim))
                if used + c > budget:
                    failed.add(key)
                    break
                used += c
                opened.add(card)
                kept.update(id(q) for q in item)
    # a card whose head did not make it shows nothing: a result's fixes never appear without its title
    for c in cards:
        heads = [p for p in c.parts if p.bundle is not None]
        if heads and not all(id(p) in kept for p in heads):
            kept.difference_update(id(p) for p in c.parts)
    return kept


def _dropping(cards: list[Card], kept: set[int]) -> set[int]:
    """The least important kept part and what cannot stay without it: the rest of its sequence, and the
    whole card of a dropped head."""
    order = [(p.tier, p.card, i, p) for c in cards for i, p in enumerate(c.parts) if id(p) in kept]
    worst = max(order, key=lambda t: t[:3])[3]
    drop = [worst]
    if worst.seq:
        seq = [p for c in cards for p in c.parts if p.seq == worst.seq]
        drop += seq[next(i for i, p in enumerate(seq) if p is worst) + 1 :]
    ids = {id(p) for p in drop}
    for p in drop:
        if p.bundle is not None:
            ids |= {id(q) for q in cards[p.card].parts}
    return ids


def _notice(lay: Layout, platform: Platform, file: File | None) -> str:
    """What did not fit and where the user gets it: the attached file, the "Full answer" buttons, the entry's
    page on the site. Never a command to run somewhere else."""
    lang, m = lay.lang, platform.markup
    said = [msg(lang, "truncated", platform=platform.name, dropped=lay.dropped)]
    if file:
        said.append(msg(lang, "attached", filename=file.name))
    if any(c.group == "expand" for c in lay.controls):
        said.append(msg(lang, "expand_hint"))
    text = m.text(" ".join(said))
    if lay.page:
        text += " " + m.text(L(lang)["page"] + (": " if lang == "en" else "：")) + m.link(lay.page, lay.page)
    return text


def _final(lay: Layout, kept: set[int], platform: Platform, files: bool) -> Layout:
    cards, shown = [], set()
    for ci, c in enumerate(lay.cards):
        ps = [p for p in c.parts if id(p) in kept]
        if ps:
            cards.append(replace(c, parts=ps))
            shown.add(ci)
    controls = [c for c in lay.controls if c.card is None or c.card in shown]  # no button for a result not shown
    out = replace(lay, cards=cards, controls=controls, dropped=sum(len(c.parts) for c in lay.cards) - len(kept))
    if out.dropped:
        out.file = lay.whole if files else None
        out.notice = _notice(out, platform, out.file)
    elif not cards and not out.text:
        out.text = platform.markup.text(L(lay.lang)["no_results"])  # never an empty message
    return out


def fit(lay: Layout, platform: Platform, files: bool = True) -> dict[str, Any]:
    """The payload for ``lay``: the parts ``choose`` keeps, then, while the platform finds a problem in what
    it drew (overheads the estimate missed), without the least important part. What it returns has no problem."""
    kept = choose(lay.cards, platform.limits)
    while True:
        body = platform.draw(_final(lay, kept, platform, files))
        if not platform.problems(body):
            return body
        if not kept:  # nothing left to drop (a reason too long for the platform): a short one instead
            short = notice_layout(shorten(lay.fallback, 300) or "kb", lay.lang, platform, lay.error_id)
            return platform.draw(_final(short, kept, platform, False))
        kept -= _dropping(lay.cards, kept)


def render(reply: Any, platform: Platform, files: bool = True) -> dict[str, Any]:
    """Any ``bot.service.Reply`` -> ``platform``'s payload, within its limits (``files``: the whole reply may
    go with it as a file when something did not fit)."""
    return fit(layout(reply, platform), platform, files)


__all__ = [
    "CONTROL_ID",
    "PRIVATE",
    "Card",
    "Control",
    "File",
    "Layout",
    "Limits",
    "Markup",
    "Part",
    "Platform",
    "control_id",
    "layout",
    "parse_control_id",
    "render",
]
