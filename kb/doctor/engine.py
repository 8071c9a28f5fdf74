"""The lint rule engine: the rule registry and what a rule reads; no rule lives here.

A rule is one function registered with ``@rule``: its code (stable), short name, severity, the entry that
explains it, what it detects, what DeepSpeed / accelerate does, which parsed views it reads and its own bad
cases (configs it must flag) and ok cases (near misses it must not flag); the registry is ``RULES``. The
rules live in ``kb/doctor/rules/`` (one module per concern, each importing only this engine);
``kb.doctor.lint`` imports every rule module and is the entry point (``lint_config``, the docs table).

A rule reads a ``Ctx`` (one view of the parsed config, the registry, the options, the shared registry walk
of every key) and calls ``ctx.add``; each finding carries its message and suggestion in English
(``message``, ``suggestion``) and in Chinese (``message_zh``, ``suggestion_zh``).
"""

from __future__ import annotations

import json
import sys
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from kb.doctor.configs import ParsedConfig, _int, deepspeed_block, parse_config
from kb.memory.estimate import DEFAULT_GPU_MEM_GIB, registry_default
from kb.registry.store import Lookup, Record, Registry

SEVERITIES = ("error", "warning", "info")
# the parsed views a rule can read; a TrainingArguments file's `deepspeed:` mapping is a "deepspeed" view
VIEWS = ("deepspeed", "training_args", "accelerate", "launch", "llamafactory", "axolotl", "trl", "swift")

FREE_FORM = (
    "optimizer.params",
    "scheduler.params",
    "zero_optimization.leaf_module.classes",
    "zero_optimization.leaf_module.names",
    "zero_optimization.leaf_module.name_suffixes",
)
# codes no rule may take again (``rule`` refuses them). KB021 (unknown-flag, a launch-line warning) was
# retired: launch lines are now parsed by the launchers' own argparse definitions
# (kb/doctor/rules/frontends.py KB030-KB033), which also know accelerate's dash spellings and argparse's
# abbreviations. KB044 (auto-param-outside-hf) is part of KB007: one "auto" finding per file.
RETIRED = {
    "KB021": "replaced by KB030-KB033 (launch lines parsed by the launchers' own argparse definitions)",
    "KB044": 'merged into KB007 (one finding per file for every "auto", optimizer / scheduler params included)',
}


@dataclass
class Finding:
    code: str
    severity: str
    path: str
    line: int | None
    message: str
    suggestion: str | None = None
    entry: str | None = None
    message_zh: str = ""
    suggestion_zh: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self, lang: str) -> tuple[str, str | None]:
        """(message, suggestion) in ``lang`` ("en" or "zh")."""
        return (self.message_zh, self.suggestion_zh) if lang == "zh" else (self.message, self.suggestion)


# ---------------------------------------------------------------- the rule registry


@dataclass(frozen=True)
class Case:
    """A config a rule must flag (bad) or must not flag (ok), with the lint options it needs."""

    raw: str | dict[str, Any]  # the text a user would paste (JSON, YAML, a command line), or a dict to dump as JSON
    note: str = ""
    world_size: int | None = None
    model_params: float | None = None
    gpu_mem_gib: float = DEFAULT_GPU_MEM_GIB
    versions: dict[str, str] | None = None  # lint against these releases (``Registry.at``), as `--versions` does
    sampled: bool = False  # lint against the sampled builds alone (``sampled_only``: what a registry without
    # timelines knows), for a rule about what such a registry cannot prove (KB022)

    @property
    def config(self) -> str:
        """The case's config text (dicts are dumped only when a test or the docs ask: not at import)."""
        return self.raw if isinstance(self.raw, str) else json.dumps(self.raw, indent=2)

    def lint(self, registry: Registry) -> list[Finding]:
        """Every registered rule's findings for this case (``kb.doctor.lint`` registers them all)."""
        cfg = parse_config(self.config, f"<case {self.note}>")
        reg = sampled_only(registry) if self.sampled else registry
        reg = reg.at(self.versions) if self.versions else reg
        return run(cfg, reg, self.world_size, self.model_params, self.gpu_mem_gib)


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: str
    entry: str | None  # the entry that explains it (``kb show ENTRY``)
    summary: str  # what it detects, one line (markdown)
    effect: str  # what DeepSpeed / accelerate does with such a config
    views: tuple[str, ...]  # which parsed views it reads (VIEWS)
    bad: tuple[Case, ...]
    ok: tuple[Case, ...]
    check: Callable[[Ctx], None] = field(repr=False)
    validity: bool = False  # its effect is that DeepSpeed / accelerate raises: proven in its module's ORACLE

    @property
    def oracle(self) -> str:
        """The test file that proves a validity rule against the real code (its rule module's ``ORACLE``)."""
        return _oracle(self.check)

    @property
    def kinds(self) -> tuple[str, ...]:
        """Config kinds (``ParsedConfig.kind``) it can fire on: TrainingArguments files carry a DeepSpeed view."""
        ks = set(self.views) | ({"training_args"} if "deepspeed" in self.views else set())
        return tuple(k for k in VIEWS if k in ks)


