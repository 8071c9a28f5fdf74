"""Slack renderer: a ``bot.service.Reply`` (or its dict) -> the exact ``chat.postMessage`` body.

Pure functions, no I/O. ``render(reply)`` returns ``{"text": fallback, "blocks": [Block Kit dicts]}`` and,
when part of an answer did not fit, ``"file": {"filename", "title", "content"}`` (the whole answer as
Markdown, for the bot to upload beside the message; pop it before posting).

What an answer shows and in which order comes from ``kb.present.doc`` through ``bot.chat.sections`` /
``entry_sections``; this module only draws those sections as Slack mrkdwn and packs them:

- Blocks are built with ``slack_sdk.models.blocks`` classes, whose ``to_dict()`` raises above Slack's
  limits; on top of that every limit is kept by construction (``problems(body)`` checks them all).
- Every text from the user or an entry goes through ``bot.chat.escape_slack`` (``&``, ``<``, ``>``), so
  ``<!everyone>``, ``<!here>`` and ``<@U123>`` show as text and never ping; ``mrkdwn`` objects are
  ``verbatim`` (no auto-linking or mention parsing either).
- A code block is never split: a section is rendered whole (a snippet that cannot fit one section block
  drops its section) and ``bot.chat.pack`` drops whole sections from the end. What is dropped is counted
  and the user is told (``bot.messages`` "truncated"), with the file when the caller can upload one.
- Sources are links: code sources go to the tagged release on GitHub (``source_url``); with
  ``Settings.site_base_url`` each entry id links to its page on the static site.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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

from bot.chat import Section, entry_sections, escape_slack, pack, sections
from bot.feedback import REASONS
from bot.messages import msg
from kb.present.doc import Block, as_dict, finding_blocks, memory_blocks, source_text
from kb.present.labels import L
from kb.present.links import code_url, entry_url

PLATFORM = "Slack"

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

ACTION_IDS = ("kb_more", "kb_lang", "kb_vote_up", "kb_vote_down", "kb_reason")
_ASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# ---------------------------------------------------------------- text helpers


_FENCE_RUN = re.compile(r"`{3,}")


def no_fence(text: str) -> str:
    """A run of 3+ backticks outside a code block, with zero-width spaces between them: never a fence."""
    return _FENCE_RUN.sub(lambda m: "\u200b".join(m.group(0)), text)


def esc(text: Any) -> str:
    """User or entry text for mrkdwn: escaped, and a stray ``` can never open a code block."""
    return no_fence(escape_slack(str(text)))


def shorten(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at a space when there is one (never inside a name), with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - 1)]
    sp = cut.rfind(" ")
    if sp >= limit // 2:
        cut = cut[:sp]
    return cut.rstrip() + "\u2026"


def esc_short(text: str, limit: int) -> str:
    """``shorten`` then ``esc``, so that the escaped text (what Slack counts) is at most ``limit``."""
    n = limit
    while True:
        out = esc(shorten(text, n))
        if len(out) <= limit or n <= 1:
            return out[:limit] if len(out) > limit else out
        n -= max(1, len(out) - limit)


def _link(url: str | None, label: str) -> str:
    """``<url|label>`` for an http(s) URL, else the escaped label."""
    if not url or urlsplit(url).scheme not in ("http", "https"):
        return esc(label)
    safe = quote(url, safe="/:?#[]@!$&'()*+,;=%~-._").replace("&", "&amp;")
    return f"<{safe}|{esc(label)}>"


source_url = code_url  # one home: kb.present.links


def source_mrkdwn(s: dict[str, Any]) -> str:
    url = source_url(s)
    note = s.get("note")
    if s.get("type") == "code":
        label = f"{s.get('package')} {s.get('version')} {s.get('file')}:{s.get('line')}"
        tail = f"  ({esc(note)})" if note else ""
    elif s.get("type") == "measurement":
        label = str(s.get("file") or s.get("url") or "")
        tail = f": {esc(note)}" if note else ""
    else:
        raw = str(s.get("url") or "")
        label = shorten(re.sub(r"^https?://", "", raw), 80) or raw
        tail = f"  ({esc(note)})" if note else ""
    return f"[{esc(s.get('type', ''))}] {_link(url, label)}{tail}"


# ---------------------------------------------------------------- sections -> mrkdwn chunks


@dataclass
class Part:
    """One section drawn: mrkdwn texts of at most SECTION_MAX characters each (None: it cannot be drawn)."""

    chunks: list[str] | None
    divider: bool = False
    kind: str = ""
    result: int | None = None

    @property
    def blocks(self) -> int:
        return len(self.chunks or ()) + self.divider

    @property
    def cost(self) -> int:
        """Characters, but at least PER_BLOCK per block: a budget in these units bounds both."""
        if self.chunks is None:
            return 10**9
        return max(self.blocks * PER_BLOCK, sum(map(len, self.chunks)))


def _split_text(text: str, limit: int) -> list[str]:
    """Plain mrkdwn text (no code block) in pieces of at most ``limit``, cut at newlines or spaces."""
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


def _chunks(pieces: list[tuple[str, bool]]) -> list[str] | None:
    """Join pieces (text, is_code) into texts of at most SECTION_MAX; a code piece is never cut."""
    out: list[str] = []
    cur = ""
    for text, is_code in pieces:
        if is_code:
            if len(text) > SECTION_MAX:
                return None
            subs = [text]
        else:
            subs = _split_text(text, SECTION_MAX)
        for sub in subs:
            if cur and len(cur) + 1 + len(sub) <= SECTION_MAX:
                cur += "\n" + sub
            else:
                if cur:
                    out.append(cur)
                cur = sub
    if cur:
        out.append(cur)
    return out


def _code(code: str) -> str | None:
    body = escape_slack(code)
    if "```" in body:
        return None  # it would close the fence early; the section goes to the file instead
    return f"```\n{body}\n```"


