"""Every minor release of a package: which names each one has (``data/registry/timeline/<package>.json``).

The registry's records (``data/registry/<package>.jsonl``) are built by importing a few sampled releases;
they carry everything a rule needs (types, raise sites, mappings). A timeline is the other half: the last
patch of *every* minor release in a window, read statically from the released files
(``indexer/registry_timeline.py``), for the namespaces users write (TrainingArguments fields, DeepSpeed
config keys, LoraConfig fields, accelerate flags and YAML keys, the front ends' arguments). It says exactly
in which releases a name exists, when its default changed and when it became deprecated, so ``since`` /
``until`` are exact to the minor release rather than to the nearest sample. docs/registry.md has the format.

Core module: stdlib + kb.registry.order only.
"""

from __future__ import annotations

import bisect
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.registry.order import version_key

TIMELINE_FORMAT = 1


class TimelineError(ValueError):
    """A timeline file that cannot be read; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Name:
    """One name across the releases of a timeline."""

    id: str
    kind: str
    name: str
    path: str
    spans: tuple[tuple[str, str], ...]  # inclusive (first, last) releases that have it, oldest first
    type: str | None = None
    doc: str | None = None
    aliases: tuple[str, ...] = ()
    inherits: str | None = None
    owners: tuple[str, ...] = ()
    defaults: dict[str, str | None] = field(default_factory=dict)  # release -> default, where it changes
    deprecated: dict[str, str] = field(default_factory=dict)  # release -> the source's message
    source: str | None = None  # "file:line" at source_release
    source_release: str | None = None
    # release -> the name of the same class the release's source says to write instead (None: it says none from
    # that release on), where it changes; a rename the source states ("`x` is deprecated, use `y` instead")
    replacement: dict[str, str | None] = field(default_factory=dict)


@dataclass
class Timeline:
    package: str
    releases: list[str]  # oldest first
    names: dict[str, Name]
    window: str = ""
    requires: dict[str, dict[str, str]] = field(default_factory=dict)  # release -> {package: specifier}
    read: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    file: str = ""

    def __post_init__(self) -> None:
        self._index = {r: i for i, r in enumerate(self.releases)}
        self._cache: dict[tuple[str, str], tuple[list[int], list[Any]]] = {}

    @property
    def newest(self) -> str:
        return self.releases[-1]

    def release_for(self, version: str) -> str | None:
        """The timeline release that stands for a user's version: the newest recorded release at or below it in
        its own minor, else the oldest recorded release of that minor (the timeline keeps the last patch of each
        minor, which stands for the earlier patches: 0.29.0 is judged by 0.29.3, not by 0.28.0; 0.19.6 by the
        extra 0.19.4, not 0.19.8), else the newest at or below it; a partial "5.8" its newest 5.8.x; None for a
        version older than the window (no verdict there)."""
        from kb.registry.versions import pick_release

        try:
            key = version_key(version)
            if version in self.releases:
                return version  # a release read for itself (a window's extra release, a `kb registry add`)
            same = [r for r in self.releases if version_key(r).release[:2] == key.release[:2] and len(key.release) >= 2]
            rel = pick_release(version, self.releases)
            if same and not (key.pre or key.dev) and not (rel in same and version_key(rel) <= key):
                return min(same, key=version_key)  # every recorded patch of its minor is newer: the nearest of them
        except ValueError:
            return None
        if rel is None:
            return None
        if version_key(rel) > version_key(version) and not _series_of(version, rel):
            return None  # older than every release in the window
        return rel

    def present(self, rid: str, release: str) -> bool | None:
        """Does ``release`` have ``rid``? None: the timeline does not cover the id or the release."""
        n = self.names.get(rid)
        i = self._index.get(release)
        if n is None or i is None:
            return None
        return any(self._index[a] <= i <= self._index[b] for a, b in n.spans)

    def releases_of(self, rid: str) -> list[str]:
        """Every release that has ``rid``, oldest first."""
        n = self.names.get(rid)
        if n is None:
            return []
        return [r for a, b in n.spans for r in self.releases[self._index[a] : self._index[b] + 1]]

    def next_release(self, release: str) -> str | None:
        i = self._index.get(release)
        return self.releases[i + 1] if i is not None and i + 1 < len(self.releases) else None

    def _changes(self, rid: str, what: str) -> tuple[list[int], list[Any]]:
        """The release indexes at which ``what`` (defaults | deprecated | replacement) of ``rid`` changes, sorted, with
        the values (computed once per name: every view and record reads them)."""
        key = (rid, what)
        hit = self._cache.get(key)
        if hit is None:
            n = self.names.get(rid)
            pairs = sorted(
                (self._index[r], v) for r, v in (getattr(n, what) if n is not None else {}).items() if r in self._index
            )
            hit = ([i for i, _ in pairs], [v for _, v in pairs])
            self._cache[key] = hit
        return hit

    def _at(self, rid: str, what: str, release: str) -> tuple[bool, Any]:
        i = self._index.get(release)
        if i is None or rid not in self.names:
            return False, None
        idx, vals = self._changes(rid, what)
        k = bisect.bisect_right(idx, i)
        return (True, vals[k - 1]) if k else (False, None)

    def default_at(self, rid: str, release: str) -> tuple[bool, str | None]:
        """(known, default) of ``rid`` at ``release``: the last recorded change at or before it."""
        return self._at(rid, "defaults", release)

    def deprecated_at(self, rid: str, release: str) -> str | None:
        """The deprecation message in force at ``release`` (None: not deprecated there)."""
        return self._at(rid, "deprecated", release)[1]

    def replacement_at(self, rid: str, release: str) -> str | None:
        """The name the source of ``release`` says replaces ``rid`` (None: it states none there)."""
        return self._at(rid, "replacement", release)[1]

    def replacement_id(self, rid: str, release: str) -> str | None:
        """The id of the name that replaces ``rid`` at ``release`` (the one :meth:`replacement_at` names, in the
        same class, present there), or None."""
        y = self.replacement_at(rid, release)
        n = self.names.get(rid)
        if y is None or n is None:
            return None
        cands = ((k, m.name, m.aliases, m.owners) for k, m in self.names.items() if self.present(k, release))
        return replacement_id(rid, n.owners, y, cands)

    def history(self, rid: str) -> list[dict[str, Any]]:
        """What happened to ``rid`` release by release: added, removed, default, deprecated (oldest first)."""
        n = self.names.get(rid)
        if n is None:
            return []
        out: list[dict[str, Any]] = []
        for a, b in n.spans:
            prev = self._index[a] - 1
            out.append({"release": a, "event": "added" if prev >= 0 else "present", "since_window": prev < 0})
            nxt = self.next_release(b)
            if nxt is not None:
                out.append({"release": nxt, "event": "removed", "last": b})
        first = n.spans[0][0] if n.spans else None
        for rel, val in n.defaults.items():
            if rel != first:
                out.append({"release": rel, "event": "default", "default": val})
        for rel, msg in n.deprecated.items():
            out.append({"release": rel, "event": "deprecated", "message": msg})
        order = {"added": 0, "present": 0, "default": 1, "deprecated": 2, "removed": 3}
        return sorted(out, key=lambda e: (self._index.get(e["release"], 10**9), order[e["event"]]))


def parent_of(rid: str) -> str:
    """The class (or config section, or CLI) an id's name belongs to: ``pkg:Args.x`` -> ``pkg:Args``,
    ``pkg:a.b.c`` -> ``pkg:a.b``, ``pkg:cli/launch/--x`` -> ``pkg:cli/launch``, ``pkg:x`` -> ``pkg:``."""
    pkg, _, local = rid.partition(":")
    cut = max(local.rfind("."), local.rfind("/"))
    return f"{pkg}:{local[:cut]}" if cut >= 0 else f"{pkg}:"


def replacement_id(
    rid: str, owners: Iterable[str], name: str, candidates: Iterable[tuple[str, str, Iterable[str], Iterable[str]]]
) -> str | None:
    """The id among ``candidates`` ((id, name, aliases, owners) of one release) that ``name`` names in the same
    class as ``rid``: a name or alias equal to it (``--`` aside), in the same class / section / CLI, else in a
    class that exposes both (``owners``); None when there is none. The rule the timeline builder and
    :func:`timeline_records` both apply."""
    want = name.lstrip("-")
    par = parent_of(rid)
    own = set(owners or ())
    same: list[str] = []
    shared: list[str] = []
    for cid, cname, caliases, cowners in candidates:
        if cid == rid or want not in {cname.lstrip("-"), *(a.lstrip("-") for a in caliases or ())}:
            continue
        if parent_of(cid) == par:
            same.append(cid)
        elif own & set(cowners or ()):
            shared.append(cid)
    pick = sorted(same) or sorted(shared)
    return pick[0] if pick else None


def _series_of(version: str, release: str) -> bool:
    from kb.registry.order import same_release

    try:
        return same_release(version, release)
    except ValueError:
        return False


def _name(rid: str, d: dict[str, Any], releases: set[str], where: str) -> Name:
    try:
        spans = tuple((str(a), str(b)) for a, b in d["spans"])
        for a, b in spans:
            if a not in releases or b not in releases:
                raise TimelineError(f"{where}: {rid}: span {a}..{b} names a release the file does not list")
        return Name(
            id=rid,
            kind=str(d["kind"]),
            name=str(d["name"]),
            path=str(d["path"]),
            spans=spans,
            type=d.get("type"),
            doc=d.get("doc"),
            aliases=tuple(d.get("aliases") or ()),
            inherits=d.get("inherits"),
            owners=tuple(d.get("owners") or ()),
            defaults=dict(d.get("defaults") or {}),
            deprecated=dict(d.get("deprecated") or {}),
            source=d.get("source"),
            source_release=d.get("source_release"),
            replacement=_replacement_map(d.get("replacement"), releases, rid, where),
        )
    except (KeyError, TypeError, ValueError) as e:
        if isinstance(e, TimelineError):
            raise
        raise TimelineError(f"{where}: {rid}: {type(e).__name__}: {e}") from None


def _replacement_map(v: Any, releases: set[str], rid: str, where: str) -> dict[str, str | None]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise TimelineError(f"{where}: {rid}: replacement must map releases to names")
    for r, y in v.items():
        if r not in releases or not (y is None or isinstance(y, str)):
            raise TimelineError(f"{where}: {rid}: replacement {r!r}: {y!r} is not a release of the file and a name")
    return {str(r): y for r, y in v.items()}


def read_timeline(path: Path) -> Timeline:
    """One timeline file; TimelineError naming the file (and the id) when it is not one."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise TimelineError(f"{path}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise TimelineError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    return timeline_from_dict(d, str(path), path.stem)


