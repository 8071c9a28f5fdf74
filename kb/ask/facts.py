"""Answers from the registry itself: a name the question uses was renamed, removed, added or deprecated.

A user pastes ``TypeError: __init__() got an unexpected keyword argument 'evaluation_strategy'`` or asks whether
``warmup_ratio`` still exists. Often no curated entry is about that one name, but the registry knows its whole
life (kb/registry/store.py, with the timelines' every minor release): when it appeared, when it was renamed and
to what, when it went. This module turns that into results of kind ``registry``, ranked with the entries by the
same gate (kb.ask.rank.select). Nothing here is prose written for a name: every sentence is a template filled
from the records, and every result cites the source lines of the release(s) it speaks of.

When a name is eligible (``registry_facts``): the question uses it, and its record has a lifecycle event (a
rename, a removal, an addition the user's release predates, a deprecation), and either the user's release is on
the far side of that event (they wrote a name their release does not have, or has deprecated), or the question
speaks of the name's lifecycle (``LIFECYCLE``: the words Python's and the packages' own errors and warnings use
for it, "unexpected keyword argument", "is deprecated", "not used by the HfArgumentParser", ...). A name that only
appears in a question about something else adds no result: the answer's notes already speak of it.

Score (on the entries' calibrated scale): the gate plus what an entry gets for a named parameter it is about
(``PARAM_BONUS + TITLE_NAME_BONUS``), plus ``FINDING_BOOST["warning"]`` when the user's release is on the far side
(a fact about their setup, like a finding in their config).

Core module: imports kb.* core only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb import contract as C
from kb.ask.rank import ANSWER_THRESHOLD, FINDING_BOOST, LIFECYCLE, PARAM_BONUS, TITLE_NAME_BONUS, package_named
from kb.ask.result import param_fact
from kb.i18n import t
from kb.registry.store import Record, Registry

FACT_SCORE = ANSWER_THRESHOLD + PARAM_BONUS + TITLE_NAME_BONUS
USER_SIDE_BONUS = FINDING_BOOST["warning"]
# the question points at the record's class (or a class of its stem, or its package): up to 2 x this, so the fact
# about the record the user means outranks an entry that only shares the name
AIM_BONUS = TITLE_NAME_BONUS / 2
MAX_FACTS = 2
# which event answers an error about a name best, first to last: it is gone or renamed, it lives elsewhere, it is not
# there yet, it is on its way out
EVENT_ORDER = {"renamed": 0, "removed": 1, "option": 2, "added": 3, "deprecated": 4}
PREFIX = "registry:"  # a registry result's id: "registry:<record id>"
NAME_KINDS = ("field", "config_key", "config_section", "yaml_key", "kwarg", "cli_flag", "function", "class", "method")


@dataclass
class Fact:
    """One lifecycle fact about a record, as the user's releases see it."""

    rid: str
    event: str  # renamed | removed | added | deprecated | option (where a name the error refuses lives)
    record: Record  # as the default view has it
    new: Record | None  # renamed: the record of the new spelling
    release: (
        str | None
    )  # renamed: the first release with the new name; removed: the first without; added: the first with
    last: str | None  # renamed / removed: the last release with the old name
    user_release: str | None  # the release the user's version maps to (None: unknown)
    user_side: bool | None  # the user's release is past the event (their name is gone / not there yet / deprecated)
    score: float
    early: bool = False  # ``release`` is the oldest release kb records for the package: the change may be older


def registry_facts(names: tuple[str, ...], text: str, base: Registry, view: Registry) -> list[Fact]:
    """The lifecycle facts about the names a question uses, best first (at most ``MAX_FACTS``).

    A name several classes or packages have (``max_prompt_length``: DPOConfig, GRPOConfig, ...) is judged on the
    record the question points at (``_aim``: its class or a class of the same stem named, its package named), and
    gives one fact: the first of its records, in that order, that has one."""
    cue = bool(LIFECYCLE.search(text))
    out: list[Fact] = []
    seen: set[str] = set()
    for name in names[:20]:
        found: list[tuple[int, int, bool, str, Fact]] = []
        for rec in _records(name, base):
            if rec["id"] in seen:
                continue
            aim = _aim(rec, text)
            fact = _fact(rec, base, view)
            if fact is None and cue and aim >= 2:
                fact = _option(rec, text, base, view)
            if fact is None or not (cue or fact.user_side):
                continue
            found.append((-aim, EVENT_ORDER[fact.event], bool(rec.get("from_timeline")), rec["id"], fact))
        if found:  # one fact per name: the record the question points at, the strongest event first
            aim, _, _, rid, fact = min(found, key=lambda x: x[:4])
            seen.add(rid)
            fact.score = round(fact.score + AIM_BONUS * min(-aim, 2), 4)
            out.append(fact)
    out.sort(key=lambda f: (-f.score, f.rid))
    return out[:MAX_FACTS]


