"""Extra registry records (provider for ``indexer.registry_hooks``): names the main builders leave out.

* ``env``: every environment variable the package's own Python sources read (``os.environ[...]``,
  ``os.environ.get/setdefault/pop``, ``"X" in os.environ``, ``os.getenv`` and the packages' env helpers
  such as accelerate's ``parse_flag_from_env``), with the first place it is read.
* ``cli_flag``: torchrun / ``python -m torch.distributed.run`` flags from torch's own argparse definition
  (``torch/distributed/run.py``), and the flags of the conversion scripts DeepSpeed ships (``zero_to_fp32.py``, which it also copies into every checkpoint
  folder, and ``ds_to_universal.py``).
* ``method``: what a ``PeftModel`` forwards to its tuner (``PeftModel.__getattr__`` falls back to
  ``self.base_model``, a ``LoraModel`` / ``BaseTuner``), e.g. ``merge_and_unload``.
* ``script``: ``ds_to_universal.py`` (``zero_to_fp32.py`` is recorded by registry_build already).
* ``class`` / ``kwarg``: DeepSpeed's LR schedulers (``WarmupLR`` ...) and their keywords, which are the
  keys of a ds_config ``"scheduler": {"params": {...}}`` (``warmup_num_steps``, ``warmup_max_lr``).

Everything is read from the installed package (AST or introspection); nothing is typed in. Every part
is defensive: a release that lacks a file or a class contributes nothing for that part, and a part
that fails says so on stderr without taking the others down.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from indexer.registry_build import (
    _argparse_records,
    _callable_records,
    _method_records,
    _pkg_root,
    env_record,
    script_record,
)

ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{2,}$")
# helper functions whose first argument names an environment variable (accelerate.utils.environment,
# transformers.utils); get_int_from_env takes a list of names
ENV_HELPERS = {
    "getenv",
    "parse_flag_from_env",
    "parse_choice_from_env",
    "get_int_from_env",
    "str_to_bool_from_env",
    "check_env_flag",
    "_get_env_var",
    "get_env_var",
}
ENV_METHODS = {"get", "setdefault", "pop", "__getitem__", "__contains__"}
SKIP_DIRS = {"test", "tests", "testing", "_vendor", "benchmarks", "examples"}

# (package, file under site-packages, command) of argparse-defined CLIs not recorded by registry_build
CLI_FILES: list[tuple[str, str, str]] = [
    ("torch", "torch/distributed/run.py", "torchrun"),
    ("deepspeed", "deepspeed/utils/zero_to_fp32.py", "zero_to_fp32.py"),
    ("deepspeed", "deepspeed/checkpoint/ds_to_universal.py", "ds_to_universal.py"),
]
SCRIPTS: list[tuple[str, str]] = [("deepspeed", "deepspeed/checkpoint/ds_to_universal.py")]
# DeepSpeed's LR schedulers: their __init__ keywords are the keys of ds_config "scheduler.params"
DS_SCHEDULERS = [
    "deepspeed.runtime.lr_schedules.WarmupLR",
    "deepspeed.runtime.lr_schedules.WarmupDecayLR",
    "deepspeed.runtime.lr_schedules.WarmupCosineLR",
    "deepspeed.runtime.lr_schedules.OneCycle",
    "deepspeed.runtime.lr_schedules.LRRangeTest",
]
# the tuner classes a PeftModel forwards unknown attributes to (PeftModel.__getattr__ -> base_model)
PEFT_TUNERS = ["peft.tuners.tuners_utils.BaseTuner", "peft.tuners.lora.LoraModel"]


def extra_records(pkg: str, version: str) -> list[dict]:
    parts: list[tuple[str, Callable[[], list[dict]]]] = [
        ("env", lambda: env_records(pkg, version)),
        ("cli", lambda: cli_records(pkg, version)),
        ("scripts", lambda: script_records(pkg, version)),
    ]
    if pkg == "peft":
        parts.append(("peft tuners", lambda: peft_forwarded_records(version)))
    if pkg == "deepspeed":
        parts.append(("lr schedulers", lambda: ds_scheduler_records(version)))
    out: list[dict] = []
    seen: set[str] = set()
    for label, part in parts:
        try:
            recs = part()
        except Exception as e:  # an older release may lack what a part reads
            print(f"registry_extra: {label} on {pkg} {version}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        for r in recs:
            if r["id"] not in seen:
                seen.add(r["id"])
                out.append(r)
    return out


# ---------------------------------------------------------------- environment variables


def _source_files(pkg: str) -> Iterable[Path]:
    root = _pkg_root(pkg) / pkg
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).parts
        if any(part in SKIP_DIRS for part in rel[:-1]) or rel[-1].startswith("test_"):
            continue
        yield p


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` / ``environ``, or a variable named for it (``environment``, ``self.environ``): the
    launchers fill such a copy of the environment for their workers (``environment['PDSH_RCMD_TYPE']``)."""
    return (isinstance(node, ast.Attribute) and "environ" in node.attr) or (
        isinstance(node, ast.Name) and "environ" in node.id
    )


