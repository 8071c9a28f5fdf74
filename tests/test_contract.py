"""The answer contract and the presenters: schema, languages, import weight, what each format shows."""

import ast
import json
import subprocess
import sys

import jsonschema
import pytest
from click.testing import CliRunner

from cli.main import main
from kb import contract
from kb.contract import SCHEMA_VERSION
from kb.i18n import MESSAGES, fields_of
from kb.present import labels, markdown, plain, render_answer, terminal
from kb.present.doc import answer_blocks
from tests.conftest import ROOT

SCHEMA_FILE = ROOT / "docs" / "answer.schema.json"


def test_exported_schema_matches_the_classes():
    assert json.loads(SCHEMA_FILE.read_text()) == contract.json_schema(), (
        "docs/answer.schema.json is stale: python -m kb.contract > docs/answer.schema.json"
    )


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_kb_ask_json_validates(cli_env, validator, tmp_path):
    cfg = tmp_path / "ds.json"
    cfg.write_text(
        json.dumps({"zero_optimization": {"stage": 3, "zero_force_opt_offload": True}, "bf16": {"enabled": True}})
    )
    for args in (
        ["ask", "zero3 oom first step", "--json"],
        ["ask", "llama2-7b 单卡 ZeRO-3 第一步就 OOM", "--json", "--config", str(cfg)],
        ["ask", "how do I center a div in css", "--json"],
        ["ask", "", "--json"],
    ):
        r = CliRunner().invoke(main, args)
        obj = json.loads(r.stdout)
        validator.validate(obj)
    assert "error" in obj  # the last one is an error object, and it validates too


def test_kb_ask_jsonl_validates(cli_env, validator, tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text("\n".join([json.dumps({"query": "zero3 oom"}), "{", json.dumps({"query": "显存不足", "k": 2})]) + "\n")
    r = CliRunner().invoke(main, ["ask", "--jsonl", str(f)])
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3
    for line in lines:
        validator.validate(json.loads(line))


def test_schema_rejects_what_it_should(validator):
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"schema_version": SCHEMA_VERSION, "query": "x"})  # neither an answer nor an error
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"schema_version": "0.9", "error": "x", "kind": "input", "line": None})


# ---------------------------------------------------------------- languages


@pytest.mark.parametrize("table", [labels.LABELS, MESSAGES], ids=["presenter labels", "core messages"])
def test_every_label_in_both_languages(table):
    assert set(table["en"]) == set(table["zh"])
    for key, en in table["en"].items():
        zh = table["zh"][key]
        assert fields_of(en) == fields_of(zh), key
        assert zh != en or not any(c.isalpha() for c in en), f"{key}: zh is the English text"


# ---------------------------------------------------------------- the core stays light


def test_core_imports_no_surface_and_no_write_side():
    code = "import sys, kb.ask.engine; print(sorted({m.split('.')[0] for m in sys.modules}))"
    mods = set(json.loads(subprocess.check_output([sys.executable, "-c", code], cwd=ROOT).decode().replace("'", '"')))
    assert not mods & {"indexer", "rich", "pydantic", "yaml", "click", "bot", "torch"}, mods & {
        "indexer",
        "rich",
        "pydantic",
        "yaml",
        "click",
    }


def test_cli_holds_no_formatting():
    """cli/main.py prints what presenters return: no f-string or .format() is echoed directly."""
    tree = ast.parse((ROOT / "cli" / "main.py").read_text())
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "echo" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr) or (
                isinstance(arg, ast.Call) and getattr(arg.func, "attr", None) == "format"
            ):
                offenders.append(node.lineno)
    assert not offenders, f"formatting inline in cli/main.py at lines {offenders}"


# ---------------------------------------------------------------- presenters


def _answer(lang="en", answered=True):
    C = contract
    fact = C.ParamFact(
        "deepspeed:zero_optimization.offload_optimizer.device",
        "device",
        "deepspeed",
        "0.19.8",
        "config_key",
        "str",
        '"none"',
        "deepspeed/runtime/zero/offload_config.py",
        60,
    )
    long_cmd = "deepspeed --num_gpus 1 train.py --deepspeed ds_config.json --per_device_train_batch_size 1 --gradient_checkpointing"
    result = C.Result(
        id="zero3-single-gpu-no-offload",
        title="ZeRO-3 on one GPU" if lang == "en" else "单卡 ZeRO-3",
        score=0.9,
        why="terms: zero3 oom",
        summary="One GPU has nothing to partition.",
        area="oom",
        causes=["nothing to shard"],
        fixes=[
            C.Fix(
                "Offload the optimizer",
                f"Run `{long_cmd}` after editing the config.",
                [fact.id],
                C.Snippet("bash", long_cmd + " --and-a-very-long-tail-argument-that-goes-past-eighty-columns"),
            )
        ],
        params=[fact.id],
        param_facts=[fact],
        myths=[C.Myth("zero_force_opt_offload fixes it", "no such key", ["zero_force_opt_offload"], True)],
        sources=[
            C.Source(
                "code", package="deepspeed", version="0.19.8", file="deepspeed/runtime/zero/stage3.py", line="4016-4050"
            )
        ],
        applies_to={"deepspeed": ">=0.10"},
    )
    return C.Answer(
        C.SCHEMA_VERSION,
        "q",
        lang,
        answered,
        [result] if answered else [],
        [] if answered else [C.Closest("zero3-single-gpu-no-offload", "near", 0.3)],
        [C.Finding("KB001", "error", "zero_optimization.zero_force_opt_offload", 3, "unknown key", "delete it", "x")],
        [C.Note("param", "`zero_force_opt_offload` does not exist", "zero_force_opt_offload", "does-not-exist")],
        message=None if answered else "No confident answer",
    ), long_cmd


