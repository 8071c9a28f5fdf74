"""Front-end mappings: which accelerate / transformers name ends up as which DeepSpeed config key.

Users reach DeepSpeed through four front ends besides the ds_config JSON itself:

* ``accelerate_yaml``   - the accelerate config file (``deepspeed_config:`` block, top-level ``mixed_precision``)
* ``accelerate_launch`` - ``accelerate launch`` flags (``--zero_stage``; accelerate also accepts ``--zero-stage``)
* ``accelerate_plugin`` - the Python API (``DeepSpeedPlugin(...)`` fields, ``Accelerator(mixed_precision=...)``)
* ``training_args``     - ``TrainingArguments`` fields (also the keys of a LLaMA-Factory / HfArgumentParser YAML)

Every record here is read from the package source with ``ast`` (never imported, never typed), so the
same code works on an unpacked older release (``root=``): on a release that lacks a function, the
mappings that can still be read are returned and what was missing is printed on stderr.

How the chain is read (accelerate):
  yaml ``deepspeed_config.K`` -> ``args.K`` (commands/launch.py copies the block into the launch args)
  flag ``--K`` (commands/launch.py ``add_argument``) -> ``args.K``
  ``args.K`` -> env ``ACCELERATE_*`` (utils/launch.py ``current_env[...] = ...``)
  env -> ``DeepSpeedPlugin.F`` (``self.F = ... os.environ.get(ENV ...)`` in ``__post_init__``)
  ``DeepSpeedPlugin.F`` -> ds path (``plugin_to_config_mapping`` in ``__post_init__``, else the config dict it builds)
  ``mixed_precision`` -> ``fp16.enabled`` / ``bf16.enabled`` (``DeepSpeedPlugin.set_mixed_precision``)
transformers: ``fill_match`` / ``fill_only`` calls of ``trainer_config_process`` / ``trainer_config_finalize``
(the same calls ``_auto_fill_records`` reads; each mapping points at that ``auto_fill`` record).

A mapping record is an ordinary registry record (``indexer.registry_build._record``) of kind ``mapping``
with ``path`` = the DeepSpeed config path (``"*"``: the whole ds_config, i.e. the front-end name that
takes a ds_config file) and ``name`` = the front-end spelling, plus these fields:

``front_end``   one of FRONT_ENDS
``front_name``  the spelling as the user writes it (``deepspeed_config.zero_stage``, ``--zero_stage``,
                ``zero_stage``, ``per_device_train_batch_size``)
``front_id``    registry id of that name (``accelerate:yaml/deepspeed_config.zero_stage``)
``owner``       the Python object that takes it (``DeepSpeedPlugin``, ``Accelerator``, ``TrainingArguments``)
``fill``        ``direct`` (accelerate writes the value) | ``auto`` (transformers replaces ``"auto"``) |
                ``file`` (the name takes a whole ds_config)
``transform``   ``None`` (value copied) or a dict read from the code: ``when`` (a condition), ``values``
                (front values that make the ds value ``ds_value``), ``index`` (position in a ds list),
                ``computed`` (expression the ds value is computed from), ``expr``, ``primary``
``must_match``  transformers only: ``True`` when a non-"auto" ds value that differs raises (fill_match),
                ``False`` for fill_only, or the condition as written
``conflict``    accelerate only: ``{"name": "deepspeed_config_file", "source_file", "source_line"}`` when
                accelerate refuses this key together with a ds_config file
``auto_fill``   transformers only: id of the ``auto_fill`` record of the same ds key
``requires``    accelerate_launch only: ``{"flag": "--use_deepspeed", "source_file", "source_line", "flag_line"}``,
                the flag without which ``accelerate launch`` does not use the DeepSpeed launcher
``chain``       the links read, each ``[file, line, what]``
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

from indexer import registry_build as rb

FRONT_ENDS = ("accelerate_yaml", "accelerate_launch", "accelerate_plugin", "training_args")
WHOLE_CONFIG = "*"

ACC_PLUGIN = "accelerate/utils/dataclasses.py"
ACC_ENV = "accelerate/utils/launch.py"
ACC_LAUNCH = "accelerate/commands/launch.py"
ACC_ARGPARSE = "accelerate/commands/utils.py"
ACC_CLUSTER = "accelerate/commands/config/cluster.py"
ACC_CONFIG_ARGS = "accelerate/commands/config/config_args.py"
ACC_STATE = "accelerate/state.py"
HF_DS = "transformers/integrations/deepspeed.py"
HF_ARGS = "transformers/training_args.py"

# what the last call could not read, per (package, version): for the manifest's "skipped"
SKIPPED: dict[tuple[str, str], list[str]] = {}


def frontend_records(pkg: str, version: str, root: Path | None = None) -> list[dict]:
    """Mapping records of ``pkg`` (accelerate / transformers); ``root`` = the directory holding the package
    (site-packages, or an unpacked release); default: where the installed package lives."""
    if pkg not in ("accelerate", "transformers"):
        return []
    if root is None:
        # found without importing the package: this provider only parses source, so it also serves a
        # release that does not import here (registry_releases' static fallback)
        finder = getattr(rb, "_pkg_root_static", None) or rb._pkg_root
        root = finder(pkg)
    src = _Sources(Path(root), pkg, version)
    out = _accelerate(src) if pkg == "accelerate" else _transformers(src)
    SKIPPED[(pkg, version)] = src.skipped
    builder_skipped = getattr(rb, "SKIPPED", None)  # the builder's per-release list (manifest "skipped")
    for what in src.skipped:
        print(f"registry: frontends on {pkg} {version}: could not read {what}", file=sys.stderr)
        if isinstance(builder_skipped, list):
            builder_skipped.append(f"frontends: {what}")
    by_id: dict[str, dict] = {}
    for r in out:
        by_id.setdefault(r["id"], r)
    return [by_id[k] for k in sorted(by_id)]


# ---------------------------------------------------------------- source access


class _Sources:
    def __init__(self, root: Path, pkg: str, version: str):
        self.root, self.pkg, self.version = root, pkg, version
        self.skipped: list[str] = []
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            try:
                self._trees[rel] = ast.parse((self.root / rel).read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                self._trees[rel] = None
                self.skipped.append(rel)
        return self._trees[rel]

    def func(self, rel: str, name: str, cls: str | None = None) -> ast.FunctionDef | None:
        tree = self.tree(rel)
        if tree is None:
            return None
        scope: list[ast.stmt] = tree.body
        if cls is not None:
            c = self.cls(rel, cls)
            if c is None:
                return None
            scope = c.body
        for node in scope:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node
        self.skipped.append(f"{rel}: {cls + '.' if cls else ''}{name}")
        return None

    def cls(self, rel: str, name: str) -> ast.ClassDef | None:
        tree = self.tree(rel)
        if tree is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == name:
                return node
        self.skipped.append(f"{rel}: class {name}")
        return None

    def record(self, front_end: str, front_name: str, ds_path: str, rel: str, line: int, **kw: Any) -> dict:
        base = {
            "front_end": front_end,
            "front_name": front_name,
            "front_id": None,
            "owner": None,
            "fill": "direct",
            "transform": None,
            "must_match": None,
            "conflict": None,
            "auto_fill": None,
            "requires": None,
            "chain": [],
        }
        base.update(kw)
        target = "the whole ds_config" if ds_path == WHOLE_CONFIG else ds_path
        return rb._named(
            self.pkg,
            self.version,
            "mapping",
            ds_path,
            (rel, line),
            rid=f"map/{front_end}/{front_name}/{ds_path}",
            name=front_name,
            doc=f"{front_name} ({front_end}) sets {target}",
            **base,
        )


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _attrs_of(node: ast.AST, base: str) -> list[str]:
    """``base.X`` attribute names in ``node``, in source order, without repeats."""
    out: list[str] = []
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == base:
            if n.attr not in out:
                out.append(n.attr)
    return sorted(out, key=lambda a: _first_pos(node, base, a))


def _first_pos(node: ast.AST, base: str, attr: str) -> tuple[int, int]:
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == base and n.attr == attr:
            return (n.lineno, n.col_offset)
    return (0, 0)


def _is_attr(node: ast.AST | None, base: str) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == base:
        return node.attr
    return None


def _class_fields(cls: ast.ClassDef | None) -> dict[str, int]:
    if cls is None:
        return {}
    return {n.target.id: n.lineno for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def _strip_self(expr: str) -> str:
    return expr.replace("self.", "")


# ---------------------------------------------------------------- accelerate


def _accelerate(src: _Sources) -> list[dict]:
    plugin_cls = src.cls(ACC_PLUGIN, "DeepSpeedPlugin")
    post = src.func(ACC_PLUGIN, "__post_init__", "DeepSpeedPlugin") if plugin_cls else None
    fields = _class_fields(plugin_cls)

    field_to_ds: dict[str, tuple[str, int]] = {}  # plugin field -> (ds path, line)
    when: dict[str, str] = {}  # plugin field -> condition under which accelerate writes it
    env_to_field: dict[str, tuple[str, int]] = {}
    file_fields: dict[str, int] = {}  # plugin fields that take a whole ds_config
    if post is not None:
        for node in ast.walk(post):
            if not isinstance(node, ast.Assign):
                continue
            tgt = node.targets[0]
            if isinstance(tgt, ast.Name) and tgt.id == "plugin_to_config_mapping" and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values, strict=False):
                    if _const_str(k) and _const_str(v):
                        field_to_ds.setdefault(k.value, (v.value, k.lineno))
        # env -> field: `if self.F is None: ... os.environ.get("ENV", ...)` (directly or through a local)
        for node in ast.walk(post):
            if not (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare)
                and isinstance(node.test.ops[0], ast.Is)
                and _const_none(node.test.comparators[0])
            ):
                continue
            field = _is_attr(node.test.left, "self")
            if not field:
                continue
            for call in (c for st in node.body for c in ast.walk(st)):
                if (
                    isinstance(call, ast.Call)
                    and ast.unparse(call.func) in ("os.environ.get", "os.getenv")
                    and call.args
                    and _const_str(call.args[0])
                ):
                    env_to_field.setdefault(call.args[0].value, (field, call.lineno))
                    break
        # the config dict accelerate builds when no ds_config file is given: fallback paths and conditions
        built = _built_config(post)
        for field, (path, line, cond) in built.items():
            field_to_ds.setdefault(field, (path, line))
            if cond:
                when[field] = cond
        for node in ast.walk(post):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("HfDeepSpeedConfig") and node.args:
                f = _is_attr(node.args[0], "self")
                if f:
                    file_fields.setdefault(f, node.lineno)
    field_to_ds = {f: v for f, v in field_to_ds.items() if not fields or f in fields}

    conflicts = _config_file_conflicts(src)
    args_to_env = _launch_env(src)
    flags = _launch_flags(src)
    dash = _dash_aliases(src)
    yaml_keys = _yaml_ds_keys(src)
    copy_line = _yaml_copy_line(src)
    gate = _launch_gate(src, flags)

    out: list[dict] = []
    targets: dict[str, tuple[str, int, dict | None]] = {}  # field -> (ds path, line, transform)
    for field, (path, line) in field_to_ds.items():
        targets[field] = (path, line, {"when": when[field]} if field in when else None)
    for field, line in file_fields.items():
        targets[field] = (WHOLE_CONFIG, line, None)

    env_of_field = {f: (env, line) for env, (f, line) in env_to_field.items()}
    for field, (path, line, transform) in sorted(targets.items()):
        fill = "file" if path == WHOLE_CONFIG else "direct"
        link = [ACC_PLUGIN, line, f"DeepSpeedPlugin.{field} -> {path}"]
        field_link = [[ACC_PLUGIN, fields[field], f"DeepSpeedPlugin.{field}"]] if field in fields else []
        out.append(
            src.record(
                "accelerate_plugin",
                field,
                path,
                ACC_PLUGIN,
                line,
                front_id=f"accelerate:DeepSpeedPlugin.{field}",
                owner="DeepSpeedPlugin",
                fill=fill,
                transform=transform,
                chain=[*field_link, link],
            )
        )
        if field not in env_of_field:
            continue
        env, env_line = env_of_field[field]
        env_link = [ACC_PLUGIN, env_line, f"{env} -> DeepSpeedPlugin.{field}"]
        if fill == "direct" and not any(e == env for e, _ in args_to_env.values()):
            out += _not_forwarded(src, field, path, env, env_link, flags, yaml_keys, dash)
            continue
        for arg, (env2, set_line) in sorted(args_to_env.items()):
            if env2 != env:
                continue
            set_link = [ACC_ENV, set_line, f"args.{arg} -> {env}"]
            # accelerate checks only the keys that came from the config YAML (ACCELERATE_CONFIG_DS_FIELDS)
            conflict = (
                {"name": "deepspeed_config_file", "source_file": ACC_PLUGIN, "source_line": conflicts[arg]}
                if arg in conflicts and fill == "direct"
                else None
            )
            if arg in flags:
                flag, flag_line = flags[arg]
                out.append(
                    _launch_flag_record(
                        src,
                        flag,
                        path,
                        line,
                        dash,
                        [[ACC_LAUNCH, flag_line, f"{flag} -> args.{arg}"], set_link, env_link, link],
                        fill=fill,
                        transform=transform,
                        requires=gate,
                    )  # fmt: skip
                )
            if arg in yaml_keys:
                chain = [[ACC_CLUSTER, yaml_keys[arg], f"deepspeed_config.{arg}"]]
                if copy_line:
                    chain.append([ACC_LAUNCH, copy_line, f"deepspeed_config.{arg} -> args.{arg}"])
                out.append(
                    src.record(
                        "accelerate_yaml",
                        f"deepspeed_config.{arg}",
                        path,
                        ACC_PLUGIN,
                        line,
                        front_id=f"accelerate:yaml/deepspeed_config.{arg}",
                        fill=fill,
                        transform=transform,
                        conflict=conflict,
                        chain=[*chain, set_link, env_link, link],
                    )
                )
    out += _mixed_precision(src, args_to_env, flags, dash, conflicts, gate)
    return out


def _not_forwarded(
    src: _Sources,
    field: str,
    path: str,
    env: str,
    env_link: list,
    flags: dict[str, tuple[str, int]],
    yaml_keys: dict[str, int],
    dash: set[str],
) -> list[dict]:
    """The plugin reads ``env`` but the launcher never sets it: a flag / YAML key of the field's own name
    is accepted and then not passed on (recorded with ``fill: "not_forwarded"``)."""
    out: list[dict] = []
    gap = [ACC_ENV, 0, f"no current_env[{env!r}] in the DeepSpeed launch env function"]
    if field in flags:
        flag, flag_line = flags[field]
        out.append(
            src.record(
                "accelerate_launch",
                flag,
                path,
                ACC_LAUNCH,
                flag_line,
                aliases=_aliases(flag, dash),
                front_id=f"accelerate:cli/accelerate launch/{flag}",
                fill="not_forwarded",
                chain=[[ACC_LAUNCH, flag_line, f"{flag} -> args.{field}"], gap, env_link],
            )
        )
    if field in yaml_keys:
        out.append(
            src.record(
                "accelerate_yaml",
                f"deepspeed_config.{field}",
                path,
                ACC_CLUSTER,
                yaml_keys[field],
                front_id=f"accelerate:yaml/deepspeed_config.{field}",
                fill="not_forwarded",
                chain=[[ACC_CLUSTER, yaml_keys[field], f"deepspeed_config.{field}"], gap, env_link],
            )
        )
    return out


def _built_config(post: ast.FunctionDef) -> dict[str, tuple[str, int, str | None]]:
    """``config = {...}`` in ``__post_init__``: plugin field -> (ds path, line, condition or None)."""
    out: dict[str, tuple[str, int, str | None]] = {}

    def walk(d: ast.Dict, prefix: str) -> None:
        for k, v in zip(d.keys, d.values, strict=False):
            key = _const_str(k)
            if key is None:
                continue
            path = prefix + key
            if isinstance(v, ast.Dict):
                walk(v, path + ".")
            elif _is_attr(v, "self"):
                out.setdefault(v.attr, (path, k.lineno, None))
            elif isinstance(v, ast.IfExp) and _is_attr(v.body, "self") and _const_none(v.orelse):
                out.setdefault(v.body.attr, (path, k.lineno, _strip_self(ast.unparse(v.test))))

    for d in _dicts_assigned(post, "config"):
        walk(d, "")
    return out


def _dicts_assigned(tree: ast.AST, name: str) -> list[ast.Dict]:
    """The dict literals assigned to ``name`` (``name = {...}``) in ``tree``, in walk order."""
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == name
        and isinstance(node.value, ast.Dict)
    ]


def _const_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _config_file_conflicts(src: _Sources) -> dict[str, int]:
    """Launch arg names accelerate refuses next to ``deepspeed_config_file`` (``_deepspeed_config_checks``):
    the code lists env var names and turns them into arg names with ``.replace`` / ``.lower``; applied here."""
    fn = src.func(ACC_PLUGIN, "_deepspeed_config_checks", "DeepSpeedPlugin")
    if fn is None:
        return {}
    names: list[tuple[str, int]] = []
    ops: list[tuple[str, tuple]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.List) and node.elts and all(_const_str(e) for e in node.elts):
            names = [(e.value, e.lineno) for e in node.elts]
        if isinstance(node, ast.ListComp):
            call = node.elt
            chain: list[tuple[str, tuple]] = []
            while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                chain.append((call.func.attr, tuple(a.value for a in call.args if isinstance(a, ast.Constant))))
                call = call.func.value
            ops = list(reversed(chain))
    if not names or not ops:
        return {}
    out: dict[str, int] = {}
    for name, line in names:
        for op, a in ops:
            if op == "replace" and len(a) == 2:
                name = name.replace(*a)
            elif op == "lower":
                name = name.lower()
        out[name] = line
    return out


def _launch_env(src: _Sources) -> dict[str, tuple[str, int]]:
    """``args.A`` -> (env var, line) in the function of utils/launch.py that prepares the DeepSpeed launch."""
    tree = src.tree(ACC_ENV)
    if tree is None:
        return {}
    fn = next(
        (
            n
            for n in tree.body
            if isinstance(n, ast.FunctionDef)
            and any(_const_str(c) == "ACCELERATE_USE_DEEPSPEED" for c in ast.walk(n))
            and "deepspeed" in n.name
        ),
        None,
    )
    if fn is None:
        src.skipped.append(f"{ACC_ENV}: the DeepSpeed launch env function")
        return {}
    local: dict[str, ast.AST] = {}
    out: dict[str, tuple[str, int]] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            local.setdefault(node.targets[0].id, node.value)
    for node in ast.walk(fn):
        if not (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)):
            continue
        tgt = node.targets[0]
        env = _const_str(tgt.slice)
        if not (isinstance(tgt.value, ast.Name) and tgt.value.id == "current_env" and env):
            continue
        value = node.value
        attrs = _attrs_of(value, "args")
        if not attrs:  # through a local: mixed_precision = PrecisionType(args.mixed_precision.lower())
            for n in ast.walk(value):
                if isinstance(n, ast.Name) and n.id in local:
                    attrs = _attrs_of(local[n.id], "args")
                    break
        if len(attrs) == 1:
            out.setdefault(attrs[0], (env, node.lineno))
    return out


def _launch_flags(src: _Sources) -> dict[str, tuple[str, int]]:
    """``accelerate launch`` options of ``launch_command_parser``: dest -> (first long option, line)."""
    fn = src.func(ACC_LAUNCH, "launch_command_parser")
    if fn is None:
        return {}
    out: dict[str, tuple[str, int]] = {}
    for node in ast.walk(fn):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        ):
            continue
        opts = [a.value for a in node.args if _const_str(a) and a.value.startswith("--")]
        if not opts:
            continue
        dest = next((_const_str(k.value) for k in node.keywords if k.arg == "dest"), None)
        dest = dest or opts[0][2:].replace("-", "_")
        out.setdefault(dest, (opts[0], node.lineno))
    return out


def _launch_flag_record(src, flag: str, path: str, line, dash, chain: list, **kw) -> dict:
    """The mapping record of an `accelerate launch` flag onto a DeepSpeedPlugin field (both producers use it)."""
    return src.record(
        "accelerate_launch",
        flag,
        path,
        ACC_PLUGIN,
        line,
        aliases=_aliases(flag, dash),
        front_id=f"accelerate:cli/accelerate launch/{flag}",
        chain=chain,
        **kw,
    )


def _aliases(flag: str, dash: set[str]) -> list[str]:
    alt = flag.replace("_", "-")
    return [alt] if alt != flag and alt in dash else []


def _dash_aliases(src: _Sources) -> set[str]:
    """Dash spellings accelerate's own argparse action adds (``--zero-stage`` for ``--zero_stage``):
    present only when commands/utils.py turns ``_`` into ``-`` in option strings."""
    tree = src.tree(ACC_ARGPARSE)
    if tree is None:
        return set()
    adds = any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "replace"
        and [_const_str(a) for a in n.args] == ["_", "-"]
        for n in ast.walk(tree)
    )
    if not adds:
        return set()
    return {flag.replace("_", "-") for flag, _ in _launch_flags(src).values() if "_" in flag[2:]}


def _launch_gate(src: _Sources, flags: dict[str, tuple[str, int]]) -> dict | None:
    """The flag that sends ``accelerate launch`` to the DeepSpeed launcher: ``if args.X ...: deepspeed_launcher(args)``."""
    fn = src.func(ACC_LAUNCH, "launch_command")
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and any(
            isinstance(c, ast.Call) and ast.unparse(c.func) == "deepspeed_launcher"
            for st in node.body
            for c in ast.walk(st)
        ):
            attrs = _attrs_of(node.test, "args")
            if attrs and attrs[0] in flags:
                flag, line = flags[attrs[0]]
                return {"flag": flag, "source_file": ACC_LAUNCH, "source_line": node.lineno, "flag_line": line}
    return None


def _yaml_ds_keys(src: _Sources) -> dict[str, int]:
    """Keys ``accelerate config`` writes into the YAML's ``deepspeed_config:`` block -> first line."""
    tree = src.tree(ACC_CLUSTER)
    if tree is None:
        return {}
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "deepspeed_config"
            and _const_str(node.slice)
        ):
            if node.lineno < out.get(node.slice.value, 1 << 30):
                out[node.slice.value] = node.lineno
    return out