def _env_names(node: ast.AST) -> list[str]:
    """The environment variable names one AST node reads, if it is an env read."""
    if isinstance(node, ast.Call):
        fn = node.func
        attr = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if not node.args:
            return []
        first = node.args[0]
        if isinstance(fn, ast.Attribute) and attr in ENV_METHODS and _is_environ(fn.value):
            pass
        elif attr in ENV_HELPERS:
            pass
        else:
            return []
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return [first.value]
        if isinstance(first, (ast.List, ast.Tuple)):  # get_int_from_env(["LOCAL_RANK", "MPI_..."], 0)
            return [e.value for e in first.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return []
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        sl = node.slice
        if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
            return [sl.value]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
        if _is_environ(node.comparators[0]) and isinstance(node.left, ast.Constant):
            return [node.left.value] if isinstance(node.left.value, str) else []
    return []


def env_records(pkg: str, version: str) -> list[dict]:
    """Every env var the package's Python sources read, at the first place read (files sorted by path)."""
    site = _pkg_root(pkg)
    out: dict[str, dict] = {}
    for path in _source_files(pkg):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "environ" not in text and "getenv" not in text and "_from_env" not in text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        hits: list[tuple[int, str]] = []
        for node in ast.walk(tree):
            for name in _env_names(node):
                if ENV_NAME.match(name):
                    hits.append((node.lineno, name))
        for line, name in sorted(hits):
            if name in out:
                continue
            out[name] = env_record(
                pkg,
                version,
                name,
                (path.relative_to(site).as_posix(), line),
                doc=f"environment variable {pkg} reads (or sets for its workers)",
            )
    return [out[k] for k in sorted(out)]


# ---------------------------------------------------------------- CLIs and scripts


def cli_records(pkg: str, version: str) -> list[dict]:
    out: list[dict] = []
    for owner, rel, command in CLI_FILES:
        if owner != pkg or not (_pkg_root(pkg) / rel).exists():
            continue
        out += _argparse_records(pkg, version, rel, command)
    return out


def script_records(pkg: str, version: str) -> list[dict]:
    out: list[dict] = []
    for owner, rel in SCRIPTS:
        path = _pkg_root(pkg) / rel
        if owner != pkg or not path.exists():
            continue
        out.append(script_record(pkg, version, rel, path.read_text(encoding="utf-8")))
    return out


# ---------------------------------------------------------------- peft: methods forwarded to the tuner


def _importable(dotted_names) -> list[tuple[str, type]]:
    """(dotted name, the object) for each name this release has: a release without one simply lacks it."""
    import importlib

    out = []
    for dotted in dotted_names:
        mod, _, name = dotted.rpartition(".")
        try:
            out.append((dotted, getattr(importlib.import_module(mod), name)))
        except (ImportError, AttributeError):
            continue
    return out


def peft_forwarded_records(version: str) -> list[dict]:

    import peft

    if "__getattr__" not in vars(peft.PeftModel):
        return []  # this release does not forward: nothing to record
    out: list[dict] = []
    for dotted, cls in _importable(PEFT_TUNERS):
        name = dotted.rpartition(".")[2]
        for r in _method_records("peft", version, name, cls):
            if r["kind"] == "method":
                r["doc"] = (r["doc"] or "") + " (reached on a PeftModel: PeftModel.__getattr__ forwards to base_model)"
                r["doc"] = r["doc"].strip()
            out.append(r)
    return out


# ---------------------------------------------------------------- deepspeed: LR scheduler parameters


def ds_scheduler_records(version: str) -> list[dict]:

    out: list[dict] = []
    for dotted, cls in _importable(DS_SCHEDULERS):
        out += _callable_records("deepspeed", version, dotted.removeprefix("deepspeed."), cls)
    return out