RULES: dict[str, Rule] = {}


def _oracle(fn: Callable[..., Any]) -> str:
    """The ``ORACLE`` of the module that defines ``fn`` (each rule module names the test file proving its rules)."""
    oracle = getattr(sys.modules.get(fn.__module__), "ORACLE", None)
    if not isinstance(oracle, str):
        raise ValueError(f"rule module {fn.__module__} names no ORACLE (the test file that proves its validity rules)")
    return oracle


def rule(
    code: str,
    name: str,
    severity: str,
    entry: str | None,
    *,
    views: tuple[str, ...],
    summary: str,
    effect: str,
    bad: list[Case],
    ok: list[Case],
    validity: bool = False,
) -> Callable[[Callable[[Ctx], None]], Callable[[Ctx], None]]:
    """Register the decorated function as rule ``code``; it reads a ``Ctx`` and calls ``ctx.add``."""

    def register(fn: Callable[[Ctx], None]) -> Callable[[Ctx], None]:
        if code in RULES:
            raise ValueError(f"rule {code} registered twice")
        if code in RETIRED:
            raise ValueError(f"rule {code}: a retired code is never reused ({RETIRED[code]})")
        if severity not in SEVERITIES or not set(views) <= set(VIEWS):
            raise ValueError(f"rule {code}: bad severity or views")
        if validity:
            _oracle(fn)  # a validity rule is proven somewhere: its module says where
        RULES[code] = Rule(code, name, severity, entry, summary, effect, views, tuple(bad), tuple(ok), fn, validity)
        return fn

    return register


# ---------------------------------------------------------------- what rules read: one view of the config


@dataclass
class KeyVisit:
    """One key of a DeepSpeed config, resolved against the registry (the walk every key rule reads)."""

    key: str
    path: str  # dotted, under the canonical parent
    shown: str  # as shown in findings (with the view's prefix, e.g. "deepspeed.")
    parent: str
    strict: bool  # the parent section rejects unknown keys (pydantic extra="forbid")
    lookup: Lookup
    value: Any
    siblings: dict[str, Any]
    rec: Record | None  # the record when the key is real here (exact, alias, deprecated, removed)
    where: list[str]  # for a misplaced key: the config paths where it belongs, nearest to ``path`` first
    value_check: tuple[str | None, Any] | None = None  # check_value() when DeepSpeed validates the value
    # can the registry prove that DeepSpeed does not read a key it has no record of here? (``Ctx._walk`` says
    # when); False: a rule says "unverified" (KB022), never "ignored" / "not valid here"
    proven: bool = True
    evidence: list[Record] = field(default_factory=list)  # sites whose condition reads a name spelled like the key
    # why it is not proven: "site" (a raise / warn site reads the name), "unprobed" (a section the trace never
    # probed), "handed-on" (a section DeepSpeedConfig hands on whole, ``handed_on``), "refused" (a removed
    # feature the registry records only from the release that refuses it, ``refused_from``)
    unproven: str = ""
    written: str = ""  # the dotted path as the file spells it (aliases kept): what the HF Trainer / accelerate match

    @property
    def status(self) -> str:
        return self.lookup.status


