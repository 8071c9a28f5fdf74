"""Config parsing limits, the one DeepSpeed-block reader, what a question states, and input decoding."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kb.ask.question import stated_facts, stated_from_text
from kb.doctor.configs import (
    MAX_NESTING,
    ConfigError,
    deepspeed_block,
    facts_from_config,
    micro_batch,
    parse_config,
)
from kb.inputs import InputError, decode_arg, decode_bytes
from kb.lang import has_cjk


@pytest.mark.parametrize(
    "text",
    [
        "[" * 1000 + "]" * 1000,
        '{"a":' * 500 + "1" + "}" * 500,
        "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200)),
    ],
    ids=["json-lists", "json-objects", "yaml-indent"],
)
def test_deep_nesting_is_refused_before_parsing(text):
    with pytest.raises(ConfigError, match=f"the limit is {MAX_NESTING}"):
        parse_config(text, "deep.json")


def test_yaml_alias_bomb_is_refused():
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n' + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8)
    )
    with pytest.raises(ConfigError, match="aliases expand"):
        parse_config(bomb)
    assert parse_config("base: &b {stage: 3}\nzero_optimization: *b\n").data["zero_optimization"] == {"stage": 3}


def test_nesting_inside_strings_does_not_count():
    cfg = parse_config(json.dumps({"zero_optimization": {"stage": 3}, "note": "[" * 500}))
    assert cfg.kind == "deepspeed"


def test_deepspeed_block_for_every_front_end():
    ds = parse_config('{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}')
    assert deepspeed_block(ds) == (ds.data, "")
    ta = parse_config(
        "output_dir: out\nper_device_train_batch_size: 4\ndeepspeed:\n  zero_optimization:\n    stage: 2\n"
    )
    assert deepspeed_block(ta) == ({"zero_optimization": {"stage": 2}}, "deepspeed.")
    assert micro_batch(ta) == 4  # from the TrainingArguments field when the block does not say
    acc = parse_config(
        "compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  zero_stage: 3\n  offload_optimizer_device: cpu\n"
    )
    assert deepspeed_block(acc) == (None, "")
    assert facts_from_config(acc).as_dict() == {"zero_stage": 3, "offload_optimizer": "cpu"}
    path_only = parse_config("output_dir: out\ndeepspeed: ds_config.json\n")
    assert deepspeed_block(path_only) == (None, "") and facts_from_config(path_only).as_dict() == {"evaluates": False}


@pytest.mark.parametrize(
    "query,hints",
    [
        ("llama2-7b on 8 gpus oom", ("llama2-7b", 7e9, 8)),
        ("7B模型 4卡 zero3 爆显存", (None, 7e9, 4)),
        ("单卡A100跑13b全参", (None, 13e9, 1)),
        ("one gpu, qwen2.5-72b", ("qwen2.5-72b", 72e9, 1)),
        ("ZeRO-3第一步就OOM", (None, None, None)),
        ("v100 with 16gb and bf16", (None, None, None)),
    ],
)
def test_query_hints(query, hints):
    s = stated_from_text(query)
    assert (s.model, s.params, s.gpus) == hints
    assert s.facts == stated_facts(query)


def test_decoding():
    assert decode_bytes("显存不足".encode("gbk")) == "显存不足"
    assert decode_bytes("\ufeffzero3".encode()) == "zero3"  # BOM dropped
    with pytest.raises(InputError, match=r"offset 3"):
        decode_bytes(b"abc\xff\xfe")
    assert decode_arg("显存".encode("gbk").decode("utf-8", "surrogateescape")) == "显存"


BOM = "\ufeff".encode()
GB18030_BYTES = st.lists(st.sampled_from(["显存", "不足", "zero3 ", "\n"]), max_size=8).map(
    lambda p: "".join(p).encode("gb18030")
)


@given(st.binary(max_size=200) | st.binary(max_size=200).map(BOM.__add__) | GB18030_BYTES)
def test_fuzz_decode_bytes_decodes_or_refuses(data):
    """Any bytes: the UTF-8 text (without its BOM); else the GB18030 text when it reads cleanly as Chinese; else an
    InputError naming the first byte that is not UTF-8, by offset and value (never another exception)."""
    try:
        utf8 = data.decode("utf-8")
    except UnicodeDecodeError as e:
        utf8, bad = None, e.start
    try:
        text = decode_bytes(data)
    except InputError as e:
        assert utf8 is None, "valid UTF-8 refused"
        assert f"invalid byte 0x{data[bad]:02x} at offset {bad})" in str(e), (str(e), bad)
        return
    if utf8 is not None:
        assert text == utf8.removeprefix("\ufeff")
    else:  # not UTF-8: read as GB18030, losslessly, and only when it is Chinese
        assert text == data.decode("gb18030") and text.encode("gb18030") == data and has_cjk(text)


# ---------------------------------------------------------------- facts the question states, facts of a front end


@pytest.mark.parametrize(
    "query,expected",
    [
        ("fp16 training loss becomes nan, loss scale keeps dropping", {"precision": "fp16"}),
        ("bf16 和 fp16 哪个更稳", {}),  # a comparison: both named, no fact
        ("zero3 单卡 OOM", {"zero_stage": 3}),
        ("switching from ZeRO-2 to zero stage 3 made it slower", {}),  # two stages: a comparison
        ("qlora 4bit with deepspeed zero2", {"method": "qlora", "zero_stage": 2}),
        ("lora 训练 loss 不降", {"method": "lora"}),
        ("7b 全参微调 爆显存", {"method": "full"}),
        ("my dataset has 3 stages of curriculum", {}),
        (
            "1 validation error for DeepSpeedZeroConfig\n  Assertion failed, Partial offloading only supported for ZeRO Stage 3.",
            {},
        ),
        (
            "zero2 offload_param does nothing\n  Assertion failed, Partial offloading only supported for ZeRO Stage 3.",
            {"zero_stage": 2},
        ),
    ],
)
def test_facts_from_query(query, expected):
    assert stated_facts(query).as_dict() == expected


def test_llamafactory_yaml_facts_from_its_file_names():
    from kb.doctor.configs import facts_from_config

    text = (
        "model_name_or_path: meta-llama/Llama-2-7b-hf\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
        "deepspeed: examples/deepspeed/ds_z3_offload_config.json\nbf16: true\ncutoff_len: 2048\n"
    )
    f = facts_from_config(parse_config(text, "train.yaml"))
    assert f.as_dict() == {
        "zero_stage": 3, "offload_optimizer": "cpu", "precision": "bf16", "method": "lora", "evaluates": False
    }  # fmt: skip
    assert facts_from_config(parse_config(text + "val_size: 0.1\n", "train.yaml")).evaluates is True
    q = parse_config("quantization_bit: 4\nfinetuning_type: lora\nstage: sft\ndo_train: true\n", "q.yaml")
    assert facts_from_config(q).method == "qlora"


def test_stated_facts_boost_and_demote_where_the_config_says_nothing():
    from kb.ask import rank
    from kb.ask.question import read_question
    from kb.ask.retrieve import Hit
    from kb.doctor.configs import SetupFacts

    q = read_question("fp16 zero3 oom on the first step")
    assert q.stated.facts == SetupFacts(zero_stage=3, precision="fp16", when="start")
    entries = {
        "x": {"conditions": {"precision": ["bf16"]}},
        "z": {"conditions": {"precision": ["fp16"], "when": ["start"]}},
        "c": {"conditions": {"zero_stage": [3]}},
        "g": {"conditions": {"when": ["later"]}},  # "OOM on the first step" is not memory growing per step
    }
    ctx = rank.Context(q, entries)
    assert rank._conditions(Hit("x"), ctx) < 0
    assert rank._conditions(Hit("z"), ctx) > 0
    assert rank._conditions(Hit("g"), ctx) < 0
    with_cfg = rank.Context(q, entries, config_facts=SetupFacts(zero_stage=2))  # the config wins over the text
    assert rank._conditions(Hit("c"), with_cfg) < 0
    assert rank._conditions(Hit("c"), ctx) > 0


def test_when_the_failure_happens():
    facts_from_query = stated_facts

    assert facts_from_query("oom on first step").when == "start"
    assert facts_from_query("ZeRO-3第一步就OOM").when == "start"
    assert facts_from_query("after 200 steps OOM, memory creeps up every step").when == "later"
    assert facts_from_query("eval OOM with zero3").when == "eval"
    assert facts_from_query("oom when saving checkpoint").when == "save"
    assert facts_from_query("oom during eval after saving checkpoint").when is None  # two phases: unknown


def test_every_preset_name_carries_its_size():
    """kb.ask.question imports the presets only when the text has a size such as "7b" in it."""
    from kb.ask.question import _PRESET_SIZE
    from kb.memory.estimate import PRESETS

    assert PRESETS and all(_PRESET_SIZE.search(n.replace("-", "")) for n in PRESETS)
