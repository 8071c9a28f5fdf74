"""The parameter registry: every real name, generated from the packages (see indexer/registry_build.py).

Lookup answers one question: is this name real, and where does it live?

>>> reg = Registry.load()
>>> reg.resolve("zero_optimization.nvme_path").status
'misplaced'
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from kb.paths import registry_dir

CONFIG_KINDS = ("config_key", "config_section", "yaml_key")

Status = Literal[
    "exact",  # the name (or id / path) is real, exactly as written
    "alias",  # accepted under another spelling (e.g. prefetch_bucket_size for stage3_prefetch_bucket_size)
    "deprecated",  # still accepted, deprecated (see record.noop / record.replacement)
    "removed",  # the package now raises for it
    "misplaced",  # real name, wrong place: see candidates
    "not-a-config-key",  # a real API / method / kwarg / env var, not a config key
    "unknown",  # no such name: see suggestions
]


@dataclass
class Lookup:
    query: str
    status: Status
    record: dict[str, Any] | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)
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
    """All records of all recorded package versions; the newest version of a package wins."""

    def __init__(self, records: list[dict[str, Any]]):
        self._all = records
        newest: dict[str, str] = {}
        for r in records:
            if _vkey(r["version"]) > _vkey(newest.get(r["package"], "0")):
                newest[r["package"]] = r["version"]
        self.versions = newest
        self.records = [r for r in records if newest[r["package"]] == r["version"]]
        self.by_id = {r["id"]: r for r in self.records}
        self.by_path: dict[str, list[dict]] = defaultdict(list)
        self.by_name: dict[str, list[dict]] = defaultdict(list)
        self.auto_fill: dict[str, list[dict]] = defaultdict(list)  # DS key -> integrations that fill "auto"
        for r in self.records:
            if r["kind"] == "auto_fill":
                self.auto_fill[r["path"]].append(r)
                continue  # metadata about a key, not a name of its own
            self.by_path[r["path"]].append(r)
            for n in [r["name"], *r["aliases"]]:
                self.by_name[n].append(r)
            for a in r["aliases"]:
                if r["kind"] in CONFIG_KINDS:
                    self.by_path[r["path"].rsplit(".", 1)[0] + "." + a if "." in r["path"] else a].append(r)

    @classmethod
    def load(cls, root: Path | None = None) -> Registry:
        root = root or registry_dir()
        records: list[dict[str, Any]] = []
        for p in sorted(root.glob("*.jsonl")):
            with p.open(encoding="utf-8") as f:
                records.extend(json.loads(line) for line in f if line.strip())
        if not records:
            raise FileNotFoundError(f"no registry records under {root}; run `kb registry build`")
        return cls(records)

    # ------------------------------------------------------------ queries

    def get(self, rid: str, version: str | None = None) -> dict[str, Any] | None:
        """Record by canonical id (newest version, or the given one)."""
        if version is None:
            return self.by_id.get(rid)
        return next((r for r in self._all if r["id"] == rid and r["version"] == version), None)

    def history(self, rid: str) -> list[dict[str, Any]]:
        """The record in every recorded version of its package, oldest first."""
        return sorted((r for r in self._all if r["id"] == rid), key=lambda r: _vkey(r["version"]))

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
                return Lookup(q, "exact", flags[0], flags)
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
                return Lookup(q, "not-a-config-key", _prefer_api(same_leaf), same_leaf)
            return self._unknown(q, q)
        if config_here:
            return Lookup(q, "misplaced", None, config_here)
        if same_leaf:
            return Lookup(q, "not-a-config-key", _prefer_api(same_leaf), same_leaf)
        return self._unknown(q, path)

    def _status(self, q: str, rec: dict[str, Any]) -> Lookup:
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


def _prefer_config(recs: list[dict[str, Any]]) -> dict[str, Any]:
    order = {"config_key": 0, "config_section": 1, "yaml_key": 2, "field": 3, "kwarg": 4}
    return sorted(recs, key=lambda r: (order.get(r["kind"], 9), r["package"] != "deepspeed", r["id"]))[0]


PACKAGE_ORDER = {"deepspeed": 0, "transformers": 1, "accelerate": 2, "torch": 3, "peft": 4}


def _prefer_api(recs: list[dict[str, Any]]) -> dict[str, Any]:
    order = {"function": 0, "class": 0, "method": 0, "field": 3, "kwarg": 4, "env": 5, "script": 6, "cli_flag": 7}
    return sorted(recs, key=lambda r: (order.get(r["kind"], 9), PACKAGE_ORDER.get(r["package"], 9), r["id"]))[0]


def _vkey(v: str) -> tuple:
    return tuple(int(x) if x.isdigit() else 0 for x in re.split(r"[.+-]", v)[:4])


_REGISTRY: Registry | None = None


def default_registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = Registry.load()
    return _REGISTRY
