"""Every lint verdict about validity, proven against DeepSpeed itself.

For each case, the config is linted (kb.doctor.lint, no DeepSpeed involved) and then built with DeepSpeed's
own config classes on CPU: DeepSpeed must raise, ignore or accept it exactly as the finding says.
Every validity rule (``Rule.validity``: DeepSpeed or accelerate raises) must have a case here
(``RAISES`` or a test marked ``@proves``), and every bad / ok case a validity rule carries is built too.
"""

import json
import logging
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest

from kb.doctor.configs import parse_config
from kb.doctor.lint import CORE_ORACLE, RULES, lint_config

ROOT = Path(__file__).resolve().parent.parent

deepspeed = pytest.importorskip("deepspeed")
import deepspeed.comm as ds_comm  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig, DeepSpeedConfigError  # noqa: E402
from pydantic import ValidationError  # noqa: E402

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
DS_DIR = Path(deepspeed.__file__).parent
PROVEN: dict[str, list[str]] = {}  # rule code -> the tests below that prove it (besides RAISES)


def proves(*codes: str):
    def mark(fn):
        for code in codes:
            PROVEN.setdefault(code, []).append(fn.__name__)
        return fn

    return mark


@contextmanager
def world(n: int | None):
    """DeepSpeedConfig asks deepspeed.comm for the world size; without a process group it falls back to 1."""
    if not n or n == 1:
        yield
        return
    with (
        mock.patch.object(ds_comm, "get_rank", lambda *a, **k: 0),
        mock.patch.object(ds_comm, "get_world_size", lambda *a, **k: n),
    ):
        yield


def build(cfg: dict, world_size: int | None = None, base: bool = True) -> DeepSpeedConfig:
    with world(world_size):
        return DeepSpeedConfig(json.loads(json.dumps({**BASE, **cfg} if base else cfg)))


def codes(cfg: dict, registry, base: bool = True, **kw) -> set[str]:
    parsed = parse_config(json.dumps({**BASE, **cfg} if base else cfg, indent=2))
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


@proves("KB002")
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


@proves("KB009")
def test_nvme_without_path_is_accepted_then_crashes_at_init(registry):
    cfg = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}}
    assert "KB009" in codes(cfg, registry)
    z = build(cfg).zero_config
    assert z.offload_optimizer.nvme_path is None
    # ZeRO-3 builds its swap folder from that path when the optimizer is created
    src = DS_DIR / "runtime" / "zero" / "stage3.py"
    assert "os.path.join(offload_optimizer_config.nvme_path, 'zero_stage_3')" in src.read_text()
    # and zero.Init asserts it for parameters on NVMe
    init = (DS_DIR / "runtime" / "zero" / "partition_parameters.py").read_text()
    assert "assert ds_config.zero_config.offload_param.nvme_path is not None" in init


@proves("KB020")
def test_nvme_below_stage3_is_cpu_offload(registry):
    cfg = {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}}
    found = codes(cfg, registry)
    assert "KB020" in found and "KB009" not in found  # ZeRO-1/2 never read nvme_path: no crash
    assert build(cfg).zero_config.offload_optimizer.device == "nvme"
    src = (DS_DIR / "runtime" / "zero" / "stage_1_and_2.py").read_text()
    # any device but none means CPU offload; the ZeRO-1/2 optimizer never reads nvme_path
    assert "offload_optimizer_config.device != OffloadDeviceEnum.none:\n            self.cpu_offload = True" in src
    assert "NVMe offload use the same CPU gradient path" in src and "nvme_path" not in src


@proves("KB012")
@pytest.mark.parametrize(
    "cfg,world_size,flagged",
    [
        ({"train_batch_size": 16, "gradient_accumulation_steps": 8}, 2, False),
        ({"train_batch_size": 16, "gradient_accumulation_steps": 8}, 4, True),
        ({"train_batch_size": 8}, 1, False),  # accumulation not given: DeepSpeed derives 8
        ({"train_batch_size": 8}, 4, False),  # derives 2
        ({"train_batch_size": 6, "train_micro_batch_size_per_gpu": 4}, 1, True),  # derives 1: 6 != 4
        ({"train_batch_size": 3}, 4, True),  # derives 0
    ],
)
def test_batch_arithmetic_as_deepspeed_derives_it(registry, cfg, world_size, flagged):
    full = {"train_micro_batch_size_per_gpu": 1, **cfg}
    assert ("KB012" in codes(full, registry, base=False, world_size=world_size)) is flagged
    if flagged:
        with pytest.raises(AssertionError):
            build(full, world_size, base=False)
    else:
        c = build(full, world_size, base=False)
        assert c.train_batch_size == c.train_micro_batch_size_per_gpu * c.gradient_accumulation_steps * world_size


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


