"""The typed reports of lint / mem / show / factcheck / gaps, their presenters, and the kb mem options declared once
(kb.memory.setup): the CLI's flags come from the table, and every path enforces the same bounds."""

import json

import click
import pytest
from click.testing import CliRunner

from cli.main import main
from kb import contract
from kb.lang import has_cjk
from kb.memory import setup as ms
from kb.present import doc, labels, reports
from tests.conftest import ROOT

EX = ROOT / "examples"


def _mem_command() -> click.Command:
    return main.commands["mem"]


# ---------------------------------------------------------------- kb mem: one table of options


def test_cli_mem_flags_are_generated_from_the_table():
    params = {p.name: p for p in _mem_command().params}
    own = {"explain", "lang", "as_json", "help"}
    assert set(params) - own == {o.name for o in ms.OPTIONS}, "kb mem has an option the table does not declare"
    assert [p.name for p in _mem_command().params if p.name not in own] == [o.name for o in ms.OPTIONS]  # same order
    for o in ms.OPTIONS:
        p = params[o.name]
        assert p.opts == [o.flag] and p.default == o.default and p.help == o.help_en, o.name
        assert p.secondary_opts == ([f"--no-{o.flag[2:]}"] if o.negatable else []), o.name
        if o.kind in ("int", "float"):
            assert (p.type.min, p.type.max) == (o.min, o.max), o.name
        if o.kind == "choice":
            assert tuple(p.type.choices) == o.choices, o.name
    text = CliRunner().invoke(main, ["mem", "--help"]).output
    for o in ms.OPTIONS:
        assert o.flag in text
    assert "1<=x<=100000" in text and "[none|optimizer|optimizer+param]" in text  # the bounds, shown by --help


def test_the_table_defaults_are_the_estimates_defaults():
    """kb mem with only a model builds exactly the estimate's default Setup: the table changed no default."""
    from kb.memory.estimate import DEFAULT_GPU_MEM_GIB, PRESETS, Setup

    assert ms.DEFAULT_GPU_MEM_GIB == DEFAULT_GPU_MEM_GIB
    assert ms.build_setup(ms.validate({"model": "llama2-7b"})) == Setup(shape=PRESETS["llama2-7b"])
    assert ms.build_setup(ms.validate({"params": "7b"})) == Setup(params=7_000_000_000)
    s = ms.build_setup(ms.validate({"model": "llama2-7b", "eager_attention": True, "ckpt": "on", "mb": "2"}))
    assert s.flash_attention is False and s.activation_checkpointing is True and s.micro_batch == 2


def _bounds_cases():
    for o in ms.OPTIONS:
        if o.kind == "int":
            yield o, [o.min, o.max], [o.min - 1, o.max + 1, "2.5", "x"]
        elif o.kind == "float":
            yield o, [o.min, o.max], [o.min - 0.5, o.max + 1, "nan", "inf", "x"]
        elif o.kind == "choice":
            yield o, list(o.choices), ["cpu", o.choices[0].upper(), ""]


@pytest.mark.parametrize("o,good,bad", list(_bounds_cases()), ids=lambda x: getattr(x, "name", ""))
def test_bounds_are_the_same_on_every_path(o, good, bad):
    """The core (what the chat forms call, with text) and the CLI accept and refuse the same values, with the
    same words."""
    base = ["mem", "--model", "llama2-7b"]
    for v in good:
        assert ms.validate({"model": "llama2-7b", o.name: str(v)})[o.name] == (v if o.kind != "float" else float(v))
        r = CliRunner().invoke(main, [*base, o.flag, str(v), "--json"])
        assert r.exit_code in (0, 1), (o.name, v, r.output)
        assert (
            contract.from_dict(contract.MemReport, json.loads(r.stdout)).setting(o.name)
            == ms.validate({"model": "llama2-7b", o.name: str(v)})[o.name]
        )
    for v in bad:
        with pytest.raises(ms.SetupError) as e:
            ms.validate({"model": "llama2-7b", o.name: str(v)})
        assert e.value.option == o.name and o.accepts("en") in e.value.en and has_cjk(e.value.text("zh"))
        r = CliRunner().invoke(main, [*base, o.flag, str(v), "--json"])
        err = json.loads(r.stdout)
        assert r.exit_code == 2 and o.flag in err["error"] and o.accepts("en") in err["error"], (o.name, v, err)