# argparse's message for a subcommand its parser does not have (``trl: error: argument command: invalid choice:
# 'vllm-serve' (choose from 'chat', 'dpo', ...)``): the choices it lists are the user's release's subcommands
# (Python 3.12.8 / 3.13.1 and later print the choices without quotes; 3.14 may add "maybe you meant ...?")
_INVALID_CHOICE = re.compile(r"invalid choice: '([\w.-]+)'(?:, maybe you meant '[\w.-]+'\?)? \(choose from ([^)]*)\)")


def subcommand_facts(text: str, base: Registry) -> list[Fact]:
    """A pasted "invalid choice" for a command whose subcommands the timelines record per release (``trl``): the user's
    release is the one whose subcommands are exactly the choices the error lists (a range of releases where several
    have the same set), and the fact is the release that added the subcommand after it, or that removed it before it."""
    out: list[Fact] = []
    for m in _INVALID_CHOICE.finditer(text):
        sub, listed = m.group(1), frozenset(c.strip(" '\"") for c in m.group(2).split(",") if c.strip(" '\""))
        for pkg, tl in sorted(base.timelines.items()):
            prefix = f"{pkg}:cli/"
            subs = {rid: n for rid, n in tl.names.items() if rid.startswith(prefix) and n.kind == "script"}
            prog = {rid.split("/")[1] for rid in subs}
            hit = next((f"{prefix}{p}/{sub}" for p in sorted(prog) if f"{prefix}{p}/{sub}" in subs), None)
            if hit is None or not re.search(rf"(?<![\w-]){re.escape(hit.split('/')[1])}(?![\w-])", text):
                continue
            prog_prefix = hit.rsplit("/", 1)[0] + "/"
            at = [
                r
                for r in tl.releases
                if frozenset(
                    rid.rsplit("/", 1)[1] for rid in subs if rid.startswith(prog_prefix) and tl.present(rid, r)
                )
                == listed
            ]
            rec = base.get(hit)
            have = tl.releases_of(hit)
            if rec is None or not have or not at or tl.present(hit, at[-1]):
                continue
            user = at[0] if len(at) == 1 else f"{at[0]}-{at[-1]}"
            i0, i1 = tl.releases.index(at[0]), tl.releases.index(at[-1])
            since = next((r for r in have if tl.releases.index(r) > i1), None)
            if since is not None:  # a later release has it: added after the user's
                out.append(
                    Fact(hit, "added", rec, None, since, None, user, True, _score(True), _oldest(base, pkg, since))
                )
                continue
            last = max((r for r in have if tl.releases.index(r) < i0), key=tl.releases.index, default=None)
            if last is not None:  # only earlier releases have it: removed before the user's
                gone = tl.next_release(last)
                out.append(Fact(hit, "removed", rec, None, gone, last, user, True, _score(True)))
    return out


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_SUFFIXES = ("Config", "Arguments", "Args", "Trainer", "Plugin")


def _stem(cls: str) -> str:
    for suf in _SUFFIXES:
        if cls.endswith(suf) and len(cls) > len(suf):
            return cls[: -len(suf)]
    return cls


def _aim(r: Record, text: str) -> int:
    """How plainly the question points at this record: 3 its class named (``DPOConfig``), 2 a class of the same stem
    (``DPOTrainer`` for DPOConfig's field) or the stem as a word (``GRPO``), 1 its package named, 0 nothing."""
    owners = [r["path"].split(".", 1)[0], *(r.get("owners") or [])] if "." in r["path"] else []
    words = set(_WORD.findall(text))
    if any(o in words for o in owners):
        return 3
    stems = {_stem(o) for o in owners if len(_stem(o)) >= 2}
    if any(_stem(w) in stems for w in words if w[:1].isupper()):
        return 2
    return 1 if package_named(r["package"], text) else 0


def _option(rec: Record, text: str, base: Registry, view: Registry) -> Fact | None:
    """``Owner.__init__() got an unexpected keyword argument 'X'`` where X lives in a sibling class of the same stem
    (DPOTrainer -> DPOConfig): the fact is where X lives, and since when."""
    if rec.get("status") in ("removed",) or "." not in rec["path"]:
        return None
    owner = rec["path"].split(".", 1)[0]
    if owner in set(_WORD.findall(text)):
        return None  # the question names the class that has it: nothing to redirect
    span = base.span(rec["id"])
    user = view.exact.get(rec["package"]) or view.pins.get(rec["package"])
    seen = view.get(rec["id"]) or rec
    side = None if user is None else seen.get("status") == "absent"
    first = span[0] if span else rec["releases"][0]
    return Fact(
        rec["id"], "option", rec, None, first, None, user, side, _score(side), _oldest(base, rec["package"], first)
    )


def _records(name: str, base: Registry) -> list[Record]:
    leaf = name.strip().lstrip("-")
    recs = [r for r in base.by_name.get(leaf, []) if r["kind"] in NAME_KINDS]
    if not recs and "." in leaf:
        lk = base.resolve(leaf)
        recs = [r for r in [lk.record, *lk.candidates] if r is not None and r["kind"] in NAME_KINDS]
    return recs


