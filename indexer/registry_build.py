"""Generate the parameter registry from the installed packages (``kb registry build``).

Nothing here is a hand-typed parameter list: every record comes from introspecting a package
(pydantic config models, dataclass fields, signatures, argparse calls, recorded config reads).
The lists below name *where to look* (which class, which module); the names, types, defaults,
aliases, deprecations and source lines all come from the package itself.

Output of :func:`build_registry`: ``<package>-<version>.jsonl`` (format 1: one record per line, sorted by
id) and a format-1 ``manifest.json`` in the folder given. Deterministic: the same packages give
byte-identical files. ``kb registry build`` runs it once per release (indexer/registry_releases.py) and
merges the releases into ``data/registry/<package>.jsonl`` (format 2, docs/registry.md). An older
release may lack a class, module, function or file named below: that part is skipped and named in
``SKIPPED`` (the manifest's ``skipped``), never a crash and never a silent gap.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import importlib.metadata as md
import inspect
import json
import logging
import os
import re
import sys
import typing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

REGISTRY_FORMAT = 1

# What the builder could not read in the release it is building (a class, module, function or file that
# release lacks): one line each, never a crash and never a silent gap. indexer/registry_releases.py
# stores it per release (manifest "skipped").
SKIPPED: list[str] = []


def _part(what: str, fn: Callable[..., list[dict]], *args: Any) -> list[dict]:
    """Run one part of a builder; a part the release lacks is recorded in SKIPPED and gives []."""
    try:
        return fn(*args)
    except (ImportError, AttributeError, OSError, StopIteration, KeyError, TypeError, SyntaxError) as e:
        SKIPPED.append(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": "))
        return []


def _skip(what: str, e: BaseException) -> None:
    SKIPPED.append(f"{what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": "))


# ---------------------------------------------------------------- helpers


def _pkg_root(pkg: str) -> Path:
    mod = importlib.import_module(pkg)
    return Path(mod.__file__).resolve().parent.parent  # site-packages


def _pkg_root_static(pkg: str) -> Path:
    """site-packages folder of ``pkg`` found without importing it (for the static fallback)."""
    import importlib.util

    spec = importlib.util.find_spec(pkg)
    if spec is None or spec.origin is None:
        raise ImportError(pkg)
    return Path(spec.origin).resolve().parent.parent


# Static fallback (a release that cannot be imported with this torch): the classes whose fields can be
# read from the source by AST, as registry path -> (file, class). Where to look, not what is in it.
STATIC_CLASSES: dict[str, dict[str, tuple[str, str]]] = {
    "transformers": {"TrainingArguments": ("transformers/training_args.py", "TrainingArguments")},
    "accelerate": {"DeepSpeedPlugin": ("accelerate/utils/dataclasses.py", "DeepSpeedPlugin")},
    "peft": {"LoraConfig": ("peft/tuners/lora/config.py", "LoraConfig")},
    "deepspeed": {
        "zero_optimization": ("deepspeed/runtime/zero/config.py", "DeepSpeedZeroConfig"),
        "bf16": ("deepspeed/runtime/precision_config.py", "DeepSpeedBF16Config"),
        "fp16": ("deepspeed/runtime/precision_config.py", "DeepSpeedFP16Config"),
    },
}


def _relfile(obj_or_path: Any, pkg: str) -> str:
    path = Path(obj_or_path if isinstance(obj_or_path, (str, Path)) else inspect.getsourcefile(obj_or_path))
    return path.resolve().relative_to(_pkg_root(pkg)).as_posix()


def _clean_type(ann: Any) -> str:
    if ann is inspect.Parameter.empty or ann is dataclasses.MISSING:
        return ""
    if isinstance(ann, str):
        s = ann
    elif isinstance(ann, type) and not typing.get_args(ann):
        s = ann.__name__
    else:
        s = str(ann)
    s = re.sub(
        r"\b(typing|pathlib|torch\.dtype|collections\.abc)\.",
        lambda m: "torch.dtype." if m.group(1) == "torch.dtype" else "",
        s,
    )
    s = re.sub(r"<class '([\w.]+)'>", lambda m: m.group(1).rsplit(".", 1)[-1], s)
    s = re.sub(
        r"\b[\w.]+\.(\w+)", lambda m: m.group(1) if "." in m.group(0) and m.group(0)[0].islower() else m.group(0), s
    )
    return s


def _default_repr(v: Any) -> str | None:
    if v is inspect.Parameter.empty or v is dataclasses.MISSING:
        return None
    if isinstance(v, enum.Enum):
        v = v.value
    if hasattr(v, "model_dump"):
        v = v.model_dump(mode="json")
    if isinstance(v, float) and v.is_integer() and abs(v) >= 1e4:
        return repr(int(v))
    if isinstance(v, (str, int, float, bool, type(None), list, dict, tuple)):
        try:
            s = json.dumps(v, sort_keys=True, default=str)
        except (TypeError, ValueError):
            s = repr(v)
    else:
        s = repr(v)
    s = re.sub(r" at 0x[0-9a-f]+", "", s)
    return s if len(s) <= 200 else s[:197] + "..."


def _short_doc(text: str | None) -> str | None:
    if not text:
        return None
    first = inspect.cleandoc(text).split("\n\n")[0].replace("\n", " ").strip()
    return first[:300] or None


def _record(**kw: Any) -> dict[str, Any]:
    base = {
        "aliases": [],
        "choices": None,  # allowed values (enum fields)
        "constraints": None,  # numeric bounds, e.g. {"gt": 0}
        "forbids_unknown": None,  # a section whose model rejects unknown keys (pydantic extra="forbid")
        "validated": False,  # the value is validated by a pydantic model (type and constraints enforced)
        "default": None,
        "deprecated": False,
        "doc": None,
        "noop": False,
        "replacement": None,
        "status": "active",
        "type": "",
    }
    base.update(kw)
    return base


def _named(
    pkg: str,
    version: str,
    kind: str,
    path: str,
    where: tuple[str, int],
    *,
    rid: str | None = None,
    name: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """The record of the name at ``path`` in ``pkg``, defined at ``where`` (file, line): its id is
    ``<pkg>:<path>`` (``<pkg>:<rid>`` when given) and its name the last dotted part of the path (unless given)."""
    return _record(
        id=f"{pkg}:{path if rid is None else rid}",
        package=pkg,
        version=version,
        kind=kind,
        name=path.rsplit(".", 1)[-1] if name is None else name,
        path=path,
        source_file=where[0],
        source_line=where[1],
        **kw,
    )


def _class_field_lines(cls: type) -> dict[str, int]:
    """Line numbers of annotated assignments in a class body (dataclass / pydantic fields)."""
    lines, start = inspect.getsourcelines(cls)
    tree = ast.parse(_dedent(lines))
    out: dict[str, int] = {}
    cls_node = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    for node in cls_node.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = start + node.lineno - 1
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, start + node.lineno - 1)
    return out


def _dedent(lines: list[str]) -> str:
    import textwrap

    return textwrap.dedent("".join(lines))


def _mro_field_line(cls: type, name: str, pkg: str) -> tuple[str, int] | None:
    for klass in cls.__mro__:
        if klass is object or name not in getattr(klass, "__annotations__", {}):
            continue
        try:
            lines = _class_field_lines(klass)
        except (OSError, TypeError, StopIteration):
            continue
        if name in lines:
            try:
                return _relfile(klass, pkg), lines[name]
            except ValueError:
                return None
    return None


def _obj_line(obj: Any, pkg: str) -> tuple[str, int] | None:
    try:
        target = inspect.unwrap(obj)
        if isinstance(target, property):
            target = target.fget
        _, line = inspect.getsourcelines(target)
        return _relfile(target, pkg), line
    except (OSError, TypeError, ValueError):
        return None


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        if inspect.ismodule(obj) and inspect.isroutine(getattr(obj, parts[-1], None)):
            obj = getattr(obj, parts[-1])  # a function shadowed by its own module's name
        return obj
    raise ImportError(dotted)


def _resolved(dotted_names: Iterable[str], prefix: str) -> Iterator[tuple[str, Any]]:
    """(the dotted name less ``prefix``, the object) for each name the release being built has; a name it
    lacks is recorded in SKIPPED."""
    for dotted in dotted_names:
        try:
            obj = _resolve(dotted)
        except (ImportError, AttributeError) as e:
            _skip(dotted, e)
            continue
        yield dotted.removeprefix(prefix), obj


# ---------------------------------------------------------------- DeepSpeed


DS_SECTION_MODELS = {
    # top-level section -> pydantic model DeepSpeed validates it with (where to look, not what is in it)
    "zero_optimization": "deepspeed.runtime.zero.config.DeepSpeedZeroConfig",
    "bf16": "deepspeed.runtime.precision_config.DeepSpeedBF16Config",
    "fp16": "deepspeed.runtime.precision_config.DeepSpeedFP16Config",
    "compile": "deepspeed.compile.config.CompileConfig",
    "comms_logger": "deepspeed.comm.config.CommsLoggerConfig",
    "tensorboard": "deepspeed.monitor.config.TensorBoardConfig",
    "wandb": "deepspeed.monitor.config.WandbConfig",
    "csv_monitor": "deepspeed.monitor.config.CSVConfig",
    "comet": "deepspeed.monitor.config.CometConfig",
    "hybrid_engine": "deepspeed.runtime.config.HybridEngineConfig",
    "tensor_parallel": "deepspeed.runtime.tensor_parallel.config.TPTrainingConfig",
}

DS_APIS = [
    "deepspeed.initialize",
    "deepspeed.init_distributed",
    "deepspeed.add_config_arguments",
    "deepspeed.zero.Init",
    "deepspeed.zero.GatheredParameters",
    "deepspeed.zero.register_external_parameter",
    "deepspeed.utils.set_z3_leaf_modules",
    "deepspeed.utils.set_z3_leaf_modules_by_name",
    "deepspeed.utils.set_z3_leaf_modules_by_suffix",
    "deepspeed.utils.unset_z3_leaf_modules",
    "deepspeed.utils.get_z3_leaf_modules",
    "deepspeed.utils.z3_leaf_module",
    "deepspeed.utils.safe_get_full_fp32_param",
    "deepspeed.utils.safe_get_full_grad",
    "deepspeed.runtime.utils.see_memory_usage",
    "deepspeed.ops.adam.DeepSpeedCPUAdam",
    "deepspeed.ops.adam.FusedAdam",
    "deepspeed.checkpointing.checkpoint",
    "deepspeed.checkpointing.configure",
    "deepspeed.utils.zero_to_fp32.get_fp32_state_dict_from_zero_checkpoint",
    "deepspeed.utils.zero_to_fp32.convert_zero_checkpoint_to_fp32_state_dict",
    "deepspeed.utils.zero_to_fp32.load_state_dict_from_zero_checkpoint",
    "deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs",
    "deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs_all_live",
    "deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs_all_cold",
    "deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs",
    "deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs_all_live",
    "deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs_all_cold",
]
DS_CLASSES_WITH_METHODS = ["deepspeed.DeepSpeedEngine"]
DS_CLI_FILES = {"deepspeed": "deepspeed/launcher/runner.py"}
DS_SCRIPT_FILES = ["deepspeed/utils/zero_to_fp32.py"]


class _Recorder(dict):
    """A dict that records every key DeepSpeed looks up, the default it passes, and where."""

    def __init__(self, data: dict, prefix: str, log: dict[str, dict[str, Any]]):
        super().__init__(data)
        self._prefix, self._log = prefix, log

    def _note(self, key: Any, default: Any = inspect.Parameter.empty) -> None:
        if not isinstance(key, str):
            return
        frame = sys._getframe(2)
        # skip DeepSpeed's generic getters (get_scalar_param & co.) to reach the reader of this key
        while frame.f_back is not None and frame.f_code.co_filename.endswith(("config_utils.py", __file__)):
            frame = frame.f_back
        path = f"{self._prefix}{key}"
        rec = self._log.setdefault(path, {"file": frame.f_code.co_filename, "line": frame.f_lineno})
        if default is not inspect.Parameter.empty and "default" not in rec:
            rec["default"] = default

    def _wrap(self, key: str, v: Any) -> Any:
        if isinstance(v, dict) and not isinstance(v, _Recorder):
            v = _Recorder(v, f"{self._prefix}{key}.", self._log)
            super().__setitem__(key, v)
        return v

    def get(self, key: Any, default: Any = None) -> Any:  # type: ignore[override]
        self._note(key, default)
        return self._wrap(key, super().get(key, default)) if key in self else default

    def __getitem__(self, key: Any) -> Any:
        self._note(key)
        return self._wrap(key, super().__getitem__(key))

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return super().__contains__(key)

    def keys(self):  # type: ignore[override]
        return _RecordingKeys(self)


class _RecordingKeys:
    """``cfg.keys()`` view whose membership tests are recorded too (``if KEY in cfg.keys()``)."""

    def __init__(self, rec: _Recorder):
        self._rec = rec

    def __contains__(self, key: object) -> bool:
        self._rec._note(key)
        return dict.__contains__(self._rec, key)

    def __iter__(self):
        return iter(dict.keys(self._rec))

    def __len__(self) -> int:
        return dict.__len__(self._rec)


def _ds_trace(config: dict) -> tuple[dict[str, dict[str, Any]], Exception | None]:
    from deepspeed.runtime.config import DeepSpeedConfig

    log: dict[str, dict[str, Any]] = {}
    try:
        DeepSpeedConfig(_Recorder(config, "", log))
        return log, None
    except Exception as e:  # noqa: BLE001 - we record what DeepSpeed raises
        return log, e


class _V1Field:
    """A pydantic-v1 ModelField seen through the v2 FieldInfo attributes _walk_model reads
    (DeepSpeed before 0.15 validated its config with pydantic.v1 models)."""

    def __init__(self, f: Any, cls: type):
        self._f = f
        self.alias = f.alias if f.alias != f.name else None
        self.json_schema_extra = dict(f.field_info.extra)
        # the annotation as written in the class body (`int`, where v1 reports ConstrainedIntValue)
        declared = next(
            (k.__annotations__[f.name] for k in cls.__mro__ if f.name in getattr(k, "__annotations__", {})), None
        )
        self.annotation = declared if declared is not None else f.outer_type_
        self.description = f.field_info.description
        info = f.field_info
        self.metadata = [type("Bound", (), {k: getattr(info, k, None) for k in ("gt", "ge", "lt", "le")})()]

    def get_default(self, call_default_factory: bool = True) -> Any:
        return self._f.get_default()


def _is_model(obj: Any) -> bool:
    """A pydantic model class, v2 or v1."""
    return (
        inspect.isclass(obj)
        and (hasattr(obj, "model_fields") or hasattr(obj, "__fields__"))
        and (hasattr(obj, "model_config") or hasattr(obj, "__config__"))
    )


def _model_fields(cls: type) -> dict[str, Any]:
    if hasattr(cls, "model_fields"):
        return cls.model_fields
    return {name: _V1Field(f, cls) for name, f in cls.__fields__.items()}


def _model_extra(cls: type) -> Any:
    if hasattr(cls, "model_config"):
        return cls.model_config.get("extra")
    extra = getattr(cls.__config__, "extra", None)
    return getattr(extra, "value", extra)


def _model_dump(m: Any) -> Any:
    return m.model_dump(mode="json") if hasattr(m, "model_dump") else json.loads(m.json())


def _walk_model(cls: type, prefix: str, pkg: str, version: str, out: list[dict]) -> None:
    for name, f in _model_fields(cls).items():
        key = f.alias or name
        path = f"{prefix}.{key}" if prefix else key
        extra = f.json_schema_extra if isinstance(f.json_schema_extra, dict) else {}
        try:
            default = f.get_default(call_default_factory=True)
        except Exception:  # noqa: BLE001
            default = None
        sub = _model_in(f.annotation)
        loc = _mro_field_line(cls, name, pkg)
        deprecated = bool(extra.get("deprecated"))
        out.append(
            _named(
                pkg,
                version,
                "config_section" if sub is not None else "config_key",
                path,
                loc or (_relfile(cls, pkg), inspect.getsourcelines(cls)[1]),
                name=key,
                type=_clean_type(f.annotation),
                default=_default_repr(default if not _is_model(type(default)) else _model_dump(default)),
                aliases=sorted({name} - {key}),
                deprecated=deprecated,
                replacement=extra.get("new_param") if deprecated else None,
                noop=deprecated and extra.get("set_new_param", True) is False,
                doc=_short_doc(f.description),
                choices=_enum_choices(f.annotation),
                constraints=_constraints(f.metadata),
                forbids_unknown=(_model_extra(sub) == "forbid") if sub is not None else None,
                validated=True,
            )
        )
        if sub is not None:
            _walk_model(sub, path, pkg, version, out)


def _enum_choices(ann: Any) -> list | None:
    """Allowed values of an Enum-typed field (DeepSpeed models use use_enum_values)."""
    for a in (ann, *typing.get_args(ann)):
        if inspect.isclass(a) and issubclass(a, enum.Enum):
            return sorted({m.value for m in a}, key=str)
    return None


def _constraints(metadata: list) -> dict | None:
    """Numeric bounds from pydantic field metadata (annotated_types Gt/Ge/Lt/Le)."""
    out = {}
    for m in metadata or []:
        for k in ("gt", "ge", "lt", "le"):
            v = getattr(m, k, None)
            if v is not None:
                out[k] = v
    return out or None


def _model_in(ann: Any) -> type | None:
    if _is_model(ann):
        return ann
    for a in typing.get_args(ann):
        if (m := _model_in(a)) is not None:
            return m
    return None


def _ds_config_records(version: str) -> list[dict]:
    import deepspeed  # noqa: F401  (registers the accelerator)

    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    pkg = "deepspeed"
    site = str(_pkg_root(pkg))
    out: list[dict] = []
    for section, dotted in DS_SECTION_MODELS.items():
        try:
            cls = _resolve(dotted)
        except (ImportError, AttributeError) as e:
            _skip(f"section {section} ({dotted})", e)
            continue
        loc = _obj_line(cls, pkg)
        out.append(
            _named(
                pkg,
                version,
                "config_section",
                section,
                loc,
                type=cls.__name__,
                doc=_short_doc(cls.__doc__),
                forbids_unknown=_model_extra(cls) == "forbid",
                validated=True,
            )
        )
        _walk_model(cls, section, pkg, version, out)
    modeled = {r["path"] for r in out}
    sections = {r["path"] for r in out if "." not in r["path"]}  # the section models this release has

    # Top-level keys and non-pydantic sections: record what DeepSpeedConfig reads.
    base = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
    log, _ = _ds_trace(base)
    top = sorted(k for k in log if "." not in k)
    removed: dict[str, str] = {}
    for key in top:
        # a section given as an (empty) dict makes DeepSpeed read its sub-keys; given as enabled, the
        # keys that switch gates (older releases read fp16's loss-scale keys only with fp16 enabled)
        for probe in ({}, {"enabled": True}):
            sub_log, err = _ds_trace({**base, key: probe})
            if not probe and err is not None and "removed" in str(err).lower():
                removed[key] = str(err).splitlines()[0]
            for path, rec in sub_log.items():
                if path.startswith(key + ".") and path.count(".") == 1:
                    log.setdefault(path, rec)
    for path in sorted(log):
        rec = log[path]
        root = path.split(".")[0]
        if path in modeled or (root in sections and path != root):
            continue
        fname = rec["file"]
        if not fname.startswith(site):
            continue  # read by the recorder itself or by another package
        children = any(p.startswith(path + ".") for p in log)
        default = rec.get("default", inspect.Parameter.empty)
        out.append(
            _named(
                pkg,
                version,
                "config_section" if children else "config_key",
                path,
                (Path(fname).resolve().relative_to(Path(site).resolve()).as_posix(), rec["line"]),
                type=type(default).__name__
                if default not in (None, inspect.Parameter.empty) and not isinstance(default, dict)
                else "",
                default=_default_repr(default) if not isinstance(default, dict) else None,
                status="removed" if path in removed else "active",
                doc=removed.get(path),
            )
        )
    # keys read only under a condition the trace cannot reach (e.g. with torch.distributed up)
    # are found from constants that the top-level reader uses
    return out


def _ds_api_records(version: str) -> list[dict]:
    pkg = "deepspeed"
    out = []
    for path, obj in _resolved(DS_APIS, "deepspeed."):
        out.extend(_callable_records(pkg, version, path, obj))
    for path, cls in _resolved(DS_CLASSES_WITH_METHODS, "deepspeed."):
        out.extend(_method_records(pkg, version, path, cls))
    return out


def _callable_records(pkg: str, version: str, path: str, obj: Any, with_kwargs: bool = True) -> list[dict]:
    loc = _obj_line(obj, pkg)
    if loc is None:
        return []
    kind = "class" if inspect.isclass(obj) else "function"
    out = [_named(pkg, version, kind, path, loc, type=kind, doc=_short_doc(obj.__doc__))]
    if with_kwargs:
        out.extend(_signature_kwargs(pkg, version, path, obj.__init__ if inspect.isclass(obj) else obj, loc))
    return out


def _method_records(pkg: str, version: str, path: str, cls: type, with_kwargs: bool = True) -> list[dict]:
    out = []
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, (classmethod, staticmethod))):
            continue
        func = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        loc = _obj_line(func, pkg)
        if loc is None or not loc[0].startswith(f"{pkg}/"):
            continue  # not defined by this package (another one patched it in): not its API
        out.append(
            _named(
                pkg,
                version,
                "method",
                f"{path}.{name}",
                loc,
                name=name,
                type="method",
                doc=_short_doc(func.__doc__),
                **_deprecation_in_body(func, name),
            )
        )
        if with_kwargs:
            out.extend(_signature_kwargs(pkg, version, f"{path}.{name}", func, loc))
    return out


def _deprecation_in_body(func: Any, name: str) -> dict[str, Any]:
    """A method that warns "`name` is deprecated ... Use `other`" about itself is a deprecated alias."""
    try:
        src = inspect.getsource(func)
    except (OSError, TypeError):
        return {}
    m = re.search(rf"warn\w*\(\s*f?[\"']`{re.escape(name)}` is deprecated", src)
    if not m:
        return {}
    use = re.search(r"[Uu]se[\s\"'f]+`(\w+)`", src[m.start() : m.start() + 400])
    return {"deprecated": True, "replacement": use.group(1) if use else None}


def _signature_kwargs(pkg: str, version: str, path: str, func: Any, loc: tuple[str, int]) -> list[dict]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    out = []
    for p in sig.parameters.values():
        if p.name in ("self", "cls") or p.name.startswith("_") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        out.append(
            _named(
                pkg,
                version,
                "kwarg",
                f"{path}.{p.name}",
                loc,
                name=p.name,
                type=_clean_type(p.annotation),
                default=_default_repr(p.default),
            )
        )
    return out


def _annotation(cls: type, name: str, fallback: Any) -> Any:
    """A dataclass field's annotation as the class wrote it. ``Field.type`` is not used first: transformers'
    HfArgumentParser rewrites it in place (``Union[str, Path, ...]`` becomes ``Path``) once it has parsed
    that dataclass, so it would depend on what ran before in the process."""
    for c in cls.__mro__:
        ann = vars(c).get("__annotations__", {})
        if name in ann:
            return ann[name]
    return fallback


def class_record(pkg: str, version: str, path: str, doc: str | None, source_file, source_line) -> dict:
    """The record of a class (a config dataclass, an API class) at ``path`` in ``pkg``."""
    return _named(pkg, version, "class", path, (source_file, source_line), type="class", doc=_short_doc(doc))


def env_record(pkg: str, version: str, name: str, where: tuple[str, int], **kw: Any) -> dict:
    """The record of environment variable ``name`` that ``pkg`` reads at ``where`` (file, line)."""
    return _named(pkg, version, "env", name, where, rid=f"env/{name}", name=name, **kw)


def script_record(pkg: str, version: str, rel: str, text: str) -> dict:
    """The record of script ``rel`` of ``pkg`` (its source ``text``): its docstring is its doc."""
    doc = _short_doc(ast.get_docstring(ast.parse(text)))
    return _named(pkg, version, "script", rel, (rel, 1), name=rel.rsplit("/", 1)[-1], doc=doc)


def _dataclass_records(pkg: str, version: str, path: str, cls: type, kind: str = "field") -> list[dict]:
    loc = _obj_line(cls, pkg)
    out = [class_record(pkg, version, path, cls.__doc__, loc[0], loc[1])]
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING  # type: ignore[misc]
            )
        )
        floc = _mro_field_line(cls, f.name, pkg) or loc
        help_text = f.metadata.get("help") if f.metadata else None
        deprecated = bool(help_text and re.search(r"\bdeprecated\b", help_text, re.I))
        out.append(
            _named(
                pkg,
                version,
                kind,
                f"{path}.{f.name}",
                floc,
                name=f.name,
                type=_clean_type(_annotation(cls, f.name, f.type)),
                default=_default_repr(default),
                deprecated=deprecated,
                doc=_short_doc(help_text),
            )
        )
    return out


# where a CLI builds its argparse parser: a function that returns it, or one that builds and parses it
# (then the parser is caught as it starts to parse). Where to look, not what is in it.
ARGPARSE_FACTORIES = {
    "deepspeed/launcher/runner.py": "deepspeed.launcher.runner.parse_args",
    "accelerate/commands/launch.py": "accelerate.commands.launch.launch_command_parser",
    "torch/distributed/run.py": "torch.distributed.run.get_args_parser",
    "torch/distributed/launch.py": "torch.distributed.launch.get_args_parser",
}
# argparse actions that take no value (nargs=0), by the name add_argument(action=...) gives them
_NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}


class _Caught(Exception):
    def __init__(self, parser: Any):
        self.parser = parser


def _real_parser(relfile: str) -> tuple[Any, tuple[str, int] | None] | None:
    """The CLI's own ArgumentParser object (and where its factory is), or None when it cannot be built."""
    import argparse
    from unittest import mock

    dotted = ARGPARSE_FACTORIES.get(relfile)
    if dotted is None:
        return None
    factory = _resolve(dotted)

    def catch(self, *a, **k):
        raise _Caught(self)

    with (
        mock.patch.object(argparse.ArgumentParser, "parse_args", catch),
        mock.patch.object(argparse.ArgumentParser, "parse_known_args", catch),
    ):
        try:
            parser = factory()
        except _Caught as c:
            parser = c.parser
    if not isinstance(parser, argparse.ArgumentParser):
        return None
    return parser, _obj_line(factory, dotted.split(".", 1)[0])


