"""Every lint verdict about validity, proven against DeepSpeed itself.

For each case, the config is linted (kb.lint, no DeepSpeed involved) and then built with DeepSpeed's
own config classes on CPU: DeepSpeed must raise, ignore or accept it exactly as the finding says.
"""

import json
import logging
from pathlib import Path

import pytest

from kb.configs import parse_config
from kb.lint import lint_config

deepspeed = pytest.importorskip("deepspeed")
from deepspeed.runtime.config import DeepSpeedConfig, DeepSpeedConfigError  # noqa: E402
from pydantic import ValidationError  # noqa: E402

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}


def build(cfg: dict) -> DeepSpeedConfig:
    return DeepSpeedConfig(json.loads(json.dumps({**BASE, **cfg})))


def codes(cfg: dict, registry, **kw) -> set[str]:
    parsed = parse_config(json.dumps({**BASE, **cfg}, indent=2))
    return {f.code for f in lint_config(parsed, registry, **kw)}


RAISES = [
    # (id, config, lint code, exception DeepSpeed raises, text in its message)
    (
        "unknown key in zero_optimization",
        {"zero_optimization": {"stage": 3, "zero_force_opt_offload": True}},
        "KB001",
        ValidationError,
        "Extra inputs are not permitted",
    ),
    (
        "unknown key in bf16",
        {"bf16": {"enabled": True, "check_overflow": True}},
        "KB001",
        ValidationError,
        "Extra inputs",
    ),
    (
        "nvme_path misplaced",
        {"zero_optimization": {"stage": 3, "nvme_path": "/nvme"}},
        "KB002",
        ValidationError,
        "Extra inputs",
    ),
    (
        "force cpu optimizer misplaced",
        {"zero_optimization": {"stage": 2, "zero_force_ds_cpu_optimizer": False}},
        "KB002",
        ValidationError,
        "Extra inputs",
    ),
    ("removed top-level key", {"amp": {"enabled": True}}, "KB004", DeepSpeedConfigError, "removed"),
    (
        "string that is not an int",
        {"zero_optimization": {"stage": 2, "reduce_bucket_size": "5e8"}},
        "KB006",
        ValidationError,
        "valid integer",
    ),
    ("stage out of range", {"zero_optimization": {"stage": 4}}, "KB006", ValidationError, "stage"),
    (
        "offload device gpu",
        {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "gpu"}}},
        "KB006",
        ValidationError,
        "'nvme'",
    ),
    (
        "bucket size zero",
        {"zero_optimization": {"stage": 2, "reduce_bucket_size": 0}},
        "KB006",
        ValidationError,
        "greater than 0",
    ),
    (
        "fractional int",
        {"zero_optimization": {"stage": 2, "allgather_bucket_size": 5.5}},
        "KB006",
        ValidationError,
        "fractional",
    ),
    (
        "deprecated plus replacement",
        {"zero_optimization": {"stage": 2, "cpu_offload": True, "offload_optimizer": {"device": "cpu"}}},
        "KB018",
        AssertionError,
        "Cannot provide deprecated parameter",
    ),
    (
        "bf16 and fp16",
        {"bf16": {"enabled": True}, "fp16": {"enabled": True}},
        "KB011",
        AssertionError,
        "cannot be simultaneously enabled",
    ),
    ("batch arithmetic", {"train_batch_size": 4}, "KB012", AssertionError, "train_batch_size is not equal"),
    (
        "partial offload below stage 3",
        {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}},
        "KB017",
        ValidationError,
        "Partial offloading only supported for ZeRO Stage 3",
    ),
    ('"auto" batch size without HF', {"train_micro_batch_size_per_gpu": "auto"}, "KB007", TypeError, "not supported"),
]


@pytest.mark.parametrize("name,cfg,code,exc,text", RAISES, ids=[r[0] for r in RAISES])
def test_deepspeed_raises_where_lint_says_error(registry, name, cfg, code, exc, text):
    found = codes(cfg, registry, world_size=1)
    assert code in found, found
    with pytest.raises(exc, match=text):
        build(cfg)


def test_silently_ignored_top_level_key(registry):
    cfg = {"zero_force_opt_offload": True, "zero_optimization": {"stage": 3}}
    assert "KB005" in codes(cfg, registry)
    c = build(cfg)  # accepted ...
    assert not hasattr(c, "zero_force_opt_offload")  # ... and read by nobody
    assert c.zero_config.offload_optimizer is None


