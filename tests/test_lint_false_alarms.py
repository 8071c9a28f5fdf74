"""Known-good configs `kb lint` used to flag (issue 21), each linted and then run through the real code.

Each config here is one a user really runs: an NVMe setup written for DeepSpeed 0.14.4 (`aio.thread_count`),
Ulysses sequence parallelism (`sequence_parallel_size`), data routing (`data_efficiency.data_routing`), an HF
Trainer DeepSpeed JSON full of "auto", TrainingArguments / LLaMA-Factory files, and a TrainingArguments file from
transformers 4.x (`warmup_ratio`). For each: no error-level finding, at most one "auto" finding, and the fix names
what the user's release reads instead; then the installed DeepSpeed / accelerate / transformers show that the
finding says what they do (the file:line the messages cite are the ones these calls go through).
"""

import copy
import json
import math
import re
import traceback
from unittest import mock

import pytest

from kb.doctor.configs import parse_config
from kb.doctor.lint import RULES, lint_config

deepspeed = pytest.importorskip("deepspeed")
import deepspeed.comm as ds_comm  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402

BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}

# ZeRO-3 with NVMe offload, its aio block as DeepSpeed 0.14.4 spelled it (AIO_FORMAT, swap_tensor/constants.py:8-16 there)
NVME_0144 = {
    **BASE,
    "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}},
    "aio": {"block_size": 1048576, "queue_depth": 8, "thread_count": 2, "single_submit": False},
}
# Ulysses sequence parallelism: DeepSpeedConfig divides the world size by it (deepspeed/runtime/config.py:468-469)
ULYSSES = {**BASE, "zero_optimization": {"stage": 2}, "sequence_parallel_size": 2}
# random-LTD data routing (deepspeed/runtime/data_pipeline/config.py:143-145 reads its `enabled`)
ROUTING = {**BASE, "data_efficiency": {"enabled": True, "data_routing": {"enabled": True}}}
# what the HF docs hand out for the Trainer: every value the Trainer can fill is "auto"
HF_JSON = {
    "fp16": {"enabled": "auto"},
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {
        "type": "WarmupLR",
        "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto"},
    },
    "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"},
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
}
TA_YAML = (
    "output_dir: out\nper_device_train_batch_size: 4\nlearning_rate: 2.0e-5\nbf16: true\ndeepspeed:\n"
    "  bf16: {enabled: auto}\n  train_micro_batch_size_per_gpu: auto\n  gradient_accumulation_steps: auto\n"
    "  zero_optimization: {stage: 2, reduce_bucket_size: auto}\n"
)
LF_YAML = (
    "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: qwen\nlora_target: all\noutput_dir: out\n"
    "deepspeed:\n  fp16: {enabled: auto}\n  train_batch_size: auto\n  train_micro_batch_size_per_gpu: auto\n"
    "  gradient_accumulation_steps: auto\n  gradient_clipping: auto\n"
    "  zero_optimization: {stage: 3, stage3_prefetch_bucket_size: auto, stage3_param_persistence_threshold: auto}\n"
)
WARMUP_4X = "output_dir: out\nlearning_rate: 2.0e-5\nwarmup_ratio: 0.1\n"


def lint(text_or_dict, registry, **kw):
    text = text_or_dict if isinstance(text_or_dict, str) else json.dumps(text_or_dict, indent=2)
    return lint_config(parse_config(text), registry, **kw)


def errors(findings):
    return [f for f in findings if f.severity == "error"]


def autos(findings):
    return [f for f in findings if f.code in ("KB007", "KB044", "KB045")]


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    """The registry of the sampled builds alone (data/registry/*.jsonl, no timeline): what `kb lint` knew before
    the timelines, and what it knows of a release no timeline covers."""
    from kb.registry.store import Registry
    from tests.conftest import ROOT

    d = tmp_path_factory.mktemp("sampled")
    for f in (ROOT / "data" / "registry").iterdir():
        if f.is_file():
            (d / f.name).symlink_to(f)
    reg = Registry.load(d)
    assert not getattr(reg, "timelines", None)
    return reg


@pytest.fixture(params=["registry", "sampled"])
def view(request):
    """Both registries: every verdict here holds with and without the timelines."""
    return request.getfixturevalue(request.param)


