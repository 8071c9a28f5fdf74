"""The parameter registry: every real name, generated from the packages (see indexer/registry_build.py).

Lookup answers one question: is this name real, and where does it live?

>>> reg = Registry.load()
>>> reg.resolve("zero_optimization.nvme_path").status
'misplaced'
"""

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

from kb.paths import registry_dir

if TYPE_CHECKING:
    from kb.registry.timeline import Timeline

CONFIG_KINDS = ("config_key", "config_section", "yaml_key")
SITE_KINDS = ("raise_site", "warn_site")
KINDS = (  # every record kind the builders write (indexer/registry_build.py, registry_sites.py, registry_frontends.py)
    *CONFIG_KINDS,
    "field",
    "kwarg",
    "function",
    "class",
    "method",
    "env",
    "script",
    "cli_flag",
    "auto_fill",
    "mapping",
    *SITE_KINDS,
)


# (this module has no `from __future__ import annotations`: Record's NotRequired fields must be seen at run time,
# in Record.__optional_keys__)
class Record(TypedDict):
    """One registry record as a view shows it (a line of data/registry/<package>.jsonl, format 2, with the
    values of the release the view shows; docs/registry.md). A TypedDict: a record is a plain dict, read as
    ``r["id"]`` / ``r.get("default")``. The fields after ``renamed_from`` belong to some kinds only, or are
    added by a view for a release that lacks the name."""

    id: str  # "<package>:<path>" (scripts "deepspeed:bin/ds_report", sites "...:site.<...>", mappings "...:map/...")
    kind: str  # one of KINDS
    name: str  # the leaf a user writes ("stage", "--num_gpus", "TrainingArguments")
    path: str  # dotted, under its canonical parent ("zero_optimization.stage")
    package: str
    version: str  # the release these values are from
    type: str  # as the package annotates it ("int", "Optional[str]"; a site: the exception or "warning")
    default: str | None  # the default as JSON text ("5e8", "false", "null"), None when it has none
    aliases: list[str]
    choices: list[Any] | None  # allowed values (enum / Literal fields)
    constraints: dict[str, float] | None  # numeric bounds: {"gt": 0}, {"ge": 0}
    deprecated: bool
    replacement: str | None  # what a deprecated name maps to
    noop: bool  # deprecated and does nothing
    status: str  # "active" or "removed" (the package raises for it); a view adds "absent"
    validated: bool  # a pydantic model validates the value (type and constraints enforced)
    forbids_unknown: bool | None  # a section whose model rejects unknown keys (pydantic extra="forbid")
    doc: str | None
    source_file: str  # relative to site-packages ("deepspeed/runtime/zero/config.py")
    source_line: int
    releases: list[str]  # the recorded releases that have the name, oldest first
    history: dict[str, dict[str, Any]]  # release -> the fields whose value differs there from this record
    renamed_to: str | None  # the id this name was renamed to
    renamed_from: list[str]  # the ids renamed to this one
    # cli_flag: how the launcher's argparse parser reads it
    nargs: NotRequired[int | None]
    allow_abbrev: NotRequired[bool]
    # raise_site / warn_site (indexer/registry_sites.py)
    function: NotRequired[str]  # the qualified name of the function that raises or warns
    reads: NotRequired[list[list[str]]]  # the attribute chains the condition reads
    trigger: NotRequired[str]  # its class (SITE_CLASSES): config, runtime, ...
    trigger_reason: NotRequired[str]
    # mapping: a front end's name for a DeepSpeed key (indexer/registry_frontends.py)
    front_end: NotRequired[str]
    front_name: NotRequired[str]
    front_id: NotRequired[str | None]  # the record of the front end's own name (a flag, a field)
    owner: NotRequired[str | None]
    fill: NotRequired[str]  # direct, file, ...
    transform: NotRequired[dict[str, Any] | None]
    must_match: NotRequired[bool | str | None]
    conflict: NotRequired[dict[str, Any] | None]
    auto_fill: NotRequired[str | None]
    requires: NotRequired[dict[str, Any] | None]
    chain: NotRequired[list[list[Any]]]  # [file, line, step] from the front end's name to the DeepSpeed key
    # added by a view (Registry.at) for a release that lacks the name
    absent: NotRequired[Literal["added", "removed"]]  # status "absent": added after, or removed before, it
    since: NotRequired[str]  # status "absent": the first recorded release that has it
    until: NotRequired[str]  # status "absent" or "removed": the last recorded release that has it
    unrecorded_in: NotRequired[str]  # recorded from a later release; not provably missing from this one
    removed_in: NotRequired[str]  # status "absent" (removed) or "removed": the first release without it (a timeline's)
    # from a timeline only (kb/registry/timeline.py): the classes that expose a field declared in a mixin, the
    # class of another package a front end's argument class extends
    owners: NotRequired[list[str]]
    inherits: NotRequired[str | None]
    from_timeline: NotRequired[bool]  # the record exists only in a timeline (no sampled release built it)


