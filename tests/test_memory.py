"""kb mem: DeepSpeed's own estimator figures, exactly; preset parameter counts from real model shapes."""

import json
import math
import subprocess
import sys

import pytest
from click.testing import CliRunner

from cli.main import main
from kb.memory.estimate import PRESETS, Setup, ds_zero2, ds_zero3, estimate, resolve_model, shape_from_hf_config


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
    # a reference line, not a base to add to: no GPU term is the estimator's figure, and a note says the difference
    assert not [t for t in e.terms if "estimator" in t["label"].lower()]
    assert any(f"{gpu / 2**30:.2f} GiB" in n and "peak over phases" in n for n in e.notes)


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
    assert not e["fits_gpu"] and e["gpu_verdict"] == "does not fit"
    assert e["deepspeed_estimator"]["gpu_gib"] == pytest.approx(113.45, abs=0.01)
    # kb's own peak: 16 bytes/param held from the first step (100.4 GiB) plus the forward/backward transients
    assert 100.4 < e["gpu_total_gib"] < 125 and e["peak_phase"] in ("forward/backward", "optimizer step")
    assert e["changes"] and any("offload" in c["change"] for c in e["changes"])
    text = CliRunner().invoke(main, ["mem", "--model", "llama2-7b", "--gpus", "1", "--gpu-mem", "80", "--stage", "3",
                                     "--offload", "none"]).output  # fmt: skip
    assert "DeepSpeed's estimator says: 113.45 GiB per GPU" in text
    assert f"{e['gpu_total_gib']:9.2f} GiB  estimated peak allocated" in text and "DOES NOT FIT" in text


def test_offload_moves_the_pressure_to_host():
    """7B on a 125 GiB host (runs b): ZeRO-3 optimizer offload survived at 123 GiB RSS; ZeRO-2 optimizer offload
    and ZeRO-3 optimizer + parameter offload were killed."""
    base = dict(shape=PRESETS["llama2-7b"], gpus=1, cpu_mem_gib=125, activation_checkpointing=True)
    e = estimate(Setup(**base, stage=3, offload="optimizer"))
    assert e.fits_gpu and e.host_verdict == "tight" and 115 < e.host_total_gib <= 125
    assert estimate(Setup(**base, stage=2, offload="optimizer")).host_verdict == "does not fit"
    e = estimate(Setup(**base, stage=3, offload="optimizer+param"))
    assert e.gpu_total_gib < 5 and e.host_verdict == "does not fit"
    # pinned buffers as torch allocates them: a power of two each
    keys = {t["key"]: t for t in e.host_terms}
    assert "pow2ceil" in keys["grads16"]["formula"] and keys["grads16"]["gib"] == 16.0  # 2 x 6.74e9 B -> 16 GiB


def test_pinned_buffers_round_to_a_power_of_two():
    from kb.memory.estimate import pinned

    assert pinned(4.4e9) == 2**33 and pinned(2**32) == 2**32 and pinned(2**32 + 1) == 2**33 and pinned(0) == 0


def test_activations_grow_with_sequence_and_shrink_with_checkpointing():
    s = Setup(shape=PRESETS["llama2-7b"], stage=3, offload="optimizer")
    a1 = estimate(s).gpu["activations"]
    a2 = estimate(Setup(**{**s.__dict__, "seq": 4096})).gpu["activations"]
    ck = estimate(Setup(**{**s.__dict__, "activation_checkpointing": True})).gpu["activations (checkpointed)"]
    assert a2 == pytest.approx(2 * a1, rel=1e-3) and ck < a1 / 10
    # per layer s*b*(22h + 4kv + 8i); eager attention adds 6*a*s^2*b (fp32 softmax output + its 16-bit copy)
    sh = PRESETS["llama2-7b"]
    sdpa = sh.layers * 2048 * (22 * sh.hidden + 4 * sh.kv_dim + 8 * sh.intermediate) / 2**30
    assert a1 == pytest.approx(sdpa, abs=1e-3)
    eager = estimate(Setup(**{**s.__dict__, "flash_attention": False})).gpu["activations"]
    assert eager == pytest.approx(sdpa + sh.layers * 6 * sh.heads * 2048 * 2048 / 2**30, abs=1e-3)


