"""Config parsing limits, the one DeepSpeed-block reader, query hints, and input decoding."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kb.configs import (
    MAX_NESTING,
    ConfigError,
    QueryHints,
    deepspeed_block,
    facts_from_config,
    hints_from_query,
    micro_batch,
    parse_config,
)
from kb.inputs import InputError, decode_arg, decode_bytes


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
    ta = parse_config("output_dir: out\nper_device_train_batch_size: 4\ndeepspeed:\n  zero_optimization:\n    stage: 2\n")
    assert deepspeed_block(ta) == ({"zero_optimization": {"stage": 2}}, "deepspeed.")
    assert micro_batch(ta) == 4  # from the TrainingArguments field when the block does not say
    acc = parse_config("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  zero_stage: 3\n  offload_optimizer_device: cpu\n")
    assert deepspeed_block(acc) == (None, "")
    assert facts_from_config(acc).as_dict() == {"zero_stage": 3, "offload_optimizer": "cpu"}
    path_only = parse_config("output_dir: out\ndeepspeed: ds_config.json\n")
    assert deepspeed_block(path_only) == (None, "") and facts_from_config(path_only).as_dict() == {}


@pytest.mark.parametrize(
    "query,hints",
    [
        ("llama2-7b on 8 gpus oom", QueryHints("llama2-7b", 7e9, 8)),
        ("7B模型 4卡 zero3 爆显存", QueryHints(None, 7e9, 4)),
        ("单卡A100跑13b全参", QueryHints(None, 13e9, 1)),
        ("one gpu, qwen2.5-72b", QueryHints("qwen2.5-72b", 72e9, 1)),
        ("ZeRO-3第一步就OOM", QueryHints(None, None, None)),
        ("v100 with 16gb and bf16", QueryHints(None, None, None)),
    ],
)
def test_query_hints(query, hints):
    assert hints_from_query(query) == hints


def test_decoding():
    assert decode_bytes("显存不足".encode("gbk")) == "显存不足"
    assert decode_bytes("\ufeffzero3".encode()) == "zero3"  # BOM dropped
    with pytest.raises(InputError, match=r"offset 3"):
        decode_bytes(b"abc\xff\xfe")
    assert decode_arg("显存".encode("gbk").decode("utf-8", "surrogateescape")) == "显存"


@given(st.binary(max_size=200))
def test_fuzz_decode_bytes_decodes_or_refuses(data):
    """Any bytes: text back, or an InputError naming the offset (never another exception)."""
    try:
        text = decode_bytes(data)
    except InputError as e:
        assert "offset" in str(e)
    else:
        assert isinstance(text, str)