def world(n: int):
    """DeepSpeedConfig asks deepspeed.comm for the rank and world size: stand in for a group of ``n``."""
    return mock.patch.multiple(ds_comm, get_rank=lambda *a, **k: 0, get_world_size=lambda *a, **k: n)


# ---------------------------------------------------------------- 1. aio.thread_count (DeepSpeed 0.14.4)


def test_thread_count_is_not_a_removed_feature_and_its_successor_is_named(view):
    f = lint(NVME_0144, view)
    assert not errors(f) and not [x for x in f if x.code == "KB004"], f
    hit = [x for x in f if x.path == "aio.thread_count"]
    assert [x.code for x in hit] == ["KB005"], hit  # ignored by the release linted against, not refused
    until = view.get("deepspeed:aio.thread_count")["until"]  # 0.14.4 sampled; the timeline knows 0.15.4
    assert "does nothing" in hit[0].message and f"read it up to {until}" in hit[0].message
    assert hit[0].suggestion.startswith("write `aio.intra_op_parallelism` instead")
    assert "`aio.intra_op_parallelism`" in hit[0].suggestion_zh
    # the view of the release the config was written for: a real key, nothing to say
    assert not [x for x in lint(NVME_0144, view.at({"deepspeed": "0.14.4"})) if x.path.startswith("aio.")]
    # and the view pinned at the installed release says the same as the default view
    pinned = [x for x in lint(NVME_0144, view.at({"deepspeed": "0.19.8"})) if x.path == "aio.thread_count"]
    assert [(x.code, x.suggestion) for x in pinned] == [(x.code, x.suggestion) for x in hit]


def test_thread_count_what_the_releases_do(registry):
    """0.14.4 read `thread_count` (the registry's record: deepspeed/runtime/swap_tensor/aio_config.py:24 there);
    the installed release reads `intra_op_parallelism` in its place and ignores `thread_count`."""
    from deepspeed.runtime.swap_tensor.aio_config import get_aio_config

    old = registry.history("deepspeed:aio.thread_count")
    assert [h["version"] for h in old] == ["0.14.4"] and old[0]["source_line"] == 24
    assert old[0]["source_file"] == "deepspeed/runtime/swap_tensor/aio_config.py"
    new = registry.history("deepspeed:aio.intra_op_parallelism")
    assert new[0]["version"] == "0.16.9" and (new[0]["type"], new[0]["default"]) == (old[0]["type"], old[0]["default"])
    got = get_aio_config({"aio": {"thread_count": 4}})
    assert "thread_count" not in got and got["intra_op_parallelism"] == 1  # ignored: the default
    assert get_aio_config({"aio": {"intra_op_parallelism": 4}})["intra_op_parallelism"] == 4


def test_a_key_deepspeed_refuses_is_still_an_error_with_what_to_do(registry):
    f = [x for x in lint({**BASE, "amp": {"enabled": True}}, registry) if x.code == "KB004"]
    assert len(f) == 1 and "raises DeepSpeedConfigError" in f[0].message
    assert "'fp16', 'bf16', or 'torch_autocast'" in f[0].suggestion  # what DeepSpeed's own message says
    assert "0.19.4 is the last recorded release" in f[0].suggestion


# ---------------------------------------------------------------- 2. sequence_parallel_size


def test_sequence_parallel_size_is_never_called_ignored(view):
    f = lint(ULYSSES, view)
    assert not errors(f) and not [x for x in f if "does nothing" in x.message], f
    hit = [x for x in f if x.path == "sequence_parallel_size"]
    if view.get("deepspeed:sequence_parallel_size"):  # the timeline read config.py:468: a real key
        assert not hit, hit
        return
    # the sampled builds never saw the read (the trace has no process group): unverified, not ignored
    assert [(x.code, x.severity) for x in hit] == [("KB022", "info")], hit
    assert "not reported as ignored" in hit[0].message
    assert "deepspeed/runtime/engine.py:" in hit[0].message  # the site that reads the name, from the registry