def test_lora_and_qlora():
    e = estimate(Setup(shape=PRESETS["llama2-7b"], lora_rank=16, stage=2, activation_checkpointing=True))
    assert e.trainable_params == 39_976_960  # r=16 on q,k,v,o,gate,up,down of 32 layers
    assert e.fits_gpu and 12 < e.gpu_total_gib < 18
    q = estimate(Setup(shape=PRESETS["llama2-7b"], qlora=True, lora_rank=16, stage=2, activation_checkpointing=True))
    t, tq = ({x["key"]: x["gib"] for x in y.terms} for y in (e, q))
    assert tq["base_4bit"] + tq["base_16bit"] < t["base_16bit"] / 3  # NF4 + quantization state vs 16-bit
    assert "build" in {p["phase"] for p in q.phases} and tq["qlora_fp32_cast"] > 0  # prepare_model_for_kbit_training
    # ZeRO-3 partitions the frozen base; ZeRO-2 keeps it whole on every GPU
    z3 = estimate(Setup(shape=PRESETS["llama2-7b"], lora_rank=16, stage=3, gpus=4, activation_checkpointing=True))
    assert {x["key"]: x["gib"] for x in z3.terms}["base_16bit"] == pytest.approx(t["base_16bit"] / 4, abs=0.01)
    # peft's fp32 adapters: each adapted layer's input is saved again in fp32 (bench/saved_activations.py)
    no = estimate(Setup(shape=PRESETS["llama2-7b"], lora_rank=16, stage=2))
    full = estimate(Setup(shape=PRESETS["llama2-7b"], stage=2, offload="optimizer"))
    a_lora, a_full = ({x["key"]: x["gib"] for x in y.terms}["activations"] for y in (no, full))
    assert a_lora > a_full * 1.3


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


def test_measured_runs_agree_with_the_estimates():
    """Every run in data/measurements/ (issue 13's targets): the fits / does-not-fit verdict right on every run
    (GPU and host), every trained run within 15% of its peak allocated, host RAM within 15% of the peak RSS."""
    from bench.compare_memory import rows
    from tests.conftest import ROOT

    files = sorted((ROOT / "data" / "measurements").glob("h200-run-*.jsonl"))
    rs = rows(files)
    assert len(rs) >= 37
    assert all(r["verdict_right"] for r in rs), [(r["file"], r["model"]) for r in rs if not r["verdict_right"]]
    bad = [
        (r["file"], r["model"], r["error_pct"]) for r in rs if r["error_pct"] is not None and abs(r["error_pct"]) > 0.15
    ]
    assert not bad
    assert all(abs(r["host_error_pct"]) <= 0.15 for r in rs if r["host_error_pct"] is not None)
    assert sum(r["error_pct"] is not None for r in rs) >= 32


def test_peak_is_the_largest_phase_not_the_sum():
    """synthetic-3b, ZeRO-3, no offload, 4k tokens without checkpointing: trained at 69.8 GiB on the 80 GiB cap
    (run d), where the old sum of every term said it does not fit (81.9 GiB)."""
    from bench.gpu_memory import model_shape

    e = estimate(Setup(shape=model_shape("synthetic-3b"), stage=3, seq=4096))
    everything = sum(t["gib"] for t in e.terms)
    assert e.gpu_total_gib == pytest.approx(max(p["gib"] for p in e.phases), abs=0.01)
    assert e.gpu_total_gib < 80 and everything - e.gpu_total_gib > 8  # the step's transients are not added
    assert e.peak_phase == "forward/backward" and e.fits_gpu
    # tight: fits by allocation, not with the allocator's measured reserve; expandable_segments is the free change
    assert e.gpu_verdict == "tight" and e.reserved_gib > 80
    assert any("expandable_segments" in n or "allocator" in n for n in e.notes)
    from kb.memory.estimate import estimate_with_changes

    ch = estimate_with_changes(Setup(shape=model_shape("synthetic-3b"), stage=3, seq=4096)).changes
    assert ch and ch[0]["change"].startswith("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    assert (
        estimate(Setup(shape=model_shape("synthetic-3b"), stage=3, seq=4096, expandable_segments=True)).gpu_verdict
        == "fits"
    )


