"""What the site shows, computed once from the entries, the registry and the seed claims; no rendering here.

Entry pages show ``kb.ask.engine.entry_result`` (the same Result a `kb ask` / `kb show` answer carries), plus
the entry's symptoms and the verdicts of its myth names. Registry records get a page when an entry uses
them: entry and fix params, the records myth names resolve to, and the records the registry suggests for
names that do not exist. Every other record is listed (with an anchor) on the parameter index.
Iteration is sorted everywhere: the same input gives the same pages, byte for byte.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kb.ask.result import entry_result
from kb.content.entries import AREAS, LoadedEntry
from kb.contract import to_dict
from kb.registry.store import CONFIG_KINDS, PACKAGE_ORDER, Registry

LANGS = ("en", "zh")
# site folders next to the entry pages (/en/<id>/): an entry id must not take one of these names
RESERVED = ("params", "names", "seed-thread", "static")
# myth verdicts the "names that do not exist" page lists (misused names are real and rightly placed)
NAME_VERDICTS = ("invented", "misplaced", "deprecated", "not-a-config-key")
CLAIM_VERDICTS = ("right", "wrong", "partly", "depends")


class SiteError(Exception):
    """The site cannot be built from this input: the message says what to change."""


@dataclass
class NameRow:
    """One name that does not exist (or not there, or not any more, or not as a config key)."""

    name: str
    verdict: str
    at: str | None
    myths: list[tuple[str, int]] = field(default_factory=list)  # (entry id, myth index)
    instead: list[str] = field(default_factory=list)  # registry ids the registry points to
    seed: bool = False  # a claim of the seed thread uses this name

    @property
    def anchor(self) -> str:
        return "n-" + slug_text(f"{self.name}-{self.verdict}" + (f"-{self.at}" if self.at else ""))


@dataclass
class Model:
    langs: tuple[str, ...]
    entries: list[LoadedEntry]  # sorted by id, withdrawn ones included
    results: dict[str, dict[str, dict[str, Any]]]  # lang -> entry id -> Result dict
    registry: Registry
    paged: dict[str, str]  # registry id -> page slug (records with a page of their own)
    anchors: dict[str, str]  # registry id -> anchor on the parameter index (every record)
    used_by: dict[str, list[str]]  # registry id -> entry ids (params, fix params)
    myth_refs: dict[str, list[tuple[str, int]]]  # registry id -> (entry id, myth index) whose names resolve to it
    names: list[NameRow]
    name_anchor: dict[str, str]  # myth name -> anchor on the names page (first row of that name)
    claims: list[dict[str, Any]]
    packages: dict[str, list[str]]  # entry id -> packages it concerns (library filter)

    def entry(self, eid: str) -> LoadedEntry:
        return self._by_id[eid]

    def __post_init__(self) -> None:
        self._by_id = {le.entry.id: le for le in self.entries}

    @property
    def areas(self) -> list[str]:
        return [a for a in AREAS if any(le.entry.area == a for le in self.entries)]


def slug_text(s: str) -> str:
    """A path segment from any text: letters, digits, ``.``, ``_`` and ``-`` kept, every other run -> ``~``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "~", s).strip("~") or "~"