def timeline_from_dict(d: Any, where: str = "<timeline>", default_package: str = "") -> Timeline:
    """A timeline from its JSON object (what :func:`read_timeline` reads from a file; ``where`` names it in the
    errors): TimelineError when it is not one."""
    path = where
    if not isinstance(d, dict) or d.get("format") != TIMELINE_FORMAT:
        raise TimelineError(f"{path}: not a timeline file of format {TIMELINE_FORMAT}")
    try:
        releases = [str(r) for r in d["releases"]]
        ordered = sorted(releases, key=version_key)
    except (KeyError, TypeError, ValueError) as e:
        raise TimelineError(f"{path}: releases: {e}") from None
    if releases != ordered or len(set(releases)) != len(releases):
        raise TimelineError(f"{path}: releases must be distinct and oldest first")
    known = set(releases)
    names = {rid: _name(rid, nd, known, str(path)) for rid, nd in (d.get("names") or {}).items()}
    return Timeline(
        package=str(d.get("package") or default_package),
        releases=releases,
        names=names,
        window=str(d.get("window") or ""),
        requires={str(k): dict(v) for k, v in (d.get("requires") or {}).items()},
        read=dict(d.get("read") or {}),
        skipped={str(k): list(v) for k, v in (d.get("skipped") or {}).items()},
        file=str(path),
    )


