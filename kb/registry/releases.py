"""Answers in the user's releases: which recorded release stands for each user version, how a
parameter is spelled there, whether an entry's ``applies_to`` holds, and snippets respelled.

Everything comes from the registry's release history (``Registry.at``, ``spellings``, ``spelled``);
nothing here knows a name. See docs/versions.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb import contract as C
from kb.i18n import t
from kb.registry.store import Registry


@dataclass(frozen=True)
class UserVersion:
    """One user version and the recorded release that stands for it."""

    package: str
    version: str
    source: str
    release: str | None

    @property
    def exact(self) -> bool:
        """The recorded release is the user's version itself (or, for "4.46", one of its series)."""
        if self.release is None:
            return False
        from kb.registry.order import same_release

        return same_release(self.version, self.release)


def pins(registry: Registry, versions: dict[str, tuple[str, str]]) -> list[UserVersion]:
    """``{package: (version, source)}`` -> pins, in package order; packages the registry lacks keep release None."""
    return [UserVersion(pkg, ver, src, registry.release_for(pkg, ver)) for pkg, (ver, src) in sorted(versions.items())]


def view_for(registry: Registry, ps: list[UserVersion]) -> Registry:
    """The registry as the user's releases have it (the default view when no pin is in the registry)."""
    return registry.at({p.package: p.version for p in ps if p.release})


def judge_versions(
    registry: Registry, versions: dict[str, tuple[str, str]], lang: str
) -> tuple[list[UserVersion], Registry, list[C.Note]]:
    """The user's versions (``{package: (version, source)}``) judged: their pins, the registry as those releases
    have it (``view_for``), and the notes on how each was judged (``version_notes``)."""
    ps = pins(registry, versions)
    return ps, view_for(registry, ps), version_notes(registry, ps, lang)


def version_notes(registry: Registry, ps: list[UserVersion], lang: str) -> list[C.Note]:
    """Notes on how each user version was judged (nearest release, newer than recorded)."""
    from kb.registry.order import version_key

    out: list[C.Note] = []
    for p in ps:
        if p.release is None or p.exact:
            continue
        newest = registry.releases[p.package][-1]
        if version_key(p.version) > version_key(newest):
            msg = t(lang, "ver.newer_than_recorded", pkg=p.package, version=p.version, release=newest)
        else:
            msg = t(lang, "ver.judged_by", pkg=p.package, version=p.version, release=p.release)
        out.append(C.Note("version", msg, p.package))
    return out


def spelling_fact(view: Registry, rid: str, lang: str) -> dict:
    """The version fields of a ParamFact: shown_name, in_release, spellings, note.

    With the user's release of the package known: the name as that release spells it (or that it is
    absent there). Unknown: every spelling with its recorded releases, when the name changed."""
    rec = view.get(rid)
    if rec is None:
        return {}
    pkg = rec["package"]
    sp = view.spellings(rid)
    spellings = [C.Spelling(s["id"], s["name"], s["since"], s["until"]) for s in sp] if len(sp) > 1 else []
    if pkg in view.pins:
        release = view.pins[pkg]
        if rec.get("unrecorded_in"):  # recorded from a later release; this one is not provably without it
            return {"spellings": spellings}
        there = view.spelled(rid)
        if there is not None and there["id"] == rid:
            return {"in_release": True, "spellings": spellings}
        if there is not None:
            since = rec.get("since") or rec["releases"][0]
            note = t(lang, "ver.renamed", shown=there["name"], pkg=pkg, release=release, name=rec["name"], since=since)
            return {"shown_name": there["name"], "in_release": True, "spellings": spellings, "note": note}
        key = "ver.absent_added" if rec.get("absent") == "added" else "ver.absent_removed"
        note = t(
            lang, key, name=rec["name"], pkg=pkg, release=release, since=rec["releases"][0], until=rec["releases"][-1]
        )
        return {"in_release": False, "spellings": spellings, "note": note}
    if not spellings:
        return {}
    me = next(s for s in spellings if s.id == rid)
    others = "; ".join(
        t(lang, "ver.spelling_other", name=s.name, since=s.since, until=s.until) for s in spellings if s.id != rid
    )
    return {
        "spellings": spellings,
        "note": t(lang, "ver.spellings", name=me.name, pkg=pkg, since=me.since, others=others),
    }


def applies(applies_to: dict[str, str], ps: list[UserVersion], lang: str) -> tuple[bool | None, str | None]:
    """Whether the user's versions satisfy an entry's ``applies_to`` (None: no version of those packages known).

    A partial version ("4.46") satisfies when some release of its series does (kb.registry.versions.satisfies)."""
    if not applies_to or not ps:
        return None, None
    from kb.registry.versions import satisfies

    known = {p.package: p for p in ps}
    verdict: bool | None = None
    for pkg, spec in sorted(applies_to.items()):
        p = known.get(pkg)
        if p is None:
            continue
        try:
            ok = satisfies(p.version, spec)
        except ValueError:  # a version or specifier that does not parse: not judged
            continue
        if not ok:
            return False, t(lang, "ver.not_applies", spec=f"{pkg} {spec}", pkg=pkg, version=p.version)
        verdict = True
    return verdict, None


def respell(code: str, pairs: list[tuple[str, str]]) -> str:
    """``code`` with each whole-word ``old`` replaced by ``new`` (a name: letters, digits and ``_`` bound it;
    ``model.old(`` is respelled too, a method being called on an object)."""
    for old, new in pairs:
        code = re.sub(rf"(?<!\w){re.escape(old)}(?!\w)", new, code)
    return code


_MAYBE_VERSION = re.compile(r"\d\.\d")  # every version kb.registry.versions reads has one; most questions have none


def user_versions(query: str, config_text: str | None, flag: dict[str, str] | None) -> dict[str, tuple[str, str]]:
    """package -> (version, source): ``flag`` first, then a pasted freeze / env report, then prose (kb.registry.versions)."""
    texts = [(config_text, "attachment"), (query, "query")]
    texts = [(text, origin) for text, origin in texts if text and _MAYBE_VERSION.search(text)]
    if not texts and not flag:
        return {}  # nothing that looks like "x.y": no version to read (and kb.registry.versions is not imported)
    from kb.registry.versions import merge, versions_from_text

    found = [versions_from_text(text, origin=origin) for text, origin in texts]
    merged = merge(*found)
    out = {pkg: (merged.pins[pkg].public, merged.pins[pkg].source) for pkg in merged}
    for pkg, v in (flag or {}).items():
        out[pkg] = (v, "flag")
    return out