def test_deepspeed_reads_sequence_parallel_size():
    """config.py:468-469: with a process group, DeepSpeedConfig divides the world size by it (the builder's
    one-process trace never reaches that branch: dist.get_rank() raises first, config.py:456-457)."""
    with world(4):
        sp = DeepSpeedConfig(copy.deepcopy(ULYSSES))
        plain = DeepSpeedConfig(copy.deepcopy(BASE))
    assert (sp.world_size, sp.train_batch_size) == (2, 2) and (plain.world_size, plain.train_batch_size) == (4, 4)
    assert DeepSpeedConfig(copy.deepcopy(ULYSSES)).world_size == 1  # no group: what the registry's trace saw


# ---------------------------------------------------------------- 3. data_efficiency.data_routing


def test_data_routing_enabled_is_not_misplaced(view):
    f = lint(ROUTING, view)
    assert not errors(f) and not [x for x in f if x.code in ("KB002", "KB005")], f
    hit = [x for x in f if x.code == "KB022"]
    if view.get("deepspeed:data_efficiency.data_routing.enabled"):  # the timeline read the section
        assert not hit, hit
        return
    assert len(hit) == 1 and hit[0].severity == "info" and "`data_efficiency.data_routing`" in hit[0].message


def test_a_typo_in_a_section_the_timeline_read_is_said_to_do_nothing(registry):
    """With a timeline of the release, the keys of `data_efficiency.data_routing` are listed: a typo there is
    KB005 again, with the section's own key suggested first."""
    if not registry.get("deepspeed:data_efficiency.data_routing.enabled"):
        pytest.skip("no timeline of this release in data/registry")
    typo = {**BASE, "data_efficiency": {"enabled": True, "data_routing": {"enabld": True}}}
    f = [x for x in lint(typo, registry) if x.path.endswith("enabld")]
    assert [x.code for x in f] == ["KB005"] and f[0].suggestion.startswith(
        "did you mean `data_efficiency.data_routing.enabled`"
    )


def test_deepspeed_reads_data_routing_enabled():
    from deepspeed.runtime.data_pipeline.config import get_data_efficiency_config

    assert get_data_efficiency_config(copy.deepcopy(ROUTING))["data_routing"]["enabled"] is True
    assert get_data_efficiency_config(copy.deepcopy(BASE))["data_routing"]["enabled"] is False


def test_a_misplaced_key_names_three_homes_at_most(registry):
    f = [x for x in lint({**BASE, "zero_optimization": {"stage": 3, "enabled": True}}, registry) if x.code == "KB002"]
    assert len(f) == 1
    homes = re.findall(r"`([\w.]+\.enabled)`", f[0].message.split("It belongs at", 1)[1])
    assert len(homes) == 3 and "kb registry lookup enabled" in f[0].message
    assert "amp.enabled" not in homes and "elasticity.enabled" not in homes  # sections DeepSpeed refuses
    nvme = [
        x for x in lint({**BASE, "zero_optimization": {"stage": 3, "nvme_path": "/n"}}, registry) if x.code == "KB002"
    ]
    assert "`zero_optimization.offload_param.nvme_path`" in nvme[0].message  # the nearest homes are the real ones


# ---------------------------------------------------------------- 4. "auto"


def test_hf_json_has_one_auto_finding_naming_who_fills_what(view):
    f = lint(HF_JSON, view)
    assert not errors(f), f
    a = autos(f)
    assert len(a) == 1 and a[0].code == "KB007" and a[0].severity == "warning"
    assert a[0].path == "fp16.enabled" and a[0].line == 3  # the first "auto" of the file (line 2 opens fp16)
    m = a[0].message
    assert "accelerate takes `fp16.enabled`, `bf16.enabled` from its `mixed_precision`" in m
    assert "Only transformers (the HF Trainer) fills `optimizer.params.{betas, eps}`" in m
    assert "torch/optim/adam.py:58" in m and "deepspeed/runtime/lr_schedules.py:734" in m


@pytest.mark.parametrize("text", [TA_YAML, LF_YAML], ids=["training_args", "llamafactory"])
def test_no_auto_finding_where_the_trainer_fills_them(registry, text):
    f = lint(text, registry)
    assert not errors(f) and not autos(f), f