def _argparse_ast(tree: ast.AST) -> tuple[dict[str, tuple[int, dict[str, Any]]], bool]:
    """From the source: option string -> (line, add_argument keywords as AST), and the parser's allow_abbrev."""
    calls: dict[str, tuple[int, dict[str, Any]]] = {}
    allow_abbrev = True
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))):
            continue
        fname = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if fname.endswith("ArgumentParser") or fname == "add_parser":
            ab = kw.get("allow_abbrev")
            if isinstance(ab, ast.Constant) and ab.value is False:
                allow_abbrev = False
        if fname != "add_argument":
            continue
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                calls.setdefault(a.value, (node.lineno, kw))
    return calls, allow_abbrev


def _custom_action_nargs(tree: ast.AST, root: Path) -> dict[str, Any]:
    """Action classes the CLI file imports from its package: class name -> the nargs its __init__ passes
    (torch's ``check_env`` passes ``nargs=0``: a flag without a value)."""
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        src = root / (node.module.replace(".", "/") + ".py")
        if not src.exists():
            continue
        names = {a.asname or a.name: a.name for a in node.names}
        for cls in ast.parse(src.read_text(encoding="utf-8")).body:
            if isinstance(cls, ast.ClassDef) and cls.name in names.values():
                for k in ast.walk(cls):
                    if isinstance(k, ast.keyword) and k.arg == "nargs" and isinstance(k.value, ast.Constant):
                        out.update({alias: k.value.value for alias, real in names.items() if real == cls.name})
                        break
    return out


