"""Which front end a config file is written for, and the releases it is judged at.

A YAML of ``key: value`` pairs may be bare ``TrainingArguments`` (HfArgumentParser), a LLaMA-Factory training
YAML, a TRL recipe (``trl sft --config``), an axolotl config or ms-swift arguments. Each is read by its own
argument classes, and each front end pins the library releases it runs on. This module decides both from the
registry, never from a list typed here:

* ``detect``: the dialect whose own arguments (the registry's records of that package: its argument classes
  at every recorded release, kb/registry/timeline.py) cover the most keys of the file that no other dialect
  has. A file with no such key stays ``training_args``.
* ``assumed_versions``: the user's versions where given; otherwise the front end's newest recorded release and,
  for the libraries under it, the newest recorded release its ``Requires-Dist`` admits (the timeline's
  ``requires``), each with the reason, so a report can say which versions it assumed.

Core module: imports kb.registry only.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from kb.registry.store import CONFIG_KINDS, Registry

# dialect -> the package whose argument classes define it (ParsedConfig.kind values besides the structural
# ones: deepspeed, accelerate, training_args, launch, unknown)
FRONT_PACKAGES = {"llamafactory": "llamafactory", "axolotl": "axolotl", "trl": "trl", "swift": "ms-swift"}
DIALECTS = ("training_args", *FRONT_PACKAGES)
LABELS = {
    "deepspeed": ("DeepSpeed config", "DeepSpeed 配置"),
    "accelerate": ("accelerate config", "accelerate 配置"),
    "training_args": ("TrainingArguments", "TrainingArguments"),
    "llamafactory": ("LLaMA-Factory YAML", "LLaMA-Factory 配置"),
    "axolotl": ("axolotl config", "axolotl 配置"),
    "trl": ("TRL recipe", "TRL 配置"),
    "swift": ("ms-swift arguments", "ms-swift 参数"),
    "launch": ("launch command", "启动命令"),
    "unknown": ("config", "配置"),
}


@dataclass(frozen=True)
class AssumedVersion:
    """One release a lint judged a package at: given by the user, or assumed (with the reason)."""

    package: str
    version: str
    origin: str  # given | assumed
    reason: str  # English, e.g. "llamafactory 0.9.5 requires transformers>=4.49.0,<=5.8.0"
    reason_zh: str

    def to_dict(self) -> dict[str, Any]:
        return {"package": self.package, "version": self.version, "origin": self.origin, "reason": self.reason}


def namespace(reg: Registry, dialect: str) -> frozenset[str]:
    """Every top-level key a file of ``dialect`` may hold, at any recorded release (the package's own argument
    fields; ``training_args``: the TrainingArguments fields transformers records)."""
    return _namespace(_base(reg), dialect)


def _base(reg: Registry) -> Registry:
    return reg._default_view()


# per registry view (weakly held: a view that is gone takes its namespaces with it; an id could be reused)
_NS: weakref.WeakKeyDictionary[Registry, dict[str, frozenset[str]]] = weakref.WeakKeyDictionary()


def _namespace(reg: Registry, dialect: str) -> frozenset[str]:
    per = _NS.setdefault(reg, {})
    hit = per.get(dialect)
    if hit is not None:
        return hit
    if dialect == "training_args":
        names = {
            n
            for r in reg.records
            if r["package"] == "transformers"
            and r["kind"] == "field"
            and r["path"].split(".", 1)[0] in ("TrainingArguments", "Seq2SeqTrainingArguments")
            for n in (r["name"], *r["aliases"])
        }
    else:
        pkg = FRONT_PACKAGES[dialect]
        names = {
            n for r in reg.records if r["package"] == pkg and r["kind"] == "field" for n in (r["name"], *r["aliases"])
        }
    out = frozenset(names)
    per[dialect] = out
    return out


def _ds_top(reg: Registry) -> frozenset[str]:
    """DeepSpeed's top-level config keys and sections (any recorded release)."""
    per = _NS.setdefault(reg, {})
    hit = per.get("ds_config")
    if hit is None:
        hit = frozenset(
            r["name"]
            for r in reg.records
            if r["package"] == "deepspeed" and r["kind"] in CONFIG_KINDS and "." not in r["path"]
        )
        per["ds_config"] = hit
    return hit


def front_records(reg: Registry, dialect: str, key: str) -> list[Any]:
    """The records of ``dialect``'s own arguments named ``key`` (as ``reg`` shows them)."""
    pkg = FRONT_PACKAGES.get(dialect)
    if pkg is None:
        return []
    return [r for r in reg.by_name.get(key, []) if r["package"] == pkg and r["kind"] == "field"]