class Ctx:
    """What a rule sees: one view of the parsed config (its data and prefix), the registry, the options.

    ``add`` records a finding in both languages. ``keys`` is the registry walk of a DeepSpeed view."""

    def __init__(
        self,
        cfg: ParsedConfig,
        reg: Registry,
        view: str,
        data: dict[str, Any],
        prefix: str,
        hf: bool,
        world_size: int | None,
        model_params: float | None,
        gpu_mem_gib: float,
        out: list[Finding],
    ):
        self.cfg, self.reg, self.view, self.data, self.prefix, self.hf = cfg, reg, view, data, prefix, hf
        self.world_size, self.model_params, self.gpu_mem_gib = world_size, model_params, gpu_mem_gib
        self.out = out
        self.code = ""  # the rule running now (set by run)

    def add(
        self,
        path: str,
        message: str,
        suggestion: str | None,
        message_zh: str,
        suggestion_zh: str | None,
        entry: str | None = None,
        line: int | None = None,
    ) -> None:
        """Record a finding of the running rule at ``path`` (on ``line``; by default the key's first line)."""
        r = RULES[self.code]
        self.out.append(
            Finding(
                r.code,
                r.severity,
                path,
                self.cfg.line(path) if line is None else line,
                message,
                suggestion,
                entry or r.entry,
                message_zh,
                suggestion_zh,
            )
        )

    def default(self, path: str) -> Any:
        """DeepSpeed's default for a config key, from the registry."""
        return registry_default(path, self.reg)

    @cached_property
    def zero(self) -> dict[str, Any]:
        z = self.data.get("zero_optimization")
        return z if isinstance(z, dict) else {}

    @cached_property
    def stage(self) -> int:
        return _int(self.zero.get("stage", self.default("zero_optimization.stage"))) or 0

    def offload(self) -> list[tuple[str, dict[str, Any], str]]:
        """(block name, block, device) for each offload block of zero_optimization that is a mapping."""
        out = []
        for blk in ("offload_optimizer", "offload_param"):
            b = self.zero.get(blk)
            if isinstance(b, dict):
                out.append((blk, b, b.get("device", self.default(f"zero_optimization.{blk}.device"))))
        return out

    @cached_property
    def keys(self) -> list[KeyVisit]:
        """Every key of this DeepSpeed view, depth first, as DeepSpeed would meet it."""
        out: list[KeyVisit] = []
        self._walk(self.data, "", out, "")
        return out

    def _walk(self, d: dict[str, Any], parent: str, out: list[KeyVisit], spelled: str) -> None:
        """Resolve every key of ``d`` (a section at config path ``parent``), then the sections inside it.

        What the registry proves about a key it has no record of depends on how it learnt the section's keys:
        a pydantic model lists every field (``validated``); a timeline (kb/registry/timeline.py, a static read
        of the released files) lists the keys of the sections it read in the view's release (the store's own
        rule, ``Registry._timeline_proves_absent``); otherwise the builder's trace (indexer/registry_build.py
        ``_ds_config_records``: DeepSpeedConfig in one process, no torch.distributed) saw the top level and the
        first level of each unvalidated top-level section, and never probed deeper ones. A key is ``proven``
        unread in the first two cases, and in the third unless a raise / warn site of DeepSpeed reads a name
        spelled like it (a read behind a branch the trace does not take, e.g. config.py:468). Neither source
        proves anything under a section DeepSpeedConfig hands on whole (``handed_on``), nor about a removed
        feature recorded only from the release that refuses it (``refused_from``)."""
        reg = self.reg
        parent_rec = reg.get(f"deepspeed:{parent}") if parent else None
        strict = bool(parent_rec and parent_rec.get("forbids_unknown"))
        listed = bool(parent_rec and parent_rec.get("validated")) or timeline_read(reg, "deepspeed", parent)
        probed = "." not in parent  # the top level ("") or a top-level section
        for key, value in d.items():
            key = str(key)
            path = f"{parent}.{key}" if parent else key
            if path.startswith(FREE_FORM):
                continue
            lk = reg.resolve(key, context=parent or None, package="deepspeed")
            if lk.status == "removed" and lk.record is not None and dropped(lk.record):
                # not DeepSpeed raising for it: the view's release does not have the name (older ones do)
                lk.status, lk.record = "absent", as_absent(lk.record)
            if parent == "" and lk.status != "unknown" and lk.record and "." in lk.record["path"]:
                lk.status = "misplaced"
                lk.candidates = [lk.record]
            rec = lk.record if lk.status in ("exact", "alias", "deprecated", "removed") else None
            homes = [c for c in lk.candidates if c["kind"] in ("config_key", "config_section") and live_key(reg, c)]
            where = nearest_paths(path, [c["path"] for c in homes])
            v = KeyVisit(key, path, self.prefix + path, parent, strict, lk, value, d, rec, where)
            v.written = f"{spelled}.{key}" if spelled else key
            if rec is None and not listed:
                # a site's read is evidence only for a name the registry knows nowhere as a config key (a read of
                # `enabled` is some section's `enabled`)
                v.evidence = site_reads(reg, "deepspeed", key) if lk.status == "unknown" else []
                v.proven = probed and not v.evidence
                v.unproven = "" if v.proven else "site" if v.evidence else "unprobed"
            if rec is None and v.proven:
                gone = lk.record if lk.status == "absent" and lk.record and lk.record.get("absent") == "added" else None
                if gone is not None and refused_from(reg, gone):
                    v.proven, v.unproven = False, "refused"
                elif handed_on(reg, parent_rec):
                    v.proven, v.unproven = False, "handed-on"
            out.append(v)
            if rec is None or lk.status == "removed":
                continue
            if isinstance(value, dict) and rec["kind"] == "config_section":
                self._walk(value, rec["path"], out, v.written)
            elif value != "auto" and rec.get("validated"):
                v.value_check = check_value(rec, value)

    def near(self, path: str) -> tuple[str, str]:
        """Did-you-mean for an unknown key, in both languages: the keys of its own section first."""
        from rapidfuzz import fuzz

        parent, leaf = _parent(path), path.rsplit(".", 1)[-1]
        own = [
            r["path"]
            for r in self.reg.records
            if r["package"] == "deepspeed"
            and r["kind"] in ("config_key", "config_section")
            and _parent(r["path"]) == parent
            and r.get("status") not in ("removed", "absent")
            and fuzz.ratio(leaf, r["name"]) >= 62.0
        ]
        own.sort(key=lambda p: -fuzz.ratio(leaf, p.rsplit(".", 1)[-1]))
        other = [
            p
            for p in self.reg.suggest(path, limit=6, config_only=True, cutoff=62.0)
            if (r := self.reg.get(f"deepspeed:{p}")) is None or live_key(self.reg, r)
        ]
        near = list(dict.fromkeys(own[:3] + other))[:3]
        if not near:
            return "delete it", "删掉它"
        names = [f"`{s}`" for s in near]
        return f"did you mean {', '.join(names)}?", f"是不是想写 {'、'.join(names)}？"