def test_chat_forms_get_fields_labels_and_bounds_in_both_languages():
    en, zh = ms.form_fields("en"), ms.form_fields("zh")
    assert [f["name"] for f in en] == [f["name"] for f in zh] == [o.name for o in ms.OPTIONS if o.chat]
    assert "params" not in {f["name"] for f in en}  # chat: a model may be a size already
    by = {f["name"]: f for f in en}
    assert by["model"]["required"] and "llama2-7b" in by["model"]["suggestions"]
    assert (by["gpus"]["min"], by["gpus"]["max"]) == (1, 100_000) and by["offload"]["choices"][0] == "none"
    assert by["micro_batch"]["aliases"] == ["mb"]
    for f in zh:
        assert has_cjk(f["label"] + f["help"]) or f["label"] in ("ZeRO stage", "offload", "micro-batch"), f
    assert json.loads(json.dumps(en)) == en  # JSON-ready


def test_chat_input_never_names_a_file_and_key_value_text_parses():
    for bad in ("./config.json", "/etc/passwd", "..\\x", "~/m/config.json", "model.json"):
        with pytest.raises(ms.SetupError, match="preset or a size"):
            ms.build_setup(ms.validate({"model": bad}))
    with pytest.raises(ms.SetupError, match="unknown model 'gpt-99'") as e:
        ms.build_setup(ms.validate({"model": "gpt-99"}))
    assert "config.json" not in e.value.en and "未知模型" in e.value.text("zh")
    values = ms.parse_pairs("llama2-7b gpus=8 mb=2 ckpt=on offload=optimizer".split())
    assert values == {"model": "llama2-7b", "gpus": "8", "micro_batch": "2", "activation_checkpointing": "on",
                      "offload": "optimizer"}  # fmt: skip
    typed = ms.validate(values)
    assert typed["gpus"] == 8 and typed["activation_checkpointing"] is True
    with pytest.raises(ms.SetupError, match="unknown option 'colour'"):
        ms.parse_pairs(["llama2-7b", "colour=red"])
    with pytest.raises(ms.SetupError, match="key=value"):
        ms.parse_pairs(["llama2-7b", "8"])
    with pytest.raises(ms.SetupError, match="give a model"):
        ms.validate({"gpus": 8})
    with pytest.raises(ms.SetupError, match="must be true or false"):
        ms.validate({"model": "7b", "qlora": "maybe"})


def test_mem_report_echoes_the_setup_in_the_reports_language():
    """The memory block of a chat /mem showed `activation_checkpointing False` in Chinese too: the report carries
    each setting with its label and its shown value in the report's language, and what the user set."""
    rep = ms.report({"model": "llama2-7b", "gpus": "2", "ckpt": "off"}, "zh")
    v = {x.name: x for x in rep.setup}
    assert [x.name for x in rep.setup] == [o.name for o in ms.OPTIONS]
    ck = v["activation_checkpointing"]
    assert ck.label == "激活检查点" and ck.value is False and ck.text == "关" and ck.given
    assert v["gpus"].value == 2 and v["gpus"].given and not v["seq"].given and v["cpu_mem"].text == "-"
    assert rep.lang == "zh" and rep.kind == "mem" and rep.shape == "llama2-7b" and rep.model == "llama2-7b"
    assert all(has_cjk(t.label) for t in rep.terms) and all(has_cjk(n) for n in rep.notes)
    text = "\n".join(b.text for b in doc.report_blocks(rep))
    assert "激活检查点 关" in text and "False" not in text and "activation_checkpointing" not in text
    en = ms.report({"model": "llama2-7b", "gpus": "2"}, "en")
    assert "activation checkpointing off" in "\n".join(b.text for b in doc.report_blocks(en))