def _fact(rec: Record, base: Registry, view: Registry) -> Fact | None:
    rid = rec["id"]
    pkg = rec["package"]
    user = view.exact.get(pkg) or view.pins.get(pkg)
    seen = view.get(rid) or rec
    new = base.get(rec["renamed_to"]) if rec.get("renamed_to") else None
    span = base.span(rid)
    last = span[1] if span else rec["releases"][-1]
    if new is not None:
        nspan = base.span(new["id"])
        # where the source first says to write the new name (a timeline's replacement), else where the new name starts
        first_new = _replaced_since(base, rid) or (nspan[0] if nspan else new["releases"][0])
        side = None if user is None else seen.get("status") == "absent"
        return Fact(rid, "renamed", rec, new, first_new, last, user, side, _score(side), _oldest(base, pkg, first_new))
    if rec["status"] == "removed":
        gone = rec.get("removed_in") or base.removed_in(rid)
        side = None if user is None else seen.get("status") == "absent"
        return Fact(rid, "removed", rec, None, gone, last, user, side, _score(side))
    if seen.get("status") == "absent" and seen.get("absent") == "added":
        since = seen.get("since")
        return Fact(rid, "added", rec, None, since, None, user, True, _score(True), _oldest(base, pkg, since))
    if seen.get("deprecated"):
        side = None if user is None else True
        return Fact(rid, "deprecated", rec, None, _deprecated_since(rid, base), None, user, side, _score(side))
    return None


def _replaced_since(base: Registry, rid: str) -> str | None:
    """The first release whose source names a replacement for ``rid`` (the timeline's ``replacement``), or None."""
    pkg = rid.split(":", 1)[0]
    tl = base.timelines.get(pkg)
    n = tl.names.get(rid) if tl is not None else None
    if n is None or not n.replacement:
        return None
    stated = [r for r, y in n.replacement.items() if y and r in tl.releases]
    return min(stated, key=tl.releases.index) if stated else None


def _oldest(base: Registry, pkg: str, release: str | None) -> bool:
    order = base._order.get(pkg) or {}
    return release is not None and order.get(release) == 0


def _deprecated_since(rid: str, base: Registry) -> str | None:
    """The first release in which the record is deprecated (timeline first, then the samples)."""
    rec = base.get(rid)
    if rec is None:
        return None
    tl = base.timelines.get(rec["package"])
    if tl is not None and rid in tl.names and tl.names[rid].deprecated:
        return min(tl.names[rid].deprecated, key=lambda r: tl.releases.index(r) if r in tl.releases else 10**9)
    hist = [h for h in base.history(rid) if h.get("deprecated")]
    return hist[0]["version"] if hist else None


def _score(user_side: bool | None) -> float:
    return round(FACT_SCORE + (USER_SIDE_BONUS if user_side else 0.0), 4)


# ---------------------------------------------------------------- as a result


def fact_result(f: Fact, lang: str, view: Registry) -> C.Result:
    """A Result of kind ``registry``: title and summary from templates, one fix, the source lines it rests on."""
    r, pkg = f.record, f.record["package"]
    owner = r["path"].rsplit(".", 1)[0] if "." in r["path"] else pkg
    release = f.release or "?"
    if f.early and f.event in ("renamed", "added"):
        release = t(lang, "fact.or_earlier", release=release)
    fields = {
        "name": r["name"],
        "pkg": pkg,
        "owner": owner,
        "release": release,
        "last": f.last or "?",
        "new": f.new["name"] if f.new else "",
        "user": f.user_release or "",
        "repl": r.get("replacement") or "",
    }
    title = t(lang, f"fact.{f.event}.title", **fields)
    summary = t(lang, f"fact.{f.event}.summary", **fields)
    if f.user_release:
        key = f"fact.{f.event}.yours" if f.user_side else f"fact.{f.event}.not_yet"
        summary += " " + t(lang, key, **fields)
    key = f"fact.{f.event}.fix"
    if f.event == "removed" and fields["repl"]:
        key = "fact.removed.fix_repl"
    elif f.event == "deprecated" and not (fields["repl"] or f.new):
        key = "fact.deprecated.fix_plain"
    fix_text = t(lang, key, **fields)
    params = [r["id"], *([f.new["id"]] if f.new else [])]
    return C.Result(
        id=PREFIX + r["id"],
        title=title,
        score=f.score,
        why=t(lang, "why.registry", name=r["name"], pkg=pkg),
        summary=summary,
        area="registry",
        causes=[],
        fixes=[C.Fix(t(lang, "fact.fix_title"), fix_text, params)],
        params=params,
        param_facts=[param_fact(view, rid, lang) for rid in params],
        myths=[],
        sources=_sources(f),
        kind="registry",
    )


def _sources(f: Fact) -> list[C.Source]:
    out = []
    for rec in (f.record, f.new):
        if rec is None or not rec.get("source_file"):
            continue
        out.append(
            C.Source(
                "code",
                package=rec["package"],
                version=rec["version"],
                file=rec["source_file"],
                line=str(rec["source_line"]) if rec.get("source_line") else None,
                note=rec["id"],
            )
        )
    return out