# ---------------------------------------------------------------- running the rules


def _views(cfg: ParsedConfig, registry: Registry) -> list[tuple[str, dict[str, Any], str, bool]]:
    """(view, data, prefix, filled by the HF Trainer) for each part of the config rules read, in order.

    A front end's file (``cfg.dialect``) is a view of its own; a front end that extends TrainingArguments hands it the
    keys that are its fields, so those keys are a ``training_args`` view too (kb.doctor.dialect.ta_keys)."""
    if cfg.kind in ("accelerate", "launch"):
        return [(cfg.kind, cfg.data, "", False)]
    out: list[tuple[str, dict[str, Any], str, bool]] = []
    if cfg.dialect:
        out.append((cfg.dialect, cfg.data, "", False))
    if cfg.dialect:
        from kb.doctor.dialect import ta_keys

        ta = ta_keys(registry, cfg.dialect, cfg.data)
        if ta:
            out.append(("training_args", ta, "", False))
    elif cfg.kind == "training_args":
        out.append(("training_args", cfg.data, "", False))
    ds, prefix = deepspeed_block(cfg)  # a DeepSpeed file (or one we cannot tell), or TrainingArguments' `deepspeed:`
    if ds is not None:
        out.append(("deepspeed", ds, prefix, cfg.kind == "training_args"))  # the HF Trainer fills its "auto" keys
    return out