def test_mem_report_terms_carry_the_phases_they_are_alive_in():
    rep = ms.report({"model": "llama2-7b", "stage": 3}, "en")
    totals = {p.phase: round(sum(t.gib for t in rep.terms if p.phase in t.phases), 2) for p in rep.phases}
    assert totals == {p.phase: round(p.gib, 2) for p in rep.phases}  # the phase totals add up from the terms
    assert {t.key for t in rep.gpu} == {t.key for t in rep.terms if rep.peak_phase in t.phases}
    assert rep.deepspeed_estimator and rep.deepspeed_estimator.gpu_gib == pytest.approx(113.45, abs=0.01)
    assert rep.deepspeed_estimator_gib == pytest.approx(113.45, abs=0.01)


# ---------------------------------------------------------------- presenters take the reports


def test_mem_text_in_chinese_has_no_english_labels():
    r = CliRunner().invoke(main, ["mem", "--model", "llama2-7b", "--cpu-mem", "64", "--offload", "optimizer",
                                  "--lang", "zh"])  # fmt: skip
    assert r.exit_code == 1
    for en in ("Per GPU", "Per node", "estimated peak", "DeepSpeed's estimator says", "Cheapest changes", "total",
               "note:", "parameters", "DOES NOT FIT"):  # fmt: skip
        assert en not in r.output, en
    for zh in ("每张卡", "每个节点（主机内存）", "放不下", "能放下的最省事的改动", "激活检查点 关"):
        assert zh in r.output, zh
    explain = CliRunner().invoke(main, ["mem", "--model", "llama2-7b", "--lang", "zh", "--explain"]).output
    assert "来源: " in explain and "[建模, deepspeed.initialize, 前向/反向, 优化器 step]" in explain


def test_mem_text_in_english_is_unchanged_by_the_report():
    """The English text of kb mem is the one the tests of kb.memory and the README have always read."""
    r = CliRunner().invoke(main, ["mem", "--params", "7b", "--gpus", "8", "--stage", "2"])
    assert r.exit_code == 0
    assert r.output.splitlines()[0] == (
        "7.00B params: 7,000,000,000 parameters (7,000,000,000 trainable), ZeRO-2, offload none, 8 GPU(s) x 1 "
        "node(s), bf16, seq 2048, micro-batch 1, activation checkpointing off, optimizer torch"
    )
    assert "  by phase: build 13.04, initialize 16.30, forward/backward 22.82, optimizer step 30.97" in r.output
    assert r.output.rstrip().endswith("(kb mem --explain: every term with its formula and source)")


def test_lint_text_in_chinese_has_a_chinese_header():
    r = CliRunner().invoke(main, ["lint", str(EX / "llamafactory.yaml"), "--lang", "zh"])
    first = r.output.splitlines()[0]
    assert "llamafactory 配置（yaml）" in first and "finding" not in r.output
    r = CliRunner().invoke(main, ["lint", str(EX / "llamafactory.yaml")])
    assert r.output.splitlines()[0].endswith(": llamafactory config (yaml), 2 finding(s)")


def test_lint_report_counts_and_language(registry):
    from kb.doctor.configs import parse_config
    from kb.doctor.lint import lint_config

    cfg = parse_config((EX / "ds_config.json").read_text(), "ds_config.json")
    fs = lint_config(cfg, registry)
    zh = contract.lint_report("ds_config.json", cfg.kind, cfg.fmt, fs, "zh")
    en = contract.lint_report("ds_config.json", cfg.kind, cfg.fmt, fs, "en")
    assert [f.message for f in zh.findings] == [f.message_zh or f.message for f in fs]
    assert [f.message for f in en.findings] == [f.message for f in fs]
    assert zh.counts.error == sum(f.severity == "error" for f in fs) > 0
    assert zh.counts.error + zh.counts.warning + zh.counts.info == len(fs)
    text = reports.lint(zh)
    assert all(f.message in text for f in zh.findings) and labels.LABELS["zh"]["see"] in text