def _imported_add_arguments(tree: ast.AST, root: Path, pkg: str) -> dict[str, tuple[str, int]]:
    """option string -> (file, line) of its add_argument call in the package modules the CLI file imports
    (torch.distributed.launch builds on torch.distributed.run's parser)."""
    out: dict[str, tuple[str, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith(pkg):
            rel = node.module.replace(".", "/") + ".py"
            if (root / rel).exists():
                calls, _ = _argparse_ast(ast.parse((root / rel).read_text(encoding="utf-8")))
                for opt, (line, _kw) in calls.items():
                    out.setdefault(opt, (rel, line))
    return out


def _ast_nargs(kw: dict[str, Any], custom: dict[str, Any] | None = None) -> Any:
    action, nargs = kw.get("action"), kw.get("nargs")
    if isinstance(action, ast.Constant) and action.value in _NO_VALUE_ACTIONS:
        return 0
    if isinstance(action, ast.Name) and custom and action.id in custom and nargs is None:
        return custom[action.id]
    if isinstance(nargs, ast.Constant):
        return nargs.value
    if nargs is not None and ast.unparse(nargs).rsplit(".", 1)[-1] in ("REMAINDER", "PARSER", "ZERO_OR_MORE"):
        return {"REMAINDER": "...", "PARSER": "A...", "ZERO_OR_MORE": "*"}[ast.unparse(nargs).rsplit(".", 1)[-1]]
    return None


def _argparse_records(pkg: str, version: str, relfile: str, command: str) -> list[dict]:
    """Flags of a CLI, one record per argparse argument: every option string of it (the first long one is
    the name, the others its aliases, e.g. accelerate's generated ``--num-processes``), ``nargs``, ``type``,
    ``default``, ``choices`` and the parser's ``allow_abbrev`` (argparse then takes any unique prefix of a
    long option). Read from the CLI's real parser object when it can be built (ARGPARSE_FACTORIES, in the
    release being built); otherwise from its ``add_argument(...)`` calls in the source."""
    path = _pkg_root(pkg) / relfile
    tree = ast.parse(path.read_text(encoding="utf-8"))
    calls, src_abbrev = _argparse_ast(tree)
    real = None
    if ARGPARSE_FACTORIES.get(relfile):
        try:
            real = _real_parser(relfile)
        except Exception as e:  # noqa: BLE001 - a release whose parser cannot be built: read its source
            _skip(f"cli {command}: parser object ({ARGPARSE_FACTORIES[relfile]}), read from source instead", e)
    rows: list[tuple[list[str], dict[str, Any]]] = []  # (option strings, fields)
    if real is not None:
        import argparse

        parser, floc = real
        more = _imported_add_arguments(tree, _pkg_root(pkg), pkg)
        for act in parser._actions:
            opts = list(act.option_strings)
            if not opts:
                continue  # positionals (the training script and its arguments)
            default = None if act.default is argparse.SUPPRESS else _default_repr(act.default)
            here = next((calls[o][0] for o in opts if o in calls), None)
            elsewhere = None if here else next((o for o in opts if o in more), None)  # added by an imported module
            line = here or (more[elsewhere][1] if elsewhere else floc[1] if floc else 1)
            rows.append(
                (
                    opts,
                    {
                        "nargs": act.nargs,
                        "type": getattr(act.type, "__name__", "") if act.type is not None else "",
                        "default": default,
                        "choices": list(act.choices) if act.choices is not None else None,
                        "allow_abbrev": parser.allow_abbrev,
                        "doc": _short_doc(act.help) if isinstance(act.help, str) else None,
                        "source_line": line,
                        "source_file": more[elsewhere][0] if elsewhere else relfile,
                    },
                )
            )
    else:
        custom = _custom_action_nargs(tree, _pkg_root(pkg))
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
            ):
                continue
            opts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not any(o.startswith("-") for o in opts):
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            default, help_node, typ, choices = kw.get("default"), kw.get("help"), kw.get("type"), kw.get("choices")
            try:
                choice_list = list(ast.literal_eval(choices)) if choices is not None else None
            except (ValueError, TypeError, SyntaxError):
                choice_list = None  # computed in code: not readable without running it
            rows.append(
                (
                    opts,
                    {
                        "nargs": _ast_nargs(kw, custom),
                        "type": ast.unparse(typ).rsplit(".", 1)[-1] if typ is not None else "",
                        "default": _default_repr(default.value) if isinstance(default, ast.Constant) else None,
                        "choices": choice_list,
                        "allow_abbrev": src_abbrev,
                        "doc": _short_doc(help_node.value)
                        if isinstance(help_node, ast.Constant) and isinstance(help_node.value, str)
                        else None,
                        "source_line": node.lineno,
                        "source_file": relfile,
                    },
                )
            )
    out: dict[str, dict] = {}
    for opts, fields in rows:
        long = [o for o in opts if o.startswith("--")]
        if not long:
            continue
        flag = long[0]
        out.setdefault(
            flag,
            _record(
                id=f"{pkg}:cli/{command}/{flag}",
                package=pkg,
                version=version,
                kind="cli_flag",
                name=flag,
                path=f"{command} {flag}",
                aliases=sorted(set(opts) - {flag}),
                **fields,
            ),
        )
    return list(out.values())


ENV_CALLS = {"get", "getenv", "parse_flag_from_env", "str_to_bool", "get_int_from_env", "parse_choice_from_env"}


def _ds_misc_records(version: str) -> list[dict]:
    pkg = "deepspeed"
    root = _pkg_root(pkg)
    out: list[dict] = []
    # console scripts installed with the wheel
    dist = md.distribution(pkg)
    for f in sorted(dist.files or [], key=str):
        s = str(f)
        if re.match(r"(\.\./)+bin/[^/]+$", s):  # ../../../bin/ in a venv, ../../bin/ under pip --target
            name = s.rsplit("/", 1)[-1]
            out.append(
                _named(
                    pkg,
                    version,
                    "script",
                    name,
                    (f"bin/{name}", 1),
                    rid=f"bin/{name}",
                    name=name,
                    doc="command installed with the deepspeed wheel",
                )
            )
    for rel in DS_SCRIPT_FILES:
        if not (root / rel).exists():
            SKIPPED.append(f"script {rel} (not in this release)")
        if (root / rel).exists():
            out.append(script_record(pkg, version, rel, (root / rel).read_text()))
    # op build switches: every op builder declares BUILD_VAR = "DS_BUILD_<OP>"
    if not (root / "deepspeed/ops/op_builder").is_dir():
        SKIPPED.append("env: deepspeed/ops/op_builder (not in this release)")
    for path in sorted((root / "deepspeed/ops/op_builder").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "BUILD_VAR" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and f"{pkg}:env/{node.value.value}" not in {r["id"] for r in out}
            ):
                out.append(
                    env_record(
                        pkg,
                        version,
                        node.value.value,
                        (path.relative_to(root).as_posix(), node.lineno),
                        doc="build switch for a DeepSpeed op (set to 1 before pip install to prebuild it)",
                    )
                )
    for command, rel in DS_CLI_FILES.items():
        out.extend(_part(f"cli {command} ({rel})", _argparse_records, pkg, version, rel, command))
    return out  # environment variables: indexer/registry_extra.py scans every source file of the package


def build_deepspeed() -> list[dict]:
    version = md.version("deepspeed")
    return (
        _ds_config_records(version)
        + _part("deepspeed APIs", _ds_api_records, version)
        + _part("deepspeed scripts, env, cli", _ds_misc_records, version)
    )


# ---------------------------------------------------------------- transformers / accelerate / peft / torch


def _popped_kwargs(pkg: str, version: str, path: str, func: Callable) -> list[dict]:
    """kwargs a function reads with ``kwargs.pop("name", default)`` / ``kwargs.get(...)``."""
    func = inspect.unwrap(func.__func__ if hasattr(func, "__func__") else func)
    lines, start = inspect.getsourcelines(func)
    tree = ast.parse(_dedent(lines))
    rel = _relfile(func, pkg)
    out: dict[str, dict] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("pop", "get")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "kwargs"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            name = node.args[0].value
            default = node.args[1] if len(node.args) > 1 else None
            out.setdefault(
                name,
                _named(
                    pkg,
                    version,
                    "kwarg",
                    f"{path}.{name}",
                    (rel, start + node.lineno - 1),
                    name=name,
                    default=_default_repr(default.value) if isinstance(default, ast.Constant) else None,
                ),
            )
        # `for name in ["a", "b"]: kwargs.pop(name, None)`: accepted and thrown away
        if (
            isinstance(node, ast.For)
            and isinstance(node.iter, (ast.List, ast.Tuple))
            and isinstance(node.target, ast.Name)
            and "kwargs.pop(" + node.target.id in ast.unparse(node)
        ):
            for elt in node.iter.elts:
                if isinstance(elt, ast.Constant) and isinstance(elt.value, str) and not elt.value.startswith("_"):
                    out[elt.value] = _named(
                        pkg,
                        version,
                        "kwarg",
                        f"{path}.{elt.value}",
                        (rel, start + node.lineno - 1),
                        name=elt.value,
                        deprecated=True,
                        noop=True,
                        doc="accepted and discarded: popped from kwargs without being used",
                    )
    return list(out.values())


def _deprecated_kwargs(records: list[dict], func: Callable) -> None:
    """Mark kwargs the function warns about as deprecated ("`x` is deprecated! Use `y` instead")."""
    src = inspect.getsource(inspect.unwrap(func.__func__ if hasattr(func, "__func__") else func))
    for m in re.finditer(r"`(\w+)` is deprecated!? [Uu]se `(\w+)`", src):
        for r in records:
            if r["name"] == m.group(1):
                r.update(deprecated=True, replacement=m.group(2))


TRANSFORMERS_FUNCS = [
    "transformers.GenerationMixin.generate",
    "transformers.Seq2SeqTrainer",
    "transformers.DataCollatorWithPadding",
    "transformers.DataCollatorForSeq2Seq",
    "transformers.integrations.HfDeepSpeedConfig",
    "transformers.integrations.is_deepspeed_zero3_enabled",
    "transformers.integrations.deepspeed.deepspeed_load_checkpoint",
    "transformers.BitsAndBytesConfig",
    "transformers.AutoModelForCausalLM.from_config",
]


def build_transformers() -> list[dict]:
    import transformers
    from transformers import PreTrainedModel, Trainer, TrainingArguments

    # 5.x names the config base class PreTrainedConfig; 4.x spells it PretrainedConfig. Records use the
    # spelling of the release being built (the class's own __name__).
    PreTrainedConfig = getattr(transformers, "PreTrainedConfig", None) or transformers.PretrainedConfig
    cfg_path = PreTrainedConfig.__name__

    pkg, version = "transformers", md.version("transformers")
    out = _dataclass_records(pkg, version, "TrainingArguments", TrainingArguments)
    # Seq2SeqTrainingArguments (HF seq2seq scripts, LLaMA-Factory): only the fields it adds of its own
    from transformers import Seq2SeqTrainingArguments

    ta_fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    s2s = _dataclass_records(pkg, version, "Seq2SeqTrainingArguments", Seq2SeqTrainingArguments)
    out += [s2s[0]] + [r for r in s2s[1:] if r["name"] not in ta_fields]
    out += _method_records(pkg, version, "PreTrainedModel", PreTrainedModel)
    fp = PreTrainedModel.from_pretrained
    kw = _callable_records(pkg, version, "PreTrainedModel.from_pretrained", fp)[1:] + _popped_kwargs(
        pkg, version, "PreTrainedModel.from_pretrained", fp
    )
    _deprecated_kwargs(kw, fp)
    out += kw
    out += _method_records(pkg, version, "Trainer", Trainer)
    out += _callable_records(pkg, version, cfg_path, PreTrainedConfig)
    for cfg_name in ("LlamaConfig", "MixtralConfig", "Qwen2Config"):
        cfg_cls = getattr(transformers, cfg_name, None)
        if cfg_cls is not None and dataclasses.is_dataclass(cfg_cls):
            out += _dataclass_records(pkg, version, cfg_name, cfg_cls)
    # attributes a model config carries by default (e.g. tie_word_embeddings)
    cfg_loc = _obj_line(PreTrainedConfig, pkg)
    for name in sorted(getattr(PreTrainedConfig, "__annotations__", {})):
        if name.startswith("_") or any(r["id"] == f"{pkg}:{cfg_path}.{name}" for r in out):
            continue
        loc = _mro_field_line(PreTrainedConfig, name, pkg) or cfg_loc
        out.append(
            _named(
                pkg,
                version,
                "field",
                f"{cfg_path}.{name}",
                loc,
                name=name,
                type=_clean_type(PreTrainedConfig.__annotations__[name]),
                default=_default_repr(getattr(PreTrainedConfig, name, inspect.Parameter.empty)),
            )
        )
    out += _part(
        "auto fill (transformers/integrations/deepspeed.py)",
        _auto_fill_records,
        pkg,
        version,
        "transformers/integrations/deepspeed.py",
        ("fill_match", "fill_only"),
        None,
    )
    for path, obj in _resolved(TRANSFORMERS_FUNCS, "transformers."):
        out += _callable_records(pkg, version, path, obj)
    del transformers
    return out


def _auto_fill_records(
    pkg: str, version: str, relfile: str, calls: tuple[str, ...], dict_var: str | None
) -> list[dict]:
    """DeepSpeed config keys whose "auto" value this integration fills, from its source:
    ``fill_match("key", ...)`` / ``fill_only("key", ...)`` calls, or keys put into ``dict_var``."""
    tree = ast.parse((_pkg_root(pkg) / relfile).read_text(encoding="utf-8"))
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        keys: list[ast.AST] = []
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in calls
            and node.args
        ):
            keys = [node.args[0]]
        elif dict_var and isinstance(node, ast.Assign) and any(ast.unparse(t) == dict_var for t in node.targets):
            keys = list(node.value.keys) if isinstance(node.value, ast.Dict) else []
        elif dict_var and isinstance(node, ast.Subscript) and ast.unparse(node.value) == dict_var:
            keys = [node.slice]
        elif (
            dict_var
            and isinstance(node, ast.Call)
            and ast.unparse(node.func) == f"{dict_var}.update"
            and node.args
            and isinstance(node.args[0], ast.Dict)
        ):
            keys = list(node.args[0].keys)
        for k in keys:
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                found.setdefault(k.value, node.lineno)
    return [
        _named(
            pkg,
            version,
            "auto_fill",
            key,
            (relfile, line),
            rid=f"ds_auto/{key}",
            doc=f'{pkg} replaces "auto" for this DeepSpeed key',
        )
        for key, line in sorted(found.items())
    ]