def test_a_key_nothing_fills_is_still_said_under_the_trainer(registry):
    text = "output_dir: out\ndeepspeed:\n  zero_optimization: {stage: 3, stage3_max_live_parameters: auto}\n"
    a = autos(lint(text, registry))
    assert len(a) == 1 and "Nothing fills" in a[0].message and "stage3_max_live_parameters" in a[0].message


def test_accelerate_fills_what_the_finding_says():
    """accelerate's DeepSpeedPlugin.set_mixed_precision fills fp16 / bf16 "auto" (utils/dataclasses.py:1415-1446);
    its deepspeed_config_process raises for an "auto" it has no value for (dataclasses.py:1368), betas included."""
    from accelerate.utils import DeepSpeedPlugin

    plugin = DeepSpeedPlugin(hf_ds_config=copy.deepcopy(HF_JSON))
    plugin.set_mixed_precision("bf16")
    assert plugin.deepspeed_config["bf16"]["enabled"] is True and plugin.deepspeed_config["fp16"]["enabled"] is False
    kwargs = {"optimizer.params.lr": 1e-3, "optimizer.params.weight_decay": 0.0}  # what Accelerator.prepare passes
    with pytest.raises(ValueError, match="optimizer.params.betas` not found in kwargs"):
        plugin.deepspeed_config_process(must_match=False, **kwargs)
    never = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 3, "stage3_max_live_parameters": "auto"}})
    with pytest.raises(ValueError, match="stage3_max_live_parameters` not found in kwargs"):
        never.deepspeed_config_process(must_match=False)


def test_an_alias_spelled_auto_is_filled_by_nobody(registry):
    """The HF Trainer and accelerate fill the paths they name: `prefetch_bucket_size` (an alias DeepSpeed accepts
    for `stage3_prefetch_bucket_size`) written "auto" is left alone, and accelerate refuses it."""
    from accelerate.utils import DeepSpeedPlugin

    cfg = {**BASE, "zero_optimization": {"stage": 3, "prefetch_bucket_size": "auto"}}
    a = autos(lint(cfg, registry))
    assert len(a) == 1 and 'Nothing fills "auto" for `zero_optimization.prefetch_bucket_size`' in a[0].message
    plugin = DeepSpeedPlugin(hf_ds_config=copy.deepcopy(cfg))
    with pytest.raises(ValueError, match="zero_optimization.prefetch_bucket_size` not found in kwargs"):
        plugin.deepspeed_config_process(must_match=False, **{"zero_optimization.stage3_prefetch_bucket_size": 14})