def test_factcheck_report_counts_and_truncation(registry):
    from kb.registry.factcheck import MAX_TEXT_CHARS, check_names

    text = (EX / "answer.md").read_text()
    rep = contract.factcheck_report("answer.md", check_names(text, registry), "en")
    assert rep.counts == {"valid": 4, "does-not-exist": 2} and list(rep.counts) == ["valid", "does-not-exist"]
    assert reports.factcheck(rep).splitlines()[-1] == "answer.md: 6 name(s): 4 valid, 2 does not exist"
    long = contract.factcheck_report("big.md", [], "zh", truncated_at=MAX_TEXT_CHARS)
    out = reports.factcheck(long)
    assert out.startswith(f"说明: 只检查了前 {MAX_TEXT_CHARS} 个字符") and "note" not in out
    r = CliRunner().invoke(main, ["factcheck", "-", "--json"], input="overlap_comm " * (MAX_TEXT_CHARS // 10))
    assert json.loads(r.stdout)["truncated_at"] == MAX_TEXT_CHARS


def test_show_report_is_the_result_ask_returns(cli_env):
    r = CliRunner().invoke(main, ["show", "zero3-single-gpu-no-offload", "--lang", "zh", "--json"])
    obj = json.loads(r.stdout)
    res = obj["result"]
    assert obj["kind"] == "show" and res["id"] == "zero3-single-gpu-no-offload" and has_cjk(res["title"])
    assert res["param_facts"] and res["sources"] and res["path"] == "/zh/zero3-single-gpu-no-offload/"
    rep = contract.from_dict(contract.ShowReport, obj)
    text = CliRunner().invoke(main, ["show", "zero3-single-gpu-no-offload", "--lang", "zh"]).output
    from kb.present import plain

    assert text == plain.blocks_text(doc.report_blocks(rep))  # the CLI and a chat surface draw the same blocks


def test_report_blocks_draw_every_chat_report():
    from kb.present import plain

    for lang in ("en", "zh"):
        rep = ms.report({"model": "7b", "gpus": "1"}, lang)
        head = doc.report_blocks(rep)[0]
        assert head.kind == "heading" and head.text.startswith(labels.LABELS[lang]["memory"])
        assert doc.report_blocks(rep.to_dict()) == doc.report_blocks(rep)  # a dict from the wire draws the same
    fc = contract.FactcheckReport("en", "a.md", [contract.NameCheck("zero_3", "does-not-exist", "no such key", None,
                                                                    [], 3)], {"does-not-exist": 1})  # fmt: skip
    assert plain.blocks_text(doc.report_blocks(fc)) == "  ! line 3: no such key\n"
    with pytest.raises(ValueError, match="gaps"):
        doc.report_blocks(contract.GapsReport(None, 0, []))


def test_from_dict_rebuilds_every_report_and_ignores_unknown_fields():
    rep = ms.report({"model": "llama2-7b"}, "en")
    d = rep.to_dict()
    assert contract.from_dict(contract.MemReport, d) == rep
    assert contract.from_dict(contract.MemReport, {**d, "added_later": 1}) == rep
    with pytest.raises(TypeError, match="missing field"):
        contract.from_dict(contract.LintReport, {"schema_version": "2.0", "kind": "lint", "lang": "en"})
    g = contract.from_dict(contract.GapsReport, {"since": None, "questions": 0, "groups": []})
    assert g.kind == "gaps" and g.threshold is None and g.schema_version == contract.SCHEMA_VERSION