def _bold(text: str) -> str:
    t = esc(" ".join(text.split()))
    return f"*{t}*" if t and len(t) + 2 <= SECTION_MAX else t


def _block_line(b: Block) -> tuple[str, bool] | None:
    """One doc block as a mrkdwn piece (text, is_code); None when it cannot be drawn."""
    if b.kind == "code":
        code = _code(b.text)
        return None if code is None else (code, True)
    if b.kind == "heading" or (b.kind == "text" and b.style == "title"):
        return _bold(b.text), False
    if b.kind == "item":
        if b.style == "ok" and re.match(r"^\d+\. ", b.text) and b.level == 1:
            return _bold(b.text), False  # a fix's title
        bullet = "\u2022 " if b.level <= 1 else "    \u25e6 "
        return bullet + esc(b.text), False
    return esc(b.text), False


def _draw(sec: Section, result: dict[str, Any] | None, lang: str, site: str, skip_title: bool, divider: bool) -> Part:
    pieces: list[tuple[str, bool]] = []
    lb = L(lang)
    src_i = 0
    is_sources = bool(sec.blocks) and sec.blocks[0].kind == "heading" and sec.blocks[0].text == lb["sources"]
    for b in sec.blocks:
        if b.kind == "title":
            if not skip_title:
                pieces.append((_bold(b.text), False))
            meta = esc(b.meta)
            if result is not None and b.meta.startswith(str(result.get("id"))):
                rid = str(result["id"])
                url = entry_url(site, lang, rid)
                meta = (_link(url, rid) if url else f"`{esc(rid)}`") + esc(b.meta[len(rid) :])
            if meta:
                pieces.append((meta, False))
            continue
        if is_sources and b.kind == "item" and result is not None:
            srcs = result.get("sources") or []
            if src_i < len(srcs) and source_text(srcs[src_i]) == b.text:
                pieces.append(("\u2022 " + source_mrkdwn(srcs[src_i]), False))
                src_i += 1
                continue
        piece = _block_line(b)
        if piece is None:
            return Part(None, divider, sec.kind, sec.result)
        pieces.append(piece)
    return Part(_chunks(pieces), divider, sec.kind, sec.result)


def _is_sources(sec: Section, lang: str) -> bool:
    return bool(sec.blocks) and sec.blocks[0].kind == "heading" and sec.blocks[0].text == L(lang)["sources"]