def run(
    cfg: ParsedConfig,
    registry: Registry,
    world_size: int | None = None,
    model_params: float | None = None,
    gpu_mem_gib: float = DEFAULT_GPU_MEM_GIB,
) -> list[Finding]:
    """The findings of every registered rule for one parsed config, in file order: line, then severity,
    then path (then code). ``kb.doctor.lint`` imports every rule module; its ``lint_config`` is this function."""
    out: list[Finding] = []
    if cfg.dialect is None and cfg.kind in ("training_args", "unknown"):
        from kb.doctor.dialect import detect

        cfg.dialect = detect(cfg.kind, cfg.data, registry)
    for view, data, prefix, hf in _views(cfg, registry):
        ctx = Ctx(cfg, registry, view, data, prefix, hf, world_size, model_params, gpu_mem_gib, out)
        for code in sorted(RULES):
            if view in RULES[code].views:
                ctx.code = code
                RULES[code].check(ctx)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(out, key=lambda f: (f.line or 0, order[f.severity], f.path, f.code))


# ---------------------------------------------------------------- shared helpers


def truthy(v: Any) -> bool:
    """A switch the packages read as on: ``True``, or a string "true" / "yes" / "1" (any case)."""
    return v is True or (isinstance(v, str) and v.lower() in ("true", "yes", "1"))


def ticks(names: list[str], sep: str = ", ") -> str:
    return sep.join(f"`{n}`" for n in names)


def nearest_paths(path: str, homes: list[str]) -> list[str]:
    """``homes`` (config paths a misplaced key is real at), nearest to ``path`` first: the most leading
    sections shared, then rapidfuzz similarity of the whole path."""
    from rapidfuzz import fuzz

    parts = path.split(".")

    def shared(h: str) -> int:
        n = 0
        for a, b in zip(parts, h.split("."), strict=False):
            if a != b:
                break
            n += 1
        return n

    return sorted(dict.fromkeys(homes), key=lambda h: (-shared(h), -fuzz.ratio(path, h), h))


# ---------------------------------------------------------------- what the registry can prove about a name


def dropped(rec: Record) -> bool:
    """The view's release does not have the name; only older recorded releases do. The default view marks
    such a record "removed" with ``until`` (kb/registry/store.py ``_view``): that is not the package raising
    for it, which a record says with status "removed" and no ``until`` (DeepSpeed's removed-feature list)."""
    return rec.get("status") == "removed" and bool(rec.get("until"))


def as_absent(rec: Record) -> Record:
    """A dropped record as a pinned view shows it: status "absent", removed after ``until``."""
    out = dict(rec, status="absent", absent="removed", since=rec["releases"][0], until=rec["until"])
    return out  # type: ignore[return-value]


def live_key(reg: Registry, rec: Record) -> bool:
    """A config key the view's release reads: neither it nor a section above it is removed or absent there."""
    path = rec["path"]
    while path:
        r = rec if path == rec["path"] else reg.get(f"{rec['package']}:{path}")
        if r is not None and r.get("status") in ("removed", "absent"):
            return False
        path = _parent(path)
    return True


_SAMPLED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def sampled_only(reg: Registry) -> Registry:
    """The registry of the sampled builds alone (data/registry/<package>.jsonl), without its timelines: what
    `kb lint` knows of a release no timeline covers. ``reg`` itself when it has no timeline."""
    base = reg._default_view()
    if not getattr(base, "timelines", None):
        return base
    if base not in _SAMPLED:  # the store keeps every record of every release in ``_all`` (format 2)
        _SAMPLED[base] = Registry([r for r in base._all if not r.get("from_timeline")])
    return _SAMPLED[base]


