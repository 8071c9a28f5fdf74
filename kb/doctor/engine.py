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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from kb.doctor.configs import ParsedConfig, _int, deepspeed_block, parse_config
from kb.memory.estimate import DEFAULT_GPU_MEM_GIB, registry_default
from kb.registry.store import Lookup, Record, Registry

SEVERITIES = ("error", "warning", "info")
# the parsed views a rule can read; a TrainingArguments file's `deepspeed:` mapping is a "deepspeed" view
VIEWS = ("deepspeed", "training_args", "accelerate", "launch")
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
# abbreviations.
RETIRED = {"KB021": "replaced by KB030-KB033 (launch lines parsed by the launchers' own argparse definitions)"}


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

    @property
    def config(self) -> str:
        """The case's config text (dicts are dumped only when a test or the docs ask: not at import)."""
        return self.raw if isinstance(self.raw, str) else json.dumps(self.raw, indent=2)

    def lint(self, registry: Registry) -> list[Finding]:
        """Every registered rule's findings for this case (``kb.doctor.lint`` registers them all)."""
        cfg = parse_config(self.config, f"<case {self.note}>")
        return run(cfg, registry, self.world_size, self.model_params, self.gpu_mem_gib)


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
    where: list[str]  # for a misplaced key: the config paths where it belongs
    value_check: tuple[str | None, Any] | None = None  # check_value() when DeepSpeed validates the value

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
        self._walk(self.data, "", out)
        return out

    def _walk(self, d: dict[str, Any], parent: str, out: list[KeyVisit]) -> None:
        reg = self.reg
        parent_rec = reg.get(f"deepspeed:{parent}") if parent else None
        strict = bool(parent_rec and parent_rec.get("forbids_unknown"))
        for key, value in d.items():
            key = str(key)
            path = f"{parent}.{key}" if parent else key
            if path.startswith(FREE_FORM):
                continue
            lk = reg.resolve(key, context=parent or None, package="deepspeed")
            if parent == "" and lk.status != "unknown" and lk.record and "." in lk.record["path"]:
                lk.status = "misplaced"
                lk.candidates = [lk.record]
            rec = lk.record if lk.status in ("exact", "alias", "deprecated", "removed") else None
            where = [c["path"] for c in lk.candidates if c["kind"] in ("config_key", "config_section")]
            v = KeyVisit(key, path, self.prefix + path, parent, strict, lk, value, d, rec, where)
            out.append(v)
            if rec is None or lk.status == "removed":
                continue
            if isinstance(value, dict) and rec["kind"] == "config_section":
                self._walk(value, rec["path"], out)
            elif value != "auto" and rec.get("validated"):
                v.value_check = check_value(rec, value)

    def near(self, path: str) -> tuple[str, str]:
        """Did-you-mean for an unknown key, in both languages."""
        near = self.reg.suggest(path, config_only=True, cutoff=62.0)
        if not near:
            return "delete it", "删掉它"
        names = [f"`{s}`" for s in near]
        return f"did you mean {', '.join(names)}?", f"是不是想写 {'、'.join(names)}？"


# ---------------------------------------------------------------- running the rules


def _views(cfg: ParsedConfig) -> list[tuple[str, dict[str, Any], str, bool]]:
    """(view, data, prefix, filled by the HF Trainer) for each part of the config rules read, in order."""
    if cfg.kind in ("accelerate", "launch"):
        return [(cfg.kind, cfg.data, "", False)]
    out = [("training_args", cfg.data, "", False)] if cfg.kind == "training_args" else []
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
    for view, data, prefix, hf in _views(cfg):
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