def _glue_headings(secs: list[Section]) -> list[Section]:
    """The "Fixes" heading (bot.chat.sections gives it a section of its own, then one per fix) goes with the
    first fix, so it is never shown (or kept) without what it heads."""
    out: list[Section] = []
    pending: Section | None = None
    for s in secs:
        if pending is not None and s.result == pending.result and s.kind == "fix":
            s = Section(pending.blocks + s.blocks, s.result, s.kind)
        elif pending is not None:
            out.append(pending)
        pending = None
        if len(s.blocks) == 1 and s.blocks[0].kind == "heading":
            pending = s
            continue
        out.append(s)
    if pending is not None:
        out.append(pending)
    return out


def _split_message(secs: list[Section]) -> list[Section]:
    """The "no confident answer" message on its own (bot.chat.sections appends it to the section before)."""
    out: list[Section] = []
    for s in secs:
        i = next((j for j, b in enumerate(s.blocks) if b.kind == "text" and b.style == "title"), None)
        if i is None or i == 0:
            out.append(s)
            continue
        out.append(Section(s.blocks[:i], s.result, s.kind))
        out.append(Section(s.blocks[i:], s.result, "message"))
    return out


# ---------------------------------------------------------------- block builders


def _section(text: str) -> SectionBlock:
    return SectionBlock(text=MarkdownTextObject(text=text, verbatim=True))


def _context(texts: list[str]) -> ContextBlock:
    return ContextBlock(elements=[MarkdownTextObject(text=t, verbatim=True) for t in texts[:CONTEXT_ELEMENTS_MAX]])


def _header(text: str) -> HeaderBlock:
    return HeaderBlock(text=PlainTextObject(text=esc_short(text, HEADER_MAX) or "kb", emoji=False))


def feedback_actions(ask_id: str, lang: str) -> ActionsBlock | None:
    """more results, the other language, helpful / not helpful and the reasons (values carry the ask_id)."""
    if not ask_id or not _ASK_ID.match(ask_id):
        return None
    lang = "zh" if lang == "zh" else "en"
    other = "en" if lang == "zh" else "zh"

    def button(key: str, action_id: str, value: str, style: str | None = None, prefix: str = "") -> ButtonElement:
        label = shorten(prefix + msg(lang, key), BUTTON_TEXT_MAX)
        return ButtonElement(
            text=PlainTextObject(text=label, emoji=True), action_id=action_id, value=value, style=style
        )

    options = [
        Option(
            value=f"{ask_id}|{lang}|{r}", text=PlainTextObject(text=shorten(msg(lang, f"reason.{r}"), OPTION_TEXT_MAX))
        )
        for r in REASONS
    ]
    return ActionsBlock(
        block_id=f"kb_feedback|{ask_id}",
        elements=[
            button("slack.more", "kb_more", f"{ask_id}|{lang}"),
            button("slack.other_lang", "kb_lang", f"{ask_id}|{other}"),
            button("slack.helpful", "kb_vote_up", f"{ask_id}|{lang}", "primary", "\U0001f44d "),
            button("slack.not_helpful", "kb_vote_down", f"{ask_id}|{lang}", None, "\U0001f44e "),
            StaticSelectElement(
                action_id="kb_reason",
                placeholder=PlainTextObject(text=shorten(msg(lang, "slack.reason"), PLACEHOLDER_MAX)),
                options=options,
            ),
        ],
    )


NOTICE_COST = 600  # what the "did not fit" notice may take (reserved whether or not it is needed)


def _cost_of(blocks: list[SlackBlock]) -> int:
    """The budget fixed blocks take (the same units as ``Part.cost``), plus the notice."""
    return sum(max(PER_BLOCK, sum(len(t) for t in _texts(b.to_dict()))) for b in blocks) + NOTICE_COST


