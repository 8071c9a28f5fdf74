"""Lint one file in its own dialect at its own releases: detect the front end, decide the versions, run the rules.

``kb lint``, ``kb ask`` with a config and the bots call ``lint_file``: it detects the dialect (kb.doctor.dialect),
takes the user's versions or assumes those the front end requires (each with its reason), and lints with the
registry as those releases have it. The versions go into the report, so the user sees what was assumed.

Core module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kb.doctor.configs import ParsedConfig, deepspeed_setting, with_deepspeed
from kb.doctor.dialect import AssumedVersion, assumed_versions, detect, view_for
from kb.doctor.lint import Finding, lint_config
from kb.memory.card import DEFAULT_GPU_MEM_GIB
from kb.registry.store import Registry


@dataclass
class Judged:
    findings: list[Finding]
    kind: str  # the dialect when one was detected, else the config's kind
    versions: list[AssumedVersion] = field(default_factory=list)
    registry: Registry | None = None  # the view the file was linted with


def lint_file(
    cfg: ParsedConfig,
    registry: Registry,
    given: dict[str, str] | None = None,
    world_size: int | None = None,
    model_params: float | None = None,
    gpu_mem_gib: float | None = None,
    with_cfg: ParsedConfig | None = None,
) -> Judged:
    """Findings for one parsed file, with the dialect and the releases it was judged at; with ``with_cfg`` (the other
    file of the same run, ``kb lint --with``) also what the two get together (``cross_findings``), in file order."""
    base = registry._default_view()
    given = dict(given or {})
    if cfg.dialect is None:
        cfg.dialect = detect(cfg.kind, cfg.data, base)
    versions = assumed_versions(cfg.dialect or cfg.kind, base, given)
    view = view_for(base, versions) if versions else base.at(given)
    findings = lint_config(
        cfg,
        view,
        world_size=world_size,
        model_params=model_params,
        gpu_mem_gib=DEFAULT_GPU_MEM_GIB if gpu_mem_gib is None else gpu_mem_gib,
    )
    if with_cfg is not None:
        findings = sorted(
            [*findings, *cross_findings(cfg, with_cfg, registry, given)], key=lambda f: (f.line or 0, f.path, f.code)
        )
    return Judged(findings, cfg.dialect or cfg.kind, versions, view)


def compose(
    primary: ParsedConfig, other: ParsedConfig, registry: Registry | None = None
) -> tuple[ParsedConfig, str] | None:
    """The one configuration two files make together, when one is the DeepSpeed config the other hands the HF Trainer
    (a launch line's ``--deepspeed ds.json``, a TrainingArguments / LLaMA-Factory file's ``deepspeed: ds.json``, or the
    config accelerate builds from its YAML's ``deepspeed_config`` for ``accelerate launch``), and which side ``primary``
    is ("args": the arguments file, "ds": the DeepSpeed side); None otherwise."""
    if primary.kind in ("deepspeed", "accelerate") and other.kind not in ("deepspeed", "accelerate"):
        made = compose(other, primary, registry)
        return (made[0], "ds") if made else None
    if other.kind == "accelerate":
        other = _accelerate_ds(other, registry)
        if other is None:
            return None
    if other.kind != "deepspeed":
        return None
    if primary.kind == "launch":
        args = dict(primary.data.get("script_args") or {})
        if "deepspeed" not in args and not other.source.startswith(_FROM_ACCELERATE):
            return None
        lines = {k.removeprefix("script_args."): v for k, v in primary.lines.items() if k.startswith("script_args.")}
    elif primary.kind == "training_args" and isinstance(deepspeed_setting(primary), str):
        args, lines = dict(primary.data), dict(primary.lines)
    else:
        return None
    args = with_deepspeed(args, other.data)
    lines.update({f"deepspeed.{k}": v for k, v in other.lines.items()})
    return ParsedConfig("training_args", args, f"{primary.source} + {other.source}", primary.fmt, lines), "args"


_FROM_ACCELERATE = "accelerate:"  # the source of a ds config kb built from an accelerate YAML (_accelerate_ds)


def _accelerate_ds(cfg: ParsedConfig, registry: Registry | None) -> ParsedConfig | None:
    """The DeepSpeed config accelerate builds from a YAML's ``deepspeed_config`` (no ``deepspeed_config_file``): each
    key written there, at the DeepSpeed path the registry's accelerate mapping copies it to (``transform`` None: the
    value is copied as it is). accelerate writes these values explicitly (DeepSpeedPlugin.__post_init__), so the HF
    Trainer compares them with its arguments."""
    block = cfg.data.get("deepspeed_config")
    if registry is None or not isinstance(block, dict) or block.get("deepspeed_config_file"):
        return None
    ds: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for path, recs in registry.mappings.items():
        for m in recs:
            if m.get("front_end") != "accelerate_yaml" or m.get("transform") is not None:
                continue
            key = str(m.get("front_name") or "").removeprefix("deepspeed_config.")
            if key not in block or path == "*":
                continue
            cur = ds
            *parents, leaf = path.split(".")
            for part in parents:
                cur = cur.setdefault(part, {})
            cur[leaf] = block[key]
            lines[path] = cfg.line(f"deepspeed_config.{key}") or 0
            _YAML_KEY[(cfg.source, path)] = f"deepspeed_config.{key}"
    if not ds:
        return None
    return ParsedConfig("deepspeed", ds, _FROM_ACCELERATE + cfg.source, "yaml", lines)


_YAML_KEY: dict[tuple[str, str], str] = {}  # (accelerate YAML source, ds path) -> its deepspeed_config key


def cross_findings(
    primary: ParsedConfig, other: ParsedConfig, registry: Registry, given: dict[str, str] | None = None
) -> list[Finding]:
    """What two files get together and neither gets alone (``kb lint FILE --with OTHER``): e.g. a DeepSpeed value the
    HF Trainer compares with the launch line's arguments (KB047). Paths are the primary file's own: a launch line's
    arguments under ``script_args.``, the DeepSpeed config's keys under ``deepspeed.`` (or bare when the primary is
    the DeepSpeed config)."""
    made = compose(primary, other, registry)
    if made is None:
        return []
    both, side = made
    together = lint_file(both, registry, given).findings
    ds_side = other if side == "args" else primary
    alone = (
        {(f.code, f.path) for f in lint_file(ds_side, registry, given).findings}
        if ds_side.kind == "deepspeed"
        else set()
    )
    args_file = primary if side == "args" else other
    out: list[Finding] = []
    for f in together:
        ds_key = f.path.startswith("deepspeed.")
        if (f.code, f.path.removeprefix("deepspeed.")) in alone and ds_key:
            continue  # the DeepSpeed config's own finding, not one of the pair
        if not ds_key and side == "args" and f.code in {x.code for x in lint_file(args_file, registry, given).findings}:
            continue
        path = f.path
        ds_path = f.path.removeprefix("deepspeed.")
        if side == "ds":
            if not ds_key:
                continue  # a finding on the other file's arguments belongs to that file's report
            path = _YAML_KEY.get((primary.source, ds_path), ds_path) if primary.kind == "accelerate" else ds_path
        elif ds_key:  # on the arguments file: at its argument the value is compared with, else the one handing it over
            named = [
                m["front_name"]
                for m in registry.mappings.get(ds_path, [])
                if m.get("front_end") == "training_args"
                and m["front_name"] in (args_file.data.get("script_args") or {})
            ]
            if args_file.kind == "launch":
                path = f"script_args.{named[0]}" if named else "script_args.deepspeed"
            else:
                path = named[0] if named else "deepspeed"
        elif args_file.kind == "launch":
            path = f"script_args.{f.path}"
        line = primary.line(path)
        msg, msg_zh = f.message, f.message_zh
        src = ds_side.source
        if ds_side.kind == "accelerate" and ds_key:
            key = _YAML_KEY.get((src, ds_path), ds_path)
            msg += f" (The DeepSpeed config here is the one accelerate builds from `{key}` of {src}.)"
            msg_zh += f"（这里的 DeepSpeed 配置是 accelerate 按 {src} 里的 `{key}` 生成的。）"
        out.append(Finding(f.code, f.severity, path, line, msg, f.suggestion, f.entry, msg_zh, f.suggestion_zh))
    return out