def _raised_at(fn) -> tuple[type, str]:
    """(exception class, "file:line" relative to site-packages) of what ``fn()`` raises."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception is what the test looks at
        fr = traceback.extract_tb(e.__traceback__)[-1]
        return type(e), f"{fr.filename.split('site-packages/')[-1]}:{fr.lineno}"
    raise AssertionError("did not raise")


def test_plain_deepspeed_fails_where_the_auto_finding_says(registry):
    """What KB044 said before it became part of KB007, checked at the constructors deepspeed.initialize hands
    the params to (tests/test_lint_oracle_types.py runs the whole deepspeed.initialize for the same lines):
    torch's AdamW with lr "auto", DeepSpeed's WarmupLR with warmup_num_steps "auto"."""
    import torch
    from deepspeed.runtime.lr_schedules import WarmupLR

    cfg = {
        **BASE,
        "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": "auto"}},
    }
    f = autos(lint(cfg, registry))
    assert len(f) == 1
    params = list(torch.nn.Linear(2, 2).parameters())
    exc, at = _raised_at(lambda: torch.optim.AdamW(params, lr="auto"))
    assert exc is TypeError and at in f[0].message, (exc, at)
    opt = torch.optim.AdamW(params, lr=1e-3)
    exc, at = _raised_at(lambda: WarmupLR(opt, warmup_num_steps="auto"))
    assert exc is ValueError and at in f[0].message, (exc, at)


# ---------------------------------------------------------------- 5. fixes that say delete


def test_warmup_ratio_fix_names_warmup_steps(registry):
    f = [x for x in lint(WARMUP_4X, registry) if x.code == "KB035"]
    assert len(f) == 1 and f[0].suggestion.startswith("write `warmup_steps: 0.1` instead")
    assert "ratio of total steps" in f[0].suggestion and "warmup_steps: 0.1" in f[0].suggestion_zh


def test_transformers_reads_a_float_warmup_steps_as_the_ratio(tmp_path):
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), warmup_steps=0.1, use_cpu=True, report_to="none")
    assert args.get_warmup_steps(1000) == math.ceil(1000 * 0.1)  # training_args.py:2158-2159
    with pytest.raises(TypeError, match="warmup_ratio"):
        TrainingArguments(output_dir=str(tmp_path), warmup_ratio=0.1, use_cpu=True, report_to="none")


BARE = re.compile(r"^(delete|remove|drop) (it|them|the block)$", re.I)


def test_no_fix_is_a_bare_delete(registry):
    """Every case of every rule: a fix that deletes says what deleting changes, or what to write instead."""
    for code, r in sorted(RULES.items()):
        for case in r.bad + r.ok:
            for f in case.lint(registry):
                assert not (f.suggestion and BARE.match(f.suggestion.strip())), (code, case.note, f.suggestion)
                assert not (f.suggestion_zh and f.suggestion_zh.strip() in ("删掉它", "删掉")), (code, case.note)


# ---------------------------------------------------------------- removed features, linted at a release that had them

# DeepSpeedExamples training/bing_bert/deepspeed_bsz4k_progressive_layer_drop_config_seq128.json (its PLD block) and
# training/MoQ/test.json (its MoQ block): DeepSpeed 0.19.8 refuses both blocks; 0.19.4 reads them
PLD = {**BASE, "progressive_layer_drop": {"enabled": True, "theta": 0.5, "gamma": 0.001}}
MOQ = {
    **BASE,
    "quantize_training": {"enabled": True, "quantize_bits": {"start_bits": 16, "target_bits": 8}, "quantize_groups": 8},
}


def test_keys_of_a_section_deepspeed_hands_on_whole_are_unverified(registry):
    """0.19.4 copies `progressive_layer_drop`, pops `enabled` (runtime/config.py:143-147) and the engine reads
    theta / gamma from the copy (runtime/engine.py:972, 975): neither the trace nor the timeline sees that read."""
    f = lint(PLD, registry.at({"deepspeed": "0.19.4"}))
    assert not errors(f) and not [x for x in f if x.code == "KB005"], f
    hit = [x for x in f if x.code == "KB022"]
    assert len(hit) == 1 and hit[0].severity == "info" and "`theta`, `gamma`" in hit[0].message, hit
    assert "hands the rest of the section on whole" in hit[0].message
    # a typo in a section DeepSpeed reads key by key is still said to do nothing
    typo = {**BASE, "flops_profiler": {"enabled": True, "profile_stpe": 1}}
    assert [x.code for x in lint(typo, registry.at({"deepspeed": "0.19.4"})) if x.path.endswith("stpe")] == ["KB005"]


def test_a_removed_feature_is_not_called_new_in_a_release_that_had_it(registry):
    """`quantize_training` is recorded only from 0.19.8, the release that refuses it: at 0.19.4 it is unverified
    (0.19.4 reads it behind get_quantize_enabled, runtime/config.py:524-525), never "first appears in 0.19.8"."""
    f = lint(MOQ, registry.at({"deepspeed": "0.19.4"}))
    assert not errors(f) and not [x for x in f if x.code == "KB005"], f
    hit = [x for x in f if x.path == "quantize_training"]
    assert [(x.code, x.severity) for x in hit] == [("KB022", "info")], hit
    assert "first appears" not in hit[0].message and "refuses it as a removed feature" in hit[0].message


@pytest.mark.parametrize("cfg,key", [(PLD, "progressive_layer_drop"), (MOQ, "quantize_training")])
def test_the_installed_deepspeed_refuses_the_removed_blocks(registry, cfg, key):
    """What the newest release does with them (KB004 at the default view, as DeepSpeedConfig raises)."""
    from deepspeed.runtime.config import DeepSpeedConfigError

    assert [x.code for x in lint(cfg, registry) if x.path == key] == ["KB004"]
    with pytest.raises(DeepSpeedConfigError, match="removed"):
        DeepSpeedConfig(copy.deepcopy(cfg))