def timeline_read(reg: Registry, package: str, section: str) -> bool:
    """Did the package's timeline read ``section`` ("" the top level) in the view's release, so that it lists
    every key there (kb/registry/timeline.py; the store treats its absence as evidence the same way)?"""
    tl = (getattr(reg, "timelines", None) or {}).get(package)
    rel = reg.versions.get(package)
    if tl is None or rel is None or rel not in tl.releases:
        return False
    return True if not section else bool(tl.present(f"{package}:{section}", rel))


# the switch of a DeepSpeed section. A section (no pydantic model) where DeepSpeedConfig looks up this key alone
# is one it hands on whole: it copies the section, pops the switch and passes the rest to the feature's code,
# which reads the other keys (deepspeed 0.19.4 runtime/config.py:143-147 get_pld_params, :159-163
# get_amp_params; runtime/data_pipeline/config.py:123-127 get_curriculum_learning_params): the trace and the
# static read follow DeepSpeedConfig only, so what they did not see read there is not evidence
SECTION_SWITCH = "enabled"
_CHILDREN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def section_keys(reg: Registry, package: str, section: str) -> frozenset[str]:
    """The names of the config keys the view's release has directly under ``section``."""
    idx = _CHILDREN.get(reg)
    if idx is None:
        idx = {}
        for r in reg.records:
            if r["kind"] in ("config_key", "config_section") and "." in r["path"]:
                if r.get("status") not in ("absent", "removed"):
                    idx.setdefault((r["package"], _parent(r["path"])), set()).add(r["name"])
        _CHILDREN[reg] = idx
    return frozenset(idx.get((package, section), ()))


def handed_on(reg: Registry, section: Record | None) -> bool:
    """Does DeepSpeedConfig hand ``section`` on whole (``SECTION_SWITCH``): an unvalidated section whose only
    key the view's release records is its switch?"""
    if section is None or section.get("validated") or section["kind"] != "config_section":
        return False
    return section_keys(reg, section["package"], section["path"]) == {SECTION_SWITCH}


def refused_from(reg: Registry, rec: Record) -> str | None:
    """The release from which the package refuses ``rec`` as a removed feature (status "removed" without
    ``until``: DeepSpeed's removed-feature list, e.g. 0.19.8's `quantize_training`), when that is the first release
    the registry records it in: releases before it had the feature, so a view older than it has not "not yet got
    the name" (the samples' trace did not see it read, which proves nothing: 0.19.4 reads `quantize_training`
    only when compression_training's weight quantization is on, runtime/config.py:524-525). None otherwise."""
    hist = reg.history(rec["id"])
    first = hist[0] if hist else None
    return first["version"] if first and first.get("status") == "removed" and not first.get("until") else None


_SITE_READS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def site_reads(reg: Registry, package: str, name: str) -> list[Record]:
    """The raise / warn sites of ``package`` whose guarding condition reads a name spelled ``name``
    (indexer/registry_sites.py ``reads``): evidence that the code uses the name, not proof of a config read."""
    idx = _SITE_READS.get(reg)
    if idx is None:
        idx = {}
        for s in reg.sites:
            for chain in s.get("reads") or []:
                for n in chain if isinstance(chain, list) else [chain]:
                    idx.setdefault((s["package"], str(n)), []).append(s)
        _SITE_READS[reg] = idx
    return list({s["id"]: s for s in idx.get((package, name), [])}.values())


def cite(rec: Record) -> str:
    """``file:line`` of a record (its release's)."""
    return f"{rec['source_file']}:{rec['source_line']}" if rec.get("source_file") else rec["id"]


@dataclass(frozen=True)
class Successor:
    """What the view's release has in place of a name it lacks (``successor``)."""

    rec: Record  # the successor as the view shows it
    how: str  # "renamed": the registry records the rename (renamed_to); "new": a new key took the old one's
    # place; "changed": a neighbour took the old one's type and default (both inferred, see ``successor``)
    since: str  # the first release the successor stands in the old name's place


def _sig(r: Record) -> tuple[Any, Any]:
    d = r.get("default")
    try:
        d = json.loads(d) if isinstance(d, str) else d
    except ValueError:
        pass
    return r.get("type"), d


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


