"""The light entry view: one curated entry as the contract's ``Result`` (kb ask's results, kb show, the site).

Names are shown as the user's releases spell them when those are known, snippets respelled, each DeepSpeed
snippet written for the user's front end too, and every parameter's registry facts carried inside, so a surface
renders a Result without the registry or the index.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kb import contract as C
from kb.i18n import t
from kb.registry.releases import UserVersion, applies, respell, spelling_fact
from kb.registry.store import Registry


def entry_result(
    e: dict[str, Any],
    lang: str,
    registry: Registry,
    score: float = 1.0,
    why: str = "",
    qnames: set[str] | frozenset[str] = frozenset(),
    pins: list[UserVersion] | tuple[UserVersion, ...] = (),
    front_end: str | None = None,
    rank: list[C.RankStep] | tuple[C.RankStep, ...] = (),
) -> C.Result:
    """One entry (a plain dict: the index's entries.json or ``Entry.model_dump(mode="json")``) as a Result.

    ``registry`` is the view of the user's releases (``Registry.at``) when ``pins`` are known: names are
    then shown as those releases spell them, snippets respelled, and ``applies`` says whether the entry's
    ``applies_to`` holds. ``front_end`` picks which equivalents of each DeepSpeed snippet to add (None: all); ``rank``: how
    kb ask's score was made (kb.ask.rank.steps).
    """
    params = list(dict.fromkeys([*e.get("params", []), *(p for f in e["fixes"] for p in f.get("params", []))]))
    facts = [param_fact(registry, rid, lang) for rid in params]
    respelled = {f.id: (f.name, f.shown_name) for f in facts if f.shown_name}
    ok, why_not = applies(e.get("applies_to") or {}, list(pins), lang)
    w = e.get("withdrawn")
    return C.Result(
        id=e["id"],
        title=e["title"][lang],
        score=round(score, 3),
        why=why,
        summary=e["summary"][lang],
        area=e["area"],
        causes=[c[lang] for c in e.get("causes", [])],
        fixes=[_fix(f, lang, registry, respelled, front_end) for f in e["fixes"]],
        params=params,
        param_facts=facts,
        myths=[
            C.Myth(
                m["claim"][lang],
                m["correction"][lang],
                [n["name"] for n in m.get("names", [])],
                any(n["name"].lower() in qnames for n in m.get("names", [])),
            )
            for m in e.get("myths", [])
        ],
        sources=[C.Source(**{k: s.get(k) for k in _SOURCE_FIELDS}) for s in e["sources"]],
        applies_to=dict(e.get("applies_to") or {}),
        related=list(e.get("related", [])),
        withdrawn=(f"{w['date']}: {w['reason']}" if w else None),
        path=site_path(lang, e["id"]),
        applies=ok,
        version_note=why_not,
        rank=list(rank),
    )


def _fix(
    f: dict[str, Any], lang: str, view: Registry, respelled: dict[str, tuple[str, str]], front_end: str | None
) -> C.Fix:
    """One fix; names its entry spells differently in the user's release are respelled in code and in `code`."""
    text = f["text"][lang]
    snippet = C.Snippet(f["snippet"]["lang"], f["snippet"]["code"]) if f.get("snippet") else None
    notes: list[str] = []
    by_pkg: dict[str, list[str]] = {}
    for rid, (old, new) in sorted(respelled.items()):
        pair = [(old, new)]
        new_text = re.sub(r"`[^`]+`", lambda m, pair=pair: respell(m.group(0), pair), text)
        new_code = respell(snippet.code, pair) if snippet else None
        if new_text == text and (snippet is None or new_code == snippet.code):
            continue
        text = new_text
        if snippet is not None and new_code is not None:
            snippet = C.Snippet(snippet.lang, new_code)
        by_pkg.setdefault(rid.split(":", 1)[0], []).append(f"`{old}` \u2192 `{new}`")
    for pkg, done in sorted(by_pkg.items()):
        notes.append(t(lang, "ver.respelled", pkg=pkg, release=view.pins.get(pkg, ""), pairs=", ".join(done)))
    return C.Fix(
        f["title"][lang],
        text,
        list(f.get("params", [])),
        snippet,
        equivalents=fix_equivalents(snippet, view, front_end, lang),
        version_notes=notes,
    )


def fix_equivalents(snippet: C.Snippet | None, view: Registry, front_end: str | None, lang: str) -> list[C.Equivalent]:
    """The DeepSpeed settings of a JSON snippet, written for other front ends (kb.doctor.frontends)."""
    if snippet is None or snippet.lang != "json":
        return []
    from kb.doctor.frontends import equivalents

    try:
        data = json.loads(snippet.code)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    return [eq for eq in equivalents(data, view, front_end, lang) if eq.front_end != "deepspeed"]


def site_path(lang: str, entry_id: str) -> str:
    """Where an entry's page lives on the static site (kb export), relative to the site's base URL."""
    return f"/{lang}/{entry_id}/"


_SOURCE_FIELDS = ("type", "url", "package", "version", "file", "line", "note")


def param_fact(registry: Registry, rid: str, lang: str = "en") -> C.ParamFact:
    r = registry.get(rid)
    if r is None:
        pkg, _, path = rid.partition(":")
        return C.ParamFact(rid, path.rsplit(".", 1)[-1], pkg, "", "", None, None, "", 0, known=False)
    default = r.get("default")
    return C.ParamFact(
        id=r["id"],
        name=r["name"],
        package=r["package"],
        version=r["version"],
        kind=r["kind"],
        type=r.get("type") or None,
        default=None if default in (None, "null") else str(default),
        source_file=r["source_file"],
        source_line=int(r["source_line"]),
        deprecated=bool(r.get("deprecated")),
        replacement=r.get("replacement"),
        **spelling_fact(registry, rid, lang),
    )