def build_accelerate() -> list[dict]:
    from accelerate import Accelerator
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DeepSpeedPlugin

    pkg, version = "accelerate", md.version("accelerate")
    root = _pkg_root(pkg)
    out = _dataclass_records(pkg, version, "DeepSpeedPlugin", DeepSpeedPlugin)
    out += _method_records(pkg, version, "Accelerator", Accelerator)
    out += _dataclass_records(pkg, version, "yaml", ClusterConfig, kind="yaml_key")[1:]
    out += _part("yaml deepspeed_config keys", _accelerate_ds_yaml_keys, pkg, version, root)
    out += _part(
        "cli accelerate launch", _argparse_records, pkg, version, "accelerate/commands/launch.py", "accelerate launch"
    )
    out += _part(
        "auto fill (accelerate/accelerator.py)",
        _auto_fill_records,
        pkg,
        version,
        "accelerate/accelerator.py",
        (),
        "config_kwargs",
    )
    return out  # environment variables: indexer/registry_extra.py scans every source file of the package


def _accelerate_ds_yaml_keys(pkg: str, version: str, root: Path) -> list[dict]:
    """Keys of the `deepspeed_config:` block of the config YAML, as `accelerate config` writes them."""
    out: list[dict] = []
    rel = "accelerate/commands/config/cluster.py"
    seen: set[str] = set()
    for node in ast.walk(ast.parse((root / rel).read_text())):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "deepspeed_config"
            and isinstance(node.slice, ast.Constant)
            and node.slice.value not in seen
        ):
            seen.add(node.slice.value)
            path = f"deepspeed_config.{node.slice.value}"
            out.append(
                _named(pkg, version, "yaml_key", path, (rel, node.lineno), rid=f"yaml/{path}", name=node.slice.value)
            )
    return out