_SUCCESSORS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def successor(reg: Registry, rec: Record) -> Successor | None:
    """The name the view's release has in place of ``rec`` (a name only older releases have), or None.

    The registry's ``renamed_to`` when it records one (a rename a release states). Otherwise inferred from
    the records of the first recorded release R without the name, and only when exactly one sibling (same
    kind, same parent, same source file) qualifies: a key new in R with the old key's type and default, in
    the old key's place (the same neighbours by source line), e.g. DeepSpeed 0.16.9's
    ``aio.intra_op_parallelism`` for 0.14.4's ``aio.thread_count``; or the old key's neighbour whose type and
    default became the old key's in R, e.g. transformers 5.24.0's ``warmup_steps`` (a float, ratio below 1)
    for ``warmup_ratio``."""
    cache = _SUCCESSORS.setdefault(reg, {})
    if rec["id"] in cache:
        return cache[rec["id"]]
    cache[rec["id"]] = out = _successor(reg, rec)
    return out


def _live(reg: Registry, rid: str | None) -> Record | None:
    r = reg.get(rid) if rid else None
    return r if r is not None and r.get("status") not in ("absent", "removed") else None


def _successor(reg: Registry, rec: Record) -> Successor | None:
    target = _live(reg, rec.get("renamed_to"))
    if target is not None:
        return Successor(target, "renamed", target["releases"][0])
    pkg, rid = rec["package"], rec["id"]
    rels = reg.releases.get(pkg, [])
    hist = {h["version"]: h for h in reg.history(rid)}
    if not hist:
        return None
    last = max(hist, key=rels.index) if all(h in rels for h in hist) else rec["releases"][-1]
    later = rels[rels.index(last) + 1 :] if last in rels else []
    if not later:
        return None
    r_rel, old = later[0], hist[last]
    home = _parent(rec["path"])
    sibs = [
        s
        for s in reg.records
        if s["package"] == pkg and s["kind"] == rec["kind"] and s["id"] != rid and _parent(s["path"]) == home
    ]

    def at(rel: str) -> dict[str, Record]:
        got = {}
        for s in sibs:
            h = next((x for x in reg.history(s["id"]) if x["version"] == rel), None)
            if h is not None and h.get("source_file") == old.get("source_file"):
                got[s["id"]] = h
        return got

    def around(order: list[str], x: str) -> tuple[str | None, str | None]:
        i = order.index(x)
        return (order[i - 1] if i else None), (order[i + 1] if i + 1 < len(order) else None)

    then, now = at(last), at(r_rel)
    before = sorted([*then, rid], key=lambda i: (then[i] if i in then else old)["source_line"])
    after = sorted(now, key=lambda i: now[i]["source_line"])
    prev_, next_ = around(before, rid)
    found = []
    for sid, x in now.items():
        if _sig(x) != _sig(old):
            continue
        if sid not in then:
            if around(after, sid) == (prev_, next_):
                found.append((sid, "new"))
        elif _sig(then[sid]) != _sig(x) and sid in (prev_, next_):
            found.append((sid, "changed"))
    if len(found) != 1:
        return None
    live = _live(reg, found[0][0])
    return Successor(live, found[0][1], r_rel) if live is not None else None


# ---------------------------------------------------------------- "auto": who fills it, what plain DeepSpeed does

# accelerate's DeepSpeedPlugin hands the value of each of its settings that maps to a DeepSpeed key to
# fill_match (accelerate 1.15.0 utils/dataclasses.py:1291-1292 for its own fields, 1445-1446 for
# `mixed_precision` -> fp16.enabled / bf16.enabled), and fill_match replaces an "auto" with it (1363-1366):
# the registry's mapping records of that front end with fill "direct" are keys accelerate fills
FILL_MATCH_FRONT_ENDS = ("accelerate_plugin",)


