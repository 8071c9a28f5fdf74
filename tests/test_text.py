from kb.ask.text import identifiers, normalize_traceback, tokenize
from kb.lang import detect_lang


def test_parameter_names_stay_whole_and_in_parts():
    toks = tokenize("set stage3_prefetch_bucket_size and zero_optimization.offload_param")
    assert "stage3_prefetch_bucket_size" in toks and "prefetch" in toks and "bucket" in toks
    assert "zero_optimization.offload_param" in toks


def test_zero_stage_variants_fold_to_one_token():
    for q in ("zero3", "ZeRO-3", "zero 3", "stage 3", "Z3", "ZeRO stage 3", "ZeRO-3第一步"):
        assert "zero3" in tokenize(q), q
    assert "zero2" in tokenize("ZeRO-2 offload")


def test_chinese_bigrams_and_glossary():
    toks = tokenize("单卡爆显存")
    assert "单卡" in toks and "显存" in toks  # bigrams
    assert "oom" in toks and "gpu" in toks and "single" in toks  # glossary: 爆显存 -> oom, 单卡 -> single gpu


def test_traceback_normalisation():
    a = normalize_traceback(
        '[rank3]: File "/a/b/site-packages/x.py", line 33, in f\nTried to allocate 2.00 GiB at 0x7ff1'
    )
    b = normalize_traceback('[rank0]: File "/c/d/x.py", line 12, in f\nTried to allocate 512.00 MiB at 0x1')
    assert a == b


def test_identifiers_do_not_swallow_chinese():
    assert identifiers("offload加zero_force_opt_offload这参数才行") == ["zero_force_opt_offload"]
    assert "--include" in identifiers("deepspeed --include localhost:0,1 train.py")


def test_detect_lang():
    assert detect_lang("ZeRO-3第一步就OOM") == "zh"
    assert detect_lang("zero3 oom first step") == "en"