def _yaml_copy_line(src: _Sources) -> int | None:
    """Where ``accelerate launch`` copies the config file's dict blocks into its args (``setattr(args, key, value)``)."""
    tree = src.tree(ACC_LAUNCH)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) == 3
            and ast.unparse(node.args[0]) == "args"
            and ast.unparse(node.args[1]) == "key"
        ):
            return node.lineno
    return None


def _mixed_precision(
    src: _Sources,
    args_to_env: dict[str, tuple[str, int]],
    flags: dict[str, tuple[str, int]],
    dash: set[str],
    conflicts: dict[str, int],
    gate: dict | None,
) -> list[dict]:
    """``DeepSpeedPlugin.set_mixed_precision(mixed_precision)``: ``kwargs = {"bf16.enabled": mixed_precision in (...)}``."""
    fn = src.func(ACC_PLUGIN, "set_mixed_precision", "DeepSpeedPlugin")
    if fn is None or len(fn.args.args) < 2:
        return []
    param = fn.args.args[1].arg
    kwargs: list[tuple[str, int, list, str]] = []
    for d in _dicts_assigned(fn, "kwargs"):
        for k, v in zip(d.keys, d.values, strict=False):
            values = _compare_values(v, param)
            if _const_str(k) and values:
                kwargs.append((k.value, k.lineno, values, ast.unparse(v)))
    if not kwargs:
        return []
    yaml_line = _class_fields(src.cls(ACC_CONFIG_ARGS, "BaseConfig")).get(param)
    accel_init = src.func("accelerate/accelerator.py", "__init__", "Accelerator")
    accel_has = accel_init is not None and any(
        a.arg == param for a in accel_init.args.args + accel_init.args.kwonlyargs
    )
    out: list[dict] = []
    for path, line, values, expr in kwargs:
        transform = {"values": values, "ds_value": True, "expr": expr}
        link = [ACC_PLUGIN, line, f"{param} -> {path}"]
        if accel_has:
            out.append(
                src.record(
                    "accelerate_plugin",
                    param,
                    path,
                    ACC_PLUGIN,
                    line,
                    front_id=None,
                    owner="Accelerator",
                    transform=transform,
                    chain=[["accelerate/accelerator.py", accel_init.lineno, f"Accelerator({param}=...)"], link],
                )
            )
        env = args_to_env.get(param)
        if param in flags:
            flag, flag_line = flags[param]
            chain = [[ACC_LAUNCH, flag_line, f"{flag} -> args.{param}"]]
            if env:
                chain.append([ACC_ENV, env[1], f"args.{param} -> {env[0]}"])
            out.append(
                _launch_flag_record(src, flag, path, line, dash, [*chain, link], transform=transform, requires=gate)
            )
        if yaml_line:
            out.append(
                src.record(
                    "accelerate_yaml",
                    param,
                    path,
                    ACC_PLUGIN,
                    line,
                    front_id=f"accelerate:yaml.{param}",
                    transform=transform,
                    conflict=(
                        {"name": "deepspeed_config_file", "source_file": ACC_PLUGIN, "source_line": conflicts[param]}
                        if param in conflicts
                        else None
                    ),
                    chain=[[ACC_CONFIG_ARGS, yaml_line, f"{param} (top level)"], link],
                )
            )
    return out