class Spelling(TypedDict):
    """One name a setting had (``Registry.spellings``): the record's id, name and path, and its releases."""

    id: str
    name: str
    path: str
    since: str
    until: str
    package: str


class RegistryError(ValueError):
    """A registry file that cannot be read; the message names the file and line, and the command that fixes it."""


Status = Literal[
    "exact",  # the name (or id / path) is real, exactly as written
    "alias",  # accepted under another spelling (e.g. prefetch_bucket_size for stage3_prefetch_bucket_size)
    "deprecated",  # still accepted, deprecated (see record.noop / record.replacement)
    "removed",  # the package now raises for it
    "absent",  # real in other recorded releases, not in the user's (record: absent added|removed, since, until)
    "misplaced",  # real name, wrong place: see candidates
    "not-a-config-key",  # a real API / method / kwarg / env var, not a config key
    "unknown",  # no such name: see suggestions
]


@dataclass
class Lookup:
    query: str
    status: Status
    record: Record | None = None
    candidates: list[Record] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("exact", "alias")

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "status": self.status,
            "registry_id": self.record["id"] if self.record else None,
            "candidates": [c["id"] for c in self.candidates],
            "suggestions": self.suggestions,
        }


class Registry:
    """Every recorded release of every package, one record per name (format 2, see docs/registry.md).

    A Registry is a *view*: by default the newest recorded release of each package (names that only
    older releases have stay findable, with status ``removed`` and ``until``); ``at(versions)`` is the
    view for a user's releases, where names of other releases only are ``absent`` (with ``since`` /
    ``until``) so a check can say "not in your version" instead of "does not exist".
    """

    def __init__(
        self,
        records: Iterable[Mapping[str, Any]],
        pins: dict[str, str] | None = None,
        timelines: "Mapping[str, Timeline] | None" = None,
        exact: dict[str, str] | None = None,
    ):
        from kb.registry.order import version_key  # packaging: imported with the first registry, not this module

        self.timelines: dict[str, Timeline] = dict(timelines or {})
        self._all = _merged(list(records))
        self._by_base_id_all = {r["id"]: r for r in self._all}
        releases: dict[str, set[str]] = defaultdict(set)
        for r in self._all:
            if not r.get("from_timeline") or r["package"] not in self.timelines:
                releases[r["package"]].update(r["releases"])
        for pkg, tl in self.timelines.items():
            if pkg not in releases:  # a package only a timeline records (a front end): its releases are the timeline's
                releases[pkg].update(tl.releases)
        self.releases = {p: sorted(v, key=version_key) for p, v in sorted(releases.items())}
        # release -> its place among the package's releases and its timeline's, oldest first: every order below
        self._order = {
            p: {rel: i for i, rel in enumerate(sorted(set(v) | set(self._tl_releases(p)), key=version_key))}
            for p, v in self.releases.items()
        }
        self.pins = dict(pins or {})  # package -> the recorded release this view shows
        unknown = sorted(f"{p} {v}" for p, v in self.pins.items() if v not in self._order.get(p, {}))
        if unknown:
            raise ValueError(f"a view pins releases the registry does not record: {', '.join(unknown)}")
        # package -> the timeline release that stands for the user's version (names a timeline covers are judged
        # there, to the minor release; the other records by the sampled release of ``pins``)
        self.exact = {p: v for p, v in (exact or {}).items() if p in self.timelines and v in self._order.get(p, {})}
        self.versions = {p: self.exact.get(p) or self.pins.get(p, v[-1]) for p, v in self.releases.items()}
        self.newest = {p: v[-1] for p, v in self.releases.items()}
        self.records = [v for v in (self._view(r) for r in self._all) if v is not None]
        self.by_id = {r["id"]: r for r in self.records}
        self._by_base_id = {r["id"]: r for r in self._all}
        self.by_path: dict[str, list[Record]] = defaultdict(list)
        self.by_name: dict[str, list[Record]] = defaultdict(list)
        self.auto_fill: dict[str, list[Record]] = defaultdict(list)  # DS key -> integrations that fill "auto"
        self.sites: list[Record] = []  # raise / warn sites on the config paths (indexer/registry_sites.py)
        self.mappings: dict[str, list[Record]] = defaultdict(list)  # DS path -> front-end names (registry_frontends)
        for r in self.records:
            if r["kind"] == "mapping":
                if r["status"] != "absent":
                    self.mappings[r["path"]].append(r)
                continue  # a front end's name for a DeepSpeed key: not a name of its own here
            if r["kind"] == "auto_fill":
                if r["status"] != "absent":
                    self.auto_fill[r["path"]].append(r)
                continue  # metadata about a key, not a name of its own
            if r["kind"] in SITE_KINDS:
                if r["status"] != "absent":
                    self.sites.append(r)
                continue  # a place in the code, not a name a user writes
            self.by_path[r["path"]].append(r)
            for n in [r["name"], *r["aliases"]]:
                self.by_name[n].append(r)
            for a in r["aliases"]:
                if r["kind"] in CONFIG_KINDS:
                    self.by_path[r["path"].rsplit(".", 1)[0] + "." + a if "." in r["path"] else a].append(r)

    def _tl_releases(self, pkg: str) -> list[str]:
        tl = self.timelines.get(pkg)
        return tl.releases if tl is not None else []

    def _covered(self, r: Record) -> bool:
        """Is ``r`` judged by its package's timeline (every minor release) rather than by the samples alone?"""
        tl = self.timelines.get(r["package"])
        return tl is not None and r["id"] in tl.names and r["package"] in self._sampled_packages

    @cached_property
    def _sampled_packages(self) -> frozenset[str]:
        """Packages whose records were built from sampled releases (data/registry/<pkg>.jsonl), beside a timeline."""
        return frozenset(
            r["package"] for r in self._all if not r.get("from_timeline") and r["package"] in self.timelines
        )

    def presence(self, rid: str) -> list[tuple[str, bool | None]]:
        """(release, has it) for every release of the record's package that says something, oldest first: the
        sampled releases by their build (authoritative there), the timeline's between them; None where absence
        is not evidence (a key under a section that release did not validate)."""
        grid = self._grids.get(rid)
        if grid is not None:
            return grid
        r = self._by_base_id_all.get(rid)
        if r is None:
            return []
        pkg = r["package"]
        tl = self.timelines.get(pkg)
        sampled = set(self.releases.get(pkg, [])) if pkg in self._sampled_packages else set()
        own = set(r["releases"])
        out: list[tuple[str, bool | None]] = []
        for rel in sorted(self._order.get(pkg, {}), key=self._order[pkg].__getitem__):
            if rel in sampled and not r.get("from_timeline"):
                if rel in own:
                    out.append((rel, True))
                elif self._older(rel, r["releases"][0], pkg) and self._unprovable(r, rel):
                    out.append((rel, None))
                else:
                    out.append((rel, False))
            elif tl is not None and rid in tl.names:
                has = tl.present(rid, rel)
                if has is False and not self._timeline_proves_absent(tl, r, rel):
                    has = None
                out.append((rel, has))
        self._grids[rid] = out
        return out

    @cached_property
    def _grids(self) -> dict[str, list[tuple[str, bool | None]]]:
        return {}

    def _timeline_proves_absent(self, tl: "Timeline", r: Record, rel: str) -> bool:
        """A timeline's "not in this release" is evidence for a field, flag or argument; for a DeepSpeed config key
        only when the timeline read its section in that release (or the key is at the top level)."""
        if r["kind"] not in CONFIG_KINDS or "." not in r["path"]:
            return True
        parent = f"{r['package']}:{r['path'].rsplit('.', 1)[0]}"
        return bool(tl.present(parent, rel))

    def span(self, rid: str) -> tuple[str, str] | None:
        """(first, last) release known to have ``rid`` across samples and timeline."""
        have = [rel for rel, has in self.presence(rid) if has]
        return (have[0], have[-1]) if have else None

    def removed_in(self, rid: str) -> str | None:
        """The first release after the last one that has ``rid`` (None: the newest still has it, or unknown)."""
        grid = self.presence(rid)
        last = max((i for i, (_, has) in enumerate(grid) if has), default=None)
        if last is None:
            return None
        for rel, has in grid[last + 1 :]:
            if has is False:
                return rel
            if has is None:
                return None
        return None

    def release_history(self, rid: str) -> dict[str, Any] | None:
        """A name's life over every minor release its package's timeline reads (``kb registry lookup``): the window,
        first / last release with it, where it went, its spans and events; None when no timeline covers it."""
        rec = self.get(rid)
        tl = self.timelines.get(rec["package"]) if rec else None
        if tl is None or rid not in tl.names:
            return None
        span = self.span(rid)
        return {
            "package": tl.package,
            "window": [tl.releases[0], tl.releases[-1]],
            "minors": len(tl.releases),
            "first": span[0] if span else None,
            "last": span[1] if span else None,
            "removed_in": self.removed_in(rid),
            "first_default": tl.default_at(rid, span[0])[1] if span and span[0] in tl.releases else None,
            "spans": [list(s) for s in tl.names[rid].spans],
            "events": tl.history(rid),
        }

    def _view(self, r: Record) -> Record | None:
        """The record as this view shows it (its release's values), or None when it is not shown."""
        pkg = r["package"]
        if self._covered(r):
            return self._timeline_view(r)
        rel = self.pins.get(pkg)
        if rel is None:  # default view: the newest release
            if r["releases"][-1] == self.newest[pkg]:
                return r
            gone = self.removed_in(r["id"]) if pkg in self.timelines else None
            return {**r, "status": "removed", "until": r["releases"][-1], **({"removed_in": gone} if gone else {})}
        if rel in r["releases"]:
            return at_release(r, rel)
        first, last = r["releases"][0], r["releases"][-1]
        absent: Literal["added", "removed"] = "added" if self._older(rel, first, pkg) else "removed"
        if absent == "added" and self._unprovable(r, rel):
            # a key under a section that release did not validate (no pydantic model): the builder saw
            # only the keys DeepSpeed read on its probes, so absence there is not evidence; say nothing
            return {**at_release(r, first), "unrecorded_in": rel}
        out: dict[str, Any] = {**r, "status": "absent", "absent": absent, "since": first, "until": last}
        if absent == "removed" and pkg in self.timelines and (gone := self.removed_in(r["id"])):
            out["removed_in"] = gone
        return cast(Record, out)

    def _timeline_view(self, r: Record) -> Record:
        """``_view`` for a record its package's timeline covers: present or absent at the user's exact minor
        release; the values are those of the nearest sampled release that has it."""
        pkg = r["package"]
        if not self.pins.get(pkg) and not self.exact.get(pkg) and r["releases"][-1] == self.newest[pkg]:
            return r  # the default view of a name the newest (sampled, authoritative) release has: nothing to work out
        rel = self.exact.get(pkg) or self.pins.get(pkg) or self.newest[pkg]
        grid = dict(self.presence(r["id"]))
        has = grid.get(rel)
        sp = self.span(r["id"])
        first, last = sp if sp else (r["releases"][0], r["releases"][-1])
        gone = self.removed_in(r["id"])
        if has:
            if not self.pins.get(pkg) and not self.exact.get(pkg):
                return r  # the default view shows the newest values
            base = [x for x in r["releases"] if not self._older(rel, x, pkg)] or r["releases"][:1]
            return at_release(r, base[-1]) if base[-1] != r["version"] else r
        if has is None:
            return {**at_release(r, r["releases"][0]), "unrecorded_in": rel}
        if not self.pins.get(pkg) and not self.exact.get(pkg):
            return {**r, "status": "removed", "until": last, **({"removed_in": gone} if gone else {})}
        absent: Literal["added", "removed"] = "added" if self._older(rel, first, pkg) else "removed"
        out: dict[str, Any] = {**r, "status": "absent", "absent": absent, "since": first, "until": last}
        if absent == "removed" and gone:
            out["removed_in"] = gone
        return cast(Record, out)

    def _older(self, a: str, b: str, package: str) -> bool:
        """Does recorded release ``a`` of ``package`` come before ``b`` (kb.registry.order.version_key's order)?"""
        order = self._order[package]
        return order[a] < order[b]

    def _unprovable(self, r: Record, rel: str) -> bool:
        """Is ``r``'s absence from release ``rel`` unproven (its section there is not a validated model)?"""
        if r["kind"] not in CONFIG_KINDS or "." not in r["path"]:
            return False
        parent = self._by_base_id_all.get(f"{r['package']}:{r['path'].rsplit('.', 1)[0]}")
        if parent is None or rel not in parent["releases"]:
            return False  # the section itself is new: its keys are new with it
        return not at_release(parent, rel).get("validated")

    def at(self, versions: dict[str, str] | None) -> "Registry":
        """The view for the user's releases: ``{"transformers": "4.46.3"}``; other packages stay newest.

        Each user version maps to the nearest recorded release at or below it (the oldest recorded
        when the user's is older than all); ``pins`` says which release each package was judged by."""
        pins = {p: self.release_for(p, v) for p, v in (versions or {}).items() if p in self.releases}
        pins = {p: rel for p, rel in pins.items() if rel}
        exact = {}
        for p, v in (versions or {}).items():
            tl = self.timelines.get(p)
            found = tl.release_for(v) if tl is not None and v else None
            if found:
                exact[p] = found
        base = self._default_view()
        if not pins:
            return base
        key = (tuple(sorted(pins.items())), tuple(sorted(exact.items())))
        cache = base.__dict__.setdefault("_views", {})
        if key not in cache:
            view = Registry(base._all, pins, base.timelines, exact)  # format 2 already: _merged passes them through
            view._default = base
            view._grids = base._grids  # presence does not depend on the view: computed once
            cache[key] = view
            while len(cache) > 16:  # a bot sees few distinct version sets; keep the newest few
                cache.pop(next(iter(cache)))
        return cache[key]

    def _default_view(self) -> "Registry":
        return getattr(self, "_default", None) or self

    def release_for(self, package: str, version: str) -> str | None:
        """The recorded release that stands for ``version`` of ``package`` (kb.registry.versions.pick_release:
        the newest at or below it, a partial "4.46" its newest 4.46.x, the oldest when older than all)."""
        rels = self.releases.get(package)
        if not rels or not version:
            return None
        from kb.registry.versions import pick_release

        try:
            return pick_release(version, rels)
        except ValueError:  # not a version (packaging's InvalidVersion is a ValueError)
            return None

    @classmethod
    def load(cls, root: Path | None = None) -> "Registry":
        from kb.registry.timeline import TimelineError, load_timelines, timeline_records

        root = root or registry_dir()
        records: list[dict[str, Any]] = []
        where: list[tuple[Path, int]] = []  # file and line of each record, for the errors
        for p in sorted(root.glob("*.jsonl")):
            numbered = [(n, ln) for n, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if ln.strip()]
            recs = _read_file([ln for _, ln in numbered])
            if recs is None:  # something is wrong in this file: read it line by line to say where
                recs = [_read_line(ln, p, n) for n, ln in numbered]
            records.extend(recs)
            where.extend((p, n) for n, _ in numbered)
        try:
            timelines = load_timelines(root)
        except TimelineError as e:
            raise RegistryError(f"{e}; {REBUILD_TIMELINE}") from None
        if not records and not timelines:
            raise FileNotFoundError(f"no registry records under {root}; run `kb registry build`")
        _check_versions(records, where)
        have = {r["id"] for r in records}
        for tl in timelines.values():
            records.extend(timeline_records(tl, have))
        _renames_from_timelines(records, timelines)
        return cls(records, timelines=timelines)

    # ------------------------------------------------------------ queries

    def get(self, rid: str, version: str | None = None) -> Record | None:
        """Record by canonical id as this view shows it (or as release ``version`` has it)."""
        if version is None:
            return self.by_id.get(rid)
        return next((r for r in self.history(rid) if r["version"] == version), None)

    def history(self, rid: str) -> list[Record]:
        """The record in every recorded release that has it, oldest first (each with that release's values)."""
        r = self._by_base_id.get(rid)
        if r is None:
            return []
        return [at_release(r, rel) for rel in r["releases"]]

    def timeline(self, rid: str) -> list[tuple[str, Record | None]]:
        """(release, record or None) for every recorded release of the record's package, oldest first."""
        r = self._by_base_id.get(rid)
        if r is None:
            return []
        have = {h["version"]: h for h in self.history(rid)}
        return [(rel, have.get(rel)) for rel in self.releases[r["package"]]]

    def spellings(self, rid: str) -> list[Spelling]:
        """The names one setting had across releases (itself and its renames), each with since / until."""
        seen: list[str] = []
        todo = [rid]
        while todo:
            cur = todo.pop(0)
            r = self._by_base_id.get(cur)
            if r is None or cur in seen:
                continue
            seen.append(cur)
            todo += [x for x in [r.get("renamed_to"), *(r.get("renamed_from") or [])] if x]
        out: list[Spelling] = []
        for cur in seen:
            r = self._by_base_id[cur]
            since, until = self.span(cur) or (r["releases"][0], r["releases"][-1])
            out.append(
                {
                    "id": cur,
                    "name": r["name"],
                    "path": r["path"],
                    "since": since,
                    "until": until,
                    "package": r["package"],
                }
            )
        return sorted(out, key=lambda d: (d["package"], self._order[d["package"]][d["since"]]))

    def spelled(self, rid: str) -> Record | None:
        """The spelling of a setting that this view's release has (``rid`` itself or a rename), or None."""
        rec = self.by_id.get(rid)
        if rec is not None and rec["status"] != "absent":
            return rec
        for s in self.spellings(rid):
            alt = self.by_id.get(s["id"])
            if alt is not None and alt["status"] != "absent" and alt["status"] != "removed":
                return alt
        return None

    def exists_in(self, rid: str, package_version: str) -> bool | None:
        """Whether release ``package_version`` of the record's package has ``rid`` (None: unknown id)."""
        r = self._by_base_id.get(rid)
        if r is None:
            return None
        tl = self.timelines.get(r["package"])
        exact = tl.release_for(package_version) if tl is not None and r["id"] in tl.names else None
        if exact is not None:
            return dict(self.presence(rid)).get(exact)
        rel = self.release_for(r["package"], package_version)
        return rel in r["releases"]

    def resolve(self, name: str, context: str | None = None, package: str | None = None) -> Lookup:
        """Resolve a user-written name.

        ``name`` may be a registry id (``deepspeed:zero_optimization.stage``), a config path
        (``zero_optimization.offload_optimizer.pin_memory``), a dotted API name, a CLI flag or a bare
        name. ``context`` is the config path the name was found under (``zero_optimization``);
        ``None`` means "anywhere". ``package`` restricts config paths to one package.
        """
        q = name.strip()
        if ":" in q and q.split(":", 1)[0] in self.versions:
            rec = self.by_id.get(q)
            return self._status(q, rec) if rec else self._unknown(q, q.split(":", 1)[1])
        path = f"{context}.{q}" if context else q
        exact = [r for r in self.by_path.get(path, []) if (package is None or r["package"] == package)]
        if context is not None or "." in path:
            exact = [r for r in exact if r["kind"] in CONFIG_KINDS] or exact
        if exact:
            rec = _prefer_config(exact)
            lk = self._status(q, rec)
            if lk.status == "exact" and rec["path"] != path:
                lk.status = "alias"
            return lk
        if context is None and "." in q and q not in self.by_name:
            # a partial path ("offload_optimizer.pin_memory") names the record it ends
            tail = [r for r in self.records if r["path"].endswith("." + q) and r["kind"] in CONFIG_KINDS]
            if tail:
                return self._status(q, _prefer_config(tail))
        leaf = q if q in self.by_name else q.rsplit(".", 1)[-1].lstrip("-")
        if q.startswith("--"):
            flags = [r for r in self.records if r["kind"] == "cli_flag" and (r["name"] == q or q in r["aliases"])]
            if flags:
                flags = sorted(flags, key=lambda r: _LIVE.get(r["status"], 0))
                lk = self._status(q, flags[0])
                lk.candidates = flags
                return lk
            fields = [r for r in self.by_name.get(leaf, []) if r["kind"] == "field"]
            if fields:  # HfArgumentParser turns every TrainingArguments field into a flag
                return Lookup(q, "exact", fields[0], fields)
        same_leaf = [r for r in self.by_name.get(leaf, []) if package is None or r["package"] == package]
        config_here = [r for r in same_leaf if r["kind"] in CONFIG_KINDS]
        if context is None and ("." not in q or q in self.by_name):
            # a bare name: real if it exists anywhere; say where
            if config_here:
                rec = _prefer_config(config_here)
                lk = self._status(q, rec)
                lk.candidates = config_here
                return lk
            if same_leaf:
                return self._api(q, same_leaf)
            return self._unknown(q, q)
        if config_here:
            return Lookup(q, "misplaced", None, config_here)
        if same_leaf:
            return self._api(q, same_leaf)
        return self._unknown(q, path)

    def _api(self, q: str, recs: list[Record]) -> Lookup:
        """A real name that is not a config key; one only other releases have says so (removed / absent)."""
        rec = _prefer_api(recs)
        if rec["status"] in ("removed", "absent"):
            lk = self._status(q, rec)
            lk.candidates = recs
            return lk
        return Lookup(q, "not-a-config-key", rec, recs)

    def _status(self, q: str, rec: Record) -> Lookup:
        if rec["status"] == "absent":
            return Lookup(q, "absent", rec)
        if rec["status"] == "removed":
            return Lookup(q, "removed", rec)
        if rec["deprecated"]:
            return Lookup(q, "deprecated", rec)
        return Lookup(q, "exact", rec)

    def _unknown(self, q: str, path: str) -> Lookup:
        return Lookup(q, "unknown", None, [], self.suggest(path))

    def suggest(self, text: str, limit: int = 3, cutoff: float = 72.0, config_only: bool = False) -> list[str]:
        """Did-you-mean: nearest real names/paths by rapidfuzz similarity (config keys only if asked)."""
        from rapidfuzz import fuzz, process

        leaf = text.rsplit(".", 1)[-1]
        names = self._config_names if config_only else self._names
        hits = process.extract(leaf.lower(), names, scorer=fuzz.ratio, processor=str.lower, limit=limit * 8)
        # config keys first at equal similarity: a config-looking typo most likely means a config key
        ranked = sorted(
            (
                (score + (6 if _prefer_config(self.by_name[n])["kind"] in CONFIG_KINDS else 0), n)
                for n, score, _ in hits
            ),
            reverse=True,
        )
        out: list[str] = []
        for score, name in ranked:
            if score < cutoff:
                continue
            rec = _prefer_config(self.by_name[name])
            label = rec["path"] if rec["kind"] in CONFIG_KINDS else rec["id"]
            if label not in out:
                out.append(label)
            if len(out) == limit:
                break
        return out

    @cached_property
    def _names(self) -> list[str]:
        return sorted(self.by_name)

    @cached_property
    def _config_names(self) -> list[str]:
        return sorted(n for n, recs in self.by_name.items() if any(r["kind"] in CONFIG_KINDS for r in recs))

    def config_paths(self, package: str = "deepspeed") -> list[str]:
        return sorted(r["path"] for r in self.records if r["package"] == package and r["kind"] in CONFIG_KINDS)