def detect(kind: str, data: dict[str, Any], reg: Registry) -> str | None:
    """The front end of a mapping file that ``kb.doctor.configs`` read as ``training_args`` or ``unknown``: the one
    with the most keys of the file that only it has (at least one, and more than any other); otherwise None."""
    if kind not in ("training_args", "unknown"):
        return None
    keys = {str(k) for k in data}
    spaces = {d: namespace(reg, d) for d in DIALECTS}
    if kind == "unknown":  # a file kb could not place may be a DeepSpeed config: its top-level keys compete too
        spaces["ds_config"] = _ds_top(reg)
    spaces = {d: s for d, s in spaces.items() if s}
    if len(spaces) < 2:
        return None
    unique: dict[str, int] = {}
    for d, names in spaces.items():
        others = set().union(*(s for o, s in spaces.items() if o != d))
        unique[d] = len({k for k in keys if k in names and k not in others})
    fronts = sorted((n, len(keys & spaces[d]), d) for d, n in unique.items() if d != "training_args")
    if not fronts or fronts[-1][0] == 0 or fronts[-1][2] == "ds_config":
        return None
    n, _, best = fronts[-1]
    if len(fronts) > 1 and fronts[-2][0] == n:
        return None  # two front ends claim as many keys of their own: do not guess
    return best


# front ends whose argument classes extend transformers' TrainingArguments (HfArgumentParser reads both): read in
# their sources (LLaMA-Factory hparams/training_args.py, TRL's *Config classes, ms-swift's SftArguments). axolotl
# has a schema of its own and builds TrainingArguments itself.
TA_BASED = ("llamafactory", "trl", "swift")


def ta_keys(reg: Registry, dialect: str, data: dict[str, Any]) -> dict[str, Any]:
    """The part of a front end's file that TrainingArguments reads: its TrainingArguments fields that are not the
    front end's own arguments (empty for a front end that does not extend TrainingArguments)."""
    if dialect not in TA_BASED:
        return {}
    mine, ta = namespace(reg, dialect), namespace(reg, "training_args")
    return {k: v for k, v in data.items() if str(k) in ta and str(k) not in mine}


def known_anywhere(reg: Registry, dialect: str, key: str) -> bool:
    """Is ``key`` an argument of ``dialect`` (or of the TrainingArguments it extends) at any recorded release?"""
    if key in namespace(reg, dialect):
        return True
    return dialect in TA_BASED and key in namespace(reg, "training_args")


def assumed_versions(dialect: str, reg: Registry, given: dict[str, str]) -> list[AssumedVersion]:
    """The releases a ``dialect`` file is judged at: the user's (``given``), then the front end's newest recorded
    release, then for each library the newest recorded release the front end's requirements admit."""
    from kb.registry.versions import satisfies

    base = _base(reg)
    out = [AssumedVersion(p, v, "given", "given", "用户给出") for p, v in sorted(given.items()) if p in base.releases]
    pkg = FRONT_PACKAGES.get(dialect)
    tl = base.timelines.get(pkg) if pkg else None
    if pkg is None or tl is None:
        return out
    if pkg in given:
        front = tl.release_for(given[pkg]) or tl.newest
    else:
        front = tl.newest
        out.append(
            AssumedVersion(
                pkg,
                front,
                "assumed",
                f"the newest {pkg} release kb records (pass --versions {pkg}==X for yours)",
                f"kb 记录的最新 {pkg} 版本（可用 --versions {pkg}==X 指定你的版本）",
            )
        )
    requires = tl.requires.get(front) or {}
    for lib in sorted(requires):
        spec = requires.get(lib)
        if lib in given or lib not in base.releases or spec is None:
            continue
        rels = base.timelines[lib].releases if lib in base.timelines else base.releases[lib]
        try:
            ok = [r for r in rels if satisfies(r, spec)]
        except ValueError:
            continue
        if not ok:
            continue
        out.append(
            AssumedVersion(
                lib,
                ok[-1],
                "assumed",
                f"{pkg} {front} requires {lib}{spec}: the newest recorded release it admits",
                f"{pkg} {front} 要求 {lib}{spec}，取其中 kb 记录的最新版本",
            )
        )
    return out


def view_for(reg: Registry, versions: list[AssumedVersion]) -> Registry:
    """The registry as those releases have it."""
    return _base(reg).at({v.package: v.version for v in versions})