def test_misplaced_at_top_level_is_ignored_not_applied(registry):
    cfg = {"stage3_max_live_parameters": 1000, "zero_optimization": {"stage": 3}}
    assert "KB002" in codes(cfg, registry)
    assert build(cfg).zero_config.max_live_parameters == 1_000_000_000  # the default, not 1000


def test_typo_in_unvalidated_section_is_ignored(registry):
    cfg = {"activation_checkpointing": {"partitioned_activations": True}}
    found = codes(cfg, registry)
    assert {"KB005", "KB016"} <= found
    assert not build(cfg).activation_checkpointing_config.partition_activations


def test_deprecated_noop_changes_nothing(registry):
    cfg = {
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {"device": "cpu", "pin_memory": False},
            "cpu_offload_use_pin_memory": True,
        }
    }
    assert "KB003" in codes(cfg, registry)
    assert build(cfg).zero_config.offload_optimizer.pin_memory is False


def test_deprecated_alias_is_mapped(registry):
    cfg = {"zero_optimization": {"stage": 2, "cpu_offload": True}}
    assert "KB003" in codes(cfg, registry) and "KB018" not in codes(cfg, registry)
    assert build(cfg).zero_config.offload_optimizer.device == "cpu"


def test_coerced_value_is_accepted(registry):
    cfg = {"zero_optimization": {"stage": "3", "reduce_bucket_size": "8"}}
    found = codes(cfg, registry)
    assert "KB019" in found and "KB006" not in found
    z = build(cfg).zero_config
    assert z.stage == 3 and z.reduce_bucket_size == 8


def test_auto_without_hf_is_dropped_to_default(registry):
    cfg = {"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3, "stage3_max_live_parameters": "auto"}}
    assert "KB007" in codes(cfg, registry)
    c = build(cfg)
    assert c.bfloat16_config.enabled is False  # fp32 training, silently
    assert c.zero_config.max_live_parameters == 1_000_000_000


def test_offload_block_without_device_offloads_nothing(registry):
    cfg = {"zero_optimization": {"stage": 3, "offload_optimizer": {"pin_memory": True}, "offload_param": {}}}
    assert "KB008" in codes(cfg, registry)
    z = build(cfg).zero_config
    assert z.offload_optimizer.device == "none" and z.offload_param.device == "none"


def test_nvme_without_path_is_accepted_then_crashes_at_init(registry):
    cfg = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}}
    assert "KB009" in codes(cfg, registry)
    z = build(cfg).zero_config
    assert z.offload_optimizer.nvme_path is None
    # ZeRO-3 builds its swap folder from that path when the optimizer is created
    src = Path(deepspeed.__file__).parent / "runtime" / "zero" / "stage3.py"
    assert "os.path.join(offload_optimizer_config.nvme_path, 'zero_stage_3')" in src.read_text()


def test_offload_param_below_stage3_is_accepted_and_unused(registry):
    cfg = {"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}
    assert "KB010" in codes(cfg, registry)
    assert build(cfg).zero_config.offload_param.device == "cpu"  # accepted without a word
    engine_src = (Path(deepspeed.__file__).parent / "runtime" / "engine.py").read_text()
    # the ZeRO-1/2 optimizer is built without any offload_param argument
    start = engine_src.index("def _configure_zero_optimizer")
    stage3 = engine_src.index("ZeroStageEnum.weights", start)
    assert "offload_param" not in engine_src[start:stage3]


def test_valid_config_has_no_errors_and_builds(registry):
    cfg = json.loads((Path(__file__).parent / "fixtures" / "configs" / "good_zero3_offload.json").read_text())
    parsed = parse_config(json.dumps(cfg))
    assert lint_config(parsed, registry, world_size=1) == []
    build(cfg)


def test_accelerate_unknown_top_level_key_raises(tmp_path, registry):
    from accelerate.commands.config.config_args import ClusterConfig

    f = tmp_path / "acc.yaml"
    f.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nzero_stage: 3\n")
    assert "KB001" in {x.code for x in lint_config(parse_config(f.read_text()), registry)}
    with pytest.raises(ValueError, match="unknown keys"):
        ClusterConfig.from_yaml_file(f)