@functools.lru_cache(maxsize=4)
def _load(folder: str) -> dict[str, Timeline]:
    root = Path(folder)
    out: dict[str, Timeline] = {}
    for p in sorted(root.glob("*.json")) if root.is_dir() else []:
        tl = read_timeline(p)
        out[tl.package] = tl
    return out


def load_timelines(registry_root: Path) -> dict[str, Timeline]:
    """Every timeline under ``<registry_root>/timeline/`` by package (empty when there is none)."""
    return _load(str(registry_root / "timeline"))


def _source(n: Name) -> tuple[str, int]:
    if not n.source:
        return "", 0
    f, _, line = n.source.rpartition(":")
    return (f, int(line)) if line.isdigit() else (n.source, 0)


def _walk(tl: Timeline, rid: str, what: str, rels: list[str]) -> list[tuple[bool, Any]]:
    """(known, value) of ``what`` at each of ``rels`` (oldest first), in one pass over the change points."""
    idx, vals = tl._changes(rid, what)
    out: list[tuple[bool, Any]] = []
    k = 0
    cur: tuple[bool, Any] = (False, None)
    for rel in rels:
        i = tl._index[rel]
        while k < len(idx) and idx[k] <= i:
            cur = (True, vals[k])
            k += 1
        out.append(cur)
    return out


