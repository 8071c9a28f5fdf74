"""Generate the parameter registry from the installed packages (``kb registry build``).

Nothing here is a hand-typed parameter list: every record comes from introspecting a package
(pydantic config models, dataclass fields, signatures, argparse calls, recorded config reads).
The lists below name *where to look* (which class, which module); the names, types, defaults,
aliases, deprecations and source lines all come from the package itself.

Output: ``data/registry/<package>-<version>.jsonl`` (one record per line, sorted by id) and
``data/registry/manifest.json``. Deterministic: the same packages give byte-identical files.
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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REGISTRY_FORMAT = 1

# ---------------------------------------------------------------- helpers


def _pkg_root(pkg: str) -> Path:
    mod = importlib.import_module(pkg)
    return Path(mod.__file__).resolve().parent.parent  # site-packages


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


def _walk_model(cls: type, prefix: str, pkg: str, version: str, out: list[dict]) -> None:
    from pydantic import BaseModel

    for name, f in cls.model_fields.items():
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
            _record(
                id=f"{pkg}:{path}",
                package=pkg,
                version=version,
                kind="config_section" if sub is not None else "config_key",
                name=key,
                path=path,
                type=_clean_type(f.annotation),
                default=_default_repr(
                    default if not isinstance(default, BaseModel) else default.model_dump(mode="json")
                ),
                aliases=sorted({name} - {key}),
                deprecated=deprecated,
                replacement=extra.get("new_param") if deprecated else None,
                noop=deprecated and extra.get("set_new_param", True) is False,
                doc=_short_doc(f.description),
                source_file=loc[0] if loc else _relfile(cls, pkg),
                source_line=loc[1] if loc else inspect.getsourcelines(cls)[1],
                choices=_enum_choices(f.annotation),
                constraints=_constraints(f.metadata),
                forbids_unknown=(sub.model_config.get("extra") == "forbid") if sub is not None else None,
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
    from pydantic import BaseModel

    if inspect.isclass(ann) and issubclass(ann, BaseModel):
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
        cls = _resolve(dotted)
        loc = _obj_line(cls, pkg)
        out.append(
            _record(
                id=f"{pkg}:{section}",
                package=pkg,
                version=version,
                kind="config_section",
                name=section,
                path=section,
                type=cls.__name__,
                doc=_short_doc(cls.__doc__),
                source_file=loc[0],
                source_line=loc[1],
                forbids_unknown=cls.model_config.get("extra") == "forbid",
                validated=True,
            )
        )
        _walk_model(cls, section, pkg, version, out)
    modeled = {r["path"] for r in out}

    # Top-level keys and non-pydantic sections: record what DeepSpeedConfig reads.
    base = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
    log, _ = _ds_trace(base)
    top = sorted(k for k in log if "." not in k)
    removed: dict[str, str] = {}
    for key in top:
        # a section given as an (empty) dict makes DeepSpeed read its sub-keys
        sub_log, err = _ds_trace({**base, key: {}})
        if err is not None and "removed" in str(err).lower():
            removed[key] = str(err).splitlines()[0]
        for path, rec in sub_log.items():
            if path.startswith(key + ".") and path.count(".") == 1:
                log.setdefault(path, rec)
    for path in sorted(log):
        rec = log[path]
        root = path.split(".")[0]
        if path in modeled or (root in DS_SECTION_MODELS and path != root):
            continue
        fname = rec["file"]
        if not fname.startswith(site):
            continue  # read by the recorder itself or by another package
        children = any(p.startswith(path + ".") for p in log)
        default = rec.get("default", inspect.Parameter.empty)
        out.append(
            _record(
                id=f"{pkg}:{path}",
                package=pkg,
                version=version,
                kind="config_section" if children else "config_key",
                name=path.rsplit(".", 1)[-1],
                path=path,
                type=type(default).__name__
                if default not in (None, inspect.Parameter.empty) and not isinstance(default, dict)
                else "",
                default=_default_repr(default) if not isinstance(default, dict) else None,
                status="removed" if path in removed else "active",
                doc=removed.get(path),
                source_file=Path(fname).resolve().relative_to(Path(site).resolve()).as_posix(),
                source_line=rec["line"],
            )
        )
    # keys read only under a condition the trace cannot reach (e.g. with torch.distributed up)
    # are found from constants that the top-level reader uses
    return out


def _ds_api_records(version: str) -> list[dict]:
    pkg = "deepspeed"
    out = []
    for dotted in DS_APIS:
        try:
            obj = _resolve(dotted)
        except (ImportError, AttributeError):
            continue
        out.extend(_callable_records(pkg, version, dotted.removeprefix("deepspeed."), obj))
    for dotted in DS_CLASSES_WITH_METHODS:
        cls = _resolve(dotted)
        out.extend(_method_records(pkg, version, dotted.removeprefix("deepspeed."), cls))
    return out


def _callable_records(pkg: str, version: str, path: str, obj: Any, with_kwargs: bool = True) -> list[dict]:
    loc = _obj_line(obj, pkg)
    if loc is None:
        return []
    kind = "class" if inspect.isclass(obj) else "function"
    out = [
        _record(
            id=f"{pkg}:{path}",
            package=pkg,
            version=version,
            kind=kind,
            name=path.rsplit(".", 1)[-1],
            path=path,
            type=kind,
            doc=_short_doc(obj.__doc__),
            source_file=loc[0],
            source_line=loc[1],
        )
    ]
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
            _record(
                id=f"{pkg}:{path}.{name}",
                package=pkg,
                version=version,
                kind="method",
                name=name,
                path=f"{path}.{name}",
                type="method",
                doc=_short_doc(func.__doc__),
                source_file=loc[0],
                source_line=loc[1],
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
            _record(
                id=f"{pkg}:{path}.{p.name}",
                package=pkg,
                version=version,
                kind="kwarg",
                name=p.name,
                path=f"{path}.{p.name}",
                type=_clean_type(p.annotation),
                default=_default_repr(p.default),
                source_file=loc[0],
                source_line=loc[1],
            )
        )
    return out


def _dataclass_records(pkg: str, version: str, path: str, cls: type, kind: str = "field") -> list[dict]:
    loc = _obj_line(cls, pkg)
    out = [
        _record(
            id=f"{pkg}:{path}",
            package=pkg,
            version=version,
            kind="class",
            name=path.rsplit(".", 1)[-1],
            path=path,
            type="class",
            doc=_short_doc(cls.__doc__),
            source_file=loc[0],
            source_line=loc[1],
        )
    ]
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
            _record(
                id=f"{pkg}:{path}.{f.name}",
                package=pkg,
                version=version,
                kind=kind,
                name=f.name,
                path=f"{path}.{f.name}",
                type=_clean_type(f.type),
                default=_default_repr(default),
                deprecated=deprecated,
                doc=_short_doc(help_text),
                source_file=floc[0],
                source_line=floc[1],
            )
        )
    return out


def _argparse_records(pkg: str, version: str, relfile: str, command: str) -> list[dict]:
    """Flags of a CLI from its ``add_argument("--flag", ...)`` calls."""
    path = _pkg_root(pkg) / relfile
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, dict] = {}
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        ):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        long = [f for f in flags if f.startswith("--")]
        if not long:
            continue
        kw = {k.arg: k.value for k in node.keywords}
        default = kw.get("default")
        help_node = kw.get("help")
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
                aliases=sorted(set(flags) - {flag}),
                default=_default_repr(default.value) if isinstance(default, ast.Constant) else None,
                doc=_short_doc(help_node.value)
                if isinstance(help_node, ast.Constant) and isinstance(help_node.value, str)
                else None,
                source_file=relfile,
                source_line=node.lineno,
            ),
        )
    return list(out.values())


ENV_CALLS = {"get", "getenv", "parse_flag_from_env", "str_to_bool", "get_int_from_env", "parse_choice_from_env"}


def _env_records(pkg: str, version: str, files: Iterable[Path], pattern: str = r"^[A-Z][A-Z0-9_]{3,}$") -> list[dict]:
    """Environment variables a package reads (os.environ[...] / .get / getenv / its own env helpers)."""
    root = _pkg_root(pkg)
    out: dict[str, dict] = {}
    rx = re.compile(pattern)
    for path in sorted(files):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
                fn = node.func
                attr = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                is_env = attr in ("getenv", "parse_flag_from_env", "get_int_from_env", "parse_choice_from_env") or (
                    attr == "get" and isinstance(fn, ast.Attribute) and "environ" in ast.unparse(fn.value)
                )
                if is_env:
                    name = node.args[0].value
            elif (
                isinstance(node, ast.Subscript)
                and "environ" in ast.unparse(node.value)
                and isinstance(node.slice, ast.Constant)
            ):
                name = node.slice.value
            if isinstance(name, str) and rx.match(name) and name not in out:
                out[name] = _record(
                    id=f"{pkg}:env/{name}",
                    package=pkg,
                    version=version,
                    kind="env",
                    name=name,
                    path=name,
                    source_file=path.relative_to(root).as_posix(),
                    source_line=node.lineno,
                )
    return list(out.values())


def _ds_misc_records(version: str) -> list[dict]:
    pkg = "deepspeed"
    root = _pkg_root(pkg)
    out: list[dict] = []
    # console scripts installed with the wheel
    dist = md.distribution(pkg)
    for f in sorted(dist.files or [], key=str):
        s = str(f)
        if s.startswith("../../../bin/"):
            name = s.rsplit("/", 1)[-1]
            out.append(
                _record(
                    id=f"{pkg}:bin/{name}",
                    package=pkg,
                    version=version,
                    kind="script",
                    name=name,
                    path=name,
                    doc="command installed with the deepspeed wheel",
                    source_file=f"bin/{name}",
                    source_line=1,
                )
            )
    for rel in DS_SCRIPT_FILES:
        if (root / rel).exists():
            name = rel.rsplit("/", 1)[-1]
            out.append(
                _record(
                    id=f"{pkg}:{rel}",
                    package=pkg,
                    version=version,
                    kind="script",
                    name=name,
                    path=rel,
                    doc=_short_doc(ast.get_docstring(ast.parse((root / rel).read_text()))),
                    source_file=rel,
                    source_line=1,
                )
            )
    # op build switches: every op builder declares BUILD_VAR = "DS_BUILD_<OP>"
    for path in sorted((root / "deepspeed/ops/op_builder").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "BUILD_VAR" for t in node.targets)
                and isinstance(node.value, ast.Constant)
                and f"{pkg}:env/{node.value.value}" not in {r["id"] for r in out}
            ):
                name = node.value.value
                out.append(
                    _record(
                        id=f"{pkg}:env/{name}",
                        package=pkg,
                        version=version,
                        kind="env",
                        name=name,
                        path=name,
                        doc="build switch for a DeepSpeed op (set to 1 before pip install to prebuild it)",
                        source_file=path.relative_to(root).as_posix(),
                        source_line=node.lineno,
                    )
                )
    for command, rel in DS_CLI_FILES.items():
        out.extend(_argparse_records(pkg, version, rel, command))
    env_files = list((root / "deepspeed/launcher").glob("*.py")) + [root / "deepspeed/env_report.py"]
    out.extend(_env_records(pkg, version, env_files))
    return out


def build_deepspeed() -> list[dict]:
    version = md.version("deepspeed")
    return _ds_config_records(version) + _ds_api_records(version) + _ds_misc_records(version)


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
                _record(
                    id=f"{pkg}:{path}.{name}",
                    package=pkg,
                    version=version,
                    kind="kwarg",
                    name=name,
                    path=f"{path}.{name}",
                    default=_default_repr(default.value) if isinstance(default, ast.Constant) else None,
                    source_file=rel,
                    source_line=start + node.lineno - 1,
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
                    out[elt.value] = _record(
                        id=f"{pkg}:{path}.{elt.value}",
                        package=pkg,
                        version=version,
                        kind="kwarg",
                        name=elt.value,
                        path=f"{path}.{elt.value}",
                        deprecated=True,
                        noop=True,
                        doc="accepted and discarded: popped from kwargs without being used",
                        source_file=rel,
                        source_line=start + node.lineno - 1,
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
    from transformers import PreTrainedConfig, PreTrainedModel, Trainer, TrainingArguments

    pkg, version = "transformers", md.version("transformers")
    out = _dataclass_records(pkg, version, "TrainingArguments", TrainingArguments)
    out += _method_records(pkg, version, "PreTrainedModel", PreTrainedModel)
    fp = PreTrainedModel.from_pretrained
    kw = _callable_records(pkg, version, "PreTrainedModel.from_pretrained", fp)[1:] + _popped_kwargs(
        pkg, version, "PreTrainedModel.from_pretrained", fp
    )
    _deprecated_kwargs(kw, fp)
    out += kw
    out += _method_records(pkg, version, "Trainer", Trainer)
    out += _callable_records(pkg, version, "PreTrainedConfig", PreTrainedConfig)
    for cfg_name in ("LlamaConfig", "MixtralConfig", "Qwen2Config"):
        cfg_cls = getattr(transformers, cfg_name, None)
        if cfg_cls is not None and dataclasses.is_dataclass(cfg_cls):
            out += _dataclass_records(pkg, version, cfg_name, cfg_cls)
    # attributes a model config carries by default (e.g. tie_word_embeddings)
    cfg_loc = _obj_line(PreTrainedConfig, pkg)
    for name in sorted(getattr(PreTrainedConfig, "__annotations__", {})):
        if name.startswith("_") or any(r["id"] == f"{pkg}:PreTrainedConfig.{name}" for r in out):
            continue
        loc = _mro_field_line(PreTrainedConfig, name, pkg) or cfg_loc
        out.append(
            _record(
                id=f"{pkg}:PreTrainedConfig.{name}",
                package=pkg,
                version=version,
                kind="field",
                name=name,
                path=f"PreTrainedConfig.{name}",
                type=_clean_type(PreTrainedConfig.__annotations__[name]),
                default=_default_repr(getattr(PreTrainedConfig, name, inspect.Parameter.empty)),
                source_file=loc[0],
                source_line=loc[1],
            )
        )
    out += _auto_fill_records(pkg, version, "transformers/integrations/deepspeed.py", ("fill_match", "fill_only"), None)
    for dotted in TRANSFORMERS_FUNCS:
        try:
            obj = _resolve(dotted)
        except (ImportError, AttributeError):
            continue
        out += _callable_records(pkg, version, dotted.removeprefix("transformers."), obj)
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
        _record(
            id=f"{pkg}:ds_auto/{key}",
            package=pkg,
            version=version,
            kind="auto_fill",
            name=key.rsplit(".", 1)[-1],
            path=key,
            doc=f'{pkg} replaces "auto" for this DeepSpeed key',
            source_file=relfile,
            source_line=line,
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
    # keys of the `deepspeed_config:` block of the config YAML, as `accelerate config` writes them
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
            out.append(
                _record(
                    id=f"{pkg}:yaml/deepspeed_config.{node.slice.value}",
                    package=pkg,
                    version=version,
                    kind="yaml_key",
                    name=node.slice.value,
                    path=f"deepspeed_config.{node.slice.value}",
                    source_file=rel,
                    source_line=node.lineno,
                )
            )
    out += _argparse_records(pkg, version, "accelerate/commands/launch.py", "accelerate launch")
    out += _auto_fill_records(pkg, version, "accelerate/accelerator.py", (), "config_kwargs")
    out += _env_records(pkg, version, [root / "accelerate/utils/dataclasses.py", root / "accelerate/state.py"])
    return out


def build_peft() -> list[dict]:
    import peft

    pkg, version = "peft", md.version("peft")
    out = _dataclass_records(pkg, version, "LoraConfig", peft.LoraConfig)
    for dotted in (
        "peft.get_peft_model",
        "peft.prepare_model_for_kbit_training",
        "peft.PeftModel.from_pretrained",
        "peft.get_peft_model_state_dict",
        "peft.set_peft_model_state_dict",
    ):
        out += _callable_records(pkg, version, dotted.removeprefix("peft."), _resolve(dotted))
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
    for dotted in TORCH_FUNCS:
        try:
            obj = _resolve(dotted)
        except (ImportError, AttributeError):
            continue
        out += _callable_records(pkg, version, dotted.removeprefix("torch."), obj)
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
                    _record(
                        id=f"{pkg}:env/{name}",
                        package=pkg,
                        version=version,
                        kind="env",
                        name=name,
                        path=name,
                        source_file=path.relative_to(root).as_posix(),
                        source_line=text.count("\n", 0, m.start()) + 1,
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