REBUILD = "rebuild the registry with `kb registry build`"
REBUILD_TIMELINE = "rebuild it with `python -m indexer.registry_timeline`"


def _read_file(lines: list[str]) -> list[dict[str, Any]] | None:
    """All records of a file in one JSON parse (a third of the time of one parse per line); None when any line is
    not a record with the fields every record has (``_read_line`` then names the line)."""
    try:
        recs = json.loads("[" + ",".join(lines) + "]")
    except json.JSONDecodeError:
        return None
    if len(recs) != len(lines):  # a line holding two values ("{...}, {...}") parses here but is not one record
        return None
    for rec in recs:
        if type(rec) is not dict or not all(type(rec.get(k)) is str for k in ("id", "package", "version")):
            return None
    return recs


def _read_line(line: str, path: Path, n: int) -> dict[str, Any]:
    """One record of a registry file; RegistryError naming the file, line and key when it cannot be read."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise RegistryError(f"{path}:{n}: not JSON ({e.msg}); {REBUILD}") from None
    if not isinstance(rec, dict):
        raise RegistryError(f"{path}:{n}: a record must be a JSON object; {REBUILD}")
    for key in ("id", "package", "version"):
        if not isinstance(rec.get(key), str):
            raise RegistryError(f"{path}:{n}: {key!r} is missing or not a string; {REBUILD}")
    return rec


def _check_versions(records: list[dict[str, Any]], where: list[tuple[Path, int]]) -> None:
    """Every ``version`` and ``releases`` entry is a version packaging reads (each distinct text is parsed once);
    RegistryError naming the file and line of the first record that has one that is not."""
    from kb.registry.order import version_key

    try:  # the common case in one pass over the distinct texts; the slow path below names the record
        distinct = {rec["version"] for rec in records}
        for rec in records:
            rel = rec.get("releases", ())
            if type(rel) is not list:
                raise TypeError
            distinct.update(rel)
        if all(type(v) is str for v in distinct):
            for v in distinct:
                version_key(v)
            return
    except (TypeError, ValueError):  # unhashable or not a list; packaging's InvalidVersion
        pass
    for i, rec in enumerate(records):
        releases = rec.get("releases", [])
        if not isinstance(releases, list) or not all(isinstance(v, str) for v in releases):
            path, n = where[i]
            raise RegistryError(f"{path}:{n}: {rec['id']}: 'releases' must be a list of versions; {REBUILD}")
        for key, vs in (("version", [rec["version"]]), ("releases", releases)):
            for v in vs:
                try:
                    version_key(v)
                except ValueError:  # packaging's InvalidVersion
                    path, n = where[i]
                    raise RegistryError(
                        f"{path}:{n}: {rec['id']}: {key} {v!r} is not a version packaging can read (PEP 440); {REBUILD}"
                    ) from None


HISTORY_FIELDS = (
    "type",
    "default",
    "aliases",
    "choices",
    "constraints",
    "deprecated",
    "replacement",
    "noop",
    "status",
    "validated",
    "forbids_unknown",
    "doc",
    "source_file",
    "source_line",
)


def at_release(r: Record, release: str) -> Record:
    """Record ``r`` as release ``release`` has it: its ``history`` entry for that release applied."""
    return cast(Record, {**r, **r.get("history", {}).get(release, {}), "version": release})


def _merged(records: list[Mapping[str, Any]]) -> list[Record]:
    """Format-2 records (one per id, ``releases`` + ``history``); format-1 records (one per id and
    version, as tests and older files have them) are merged the same way: newest release is the base."""
    from kb.registry.order import version_key

    def fmt2(r: Mapping[str, Any]) -> bool:  # a record copied and re-versioned by hand counts as format 1
        return "releases" in r and r.get("version") in r["releases"]

    if all(fmt2(r) for r in records):
        return cast(list[Record], records)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    out = []
    for r in records:
        if fmt2(r):  # mixed input: expand to one record per release, then merge all alike
            for rel in r["releases"]:
                groups[r["id"]].append(dict(at_release(cast(Record, r), rel)))
        else:
            groups[r["id"]].append(dict(r))
    for recs in groups.values():
        recs = sorted(recs, key=lambda r: version_key(r["version"]))
        base = {k: v for k, v in recs[-1].items() if k not in ("releases", "history")}
        hist = {}
        for r in recs[:-1]:
            diff = {k: r.get(k) for k in HISTORY_FIELDS if r.get(k) != base.get(k)}
            if diff:
                hist[r["version"]] = diff
        base.update(releases=[r["version"] for r in recs], history=hist)
        base.setdefault("renamed_to", None)
        base.setdefault("renamed_from", [])
        out.append(cast(Record, base))
    return sorted(out, key=lambda r: r["id"])


def _renames_from_timelines(records: list[dict[str, Any]], timelines: "Mapping[str, Timeline]") -> None:
    """A sampled record the import build gave no ``renamed_to`` gets the one its timeline states: the replacement the
    source names in the last release that deprecates it (``warmup_ratio`` -> ``warmup_steps``), when that name is a
    record too; the target's ``renamed_from`` lists it. In place."""
    by_id = {r["id"]: r for r in records}
    for r in records:
        tl = timelines.get(r["package"])
        if tl is None or r.get("renamed_to") or r.get("from_timeline") or r["id"] not in tl.names:
            continue
        n = tl.names[r["id"]]
        if not (n.deprecated and n.replacement):
            continue
        for rel in reversed(tl.releases_of(r["id"])):
            if tl.deprecated_at(r["id"], rel) is not None and tl.replacement_at(r["id"], rel):
                new = tl.replacement_id(r["id"], rel)
                if new and new in by_id and new != r["id"]:
                    r["renamed_to"] = new
                    target = by_id[new]
                    target["renamed_from"] = sorted({*(target.get("renamed_from") or []), r["id"]})
                break