def build_peft() -> list[dict]:
    import peft

    pkg, version = "peft", md.version("peft")
    out = _dataclass_records(pkg, version, "LoraConfig", peft.LoraConfig)
    funcs = (
        "peft.get_peft_model",
        "peft.prepare_model_for_kbit_training",
        "peft.PeftModel.from_pretrained",
        "peft.get_peft_model_state_dict",
        "peft.set_peft_model_state_dict",
    )
    for path, obj in _resolved(funcs, "peft."):
        out += _callable_records(pkg, version, path, obj)
    out += _method_records(pkg, version, "PeftModel", peft.PeftModel)
    return out


TORCH_FUNCS = [
    "torch.cuda.memory_summary",
    "torch.cuda.memory_allocated",
    "torch.cuda.max_memory_allocated",
    "torch.cuda.max_memory_reserved",
    "torch.cuda.reset_peak_memory_stats",
    "torch.cuda.empty_cache",
    "torch.cuda.set_per_process_memory_fraction",
    "torch.cuda.is_bf16_supported",
    "torch.cuda.get_device_capability",
    "torch.cuda.memory._record_memory_history",
    "torch.cuda.memory._dump_snapshot",
    "torch.utils.checkpoint.checkpoint",
    "torch.distributed.init_process_group",
    "torch.distributed.barrier",
    "torch.distributed.destroy_process_group",
    # the data-loading API users configure (num_workers, pin_memory, persistent_workers, prefetch_factor, ...)
    "torch.utils.data.DataLoader",
    "torch.utils.data.distributed.DistributedSampler",
]
TORCH_ENV = [
    "PYTORCH_CUDA_ALLOC_CONF",
    "CUDA_VISIBLE_DEVICES",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
]


