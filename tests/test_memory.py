"""kb mem: DeepSpeed's own estimator figures, exactly; preset parameter counts from real model shapes."""

import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner

from kb.cli import main
from kb.memory import PRESETS, Setup, ds_zero2, ds_zero3, estimate, resolve_model, shape_from_hf_config


@pytest.fixture(scope="module")
def ds_estimators():
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    return estimate_zero2_model_states_mem_needs, estimate_zero3_model_states_mem_needs


SHAPES = [
    (6_738_415_616, 131_072_000),
    (125_000_000, 38_597_376),
    (46_702_792_704, 1_409_286_144),
    (70_553_706_496, 1_050_673_152),
    (1_000_003, 77),
    (13_015_864_320, 163_840_000),
]
TOPOLOGIES = [(1, 1), (2, 1), (8, 1), (8, 4), (4, 16), (3, 5)]


@pytest.mark.parametrize("P,L", SHAPES)
@pytest.mark.parametrize("gpn,nodes", TOPOLOGIES)
def test_model_states_equal_deepspeed(ds_estimators, P, L, gpn, nodes):
    z2, z3 = ds_estimators
    for off in (False, True):
        assert ds_zero2(P, gpn, nodes, off) == z2(P, gpn, nodes, cpu_offload=off)
        for off_p in (False, True):
            for zi in (False, True):
                cpu, gpu, _ = z3(P, L, gpn, nodes, cpu_offload=off, cpu_offload_params=off_p, zero_init=zi)
                assert ds_zero3(P, L, gpn, nodes, off, off_p, zi) == (cpu, gpu)


def test_estimate_carries_the_estimator_figure(ds_estimators):
    _, z3 = ds_estimators
    shape = PRESETS["llama2-7b"]
    e = estimate(Setup(shape=shape, gpus=1, stage=3, offload="none"))
    cpu, gpu, _ = z3(shape.params(), shape.largest_layer(), 1, 1, cpu_offload=False, cpu_offload_params=False)
    assert e.deepspeed_estimator["gpu_bytes"] == gpu and e.deepspeed_estimator["cpu_bytes"] == cpu
    assert math.isclose(e.deepspeed_estimator["gpu_gib"], gpu / 2**30, rel_tol=1e-12)
    assert e.gpu["model states (DeepSpeed estimator)"] == round(gpu / 2**30, 3)


KNOWN_TOTALS = {
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "mistral-7b": 7_241_732_096,
    "llama3-8b": 8_030_261_248,
    "qwen2.5-7b": 7_615_616_512,
    "mixtral-8x7b": 46_702_792_704,
}


@pytest.mark.parametrize("name,total", sorted(KNOWN_TOTALS.items()))
def test_preset_totals(name, total):
    assert PRESETS[name].params() == total


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_match_transformers_models_on_meta(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    s = PRESETS[name]
    fam = (
        "Mixtral" if s.experts > 1 else "Qwen2" if s.qkv_bias else "Mistral" if name.startswith("mistral") else "Llama"
    )
    cfg = getattr(transformers, f"{fam}Config")(**s.hf_config_fields())
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert sum(p.numel() for p in model.parameters()) == s.params()
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    assert largest == s.largest_layer()


def test_config_json(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "vocab_size": 32000,
                "hidden_size": 4096,
                "intermediate_size": 11008,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 32,
            }
        )
    )
    assert shape_from_hf_config(f).params() == 6_738_415_616
    assert resolve_model(str(tmp_path)).params() == 6_738_415_616
    f.write_text('{"hidden_size": 8}')
    with pytest.raises(ValueError, match="missing or invalid field"):
        shape_from_hf_config(f)


