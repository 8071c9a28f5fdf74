"""Discord renderer: a ``bot.service.Reply`` -> the Discord message body. Pure functions, no I/O.

``render(reply)`` returns the JSON body a bot posts (``content``, ``embeds``, ``components``,
``allowed_mentions``) and, when something did not fit, ``files``: ``[(filename, text)]`` with the full
answer as Markdown (``answer.md``). What is shown and in which order comes from ``bot.chat.sections``
(that is, ``kb/present/doc.py``); this module only decides how a section looks in Discord and where it
goes:

- one embed per group: config findings, the memory verdict, notes on names, the "no confident answer"
  message with the closest entries, then one per result (title, linked to the entry page when
  ``site_base_url`` is set; summary, fixes with their snippets as fenced code blocks, parameters,
  myths, versions; sources as links in a field; id and score in the footer);
- the limits hold for every input (``LIMITS``): a section is placed whole or not at all, never cut, so a
  code block is never split; a section that does not fit is dropped (``bot.chat.pack``), later and less
  important ones first (later results, the other fixes and the parameters; never the top result's sources);
  the user is told (``bot.messages`` "truncated") and gets the whole answer as ``answer.md``;
- every text from an entry or a user goes through ``bot.chat.neutralise_discord``, and
  ``allowed_mentions`` is always ``{"parse": []}``: nothing in a reply can ping.

Buttons on every answer use stable ``custom_id`` values (``kb:more:<ask_id>``, ``kb:lang:<ask_id>:<zh|en>``,
``kb:vote:<ask_id>:up|down``; the reason select ``kb:reason:<ask_id>``), so a restarted bot still handles
them. The dicts are exactly what discord.py 2.7 serialises for the same embeds and items.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bot.chat import Section, entry_sections, neutralise_discord, pack, sections
from bot.feedback import REASONS
from bot.messages import msg
from kb.present.doc import Block, as_dict
from kb.present.labels import L
from kb.present.links import REPOS, code_url, entry_url  # noqa: F401 - re-exported for callers

PLATFORM = "Discord"
ANSWER_FILE = "answer.md"
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
    "label": 80,
    "placeholder": 150,
    "option_label": 100,
}

COLOR = {"result": 0x5865F2, "error": 0xED4245, "warning": 0xFEE75C, "ok": 0x57F287, "dim": 0x95A5A6}

_ASK_ID = r"[0-9A-Za-z_-]{1,64}"
CUSTOM_ID = re.compile(
    rf"kb:(?:(?P<more>more):(?P<more_id>{_ASK_ID})|(?P<lang>lang):(?P<lang_id>{_ASK_ID}):(?P<to>zh|en)"
    rf"|(?P<vote>vote):(?P<vote_id>{_ASK_ID}):(?P<dir>up|down)|(?P<reason>reason):(?P<reason_id>{_ASK_ID}))"
)


# ---------------------------------------------------------------- small helpers


def custom_id(action: str, ask_id: str, arg: str | None = None) -> str:
    """``kb:<action>:<ask_id>[:<arg>]``; at most 100 characters (Discord's limit)."""
    cid = f"kb:{action}:{ask_id}" + (f":{arg}" if arg else "")
    if len(cid) > LIMITS["custom_id"] or not CUSTOM_ID.fullmatch(cid):
        raise ValueError(f"not a kb custom_id: {cid!r}")
    return cid


def parse_custom_id(cid: str) -> tuple[str, str, str | None] | None:
    """``(action, ask_id, arg)`` for a kb custom_id, else None."""
    m = CUSTOM_ID.fullmatch(cid or "")
    if m is None:
        return None
    for action, id_key, arg_key in (
        ("more", "more_id", None),
        ("lang", "lang_id", "to"),
        ("vote", "vote_id", "dir"),
        ("reason", "reason_id", None),
    ):
        if m.group(action):
            return action, m.group(id_key), m.group(arg_key) if arg_key else None
    return None  # pragma: no cover - the pattern has no other branch


def safe(text: str | None) -> str:
    """Entry or user text for Discord: no pings, and no ``` that would open or close a code block."""
    return neutralise_discord(_defence(text or ""))


_FENCE_RUN = re.compile(r"`{3,}")


def _defence(text: str) -> str:
    # zero-width spaces between backticks keep a literal ``` (or a longer run) from becoming a fence
    return _FENCE_RUN.sub(lambda m: "\u200b".join(m.group(0)), text)


def inline_code(text: str) -> str:
    """`text` as inline code (a backtick inside would end it early: shown as ')."""
    return "`" + safe(text).replace("`", "'") + "`"


def code_block(code: str, lang: str = "") -> str:
    """A fenced code block, whole; the code is shown as is except that pings and ``` are defused."""
    return f"```{lang if lang and lang != 'text' else ''}\n{safe(code)}\n```"


def other_lang(lang: str) -> str:
    return "en" if lang == "zh" else "zh"


_URL_ESCAPES = {c: f"%{ord(c):02X}" for c in " ()<>[]`@\n\r\t"}


def _link_url(url: str) -> str:
    # what would end a Markdown link target early, open a code span or fence, or look like a ping
    return "".join(_URL_ESCAPES.get(c, c) for c in url)


def _link_text(text: str) -> str:
    return safe(text).replace("[", "(").replace("]", ")")


def link(text: str, url: str | None) -> str:
    """``[text](url)`` (embeds only); plain text when there is no https URL."""
    if not url or not url.startswith(("https://", "http://")):
        return _link_text(text)
    return f"[{_link_text(text)}]({_link_url(url)})"


def _short_url(url: str) -> str:
    """Link text for a docs / issue URL: owner/repo#123 for GitHub issues and pulls, else host/path."""
    m = re.match(r"https?://github\.com/([^/]+/[^/]+)/(?:issues|pull|discussions)/(\d+)", url)
    if m:
        return f"{m.group(1)}#{m.group(2)}"
    parts = urlsplit(url)
    text = (parts.netloc + parts.path).rstrip("/")
    return text if len(text) <= 70 else text[:69] + "\u2026"


def source_md(s: dict[str, Any]) -> str:
    """One source as a Discord list item: code as file:line linked to the release tag, docs/issues as links."""
    note = f" ({safe(s['note'])})" if s.get("note") else ""
    if s["type"] == "code":
        where = f"{s.get('file')}:{s.get('line')}" if s.get("line") else f"{s.get('file')}"
        text = inline_code(where)
        url = code_url(s)
        pkg = safe(f"{s.get('package')} {s.get('version')}")
        return f"- {f'[{text}]({_link_url(url)})' if url else text} {pkg}{note}"
    if s["type"] == "measurement":
        what = s.get("file") or s.get("url") or ""
        return f"- {link(what, s.get('url'))}{note}"
    url = s.get("url") or ""
    return f"- {link(_short_url(url), url)}{note}"


# ---------------------------------------------------------------- sections -> units


@dataclass
class _Unit:
    """One section (or part of one) as Discord Markdown, with where it may go and how much it matters."""

    group: int
    md: str
    tier: int  # 0 shown first ... higher tiers are dropped first
    seq: str = ""  # units of one sequence (the fixes, the findings) are kept as a prefix, never with a gap
    field_name: str | None = None  # may be a field with this name (sources)
    bundle: int | None = None  # units of one bundle are kept together or dropped together


@dataclass
class _Group:
    kind: str  # findings | memory | notes | message | result
    title: str | None = None
    url: str | None = None
    footer: str | None = None
    color: int = COLOR["result"]
    units: list[_Unit] = field(default_factory=list)


def _block_md(b: Block) -> str:
    if b.kind == "code":
        return code_block(b.text, b.lang)
    if b.kind in ("title", "heading"):
        return f"**{safe(b.text)}**"
    text = safe(b.text)
    if b.kind == "item":
        text = text.strip()
        if text.startswith("-> "):  # a memory change: an arrow is its bullet
            return ("  " * max(0, b.level - 1)) + "\u2192 " + text[3:]
        return ("  " * max(0, b.level - 1)) + f"- {text}"
    return text


def _blocks_md(blocks: list[Block]) -> str:
    return "\n".join(_block_md(b) for b in blocks)


def _sources_md(sec: Section, sources: list[dict[str, Any]]) -> str:
    """The sources section (heading skipped: it is the field's name) with each source item as a link."""
    out: list[str] = []
    queue = list(sources)
    for b in sec.blocks[1:]:
        if b.kind == "item" and b.level == 1 and queue:
            out.append(source_md(queue.pop(0)))
        else:
            out.append(_block_md(b))
    return "\n".join(out)


def _closest_md(sec: Section, closest: list[dict[str, Any]], lang: str, base: str) -> str:
    out = [_block_md(sec.blocks[0])]
    queue = list(closest)
    lb = L(lang)
    for b in sec.blocks[1:]:
        if b.kind == "item" and queue:
            c = queue.pop(0)
            title = link(c["title"], entry_url(base, lang, c["id"]))
            out.append(f"- ? {title}  [{inline_code(c['id'])}, {lb['score']} {c['score']}]")
        else:
            out.append(_block_md(b))
    return "\n".join(out)


def _title_fits(text: str) -> bool:
    return 0 < len(text) <= LIMITS["title"]


def _pre_groups(secs: list[Section], a: dict[str, Any], lang: str, base: str) -> list[_Group]:
    """Findings, memory, notes and the no-answer message: the sections before the first result."""
    lb = L(lang)
    groups: list[_Group] = []
    for sec in secs:
        head = sec.blocks[0]
        gi = len(groups)
        if head.kind == "heading" and head.text == lb["findings"]:
            errors = any(f.get("severity") == "error" for f in a.get("findings") or [])
            g = _Group("findings", color=COLOR["error" if errors else "warning"])
            g.title = safe(head.text) if _title_fits(safe(head.text)) else None
            # one unit per finding (the item and its fix / see lines), kept in order without gaps
            parts: list[list[Block]] = []
            for b in sec.blocks[1:]:
                if b.kind == "item" or not parts:
                    parts.append([b])
                else:
                    parts[-1].append(b)
            if g.title is None:
                if parts:
                    parts[0].insert(0, head)
                else:
                    parts.append([head])
            # the first finding with the answer's head, two more with the first fix, the rest before later results
            for j, p in enumerate(parts):
                g.units.append(_Unit(gi, _blocks_md(p), 0 if j == 0 else 1 if j < 3 else 2, seq=f"findings:{gi}"))
            groups.append(g)
        elif head.kind == "heading" and head.text.startswith(lb["memory"]):
            fits = (a.get("memory") or {}).get("fits_gpu", True)
            g = _Group("memory", color=COLOR["ok" if fits else "error"])
            # the verdict (needed vs the card: fits or not) first; the terms, changes and assumptions after
            if _title_fits(safe(head.text)):
                g.title = safe(head.text)
                g.units.append(_Unit(gi, "", 0, seq=f"memory:{gi}"))
            else:
                g.units.append(_Unit(gi, _block_md(head), 0, seq=f"memory:{gi}"))
            if len(sec.blocks) > 1:
                g.units.append(_Unit(gi, _blocks_md(sec.blocks[1:]), 1, seq=f"memory:{gi}"))
            groups.append(g)
        elif head.kind == "heading" and head.text == lb["notes"]:
            g = _Group("notes", title=safe(head.text), color=COLOR["warning"])
            for b in sec.blocks[1:]:
                g.units.append(_Unit(gi, _block_md(b), 1, seq=f"notes:{gi}"))
            if len(g.units) == 0:
                g.units.append(_Unit(gi, "", 1))
            groups.append(g)
        elif head.kind == "heading" and head.text == lb["closest"]:
            target = groups[-1] if groups and groups[-1].kind == "message" else None
            if target is None:
                target = _Group("message", color=COLOR["dim"])
                groups.append(target)
            target.units.append(_Unit(groups.index(target), _closest_md(sec, a.get("closest") or [], lang, base), 0))
        else:  # the "no confident answer" message, or anything doc.py adds later: shown as it is
            g = _Group("message", color=COLOR["dim"])
            g.units.append(_Unit(gi, _blocks_md(sec.blocks), 0))
            groups.append(g)
    return groups


def _result_group(
    secs: list[Section], r: dict[str, Any], n: int | None, lang: str, base: str, gi: int, first: bool
) -> _Group:
    """One result (or the entry of ``kb show``): title and summary, fixes, parameters, myths, sources."""
    lb = L(lang)
    url = entry_url(base, lang, r["id"])
    g = _Group("result", url=url, color=COLOR["result"])
    bundle = gi  # the title and the sources of a result go together: never an answer without its sources
    # tiers (lower first): the top result's title, summary and sources; its first fix and its myths; the
    # other results' titles, summaries and sources (in order, no gaps); the top result's other fixes; its
    # parameters and the rest; last the other results' fixes and parameters
    if first:
        t_head, t_first, t_fixes, t_rest, head_seq = 0, 1, 3, 4, "results"
    else:
        t_head, t_first, t_fixes, t_rest, head_seq = 2, 5, 5, 5, "results"
    pending: list[Block] = []  # a heading alone ("Fixes") goes with the section after it
    for sec in secs:
        head = sec.blocks[0]
        if head.kind == "heading" and len(sec.blocks) == 1:
            pending += sec.blocks
            continue
        blocks, pending = pending + sec.blocks, []
        if head.kind == "title":
            g.footer = safe(head.meta) if head.meta else None
            title = safe(head.text)
            rest = blocks[1:]
            if _title_fits(title):
                g.title = title
                md = _blocks_md(rest)
            else:
                md = "\n".join([f"**{link(head.text, url)}**", _blocks_md(rest)]).strip("\n")
                g.url = None
            g.units.append(_Unit(gi, md, t_head, seq=head_seq, bundle=bundle))
        elif head.kind == "heading" and head.text == lb["sources"]:
            md = _sources_md(sec, r.get("sources") or [])
            g.units.append(_Unit(gi, md, t_head, seq=head_seq, field_name=safe(head.text), bundle=bundle))
        elif sec.kind == "fix":
            is_first = not any(u.seq == f"fixes:{gi}" for u in g.units)
            g.units.append(_Unit(gi, _blocks_md(blocks), t_first if is_first else t_fixes, seq=f"fixes:{gi}"))
        elif head.kind == "heading" and head.text in (lb["myths"], lb["cause"]):
            g.units.append(_Unit(gi, _blocks_md(blocks), t_first))
        else:  # verified parameters, and anything else doc.py shows for a result
            g.units.append(_Unit(gi, _blocks_md(blocks), t_rest))
    if pending:
        g.units.append(_Unit(gi, _blocks_md(pending), t_rest))
    return g


def _groups_for_answer(a: dict[str, Any], base: str) -> list[_Group]:
    lang = a["lang"]
    secs = sections(a)
    pre = [s for s in secs if s.result is None]
    groups = _pre_groups(pre, a, lang, base)
    for i, r in enumerate(a.get("results") or [], 1):
        rs = [s for s in secs if s.result == i]
        if rs:
            groups.append(_result_group(rs, r, i, lang, base, len(groups), first=(i == 1)))
    return groups


# ---------------------------------------------------------------- choosing what fits, then laying it out


def _cost(u: _Unit) -> int:
    return len(u.md) + 2


def _placeable(u: _Unit) -> bool:
    if u.field_name is not None and len(u.md) <= LIMITS["field_value"] and 0 < len(u.md):
        return True
    return len(_desc_md(u)) <= LIMITS["description"]


def _desc_md(u: _Unit) -> str:
    """A unit as description text: a would-be field keeps its name as a bold heading."""
    return f"**{u.field_name}**\n{u.md}" if u.field_name and u.md else u.md


def _overhead(g: _Group) -> int:
    return len(g.title or "") + len(g.footer or "") + sum(len(u.field_name or "") for u in g.units)


def _choose(groups: list[_Group], budget: int) -> set[int]:
    """ids of the units to show: tier by tier (lowest first), each stream in display order with
    ``bot.chat.pack``, which stops at the first item that does not fit, so a sequence (the fixes, the
    findings, the later results) never shows a gap. A bundle (a result's title and sources) is one item."""
    units = [u for g in groups for u in g.units]
    kept: set[int] = set()
    opened: set[int] = set()  # groups with a kept unit: their title / footer / field names are paid for
    used = 0
    failed: set[Any] = set()
    for tier in sorted({u.tier for u in units}):
        streams: dict[Any, list[list[_Unit]]] = {}
        seen: set[int] = set()
        for u in units:
            if u.tier != tier or id(u) in seen:
                continue
            item = [v for v in units if v.bundle == u.bundle] if u.bundle is not None else [u]
            seen.update(id(v) for v in item)
            key = u.seq or (("bundle", u.bundle) if u.bundle is not None else ("unit", id(u)))
            if key not in failed:
                streams.setdefault(key, []).append(item)
        for key, items in streams.items():
            pending_open: set[int] = set()

            def cost(item: list[_Unit], _pending: set[int] = pending_open) -> int:
                if not all(_placeable(v) for v in item):
                    return 10**9
                c = sum(_cost(v) for v in item)
                g = item[0].group
                if g not in opened and g not in _pending:
                    _pending.add(g)
                    c += _overhead(groups[g])
                return c

            ok, dropped = pack(items, budget - used, cost)
            # pack asked for the cost of each kept item once, in order; recompute the total the same way
            pending_open.clear()
            spent = sum(cost(it) for it in ok)
            used += spent
            opened.update(it[0].group for it in ok)
            kept.update(id(v) for it in ok for v in it)
            if dropped:
                failed.add(key)
    # a group whose head did not make it shows nothing: a result's fixes never appear without its title
    for g in groups:
        heads = [u for u in g.units if u.bundle is not None]
        if heads and not all(id(u) in kept for u in heads):
            kept.difference_update(id(u) for u in g.units)
    return kept


def _new_embed(g: _Group, cont: bool) -> dict[str, Any]:
    e: dict[str, Any] = {"type": "rich", "color": g.color, "flags": 0}  # flags: as discord.py 2.7 sends it
    if not cont:
        if g.title:
            e["title"] = g.title
            if g.url:
                e["url"] = g.url
        if g.footer:
            e["footer"] = {"text": g.footer}
    return e


def _layout(groups: list[_Group], kept: set[int]) -> tuple[list[dict[str, Any]], set[int]]:
    """Embeds for the kept units, in display order; returns the units actually placed."""
    embeds: list[dict[str, Any]] = []
    placed: set[int] = set()
    for g in groups:
        us = [u for u in g.units if id(u) in kept]
        if not us:
            continue
        e = _new_embed(g, cont=False)
        group_embeds = [e]
        for u in us:
            desc = e.get("description", "")
            fields = e.setdefault("fields", [])
            if u.field_name is not None and 0 < len(u.md) <= LIMITS["field_value"] and len(fields) < LIMITS["fields"]:
                fields.append({"name": u.field_name, "value": u.md, "inline": False})
            elif not u.md:
                pass
            elif not fields and len(desc) + 2 + len(_desc_md(u)) <= LIMITS["description"]:
                e["description"] = f"{desc}\n\n{_desc_md(u)}" if desc else _desc_md(u)
            elif len(_desc_md(u)) <= LIMITS["description"]:
                e = _new_embed(g, cont=True)
                e["description"] = _desc_md(u)
                group_embeds.append(e)
            else:
                continue
            placed.add(id(u))
        for ge in group_embeds:
            if not ge.get("fields"):
                ge.pop("fields", None)
            if any(k in ge for k in ("title", "description", "fields", "footer")):
                embeds.append(ge)
    return embeds, placed


def embed_length(e: dict[str, Any]) -> int:
    """What Discord counts towards the 6,000 characters of a message's embeds."""
    n = len(e.get("title", "")) + len(e.get("description", ""))
    n += sum(len(f["name"]) + len(f["value"]) for f in e.get("fields", []))
    n += len((e.get("footer") or {}).get("text", "")) + len((e.get("author") or {}).get("name", ""))
    return n


def _valid(embeds: list[dict[str, Any]]) -> bool:
    return len(embeds) <= LIMITS["embeds"] and sum(embed_length(e) for e in embeds) <= LIMITS["total"]


def _build(groups: list[_Group]) -> tuple[list[dict[str, Any]], int]:
    """Embeds within every limit, and how many parts (sections, or findings / notes one by one) were left out."""
    total = sum(len(g.units) for g in groups)
    budget = LIMITS["total"]
    kept = _choose(groups, budget)
    embeds, placed = _layout(groups, kept)
    while not _valid(embeds):
        # overheads the estimate missed (continuation embeds, separators): drop the least important unit
        order = [u for g in groups for u in g.units if id(u) in placed]
        if not order:
            embeds = []
            break
        worst = max(order, key=lambda u: (u.tier, u.group, _position(groups, u)))
        kept -= _dropping(groups, worst)
        embeds, placed = _layout(groups, kept)
    return embeds, total - len(placed)


def _position(groups: list[_Group], u: _Unit) -> int:
    return next(i for i, v in enumerate(groups[u.group].units) if v is u)


def _dropping(groups: list[_Group], worst: _Unit) -> set[int]:
    """``worst`` and what cannot stay without it: the rest of its sequence (no gaps, across results too),
    and the whole group of a dropped head (a result's title and sources)."""
    drop = [worst]
    if worst.seq:
        seq = [u for g in groups for u in g.units if u.seq == worst.seq]
        at = next(i for i, v in enumerate(seq) if v is worst)
        drop += seq[at + 1 :]
    ids = {id(u) for u in drop}
    for u in drop:
        if u.bundle is not None:
            ids |= {id(v) for v in groups[u.group].units}
    return ids


# ---------------------------------------------------------------- components


def _button(label: str, cid: str, style: int) -> dict[str, Any]:
    return {"type": 2, "style": style, "disabled": False, "label": label[: LIMITS["label"]], "custom_id": cid}


def answer_components(ask_id: str, lang: str) -> list[dict[str, Any]]:
    """more results / the other language / helpful / not helpful, one action row."""
    return [
        {
            "type": 1,
            "components": [
                _button(msg(lang, "button.more"), custom_id("more", ask_id), 1),
                _button(msg(lang, "button.lang"), custom_id("lang", ask_id, other_lang(lang)), 2),
                _button(msg(lang, "button.up"), custom_id("vote", ask_id, "up"), 3),
                _button(msg(lang, "button.down"), custom_id("vote", ask_id, "down"), 4),
            ],
        }
    ]


def reason_components(ask_id: str, lang: str) -> list[dict[str, Any]]:
    """The select shown after "not helpful": the reasons of bot.feedback.REASONS, labelled in ``lang``."""
    options = [
        {"label": msg(lang, f"reason.{r}")[: LIMITS["option_label"]], "value": r, "default": False} for r in REASONS
    ]
    select = {
        "type": 3,
        "custom_id": custom_id("reason", ask_id),
        "min_values": 1,
        "max_values": 1,
        "disabled": False,
        "required": True,  # discord.py 2.7 serialises it for every select; messages ignore it
        "placeholder": msg(lang, "reason.placeholder")[: LIMITS["placeholder"]],
        "options": options,
    }
    return [{"type": 1, "components": [select]}]


# ---------------------------------------------------------------- payloads


def _body(
    content: str = "",
    embeds: list[dict[str, Any]] | None = None,
    components: list[dict[str, Any]] | None = None,
    files: list[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "content": _fit_content(content),
        "embeds": embeds or [],
        "components": components or [],
        "allowed_mentions": dict(NO_MENTIONS),
    }
    if files:
        body["files"] = files
    return body


def _fit_content(text: str) -> str:
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


def _notice(lang: str, dropped: int, entry_id: str | None, embeds: list[dict[str, Any]] | None = None) -> str:
    if not dropped:
        return "" if embeds else L(lang)["no_results"]  # Discord refuses an empty message
    if entry_id:
        return (
            msg(lang, "truncated", platform=PLATFORM, dropped=dropped, entry_id=entry_id)
            + " "
            + msg(lang, "attached", filename=ANSWER_FILE)
        )
    return msg(lang, "truncated_file", platform=PLATFORM, dropped=dropped, filename=ANSWER_FILE)


def render_answer(answer: Any, ask_id: str | None = None, site_base_url: str = "") -> dict[str, Any]:
    """An ``Answer`` (dataclass or its JSON dict) -> the message body, with buttons when ``ask_id`` is given."""
    from kb.present import markdown

    a = as_dict(answer)
    lang = a["lang"]
    embeds, dropped = _build(_groups_for_answer(a, site_base_url))
    top = (a.get("results") or [{}])[0].get("id")
    files = [(ANSWER_FILE, markdown.answer(a))] if dropped else None
    comps = answer_components(ask_id, lang) if ask_id else None
    return _body(_notice(lang, dropped, top, embeds), embeds, comps, files)


def render_entry(result: dict[str, Any], lang: str, site_base_url: str = "") -> dict[str, Any]:
    """``kb show``: one entry with everything (causes, all myths, related)."""
    from kb.present import markdown

    secs = entry_sections(result, lang)
    groups = [_result_group(secs, result, None, lang, site_base_url, 0, first=True)]
    embeds, dropped = _build(groups)
    files = [(ANSWER_FILE, markdown.entry(result, lang))] if dropped else None
    return _body(_notice(lang, dropped, result.get("id"), embeds), embeds, None, files)


def _lint_finding(f: dict[str, Any], lang: str) -> dict[str, Any]:
    """A kb.doctor.lint finding dict (message / message_zh) -> the contract's Finding shape, in ``lang``."""
    zh = lang == "zh" and f.get("message_zh")
    return {
        "code": f["code"],
        "severity": f["severity"],
        "path": f["path"],
        "line": f.get("line"),
        "message": f["message_zh"] if zh else f["message"],
        "suggestion": (f.get("suggestion_zh") or f.get("suggestion")) if zh else f.get("suggestion"),
        "entry": f.get("entry"),
    }


def _pseudo_answer(lang: str, **fields: Any) -> dict[str, Any]:
    base = {"lang": lang, "answered": True, "results": [], "closest": [], "findings": [], "notes": [], "memory": None}
    return {**base, **fields}


def render_lint(data: dict[str, Any], lang: str) -> dict[str, Any]:
    """``kb lint`` findings: the same findings section an answer with a config shows first."""
    from kb.present import markdown
    from kb.present.doc import answer_blocks

    findings = [_lint_finding(f, lang) for f in data.get("findings") or []]
    if not findings:
        text = msg(
            lang, "lint_clean", file=data.get("file", ""), kind=data.get("kind", ""), format=data.get("format", "")
        )
        return _body(safe(text))
    a = _pseudo_answer(lang, findings=findings)
    embeds, dropped = _build(_groups_for_answer(a, ""))
    files = [(ANSWER_FILE, markdown.blocks_markdown(answer_blocks(a)))] if dropped else None
    return _body(_notice(lang, dropped, None, embeds), embeds, None, files)


def memory_view(e: dict[str, Any], lang: str) -> dict[str, Any]:
    """A ``kb mem`` estimate dict -> the Answer's Memory shape (kb.ask.engine.memory_contract), for doc.memory_blocks."""
    from kb.ask.engine import memory_contract

    s = e.get("setup") or {}
    assumptions = (
        [
            f"ZeRO-{s.get('stage')}, offload {s.get('offload')}, {s.get('precision')}, seq {s.get('seq')}, "
            f"micro_batch {s.get('micro_batch')}, activation_checkpointing {s.get('activation_checkpointing')}"
        ]
        if s
        else []
    )
    return asdict(memory_contract(e, lang, assumptions))


def render_memory(data: dict[str, Any], lang: str) -> dict[str, Any]:
    """``kb mem``: the memory verdict (needed vs the card), the terms, the cheapest changes."""
    from kb.present import markdown
    from kb.present.doc import answer_blocks

    mem = data if "gpu_mem_gib" in data and isinstance(data.get("gpu"), list) else memory_view(data, lang)
    a = _pseudo_answer(lang, memory=mem)
    embeds, dropped = _build(_groups_for_answer(a, ""))
    files = [(ANSWER_FILE, markdown.blocks_markdown(answer_blocks(a)))] if dropped else None
    return _body(_notice(lang, dropped, None, embeds), embeds, None, files)


def render_notice(text: str) -> dict[str, Any]:
    """A reason (rate limited, refused, internal error with its id) or a thank-you: content only."""
    return _body(safe(text))


def render_reason_prompt(ask_id: str, lang: str) -> dict[str, Any]:
    """The ephemeral reply to "not helpful": thanks, and the select with the reasons."""
    return _body(msg(lang, "reason.prompt"), components=reason_components(ask_id, lang))


def render(reply: Any) -> dict[str, Any]:
    """``bot.service.Reply`` (or its dict) -> the Discord message body (plus ``files`` when something moved there)."""
    r = reply.to_dict() if hasattr(reply, "to_dict") else dict(reply)
    kind, lang = r["kind"], r.get("lang") or "en"
    if kind in ("answer", "no_answer") and r.get("answer"):
        return render_answer(r["answer"], r.get("ask_id"), r.get("site_base_url") or "")
    if kind == "entry" and r.get("data"):
        return render_entry(r["data"], lang, r.get("site_base_url") or "")
    if kind == "lint" and r.get("data") is not None:
        return render_lint(r["data"], lang)
    if kind == "memory" and r.get("data"):
        return render_memory(r["data"], lang)
    return render_notice(r.get("message") or "")


def wire_body(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON part of a body (without ``files``)."""
    return {k: body[k] for k in BODY_KEYS}
