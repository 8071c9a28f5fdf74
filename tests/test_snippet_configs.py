"""Every DeepSpeed config snippet in the entries is built with DeepSpeed's own config classes, in its context.

Two contexts, told apart by the snippet itself:
- with ``"auto"`` values it is for the HF Trainer (or accelerate / a front end on top of it), which fills them:
  the fix's text must say so, and the test fills them the way the Trainer does
  (``HfTrainerDeepSpeedConfig.trainer_config_process`` / ``trainer_config_finalize``) before building;
- without, it is for plain ``deepspeed.initialize``: a fragment gets a micro-batch size (the rest of the user's
  config).
In the plain context a complete config (one that sets a batch size) that offloads the optimizer needs its own
``optimizer`` block: DeepSpeed refuses a client torch optimizer with ZeRO-Offload unless
``zero_force_ds_cpu_optimizer`` is false (engine.py:2344). Under the HF Trainer the block is optional: accelerate
turns the Trainer's AdamW into DeepSpeedCPUAdam (accelerate/accelerator.py).
Then ``deepspeed.runtime.config.DeepSpeedConfig`` must accept it (pydantic validation of every section).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT

BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
HF_CONTEXT = re.compile(
    r"Trainer|TrainingArguments|accelerate|LLaMA-Factory|llamafactory|axolotl|--deepspeed|trl|swift", re.I
)


def _snippets():
    import yaml

    out = []
    for p in sorted((ROOT / "data" / "entries").glob("*.yaml")):
        e = yaml.safe_load(p.read_text(encoding="utf-8"))
        for i, f in enumerate(e.get("fixes") or []):
            sn = f.get("snippet") or {}
            if sn.get("lang") == "json":
                out.append(pytest.param(e, i, id=f"{e['id']}:fix{i}"))
    return out


def _has_auto(x) -> bool:
    if isinstance(x, dict):
        return any(_has_auto(v) for v in x.values())
    if isinstance(x, list):
        return any(_has_auto(v) for v in x)
    return x == "auto"


def _enabled(cfg: dict, key: str) -> bool:
    return isinstance(cfg.get(key), dict) and cfg[key].get("enabled") is True


def _hf_fill(cfg: dict, tmp_path) -> dict:
    """The "auto" values filled as the Trainer does, for TrainingArguments that agree with the snippet's own values
    (its precision; defaults elsewhere)."""
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    hf = HfTrainerDeepSpeedConfig(cfg)
    flags = {"bf16": _enabled(cfg, "bf16"), "fp16": _enabled(cfg, "fp16")}
    mb, ga = cfg.get("train_micro_batch_size_per_gpu"), cfg.get("gradient_accumulation_steps")
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=mb if isinstance(mb, int) else 1,
        gradient_accumulation_steps=ga if isinstance(ga, int) else 1,
        use_cpu=not any(flags.values()),
    )
    for k, v in flags.items():
        setattr(args, k, v)  # as the user's TrainingArguments would say (set after init: no GPU on this machine)
    hf.trainer_config_process(args)

    class Model:  # what trainer_config_finalize reads for the hidden-size-based "auto" buckets
        class config:
            hidden_size = 4096

    hf.trainer_config_finalize(args, Model(), 1000)
    return hf.config


@pytest.mark.parametrize("entry,i", _snippets())
def test_snippet_builds_with_deepspeed_config(entry, i, tmp_path, monkeypatch):
    pytest.importorskip("deepspeed")
    import deepspeed.runtime.config as ds_config
    from deepspeed.runtime.config import DeepSpeedConfig

    monkeypatch.setattr(ds_config.dist, "get_rank", lambda *a, **k: 0)  # rank 0 of the snippet's data-parallel size

    fix = entry["fixes"][i]
    cfg = json.loads(fix["snippet"]["code"])
    complete = any(k in cfg for k in BATCH_KEYS)
    dev = ((cfg.get("zero_optimization") or {}).get("offload_optimizer") or {}).get("device")
    if complete and dev in ("cpu", "nvme") and not _has_auto(cfg):
        assert "optimizer" in cfg or cfg.get("zero_force_ds_cpu_optimizer") is False, (
            f"{entry['id']}: a complete plain-DeepSpeed config that offloads the optimizer needs an optimizer block "
            "(DeepSpeed refuses a client torch optimizer with ZeRO-Offload by default)"
        )
    if _has_auto(cfg):
        context = " ".join([fix["text"]["en"], fix["title"]["en"], entry["summary"]["en"]])
        assert HF_CONTEXT.search(context), f"{entry['id']}: 'auto' values need the HF Trainer; the fix must say so"
        if not any(k in cfg for k in BATCH_KEYS):
            cfg["train_micro_batch_size_per_gpu"] = "auto"
        cfg = _hf_fill(cfg, tmp_path)
        assert not _has_auto(cfg), cfg
    elif not complete:
        cfg["train_micro_batch_size_per_gpu"] = 1  # a fragment: the rest of the user's config
    DeepSpeedConfig(cfg, mpu=_DataParallel(_world_size(cfg)))


class _DataParallel:
    """The data-parallel size a snippet is written for (DeepSpeedConfig checks the batch sizes against it)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def get_data_parallel_world_size(self) -> int:
        return self.n


def _world_size(cfg: dict) -> int:
    """1, or what a snippet that sets all three batch sizes implies: train_batch / (micro x accumulation)."""
    tb, mb, ga = (cfg.get(k) for k in BATCH_KEYS)
    if all(isinstance(x, int) and x > 0 for x in (tb, mb, ga)) and tb % (mb * ga) == 0:
        return tb // (mb * ga)
    return 1


def test_the_checks_can_fail(tmp_path):
    """The same building rejects what it must: an 'auto' value outside the Trainer, an unknown ZeRO key."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    with pytest.raises((TypeError, ValueError)):
        DeepSpeedConfig({"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}})
    with pytest.raises(ValueError, match="Extra inputs"):
        DeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "cpu_offload_x": 1}})
    filled = _hf_fill(
        {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"reduce_bucket_size": "auto"}}, tmp_path
    )
    assert filled["zero_optimization"]["reduce_bucket_size"] == 4096 * 4096