def test_acceptance_llama2_7b_single_gpu_zero3_no_offload():
    r = CliRunner().invoke(
        main,
        [
            "mem",
            "--model",
            "llama2-7b",
            "--gpus",
            "1",
            "--gpu-mem",
            "80",
            "--stage",
            "3",
            "--offload",
            "none",
            "--json",
        ],
    )
    assert r.exit_code == 1
    e = json.loads(r.output)
    assert not e["fits_gpu"]
    assert e["deepspeed_estimator"]["gpu_gib"] == pytest.approx(113.45, abs=0.01)
    assert e["gpu"]["model states (DeepSpeed estimator)"] == pytest.approx(113.45, abs=0.01)
    assert e["changes"] and any("offload" in c["change"] for c in e["changes"])


def test_offload_moves_the_pressure_to_host():
    base = dict(shape=PRESETS["llama2-7b"], gpus=1, stage=3, cpu_mem_gib=128)
    e = estimate(Setup(**base, offload="optimizer+param", activation_checkpointing=True))
    assert e.fits_gpu and e.gpu_total_gib < 5
    assert e.host_total_gib == pytest.approx(169.44, abs=0.01) and e.host_verdict == "tight"  # 121 GiB raw + 3
    e = estimate(Setup(**base, offload="optimizer"))
    assert e.host_total_gib == pytest.approx(150.62, abs=0.01)


def test_activations_grow_with_sequence_and_shrink_with_checkpointing():
    s = Setup(shape=PRESETS["llama2-7b"], stage=3, offload="optimizer")
    a1 = estimate(s).gpu["activations"]
    a2 = estimate(Setup(**{**s.__dict__, "seq": 4096})).gpu["activations"]
    ck = estimate(Setup(**{**s.__dict__, "activation_checkpointing": True})).gpu["activations (checkpointed)"]
    assert a2 == pytest.approx(2 * a1, rel=1e-3) and ck < a1 / 10
    # per layer s*b*(22h + 4kv + 8i); eager attention adds Korthikanti et al.'s 5*a*s^2*b
    sh = PRESETS["llama2-7b"]
    sdpa = sh.layers * 2048 * (22 * sh.hidden + 4 * sh.kv_dim + 8 * sh.intermediate) / 2**30
    assert a1 == pytest.approx(sdpa, abs=1e-3)
    eager = estimate(Setup(**{**s.__dict__, "flash_attention": False})).gpu["activations"]
    assert eager == pytest.approx(sdpa + sh.layers * 5 * sh.heads * 2048 * 2048 / 2**30, abs=1e-3)


def test_lora_and_qlora():
    e = estimate(Setup(shape=PRESETS["llama2-7b"], lora_rank=16, activation_checkpointing=True))
    assert e.trainable_params == 39_976_960  # r=16 on q,k,v,o,gate,up,down of 32 layers
    assert e.fits_gpu and 12 < e.gpu_total_gib < 16
    q = estimate(Setup(shape=PRESETS["llama2-7b"], qlora=True, lora_rank=16, activation_checkpointing=True))
    assert q.gpu["frozen base weights"] < e.gpu["frozen base weights"] / 2.5


def test_bad_model_is_a_clear_error():
    r = CliRunner().invoke(main, ["mem", "--model", "gpt-99"])
    assert r.exit_code == 2 and "unknown model" in r.output
    r = CliRunner().invoke(main, ["mem"])
    assert r.exit_code == 2


def test_host_verdict_three_ways():
    s = dict(shape=PRESETS["llama2-7b"], gpus=1, stage=3, offload="optimizer", activation_checkpointing=True)
    assert estimate(Setup(**s, cpu_mem_gib=256)).host_verdict == "fits"
    assert estimate(Setup(**s, cpu_mem_gib=125)).host_verdict == "tight"  # measured: ran at 123 GiB RSS
    assert estimate(Setup(**s, cpu_mem_gib=64)).host_verdict == "does not fit"


# runs a-c are the ones kb mem's terms were checked on (docs/memory.md); run d (issue 13) is new evidence on
# shapes, sequences, micro-batches, LoRA and QLoRA the estimate was not fitted to: it does not meet the
# targets yet, and the strict xfail below turns into a failure the day it does (then fold it in here)
FITTED_RUNS = ("h200-run-a.jsonl", "h200-run-b.jsonl", "h200-run-c.jsonl")