def _compare_values(node: ast.AST, param: str) -> list | None:
    """``param == "bf16"`` -> ["bf16"]; ``param in ("bf16", "fp8")`` -> ["bf16", "fp8"]; else None."""
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and ast.unparse(node.left) == param):
        return None
    op, right = node.ops[0], node.comparators[0]
    if isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
        return [right.value]
    if isinstance(op, ast.In) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        vals = [e.value for e in right.elts if isinstance(e, ast.Constant)]
        return vals or None
    return None


# ---------------------------------------------------------------- transformers


def _transformers(src: _Sources) -> list[dict]:
    ta_fields = _class_fields(src.cls(HF_ARGS, "TrainingArguments"))
    out: list[dict] = []
    for fname in ("trainer_config_process", "trainer_config_finalize"):
        fn = src.func(HF_DS, fname, "HfTrainerDeepSpeedConfig")
        if fn is None:
            continue
        out += _fill_calls(src, fn, ta_fields)
        out += _direct_sets(src, fn, ta_fields)
    out += _ta_file_field(src, ta_fields)
    return out


def _is_field(name: str, ta_fields: dict[str, int]) -> bool:
    return not ta_fields or name in ta_fields


def _ta_record(src: _Sources, field: str, path: str, line: int, ta_fields: dict[str, int], **kw: Any) -> dict:
    chain = kw.pop("chain", [])
    rel = kw.pop("rel", HF_DS)
    if field in ta_fields:
        chain = [[HF_ARGS, ta_fields[field], f"TrainingArguments.{field}"], *chain]
    return src.record(
        "training_args",
        field,
        path,
        rel,
        line,
        front_id=f"transformers:TrainingArguments.{field}",
        owner="TrainingArguments",
        chain=chain,
        **kw,
    )