@pytest.mark.parametrize("fmt", ["plain", "markdown", "terminal"])
def test_presenters_keep_commands_whole_and_show_everything(fmt):
    ans, long_cmd = _answer()
    text = render_answer(ans, fmt)
    snippet = ans.results[0].fixes[0].snippet.code
    assert snippet in _strip_ansi(text), "snippet cut or wrapped"
    for must in ("KB001", "zero_force_opt_offload", "offload_config.py:60", "stage3.py:4016-4050", "deepspeed >=0.10"):
        assert must in _strip_ansi(text), (fmt, must)
    # findings come before the results
    assert _strip_ansi(text).index("KB001") < _strip_ansi(text).index("Offload the optimizer")


def test_plain_has_no_escape_codes_and_markdown_fences_code():
    ans, _ = _answer()
    assert "\x1b[" not in plain.answer(ans)
    md = markdown.answer(ans)
    assert "```bash" in md and md.count("```") == 2
    assert "\x1b[" in terminal.answer(ans)


def test_no_answer_marks_closest_entries():
    ans, _ = _answer(answered=False)
    text = plain.answer(ans)
    assert "No confident answer" in text and "Closest entries (not a confident match)" in text and "? near" in text


def test_chinese_answer_uses_chinese_labels():
    ans, _ = _answer(lang="zh")
    text = plain.answer(ans)
    for key in ("fixes", "params", "sources", "myths", "findings", "applies"):
        assert labels.LABELS["zh"][key] in text
    assert labels.LABELS["en"]["fixes"] not in text


def test_presenters_accept_the_json_dict_too():
    ans, _ = _answer()
    assert answer_blocks(ans) == answer_blocks(json.loads(json.dumps(ans.to_dict())))


def _strip_ansi(s: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", s)


def test_results_carry_their_site_path_and_presenters_link_it(cli_env):
    r = CliRunner().invoke(main, ["ask", "zero3 oom first step", "--json"])
    res = json.loads(r.stdout)["results"]
    assert res and all(x["path"] == f"/en/{x['id']}/" for x in res)
    r = CliRunner().invoke(main, ["ask", "ZeRO-3第一步就OOM", "--site-url", "https://kb.example.org/"])
    assert "页面: https://kb.example.org/zh/" in r.stdout
    r = CliRunner().invoke(main, ["show", "nvme-offload-setup"], env={"KB_SITE_URL": "https://kb.example.org"})
    assert "Page: https://kb.example.org/en/nvme-offload-setup/" in r.stdout


def test_code_links_point_at_the_release_file_and_line():
    from kb.present.links import code_url, entry_url

    ds = {
        "type": "code",
        "package": "deepspeed",
        "version": "0.19.8",
        "file": "deepspeed/runtime/zero/stage3.py",
        "line": "4016-4050",
    }
    assert (
        code_url(ds)
        == "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage3.py#L4016-L4050"
    )
    tf = {
        "type": "code",
        "package": "transformers",
        "version": "5.24.0",
        "file": "transformers/trainer.py",
        "line": "12",
    }
    assert code_url(tf) == "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py#L12"
    moved = {
        "type": "code",
        "package": "deepspeed",
        "version": "0.19.8",
        "file": "deepspeed/ops/op_builder/builder.py",
        "line": "710",
    }
    assert code_url(moved).endswith("/blob/v0.19.8/op_builder/builder.py#L710")
    assert (
        code_url({"type": "code", "package": "deepspeed", "version": "0.19.8", "file": "../etc/passwd", "line": "1"})
        is None
    )
    assert code_url({"type": "docs", "url": "javascript:alert(1)"}) is None
    assert (
        entry_url("https://kb.example.org/", "zh", "nvme-offload-setup")
        == "https://kb.example.org/zh/nvme-offload-setup/"
    )
    assert entry_url("", "en", "x") is None