def test_measured_runs_agree_with_the_estimates():
    """Runs a-c of data/measurements/: verdict right, trained runs within 16% (docs/memory.md)."""
    from bench.compare_memory import rows
    from tests.conftest import ROOT

    rs = rows([ROOT / "data" / "measurements" / f for f in FITTED_RUNS])
    assert len(rs) >= 15
    assert all(r["verdict_right"] for r in rs), [r for r in rs if not r["verdict_right"]]
    errs = [abs(r["error_pct"]) for r in rs if r["error_pct"] is not None]
    assert errs and max(errs) < 0.16 and sum(e <= 0.15 for e in errs) >= len(errs) - 1


@pytest.mark.xfail(strict=True, reason="issue 13: kb mem over-counts ZeRO-3 and under-counts LoRA/QLoRA on run d")
def test_issue13_runs_meet_the_targets():
    """Issue 13's targets on the 20 runs of h200-run-d: every verdict right, every trained run within 15%."""
    from bench.compare_memory import rows
    from tests.conftest import ROOT

    rs = rows([ROOT / "data" / "measurements" / "h200-run-d.jsonl"])
    assert len(rs) == 20
    assert all(r["verdict_right"] for r in rs)
    assert all(abs(r["error_pct"]) <= 0.15 for r in rs if r["error_pct"] is not None)


def test_ask_with_config_and_model_size_carries_memory(fake_engine):
    cfg = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}, "train_micro_batch_size_per_gpu": 1}'
    ans = fake_engine.ask("llama2-7b on one gpu with zero3 runs out of memory", config_text=cfg).to_dict()
    m = ans["memory"]
    assert m["model"] == "llama2-7b" and not m["fits_gpu"]
    assert m["deepspeed_estimator_gib"] == pytest.approx(113.45, abs=0.01)
    ans = fake_engine.ask("7b 8卡 zero3 爆显存", config_text=cfg).to_dict()
    assert ans["memory"]["model"] == "7B" and ans["memory"]["fits_gpu"]  # 8 GPUs: partitioned
    assert fake_engine.ask("zero3 out of memory", config_text=cfg).memory is None  # no model size: no guess


# ---------------------------------------------------------------- one home per fact: kb.memory, the registry


@pytest.mark.parametrize("params", [7e9, 13e9, 3e9, 6_738_415_616])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_lint_fit_rule_uses_the_memory_figure(registry, params, stage):
    """KB014 fires exactly above kb.memory's model-state figure, and says the same number and basis."""
    from kb.configs import parse_config
    from kb.lint import lint_config
    from kb.memory import model_states

    ms = model_states(params, stage)
    need = ms.gpu_bytes / 2**30
    cfg = parse_config(json.dumps({"zero_optimization": {"stage": stage}}))
    below = lint_config(cfg, registry, world_size=1, model_params=params, gpu_mem_gib=need * 0.999)
    above = lint_config(cfg, registry, world_size=1, model_params=params, gpu_mem_gib=need * 1.001)
    fit = [f for f in below if f.code == "KB014"]
    assert len(fit) == 1 and not [f for f in above if f.code == "KB014"]
    assert f"at least {need:.0f} GiB" in fit[0].message and ms.basis in fit[0].message
    assert f"{ms.gpu_bytes / params:.0f} bytes/param" in fit[0].message
    assert ms.basis_zh in fit[0].message_zh
    # kb mem prints the same figure for the same setup (largest layer unknown: 0)
    e = estimate(Setup(params=int(params), gpus=1, stage=stage, offload="none"))
    assert e.gpu["model states (DeepSpeed estimator)"] == round(ms.gpu_bytes / 2**30, 3)
    if stage in (0, 1):
        assert any(ms.basis in n for n in e.notes)  # the same honest wording in both places