def _prefer_config(recs: list[Record]) -> Record:
    order = {"config_key": 0, "config_section": 1, "yaml_key": 2, "field": 3, "kwarg": 4}
    return sorted(
        recs,
        key=lambda r: (
            _LIVE.get(r["status"], 0),
            order.get(r["kind"], 9),
            r["package"] != "deepspeed",
            bool(r.get("from_timeline")),  # a sampled library's record over a front end's argument of the same name
            r["id"],
        ),
    )[0]


_LIVE = {"removed": 1, "absent": 2}  # a name this release has wins over one that other releases have
PACKAGE_ORDER = {"deepspeed": 0, "transformers": 1, "accelerate": 2, "torch": 3, "peft": 4}


def _prefer_api(recs: list[Record]) -> Record:
    order = {"function": 0, "class": 0, "method": 0, "field": 3, "kwarg": 4, "env": 5, "script": 6, "cli_flag": 7}
    return sorted(
        recs,
        key=lambda r: (
            _LIVE.get(r["status"], 0),
            bool(r.get("from_timeline")),  # the libraries' APIs before a front end's argument of the same name
            order.get(r["kind"], 9),
            PACKAGE_ORDER.get(r["package"], 9),
            r["id"],
        ),
    )[0]


_REGISTRY: Registry | None = None


def default_registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry.load()
    return _REGISTRY