def _fill_calls(src: _Sources, fn: ast.FunctionDef, ta_fields: dict[str, int]) -> list[dict]:
    local: dict[str, ast.AST] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            local.setdefault(node.targets[0].id, node.value)
    out: list[dict] = []
    for node in ast.walk(fn):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("fill_match", "fill_only")
            and len(node.args) >= 2
            and _const_str(node.args[0])
        ):
            continue
        path, value = node.args[0].value, node.args[1]
        hf_key = _const_str(node.args[2]) if len(node.args) > 2 else None
        if node.func.attr == "fill_only":
            must: Any = False
        else:
            m = (
                node.args[3]
                if len(node.args) > 3
                else next((k.value for k in node.keywords if k.arg == "must_match"), None)
            )
            must = True if m is None else (m.value if isinstance(m, ast.Constant) else ast.unparse(m))
        common = {"fill": "auto", "must_match": must, "auto_fill": f"transformers:ds_auto/{path}"}
        link = [HF_DS, node.lineno, f"{node.func.attr}({path!r}, {ast.unparse(value)})"]
        direct = _is_attr(value, "args")
        if direct and _is_field(direct, ta_fields):
            out.append(_ta_record(src, direct, path, node.lineno, ta_fields, chain=[link], **common))
            continue
        if isinstance(value, ast.BoolOp) and all(_is_attr(v, "args") for v in value.values):
            for i, v in enumerate(value.values):
                if _is_field(v.attr, ta_fields):
                    t = {"expr": ast.unparse(value), "primary": i == 0}
                    out.append(
                        _ta_record(src, v.attr, path, node.lineno, ta_fields, transform=t, chain=[link], **common)
                    )
            continue
        if isinstance(value, (ast.List, ast.Tuple)) and all(_is_attr(v, "args") for v in value.elts):
            for i, v in enumerate(value.elts):
                if _is_field(v.attr, ta_fields):
                    t = {"index": i, "expr": ast.unparse(value)}
                    out.append(
                        _ta_record(src, v.attr, path, node.lineno, ta_fields, transform=t, chain=[link], **common)
                    )
            continue
        # computed: through a local (train_batch_size = ...) or a call (max(1, args.get_warmup_steps(...)))
        expr = local[value.id] if isinstance(value, ast.Name) and value.id in local else value
        names = [a for a in _attrs_of(expr, "args") if a in ta_fields]
        if not names and hf_key and hf_key in ta_fields:
            names = [hf_key]
        for a in names:
            t = {"computed": ast.unparse(expr)}
            out.append(_ta_record(src, a, path, node.lineno, ta_fields, transform=t, chain=[link], **common))
    return out