def build_torch() -> list[dict]:
    pkg, version = "torch", _public(md.version("torch"))
    out: list[dict] = []
    for path, obj in _resolved(TORCH_FUNCS, "torch."):
        out += _callable_records(pkg, version, path, obj)
    import torch

    out += _method_records(pkg, version, "nn.Module", torch.nn.Module, with_kwargs=False)
    root = _pkg_root(pkg)
    # where torch itself names each environment variable (first non-test file, sorted by path)
    files = sorted(p for p in (root / "torch").rglob("*.py") if "testing" not in p.parts and "test" not in p.name)
    wanted = set(TORCH_ENV)
    for path in files:
        if not wanted:
            break
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for name in sorted(wanted):
            m = re.search(rf'["\']{name}["\']', text)
            if m:
                wanted.discard(name)
                out.append(
                    env_record(
                        pkg, version, name, (path.relative_to(root).as_posix(), text.count("\n", 0, m.start()) + 1)
                    )
                )
    return out


BUILDERS: dict[str, Callable[[], list[dict]]] = {
    "deepspeed": build_deepspeed,
    "transformers": build_transformers,
    "accelerate": build_accelerate,
    "peft": build_peft,
    "torch": build_torch,
}


def build_registry(
    out_dir: Path, packages: Iterable[str] | None = None, progress: Callable[[str], None] | None = None
) -> dict:
    """Introspect each package and write its records; returns the manifest."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    manifest = (
        json.loads(manifest_path.read_text()) if manifest_path.exists() else {"format": REGISTRY_FORMAT, "files": {}}
    )
    for pkg in packages or BUILDERS:
        if progress:
            progress(pkg)
        records = BUILDERS[pkg]() + _hook_records(pkg)
        by_id: dict[str, dict] = {}
        for r in records:
            by_id.setdefault(r["id"], r)
        version = _public(md.version(pkg))
        fname = f"{pkg}-{version}.jsonl"
        text = "".join(json.dumps(by_id[k], sort_keys=True, ensure_ascii=False) + "\n" for k in sorted(by_id))
        _atomic_write(out_dir / fname, text)
        manifest["files"][fname] = {"package": pkg, "version": version, "records": len(by_id)}
    manifest["files"] = dict(sorted(manifest["files"].items()))
    _atomic_write(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _hook_records(pkg: str) -> list[dict]:
    """Records of the providers in indexer/registry_hooks.py (each failure said on stderr, never fatal)."""
    from indexer.registry_hooks import PROVIDERS

    version = _public(md.version(pkg))
    out: list[dict] = []
    for module, fn in PROVIDERS:
        try:
            out += getattr(importlib.import_module(module), fn)(pkg, version)
        except Exception as e:  # an older release may lack what a provider reads
            print(f"registry: {module}.{fn} on {pkg} {version}: {type(e).__name__}: {e}", file=sys.stderr)
    return out


def _public(version: str) -> str:
    """2.13.0+cpu -> 2.13.0: the build label is not part of the API."""
    return version.split("+", 1)[0]


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