def _body(text: str, blocks: list[SlackBlock], file: dict[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"text": esc_short(text, FALLBACK_MAX) or "kb", "blocks": [b.to_dict() for b in blocks]}
    if file:
        body["file"] = file
    return body


def _select(
    parts: list[Part], mandatory: list[int], groups: list[list[list[int]]], budget: int
) -> tuple[set[int], int]:
    """Indices of the parts to show: the mandatory ones (while they fit), then each group packed in order
    (``bot.chat.pack``: whole units, stopping at the first that does not fit). Returns (shown, budget left)."""
    shown: set[int] = set()
    for i in mandatory:
        if parts[i].chunks is not None and parts[i].cost <= budget:
            shown.add(i)
            budget -= parts[i].cost
    for units in groups:
        # a part that cannot be drawn (a snippet too long for one block) is left out with its unit: its
        # neighbours still show; the notice and the file say what is missing
        units = [u for u in units if u and all(parts[i].chunks is not None for i in u)]
        kept, _ = pack(units, budget, lambda u: sum(parts[i].cost for i in u))
        for u in kept:
            shown.update(u)
            budget -= sum(parts[i].cost for i in u)
    return shown, budget


def _assemble(
    top: list[SlackBlock],
    parts: list[Part],
    shown: set[int],
    notice: list[str],
    bottom: list[SlackBlock],
) -> list[SlackBlock]:
    blocks: list[SlackBlock] = list(top)
    for i, p in enumerate(parts):
        if i not in shown:
            continue
        if p.divider:
            blocks.append(DividerBlock())
        blocks += [_section(c) for c in p.chunks or ()]
    if notice:
        blocks.append(_context(notice))
    blocks += bottom
    return blocks[:MAX_BLOCKS]


def _notice(lang: str, dropped: int, entry_id: str, file_name: str | None, site: str) -> list[str]:
    if not dropped:
        return []
    text = esc(msg(lang, "truncated", platform=PLATFORM, dropped=dropped, entry_id=entry_id))
    if file_name:
        text += " " + esc(msg(lang, "slack.truncated_file", name=file_name))
    url = entry_url(site, lang, entry_id)
    if url and len(text) + 1 + len(_link(url, url)) <= NOTICE_COST:
        text += " " + _link(url, url)
    return [
        text
        if len(text) <= NOTICE_COST
        else esc_short(msg(lang, "truncated", platform=PLATFORM, dropped=dropped, entry_id="ID"), NOTICE_COST)
    ]


# ---------------------------------------------------------------- answers


def answer_body(answer: Any, ask_id: str | None = None, site_base_url: str = "", files: bool = True) -> dict[str, Any]:
    """An Answer (kind answer / no_answer) as a chat.postMessage body within every limit."""
    from kb.present import markdown

    a = as_dict(answer)
    lang = "zh" if a.get("lang") == "zh" else "en"
    lb = L(lang)
    results = a.get("results") or []
    secs = _glue_headings(sections(a))
    if not a.get("answered"):
        secs = _split_message(secs)
    top_id = results[0]["id"] if results else (a.get("closest") or [{"id": "ID"}])[0]["id"]

    title = results[0]["title"] if a.get("answered") and results else msg(lang, "slack.no_answer")
    header = _header(title)
    full_title = esc(" ".join(str(title).split())) == header.text.text
    top: list[SlackBlock] = [header]
    if a.get("query"):
        top.append(_context([esc_short(msg(lang, "slack.asked", query=a["query"]), 400)]))
    actions = feedback_actions(ask_id or "", lang)
    bottom: list[SlackBlock] = [actions] if actions else []

    parts: list[Part] = []
    for s in secs:
        r = results[s.result - 1] if s.result and s.result <= len(results) else None
        first_title = s.result == 1 and s.blocks[0].kind == "title"
        divider = bool(s.result and s.result > 1 and s.blocks[0].kind == "title")
        parts.append(_draw(s, r, lang, site_base_url, skip_title=first_title and full_title, divider=divider))

    # what goes first when the message is full: the top entry's title and sources, its first fix, the
    # findings / memory / notes (each on its own), the rest of the top entry, then later results
    idx = {i: s for i, s in enumerate(secs)}
    mandatory: list[int] = []
    groups: list[list[list[int]]] = []
    if a.get("answered"):
        r1 = [i for i, s in idx.items() if s.result == 1]
        r1_core = [i for i in r1 if secs[i].blocks[0].kind == "title" or _is_sources(secs[i], lang)]
        r1_extra = [i for i in r1 if i not in r1_core]
        mandatory = r1_core
        pre = [i for i, s in idx.items() if s.result is None]
        if r1_extra:
            groups.append([[r1_extra[0]]])
        groups += [[[i]] for i in pre]
        groups.append([[i] for i in r1_extra[1:]])
        later: list[list[int]] = []
        for n in range(2, len(results) + 1):
            rn = [i for i, s in idx.items() if s.result == n]
            core = [i for i in rn if secs[i].blocks[0].kind == "title" or _is_sources(secs[i], lang)]
            later.append(core)
            later += [[i] for i in rn if i not in core]
        groups.append(later)
    else:
        mandatory = [i for i, s in idx.items() if s.kind == "message" or s.blocks[0].text == lb["closest"]]
        groups = [[[i]] for i in idx if i not in mandatory]

    file_name = f"kb-answer-{top_id}.md" if files else None
    reserved = _cost_of(top + bottom)
    shown, _ = _select(parts, mandatory, groups, BLOCKS_CHARS - reserved)
    dropped = len(parts) - len(shown)
    file = None
    if dropped and files:
        file = {"filename": file_name, "title": shorten(str(title), 200), "content": markdown.answer(a)}
    # `kb show` the entry whose parts are missing (the first one; the top entry when findings etc. are)
    first = next((secs[i].result for i in range(len(parts)) if i not in shown), None)
    show_id = results[first - 1]["id"] if first and first <= len(results) else top_id
    notice = _notice(lang, dropped, show_id, file_name if file else None, site_base_url)
    blocks = _assemble(top, parts, shown, notice, bottom)
    return _body(title if a.get("answered") else (a.get("message") or title), blocks, file)


def entry_body(result: dict[str, Any], lang: str, site_base_url: str = "", files: bool = True) -> dict[str, Any]:
    """One entry (``kb show``): every section, as many as fit; the rest in the file."""
    from kb.present import markdown

    lang = "zh" if lang == "zh" else "en"
    secs = _glue_headings(entry_sections(result, lang))
    header = _header(result["title"])
    full_title = esc(" ".join(str(result["title"]).split())) == header.text.text
    parts = [
        _draw(s, result, lang, site_base_url, skip_title=(i == 0 and full_title), divider=False)
        for i, s in enumerate(secs)
    ]
    mandatory = [i for i, s in enumerate(secs) if s.blocks[0].kind == "title" or _is_sources(s, lang)]
    groups = [[[i] for i in range(len(secs)) if i not in mandatory]]
    top: list[SlackBlock] = [header]
    reserved = _cost_of(top)
    shown, _ = _select(parts, mandatory, groups, BLOCKS_CHARS - reserved)
    dropped = len(parts) - len(shown)
    name = f"kb-{result['id']}.md"
    file = {"filename": name, "title": shorten(result["title"], 200), "content": markdown.entry(result, lang)}
    file = file if dropped and files else None
    notice = _notice(lang, dropped, str(result["id"]), name if file else None, site_base_url)
    return _body(result["title"], _assemble(top, parts, shown, notice, []), file)


# ---------------------------------------------------------------- lint, memory, reasons


def lint_body(data: dict[str, Any], lang: str) -> dict[str, Any]:
    """``kb lint`` findings of a pasted or attached config (the service's lint data)."""
    lang = "zh" if lang == "zh" else "en"
    lb = L(lang)
    name = str(data.get("file") or "<config>")
    findings = data.get("findings") or []
    summary = msg(
        lang, "slack.lint_summary", name=name, kind=data.get("kind", ""), fmt=data.get("format", ""), n=len(findings)
    )
    top: list[SlackBlock] = [_header(lb["findings"]), _context([esc_short(summary, CONTEXT_TEXT_MAX)])]
    if not findings:
        top.append(_section(esc_short(msg(lang, "slack.lint_clean", name=name), SECTION_MAX)))
        return _body(summary, top)
    parts: list[Part] = []
    for f in findings:
        f = dict(f)
        if lang == "zh":  # lint data carries both languages; the answer contract carries one
            f["message"] = f.get("message_zh") or f.get("message", "")
            f["suggestion"] = f.get("suggestion_zh") or f.get("suggestion")
        pieces = [p for p in (_block_line(b) for b in finding_blocks([f], lang)) if p is not None]
        parts.append(Part(_chunks(pieces)))
    reserved = _cost_of(top)
    shown, _ = _select(parts, [], [[[i] for i in range(len(parts))]], BLOCKS_CHARS - reserved)
    dropped = len(parts) - len(shown)
    notice = [esc(msg(lang, "slack.truncated_lint", dropped=dropped))] if dropped else []
    return _body(summary, _assemble(top, parts, shown, notice, []))


def estimate_memory(data: dict[str, Any], lang: str) -> dict[str, Any]:
    """A ``kb mem`` estimate (``Estimate.to_dict()``) as the answer contract's Memory, labels in ``lang``
    (kb.ask.engine.memory_contract, the one conversion every surface uses)."""
    from kb.ask.engine import memory_contract

    s = data.get("setup") or {}
    what = s.get("shape") or f"{(data.get('params') or 0) / 1e9:.2f}B"
    setup = msg(
        lang,
        "slack.mem_setup",
        what=what,
        stage=s.get("stage"),
        offload=s.get("offload"),
        precision=s.get("precision"),
        seq=s.get("seq"),
        mb=s.get("micro_batch"),
        gpus=s.get("gpus"),
        nodes=s.get("nodes"),
    )
    from dataclasses import asdict

    return asdict(memory_contract(data, lang, [setup]))


def memory_body(data: dict[str, Any], lang: str) -> dict[str, Any]:
    """A ``kb mem`` estimate: the verdict, the terms, the cheapest changes (kb.present.doc.memory_blocks)."""
    lang = "zh" if lang == "zh" else "en"
    lb = L(lang)
    m = estimate_memory(data, lang) if "setup" in data else data
    pieces = [p for p in (_block_line(b) for b in memory_blocks(m, lang)) if p is not None]
    chunks = _chunks(pieces) or []
    top: list[SlackBlock] = [_header(lb["memory"])]
    blocks = top + [_section(c) for c in chunks[: MAX_BLOCKS - 1]]
    verdict = lb["fits"] if m.get("fits_gpu") else lb["does_not_fit"]
    return _body(f"{lb['memory']}: {m.get('model')}: {verdict}", blocks)


def message_body(message: str, lang: str = "en", error_id: str | None = None) -> dict[str, Any]:
    """A reason (rate limited, refused, internal error with its id, a usage line): never silence."""
    blocks: list[SlackBlock] = [_section(esc_short(message or "", SECTION_MAX) or "kb")]
    if error_id:
        blocks.append(_context([f"error id `{esc_short(error_id, 100)}`"]))
    return _body(message or "kb", blocks)


def help_body(lang: str = "en") -> dict[str, Any]:
    text = no_fence(escape_slack(msg(lang, "slack.help")))
    return {"text": esc_short("kb: /kb help", FALLBACK_MAX), "blocks": [_section(text[:SECTION_MAX]).to_dict()]}


def render(reply: Any, files: bool = True) -> dict[str, Any]:
    """Any Reply kind -> the chat.postMessage body (``text``, ``blocks``; ``file`` when something did not fit
    and ``files`` is true: the caller uploads it)."""
    r = as_dict(reply)
    kind, lang = r.get("kind"), ("zh" if r.get("lang") == "zh" else "en")
    if kind in ("answer", "no_answer") and r.get("answer"):
        return answer_body(r["answer"], r.get("ask_id"), r.get("site_base_url") or "", files=files)
    if kind == "entry" and r.get("data"):
        return entry_body(r["data"], lang, r.get("site_base_url") or "", files=files)
    if kind == "lint" and r.get("data") is not None:
        return lint_body(r["data"], lang)
    if kind == "memory" and r.get("data"):
        return memory_body(r["data"], lang)
    return message_body(
        r.get("message") or msg(lang, "internal_error", error_id=r.get("error_id")), lang, r.get("error_id")
    )


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
            if any(len(e.get("text", "")) > SECTION_MAX for e in els):
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