def record_slugs(ids: list[str]) -> dict[str, str]:
    """Registry id -> ``<package>/<path slug>``, unique even on a case-insensitive file system."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for rid in sorted(ids):
        pkg, _, path = rid.partition(":")
        s = f"{slug_text(pkg)}/{slug_text(path)}"
        if s.lower() in seen:
            s = f"{s}-{hashlib.sha1(rid.encode()).hexdigest()[:8]}"
        seen.add(s.lower())
        out[rid] = s
    return out


def entry_packages(e: dict[str, Any]) -> list[str]:
    pk = {p.split(":", 1)[0] for p in e.get("params", [])}
    pk |= {p.split(":", 1)[0] for f in e["fixes"] for p in f.get("params", [])}
    pk |= set((e.get("applies_to") or {}).keys())
    pk |= {s["package"] for s in e["sources"] if s.get("package")}
    return sorted(pk, key=lambda p: (PACKAGE_ORDER.get(p, 9), p))


def _resolve(reg: Registry, name: str) -> dict[str, Any] | None:
    lk = reg.resolve(name)
    if lk.record is not None:
        return lk.record
    return lk.candidates[0] if lk.candidates else None


def _instead(reg: Registry, name: str, verdict: str) -> list[str]:
    """The records to use instead of a myth name, as the registry says."""
    lk = reg.resolve(name)
    ids: list[str] = []
    if verdict == "invented":
        for label in lk.suggestions:
            rec = _resolve(reg, label)
            if rec is not None:
                ids.append(rec["id"])
        return list(dict.fromkeys(ids))
    recs = ([lk.record] if lk.record else []) + list(lk.candidates)
    for rec in recs:
        if verdict == "deprecated" and rec.get("replacement"):
            parent = rec["path"].rsplit(".", 1)[0] if "." in rec["path"] else None
            rep = reg.resolve(rec["replacement"], context=parent) if rec["kind"] in CONFIG_KINDS else None
            target = (rep.record if rep is not None else None) or _resolve(reg, rec["replacement"])
            if target is not None:
                ids.append(target["id"])
        ids.append(rec["id"])
    return list(dict.fromkeys(ids))


def build_model(
    entries: list[LoadedEntry],
    registry: Registry,
    claims: list[dict[str, Any]],
    langs: tuple[str, ...] = LANGS,
) -> Model:
    entries = sorted(entries, key=lambda le: le.entry.id)
    for le in entries:
        if le.entry.id in RESERVED:
            raise SiteError(f"entry id {le.entry.id!r} is a folder of the site ({', '.join(RESERVED)}): rename it")
    dumps = {le.entry.id: le.entry.model_dump(mode="json") for le in entries}
    results = {lang: {eid: to_dict(entry_result(d, lang, registry)) for eid, d in dumps.items()} for lang in langs}
    used_by: dict[str, list[str]] = {}
    for le in entries:
        for rid in le.entry.all_params():
            used_by.setdefault(rid, []).append(le.entry.id)
    myth_refs: dict[str, list[tuple[str, int]]] = {}
    rows: dict[tuple[str, str, str | None], NameRow] = {}
    seed_names = {n.lower() for c in claims for n in c.get("names", [])}
    for le in entries:
        for i, m in enumerate(le.entry.myths):
            for n in m.names:
                rec = _resolve(registry, n.name)
                if rec is not None:
                    refs = myth_refs.setdefault(rec["id"], [])
                    if (le.entry.id, i) not in refs:
                        refs.append((le.entry.id, i))
                if n.verdict not in NAME_VERDICTS:
                    continue
                key = (n.name, n.verdict, n.at)
                row = rows.get(key)
                if row is None:
                    leaf = n.name.split(":", 1)[-1].rsplit(".", 1)[-1]
                    row = rows[key] = NameRow(
                        n.name,
                        n.verdict,
                        n.at,
                        instead=_instead(registry, n.name, n.verdict),
                        seed=n.name.lower() in seed_names or leaf.lower() in seed_names,
                    )
                row.myths.append((le.entry.id, i))
    names = sorted(rows.values(), key=lambda r: (r.name.lower(), r.name, r.verdict, r.at or ""))
    name_anchor: dict[str, str] = {}
    for row in names:
        name_anchor.setdefault(row.name, row.anchor)
    wanted = set(used_by) | set(myth_refs) | {rid for row in names for rid in row.instead}
    paged_ids = sorted(rid for rid in wanted if registry.get(rid) is not None)
    all_slugs = record_slugs([r["id"] for r in registry.records])
    ids = {le.entry.id: le.entry.id for le in entries}
    ids.update({a: le.entry.id for le in entries for a in le.entry.aliases})
    resolved_claims = []
    for c in claims:
        if c.get("entry") not in ids:
            raise SiteError(f"seed claim {c.get('id')}: entry {c.get('entry')!r} does not exist")
        resolved_claims.append({**c, "entry": ids[c["entry"]]})
    return Model(
        langs=langs,
        entries=entries,
        results=results,
        registry=registry,
        paged={rid: all_slugs[rid] for rid in paged_ids},
        anchors={rid: "r-" + s.replace("/", "--") for rid, s in all_slugs.items()},
        used_by={k: sorted(v) for k, v in sorted(used_by.items())},
        myth_refs={k: sorted(v) for k, v in sorted(myth_refs.items())},
        names=names,
        name_anchor=name_anchor,
        claims=resolved_claims,
        packages={eid: entry_packages(d) for eid, d in dumps.items()},
    )


def load_claims(path: Path | None) -> list[dict[str, Any]]:
    """The seed thread's claims (data/seed-claims.yaml); none when the file is absent."""
    if path is None or not path.is_file():
        return []
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    claims = data.get("claims") or []
    for c in claims:
        if c.get("verdict") not in CLAIM_VERDICTS:
            raise SiteError(f"{path}: claim {c.get('id')}: verdict must be one of {', '.join(CLAIM_VERDICTS)}")
    return claims