def test_sub_groups_as_deepspeed_builds_them(ds_estimators):
    """kb.memory.estimate.sub_groups against ZeRO-3's own _create_fp16_sub_groups, run on stand-in parameters."""
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3

    from kb.memory.estimate import param_order, sub_groups

    class P:
        def __init__(self, n):
            self.n = n

        def partition_numel(self):
            return self.n

    for name in ("llama2-7b", "llama3-8b", "qwen2.5-7b"):
        for world in (1, 2, 8):
            sizes = param_order(PRESETS[name])
            params = [P(-(-n // world)) for n in sizes]
            for sgs in (10**9, 10**8, 10**12):
                fake = type("Z", (), {"sub_group_size": sgs})()
                theirs = [
                    sum(p.n for p in g) for g in DeepSpeedZeroOptimizer_Stage3._create_fp16_sub_groups(fake, params)
                ]
                assert sub_groups(sizes, sgs, world) == theirs, (name, world, sgs)


@pytest.mark.parametrize("name", ["llama2-7b", "llama3-8b", "qwen2.5-7b", "mistral-7b"])
def test_param_order_matches_transformers(name):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from kb.memory.estimate import param_order

    s = PRESETS[name]
    fam = "Qwen2" if s.qkv_bias else "Mistral" if name.startswith("mistral") else "Llama"
    cfg = getattr(transformers, f"{fam}Config")(**s.hf_config_fields())
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert [p.numel() for p in model.parameters()] == param_order(s)


# each DeepSpeed source a term cites: the file and lines hold what the term says (deepspeed 0.19.8)
CITED = {
    "zero3_grad_buffer": ("grad_partitions_flat_buffer",),
    "zero3_master": ("fp32_partitioned_groups_flat.append",),
    "zero3_ipg": ("reduce_bucket_size",),
    "zero3_fp32_grad": ("single_grad_partition", "sub_group_size"),
    "zero3_gather": ("largest_layer",),
    "zero2_master": ("weights_partition",),
    "zero2_fp32_grad": ("single_grad_partition",),
    "zero2_gpu_offload_buf": ("temp_grad_buffer_for_gpu_offload",),
    "host_zero2": ("pin_memory",),
    "host_zero3": ("pin_memory",),
    "host_param": ("pin_memory",),
}


@pytest.mark.parametrize("key", sorted(CITED))
def test_cited_deepspeed_lines_say_what_the_term_says(key):
    import re

    deepspeed = pytest.importorskip("deepspeed")
    if deepspeed.__version__ != "0.19.8":
        pytest.skip(f"sources cite deepspeed 0.19.8, installed {deepspeed.__version__}")
    from pathlib import Path

    from kb.memory.estimate import SRC

    pkg = Path(deepspeed.__file__).parent
    refs = re.findall(r"([\w/]+\.py)?:(\d+)(?:-(\d+))?", SRC[key])
    assert refs, SRC[key]
    current, found = None, []
    for f, a, b in refs:
        current = f or current
        path = pkg / current if "/" in current else pkg / "runtime" / "zero" / current
        lines = path.read_text().splitlines()
        found.append("\n".join(lines[int(a) - 1 : int(b or a)]))
    for word in CITED[key]:
        assert any(word in chunk for chunk in found), (key, word)


def test_lora_activation_terms_match_what_autograd_saves():
    """The per-layer formula and peft's fp32-input term against saved_tensors_hooks on a small bf16 Llama (CPU)."""
    pytest.importorskip("peft")
    from bench.saved_activations import SHAPES, per_layer
    from kb.memory.estimate import LORA_FP32_INPUT_BYTES, layer_activation_bytes

    s = SHAPES[0]
    full = per_layer(s, "full", False, 256)
    assert abs(layer_activation_bytes(s, 1, 1) - full) / full < 0.08
    extra = per_layer(s, "lora-fp32", False, 256) - per_layer(s, "lora-bf16", False, 256)
    assert abs(extra / (6 * s.hidden + s.intermediate) - LORA_FP32_INPUT_BYTES) < 0.15
    assert per_layer(s, "full", True, 256) == 2 * s.hidden  # checkpointing keeps each layer's input
    from bench.saved_activations import eager_extra
    from kb.memory.estimate import EAGER_SCORE_BYTES

    assert EAGER_SCORE_BYTES <= eager_extra(s, 256) < EAGER_SCORE_BYTES * 1.15


def test_explain_prints_every_term_with_formula_and_source():
    r = CliRunner().invoke(main, ["mem", "--model", "qwen2.5-7b", "--qlora", "--lora-rank", "16", "--stage", "3",
                                  "--activation-checkpointing", "--explain"])  # fmt: skip
    assert r.exit_code == 0, r.output
    e = estimate(Setup(shape=PRESETS["qwen2.5-7b"], qlora=True, lora_rank=16, stage=3, activation_checkpointing=True))
    for t in e.terms:
        assert t["formula"] and t["source"], t
        assert t["label"] in r.output and f"= {t['formula']}" in r.output and f"source: {t['source']}" in r.output
    assert "by phase: build" in r.output


def test_ask_with_config_and_model_size_carries_memory(fake_engine):
    cfg = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}, "train_micro_batch_size_per_gpu": 1}'
    ans = fake_engine.ask("llama2-7b on one gpu with zero3 runs out of memory", config_text=cfg).to_dict()
    m = ans["memory"]
    assert m["model"] == "llama2-7b" and not m["fits_gpu"] and m["gpu_verdict"] == "does not fit"
    assert m["deepspeed_estimator_gib"] == pytest.approx(113.45, abs=0.01)
    assert m["peak_phase"] and [p["phase"] for p in m["phases"]] == [
        "build",
        "initialize",
        "forward/backward",
        "optimizer step",
    ]
    assert all(t["formula"] and t["source"] for t in m["gpu"])
    zh = fake_engine.ask("llama2-7b 单卡 zero3 爆显存", config_text=cfg).to_dict()["memory"]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in zh["gpu"][0]["label"])
    ans = fake_engine.ask("7b 8卡 zero3 爆显存", config_text=cfg).to_dict()
    assert ans["memory"]["model"] == "7B" and ans["memory"]["fits_gpu"]  # 8 GPUs: partitioned
    assert fake_engine.ask("zero3 out of memory", config_text=cfg).memory is None  # no model size: no guess