def _direct_sets(src: _Sources, fn: ast.FunctionDef, ta_fields: dict[str, int]) -> list[dict]:
    """``self.config["a"]["b"] = args.X`` (under ``if <cond>:``): the field sets the key outright."""
    out: list[dict] = []

    def visit(stmts: list[ast.stmt], cond: str | None) -> None:
        for st in stmts:
            if isinstance(st, ast.If):
                visit(st.body, ast.unparse(st.test))
                visit(st.orelse, None)
                continue
            if not isinstance(st, ast.Assign) or not isinstance(st.targets[0], ast.Subscript):
                continue
            keys: list[str] = []
            t: ast.AST = st.targets[0]
            while isinstance(t, ast.Subscript) and _const_str(t.slice):
                keys.insert(0, t.slice.value)
                t = t.value
            field = _is_attr(st.value, "args")
            if ast.unparse(t) == "self.config" and keys and field and _is_field(field, ta_fields):
                path = ".".join(keys)
                out.append(
                    _ta_record(
                        src,
                        field,
                        path,
                        st.lineno,
                        ta_fields,
                        fill="direct",
                        transform={"when": cond} if cond else None,
                        chain=[[HF_DS, st.lineno, f"{ast.unparse(st.targets[0])} = args.{field}"]],
                    )
                )

    visit(fn.body, None)
    return out


def _ta_file_field(src: _Sources, ta_fields: dict[str, int]) -> list[dict]:
    """The TrainingArguments field handed to ``HfTrainerDeepSpeedConfig(...)``: it takes the ds_config."""
    cls = src.cls(HF_ARGS, "TrainingArguments")
    if cls is None:
        return []
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("DeepSpeedConfig") and node.args:
            field = _is_attr(node.args[0], "self")
            if field and _is_field(field, ta_fields):
                return [
                    _ta_record(
                        src,
                        field,
                        WHOLE_CONFIG,
                        node.lineno,
                        ta_fields,
                        fill="file",
                        rel=HF_ARGS,
                        chain=[[HF_ARGS, node.lineno, f"{ast.unparse(node.func)}(self.{field})"]],
                    )
                ]
    return []