def timeline_records(tl: Timeline, have: set[str]) -> list[dict[str, Any]]:
    """Format-2 records for the names of ``tl`` that no sampled build recorded (``have``: the ids that one did):
    every name of a package only a timeline records (a front end), and names of the other packages that exist
    only between the samples. Their values are those of the newest release that has them; ``history`` keeps the
    defaults, deprecations and replacements of the older ones. Marked ``from_timeline``.

    ``renamed_to``: the id of the name the newest release that deprecates it with a stated replacement says to
    write instead (``replacement`` there: its name), as the sampled build sets it (indexer/registry_releases.py);
    ``renamed_from`` is its inverse among the records made here (a sampled record a rename points to keeps its
    own ``renamed_from``)."""
    out: list[dict[str, Any]] = []
    for rid, n in sorted(tl.names.items()):
        if rid in have:
            continue
        rels = tl.releases_of(rid)
        if not rels:
            continue
        newest = rels[-1]
        f, line = _source(n)
        _, default = tl.default_at(rid, newest)
        dep = tl.deprecated_at(rid, newest)
        repl = tl.replacement_at(rid, newest)
        renamed_to = None
        for rel in reversed(rels if n.deprecated and n.replacement else ()):  # the newest that deprecates it, renaming
            if tl.deprecated_at(rid, rel) is not None and tl.replacement_at(rid, rel):
                renamed_to = tl.replacement_id(rid, rel)
                break
        history: dict[str, dict[str, Any]] = {}
        changes = len(n.defaults) > 1 or n.deprecated or n.replacement
        defaults, deps, repls = (
            _walk(tl, rid, what, rels) if changes else [] for what in ("defaults", "deprecated", "replacement")
        )
        for j, rel in enumerate(rels[:-1] if changes else ()):
            diff: dict[str, Any] = {}
            known, d = defaults[j]
            if known and d != default:
                diff["default"] = d
            if (deps[j][1] is not None) != (dep is not None):
                diff["deprecated"] = deps[j][1] is not None
            if repls[j][1] != repl:
                diff["replacement"] = repls[j][1]
            if diff:
                history[rel] = diff
        out.append(
            {
                "id": rid,
                "kind": n.kind,
                "name": n.name,
                "path": n.path,
                "package": tl.package,
                "version": newest,
                "type": n.type or "",
                "default": default,
                "aliases": list(n.aliases),
                "choices": None,
                "constraints": None,
                "deprecated": dep is not None,
                "replacement": repl,
                "noop": False,
                "status": "active",
                "validated": False,
                "forbids_unknown": None,
                "doc": (n.doc + (f" Deprecated: {dep}" if dep else ""))
                if n.doc
                else (f"Deprecated: {dep}" if dep else None),
                "source_file": f,
                "source_line": line,
                "releases": rels,
                "history": history,
                "renamed_to": renamed_to,
                "renamed_from": [],
                "owners": list(n.owners),
                "inherits": n.inherits,
                "from_timeline": True,
            }
        )
    made = {r["id"]: r for r in out}
    for r in out:
        if r["renamed_to"] in made:
            made[r["renamed_to"]]["renamed_from"].append(r["id"])
    return out