# ---------------------------------------------------------------- one home per fact: kb.memory.estimate, the registry


@pytest.mark.parametrize("params", [7e9, 13e9, 3e9, 6_738_415_616])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_lint_fit_rule_uses_the_memory_figure(registry, params, stage):
    """KB014 fires exactly above kb.memory.estimate's model-state figure, and says the same number and basis."""
    from kb.doctor.configs import parse_config
    from kb.doctor.lint import lint_config
    from kb.memory.estimate import model_states

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
    # kb mem shows the same DeepSpeed figure as its reference line (largest layer unknown: 0)
    e = estimate(Setup(params=int(params), gpus=1, stage=stage, offload="none"))
    if stage:
        assert e.deepspeed_estimator["gpu_bytes"] == ms.gpu_bytes


def test_stage_0_and_1_use_the_zero2_formula_and_say_so():
    from kb.memory.estimate import model_states

    for stage in (0, 1):
        ms = model_states(7e9, stage)
        assert ms.formula == 2 and ms.function == "estimate_zero2_model_states_mem_needs"
        assert ms.gpu_bytes == ds_zero2(7e9, 1, 1, False)[1] == 20 * 7e9
        assert "estimators for ZeRO-2 and ZeRO-3 only" in ms.basis and f"stage {stage}" in ms.basis
    assert "DeepSpeed's ZeRO-3 estimator" in model_states(7e9, 3).basis
    assert model_states(7e9, 0, gpus=8).gpu_bytes == model_states(7e9, 0).gpu_bytes  # nothing partitioned