@proves("KB001")
def test_accelerate_unknown_top_level_key_raises(tmp_path, registry):
    from accelerate.commands.config.config_args import ClusterConfig

    f = tmp_path / "acc.yaml"
    f.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nzero_stage: 3\n")
    assert "KB001" in {x.code for x in lint_config(parse_config(f.read_text()), registry)}
    with pytest.raises(ValueError, match="unknown keys"):
        ClusterConfig.from_yaml_file(f)


# ---------------------------------------------------------------- the rules' own cases, built by DeepSpeed

# bad cases of validity rules that DeepSpeed accepts when it builds the config, and the test proving what then happens
# ok cases whose validity depends on a world size lint was not told: built with the one that makes them valid
BUILD_WORLD = {("KB012", "world size unknown, 2 would do"): 2}
ACCEPTED_AT_BUILD = {
    ("KB002", "ZeRO key at top level"): "test_misplaced_at_top_level_is_ignored_not_applied",
    ("KB009", "optimizer"): "test_nvme_without_path_is_accepted_then_crashes_at_init",
    ("KB009", "params"): "test_nvme_without_path_is_accepted_then_crashes_at_init",
}
VALIDITY_CASES = [
    (code, kind, i)
    for code, r in sorted(RULES.items())
    if r.validity and r.oracle == CORE_ORACLE  # the rule modules' own oracle files prove theirs
    for kind, cases in (("bad", r.bad), ("ok", r.ok))
    for i in range(len(cases))
]


def _build_case(case, tmp_path, world_size=None):
    """Build a rule's case the way its tool would: DeepSpeedConfig, or accelerate's config loader."""
    cfg = parse_config(case.config)
    if cfg.kind == "accelerate":
        from accelerate.commands.config.config_args import ClusterConfig

        f = tmp_path / "accelerate.yaml"
        f.write_text(case.config)
        return ClusterConfig.from_yaml_file(f)
    data = cfg.data if "train_batch_size" in cfg.data else {**BASE, **cfg.data}
    return build(data, world_size, base=False)


@pytest.mark.parametrize("code,kind,i", VALIDITY_CASES, ids=[f"{c}-{k}{i}" for c, k, i in VALIDITY_CASES])
def test_validity_rule_cases_against_deepspeed(registry, tmp_path, code, kind, i):
    """A validity rule's bad cases make DeepSpeed (or accelerate) raise; its ok cases build."""
    case = (RULES[code].bad if kind == "bad" else RULES[code].ok)[i]
    ws = BUILD_WORLD.get((code, case.note), case.world_size)
    if kind == "ok" or (code, case.note) in ACCEPTED_AT_BUILD:
        _build_case(case, tmp_path, ws)
        return
    with pytest.raises((ValidationError, DeepSpeedConfigError, AssertionError, ValueError)):
        _build_case(case, tmp_path, ws)


def test_every_validity_rule_has_an_oracle_case():
    validity = {code for code, r in RULES.items() if r.validity and r.oracle == CORE_ORACLE}
    proven = {row[2] for row in RAISES} | set(PROVEN)
    assert validity <= proven, f"validity rules without an oracle case here: {sorted(validity - proven)}"
    for (code, note), test in ACCEPTED_AT_BUILD.items():
        assert any(c.note == note for c in RULES[code].bad) and test in PROVEN[code], (code, note)
    for code, note in BUILD_WORLD:
        assert any(c.note == note for c in RULES[code].ok), (code, note)


def test_error_rules_are_validity_rules_unless_deepspeed_accepts_the_config():
    # KB014: the config is valid; the run dies of CUDA OOM at the first step, which no config class checks.
    # KB093: a trl subcommand its release lacks; trl is not installed here, so the rule stands on each release's CLI
    # source as the timeline read it (tests/test_trl_cli.py tests that reader on every form), not on a run
    not_enforced = {"KB014", "KB093"}
    errors = {code for code, r in RULES.items() if r.severity == "error"}
    assert {code for code, r in RULES.items() if r.validity} == errors - not_enforced
    # rules of kb/doctor/rules/ are proven in their own oracle files (Rule.oracle), which run their rule module's cases
    for code, r in RULES.items():
        if r.validity and r.oracle != CORE_ORACLE:
            module = r.check.__module__.rsplit(".", 1)[-1]
            assert f"kb/doctor/rules/{module}.py" in (ROOT / r.oracle).read_text(encoding="utf-8"), (code, r.oracle)
