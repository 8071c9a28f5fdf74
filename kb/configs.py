"""Parsing what users paste as a config: DeepSpeed JSON, accelerate YAML, TrainingArguments JSON/YAML.

``parse_config`` detects the format and returns plain data; ``facts_from_config`` extracts the few
facts retrieval conditions use (ZeRO stage, offload devices, precision).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kb.retrieve import QueryFacts

MAX_CONFIG_BYTES = 1_000_000


class ConfigError(ValueError):
    """Unparseable config; the message names the source and line."""


@dataclass
class ParsedConfig:
    kind: str  # deepspeed | accelerate | training_args | unknown
    data: dict[str, Any]
    source: str


def parse_config(text: str, source: str = "<config>") -> ParsedConfig:
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: config is larger than {MAX_CONFIG_BYTES // 1000} kB; paste only the config")
    stripped = text.strip()
    if not stripped:
        raise ConfigError(f"{source}: config is empty")
    data: Any
    if stripped[0] in "{[":
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as e:
            data = _hjson(stripped)
            if data is None:
                raise ConfigError(f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(stripped)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark
            raise ConfigError(f"{source}:{mark.line + 1 if mark else '?'}: invalid YAML: {e.problem}") from None
        except yaml.YAMLError as e:
            raise ConfigError(f"{source}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    return ParsedConfig(_kind(data), data, source)


def _hjson(text: str) -> Any:
    """DeepSpeed also reads HJSON (comments, trailing commas)."""
    try:
        import hjson
    except ImportError:
        return None
    try:
        return hjson.loads(text)
    except Exception:  # noqa: BLE001 - any hjson failure means "not HJSON either"
        return None


def _kind(d: dict[str, Any]) -> str:
    if "deepspeed_config" in d or "distributed_type" in d or "compute_environment" in d:
        return "accelerate"
    if "zero_optimization" in d or "train_micro_batch_size_per_gpu" in d or "bf16" in d or "fp16" in d:
        return "deepspeed"
    if "per_device_train_batch_size" in d or "output_dir" in d or "deepspeed" in d:
        return "training_args"
    return "unknown"


def facts_from_config(cfg: ParsedConfig) -> QueryFacts:
    d = cfg.data
    f = QueryFacts()
    if cfg.kind == "accelerate":
        ds = d.get("deepspeed_config") or {}
        f.zero_stage = _int(ds.get("zero_stage"))
        f.offload_optimizer = _dev(ds.get("offload_optimizer_device"))
        f.offload_param = _dev(ds.get("offload_param_device"))
        mp = d.get("mixed_precision")
        f.precision = mp if mp in ("bf16", "fp16") else ("fp32" if mp == "no" else None)
        return f
    z = d.get("zero_optimization")
    if isinstance(z, dict):
        f.zero_stage = _int(z.get("stage", 0))
        for key in ("offload_optimizer", "offload_param"):
            blk = z.get(key)
            setattr(f, key, _dev(blk.get("device", "none")) if isinstance(blk, dict) else "none")
    if cfg.kind == "deepspeed":
        bf = d.get("bf16") or d.get("bfloat16") or {}
        fp = d.get("fp16") or {}
        if isinstance(bf, dict) and bf.get("enabled") is True:
            f.precision = "bf16"
        elif isinstance(fp, dict) and fp.get("enabled") is True:
            f.precision = "fp16"
        elif not (isinstance(bf, dict) and bf.get("enabled") == "auto") and not (
            isinstance(fp, dict) and fp.get("enabled") == "auto"
        ):
            f.precision = "fp32"
    return f


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def _dev(v: Any) -> str | None:
    return v if v in ("none", "cpu", "nvme") else None