def test_defaults_come_from_the_registry(registry):
    from kb.doctor.configs import parse_config
    from kb.doctor.lint import lint_config
    from kb.memory.estimate import additional_buffer_factor, registry_default

    rec = {
        k: json.loads(registry.get(f"deepspeed:zero_optimization.{k}")["default"])
        for k in ("reduce_bucket_size", "stage3_prefetch_bucket_size")
    }
    assert registry_default("zero_optimization.reduce_bucket_size") == rec["reduce_bucket_size"]
    for formula, fn in ((2, "stage_1_and_2.estimate_zero2"), (3, "stage3.estimate_zero3")):
        r = registry.get(f"deepspeed:runtime.zero.{fn}_model_states_mem_needs.additional_buffer_factor")
        assert additional_buffer_factor(formula) == json.loads(r["default"])
    sh = PRESETS["llama2-7b"]
    e3 = {t["key"]: t for t in estimate(Setup(shape=sh, stage=3)).terms}
    assert e3["ipg_bucket"]["gib"] == round(rec["reduce_bucket_size"] * 2 / 2**30, 3)
    assert f"reduce_bucket_size {rec['reduce_bucket_size']:.0e}".replace("+0", "") in e3["ipg_bucket"]["label"]
    assert e3["gathered"]["gib"] == round((4 * sh.largest_layer() + 2 * rec["stage3_prefetch_bucket_size"]) / 2**30, 3)
    sgs = json.loads(registry.get("deepspeed:zero_optimization.sub_group_size")["default"])
    assert f"sub_group_size {sgs:.0e}".replace("+0", "") in e3["step_fp32_grad"]["label"]
    # lint's bucket rule reads the same default when the config does not set it
    cfg = parse_config('{"zero_optimization": {"stage": 2, "overlap_comm": true}}')
    (f,) = [f for f in lint_config(cfg, registry) if f.code == "KB013"]
    assert f"reduce_bucket_size={rec['reduce_bucket_size']:,}" in f.message


def test_default_card_is_one_constant():
    import inspect

    from kb.doctor.lint import Case, lint_config
    from kb.memory.estimate import DEFAULT_GPU_MEM_GIB

    assert inspect.signature(lint_config).parameters["gpu_mem_gib"].default == DEFAULT_GPU_MEM_GIB
    assert Case("{}").gpu_mem_gib == DEFAULT_GPU_MEM_GIB == Setup().gpu_mem_gib


def test_import_memory_loads_no_yaml_or_pydantic():
    code = "import sys, kb.memory.estimate; print(any(m.split('.')[0] in ('yaml', 'pydantic') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_note_and_change_has_its_chinese_twin():
    from kb.memory.estimate import PRESETS, Setup, estimate_with_changes

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


def test_measured_constants_hold_leave_one_shape_out():
    """RESERVED_RATIO and PROCESS_BASELINE_GIB refitted without each shape: every verdict of that shape stays right
    and its host RAM estimates stay within 15% (bench/compare_memory.py constants)."""
    import re

    from bench.compare_memory import constants, rows
    from tests.conftest import ROOT

    table = constants(rows(sorted((ROOT / "data" / "measurements").glob("h200-run-*.jsonl"))))
    body = [ln for ln in table.splitlines() if ln.startswith("| ") and "held-out shape" not in ln]
    assert len(body) >= 8
    for ln in body:
        k, n = re.search(r"\| (\d+)/(\d+) \|", ln).groups()
        assert k == n, ln
        m = re.search(r"max ([\d.]+)%", ln)
        assert m is None or float(m.group(1)) <= 15, ln