def test_stage_0_and_1_use_the_zero2_formula_and_say_so():
    from kb.memory import model_states

    for stage in (0, 1):
        ms = model_states(7e9, stage)
        assert ms.formula == 2 and ms.function == "estimate_zero2_model_states_mem_needs"
        assert ms.gpu_bytes == ds_zero2(7e9, 1, 1, False)[1] == 20 * 7e9
        assert "estimators for ZeRO-2 and ZeRO-3 only" in ms.basis and f"stage {stage}" in ms.basis
    assert "DeepSpeed's ZeRO-3 estimator" in model_states(7e9, 3).basis
    assert model_states(7e9, 0, gpus=8).gpu_bytes == model_states(7e9, 0).gpu_bytes  # nothing partitioned


def test_defaults_come_from_the_registry(registry):
    from kb.configs import parse_config
    from kb.lint import lint_config
    from kb.memory import additional_buffer_factor, registry_default

    rec = {
        k: json.loads(registry.get(f"deepspeed:zero_optimization.{k}")["default"])
        for k in ("reduce_bucket_size", "stage3_prefetch_bucket_size")
    }
    assert registry_default("zero_optimization.reduce_bucket_size") == rec["reduce_bucket_size"]
    for formula, fn in ((2, "stage_1_and_2.estimate_zero2"), (3, "stage3.estimate_zero3")):
        r = registry.get(f"deepspeed:runtime.zero.{fn}_model_states_mem_needs.additional_buffer_factor")
        assert additional_buffer_factor(formula) == json.loads(r["default"])
    P = PRESETS["llama2-7b"].params()
    e3 = estimate(Setup(shape=PRESETS["llama2-7b"], stage=3))
    grad = [v for k, v in e3.gpu.items() if k.startswith("ZeRO-3 contiguous gradient buffer")]
    pre = [v for k, v in e3.gpu.items() if k.startswith("ZeRO-3 prefetch")]
    assert grad == [round(min(rec["reduce_bucket_size"], P) * 2 / 2**30, 3)]
    assert pre == [round(min(rec["stage3_prefetch_bucket_size"], P) * 2 / 2**30, 3)]
    e2 = estimate(Setup(shape=PRESETS["llama2-7b"], stage=2))
    assert [v for k, v in e2.gpu.items() if k.startswith("ZeRO-1/2 reduce bucket")] == grad
    # lint's bucket rule reads the same default when the config does not set it
    cfg = parse_config('{"zero_optimization": {"stage": 2, "overlap_comm": true}}')
    (f,) = [f for f in lint_config(cfg, registry) if f.code == "KB013"]
    assert f"reduce_bucket_size={rec['reduce_bucket_size']:,}" in f.message


def test_default_card_is_one_constant():
    import inspect

    from kb.lint import Case, lint_config
    from kb.memory import DEFAULT_GPU_MEM_GIB

    assert inspect.signature(lint_config).parameters["gpu_mem_gib"].default == DEFAULT_GPU_MEM_GIB
    assert Case("{}").gpu_mem_gib == DEFAULT_GPU_MEM_GIB == Setup().gpu_mem_gib


def test_import_memory_loads_no_yaml_or_pydantic():
    code = "import sys, kb.memory; print(any(m.split('.')[0] in ('yaml', 'pydantic') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_note_and_change_has_its_chinese_twin():
    from kb.memory import PRESETS, Setup, estimate_with_changes

    cases = [
        Setup(shape=PRESETS["llama2-7b"], stage=3),
        Setup(shape=PRESETS["llama2-7b"], stage=1, offload="optimizer+param", precision="fp32"),
        Setup(shape=PRESETS["llama2-7b"], stage=0),
        Setup(shape=PRESETS["llama2-7b"], qlora=True, lora_rank=8, stage=3),
        Setup(params=7_000_000_000, stage=3, cpu_mem_gib=120, offload="optimizer"),
    ]
    for s in cases:
        e = estimate_with_changes(s)
        assert len(e.notes) == len(e.notes_zh)
        for text in e.notes_zh + [c["change_zh"] + c["cost_zh"] for c in e.changes]:
            assert any("\u4e00" <= ch <= "\u9fff" for ch in text), text