def fillers(reg: Registry, path: str) -> dict[str, str | None]:
    """The packages that replace "auto" for DeepSpeed key ``path`` -> the setting of theirs they fill it from
    (None: a value they compute). From the registry's auto_fill records, then the mapping records of
    ``FILL_MATCH_FRONT_ENDS`` (the registry's auto_fill scan of accelerate reads accelerator.py only)."""
    out: dict[str, str | None] = {}
    for r in reg.auto_fill.get(path, []):
        out.setdefault(r["package"], None)
    for m in reg.mappings.get(path, []):
        if m.get("front_end") in FILL_MATCH_FRONT_ENDS and m.get("fill") == "direct" and m["package"] not in out:
            out[m["package"]] = m.get("front_name")
    return dict(sorted(out.items()))


# where plain DeepSpeed meets an "auto" (or any string) it hands to an optimizer / scheduler unconverted
# (kb/doctor/rules/types.py and the "auto" rule KB007 cite these; tests/test_lint_oracle_types.py checks the lines)
DS_SCHED = "deepspeed/runtime/lr_schedules.py"
# DeepSpeed's Adam / AdamW: with `torch_adam: true` it builds torch.optim.Adam / AdamW, whose constructor
# compares each number with 0.0 (torch 2.13 torch/optim/adam.py)
ADAM_TYPES = ("adam", "adamw")
ADAM_NUMBERS: dict[str, tuple[str, int]] = {
    "lr": ("torch/optim/adam.py", 58),
    "eps": ("torch/optim/adam.py", 60),
    "betas": ("torch/optim/adam.py", 62),
    "weight_decay": ("torch/optim/adam.py", 66),
}
# DeepSpeed's warmup schedulers: parameter -> (exception, file, line), per scheduler type
SCHED_NUMBERS: dict[str, dict[str, tuple[str, str, int]]] = {
    "WarmupLR": {
        "warmup_num_steps": ("ValueError", DS_SCHED, 734),  # not isinstance(warmup_num_steps, int)
        "warmup_min_lr": ("TypeError", DS_SCHED, 743),  # big - small
        "warmup_max_lr": ("TypeError", DS_SCHED, 743),
    },
    "WarmupDecayLR": {
        "warmup_num_steps": ("ValueError", DS_SCHED, 734),
        "warmup_min_lr": ("TypeError", DS_SCHED, 743),
        "warmup_max_lr": ("TypeError", DS_SCHED, 743),
        "total_num_steps": ("TypeError", DS_SCHED, 826),  # self.total_num_steps < self.warmup_num_steps
    },
    "WarmupCosineLR": {
        "warmup_num_steps": ("ValueError", DS_SCHED, 875),
        "total_num_steps": ("TypeError", DS_SCHED, 893),
    },
}
# accelerate fills the "auto" it has a value for and raises for every other "auto" leaf of the config
ACC_AUTO = ("accelerate/utils/dataclasses.py", 1368)


# ---------------------------------------------------------------- value checks (pydantic, as DeepSpeed does)


_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


def check_value(rec: Record, value: Any) -> tuple[str | None, Any]:
    """Validate like DeepSpeed's pydantic models (lax mode). Returns (error, coerced value)."""
    from pydantic import TypeAdapter, ValidationError

    t = rec.get("type") or ""
    optional = t.startswith("Optional[") or t.endswith("| None")
    base = t.removeprefix("Optional[").removesuffix("]").replace(" | None", "").strip()
    if value is None:
        return (None, None) if optional or rec.get("default") in ("null", None) else ("null is not allowed", None)
    if rec.get("choices"):
        choices = rec["choices"]
        cand = value
        if isinstance(value, str) and all(isinstance(c, int) for c in choices):
            try:
                cand = int(value)
            except ValueError:
                return f"must be one of {choices}", None
        if cand not in choices or isinstance(cand, bool):
            return f"must be one of {choices}", None
        return None, cand
    py = _TYPES.get(base)
    if py is None:
        return None, None
    try:
        coerced = TypeAdapter(py).validate_python(value)
    except ValidationError as e:
        return e.errors()[0]["msg"].lower(), None
    for k, bound in (rec.get("constraints") or {}).items():
        ok = {"gt": coerced > bound, "ge": coerced >= bound, "lt": coerced < bound, "le": coerced <= bound}[k]
        if not ok:
            return f"must be {'>' if k == 'gt' else '>=' if k == 'ge' else '<' if k == 'lt' else '<='} {bound}", None
    return None, coerced
