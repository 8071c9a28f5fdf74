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


@pytest.mark.parametrize("name", list(contract.SCHEMAS))
def test_exported_schemas_match_the_classes(name):
    f = ROOT / "docs" / contract.schema_file(name)
    assert f.is_file() and json.loads(f.read_text()) == contract.json_schema(name), (
        f"docs/{f.name} is stale: python -m kb.contract --all docs/"
    )


def test_schema_generator_writes_and_checks_every_file(tmp_path):
    assert contract.main(["--all", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(contract.schema_file(n) for n in contract.SCHEMAS)
    assert contract.main(["--check", str(tmp_path)]) == 0
    (tmp_path / "lint.schema.json").write_text("{}")
    assert contract.main(["--check", str(tmp_path)]) == 1
    assert contract.main(["--check", str(ROOT / "docs")]) == 0


@pytest.fixture(scope="module")
def validators():
    out = {}
    for name in contract.SCHEMAS:
        schema = json.loads((ROOT / "docs" / contract.schema_file(name)).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        out[name] = jsonschema.Draft202012Validator(schema)
    return out


@pytest.fixture(scope="module")
def validator(validators):
    return validators["answer"]


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


EX = str(ROOT / "examples")
# every report command: (its schema, argv, the exit code, whether it prints a report or an error object)
COMMANDS = [
    ("lint", ["lint", f"{EX}/ds_config.json", "--world-size", "1", "--model", "7b"], 1, "report"),
    ("lint", ["lint", f"{EX}/llamafactory.yaml", "--lang", "zh"], 1, "report"),
    ("lint", ["lint", f"{EX}/accelerate.yaml"], 0, "report"),
    ("lint", ["lint", f"{EX}/missing.json"], 2, "error"),
    ("mem", ["mem", "--model", "llama2-7b", "--gpus", "1", "--stage", "3"], 1, "report"),
    ("mem", ["mem", "--model", "qwen2.5-7b", "--qlora", "--lora-rank", "16", "--lang", "zh"], 0, "report"),
    ("mem", ["mem", "--params", "7b", "--gpus", "8", "--stage", "2", "--cpu-mem", "64"], 0, "report"),
    ("mem", ["mem", "--model", "llama2-7b", "--gpus", "0"], 2, "error"),
    ("show", ["show", "zero3-single-gpu-no-offload"], 0, "report"),
    ("show", ["show", "nvme-offload-setup", "--lang", "zh"], 0, "report"),
    ("show", ["show", "no-such-entry"], 2, "error"),
    ("factcheck", ["factcheck", f"{EX}/answer.md"], 1, "report"),
    ("factcheck", ["factcheck", f"{EX}/answer.md", "--lang", "zh"], 1, "report"),
    ("factcheck", ["factcheck", f"{EX}/missing.md"], 2, "error"),
]


@pytest.mark.parametrize("name,argv,code,what", COMMANDS, ids=[" ".join(c[1][:2] + c[1][-1:]) for c in COMMANDS])
def test_every_report_commands_json_validates(name, argv, code, what, validators):
    r = CliRunner().invoke(main, [*argv, "--json"])
    assert r.exit_code == code, r.output
    obj = json.loads(r.stdout)  # exactly one JSON object
    validators[name].validate(obj)
    assert obj["schema_version"] == SCHEMA_VERSION
    if what == "error":
        assert set(obj) == {"schema_version", "error", "kind", "line"}
        return
    assert list(obj)[:2] == ["schema_version", "kind"] and obj["kind"] == name
    assert obj["lang"] == ("zh" if "zh" in argv else "en")
    back = contract.from_dict(contract.REPORTS[name], obj)  # the typed value rebuilt from the wire
    assert back.to_dict() == obj


def test_kb_gaps_json_validates(cli_env, validators, tmp_path):
    from bot.feedback import SQLiteStore

    db = tmp_path / "fb.sqlite"
    store = SQLiteStore(db)
    r = CliRunner().invoke(main, ["gaps", "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    empty = json.loads(r.stdout)
    validators["gaps"].validate(empty)
    assert empty["kind"] == "gaps" and empty["groups"] == [] and empty["questions"] == 0
    for q in ("how to train a diffusion model", "扩散模型怎么训练"):
        ask = store.record_ask({"query": q, "lang": "en", "answered": False, "closest": []}, "test", "c", "u")
    store.record_vote(ask, False, "unclear", "u")
    r = CliRunner().invoke(main, ["gaps", "--db", str(db), "--json"])
    obj = json.loads(r.stdout)
    validators["gaps"].validate(obj)
    assert obj["questions"] == 2 and sum(g["count"] for g in obj["groups"]) == 2
    assert any(g["downvote_reasons"] == {"unclear": 1} for g in obj["groups"])
    r = CliRunner().invoke(main, ["gaps", "--db", str(tmp_path / "none.sqlite"), "--json"])
    validators["gaps"].validate(json.loads(r.stdout))  # the error object


def test_schema_rejects_what_it_should(validator, validators):
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"schema_version": SCHEMA_VERSION, "query": "x"})  # neither an answer nor an error
    for old in ("0.9", "1.3", "3.0", "2", "2.x", "v2.1"):  # another major version, or not major.minor
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({"schema_version": old, "error": "x", "kind": "input", "line": None})
    r = CliRunner().invoke(main, ["lint", str(ROOT / "examples" / "accelerate.yaml"), "--json"])
    lint = json.loads(r.stdout)
    with pytest.raises(jsonschema.ValidationError):
        validators["lint"].validate({**lint, "kind": "mem"})  # a report is not another command's report
    with pytest.raises(jsonschema.ValidationError):
        validators["lint"].validate({k: v for k, v in lint.items() if k != "counts"})  # a field missing


def test_a_newer_minor_version_with_unknown_fields_validates(validators, cli_env):
    """Readers must ignore fields they do not know: a 2.7 answer or report with a new field is still valid 2.x."""
    r = CliRunner().invoke(main, ["ask", "zero3 oom first step", "--json"])
    ans = json.loads(r.stdout)
    newer = {**ans, "schema_version": "2.7", "field_from_2_7": [{"step": "bm25", "score": 0.3}]}
    newer["results"] = [{**x, "badge_from_2_7": "new"} for x in ans["results"]]
    validators["answer"].validate(newer)
    back = contract.from_dict(contract.Answer, newer)  # a 2.0 reader reads it, dropping what it does not know
    assert back.schema_version == "2.7" and back.results[0].id == ans["results"][0]["id"]
    assert "field_from_2_7" not in back.to_dict() and "badge_from_2_7" not in back.to_dict()["results"][0]
    for name, argv, _, what in COMMANDS:
        if what != "report":
            continue
        obj = json.loads(CliRunner().invoke(main, [*argv, "--json"]).stdout)
        validators[name].validate({**obj, "schema_version": "2.7", "something_new": {"x": 1}})
    validators["answer"].validate({"schema_version": "2.7", "error": "x", "kind": "input", "line": None, "hint": "y"})


def test_the_schema_version_is_stated_the_same_everywhere():
    """kb/contract.py, docs/answer.md and README.md name one schema version."""
    import re

    assert re.fullmatch(r"\d+\.\d+", SCHEMA_VERSION)
    doc = (ROOT / "docs" / "answer.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"(schema {SCHEMA_VERSION})" in doc.splitlines()[0]
    assert f'| `schema_version` | "{SCHEMA_VERSION}" |' in doc
    stated = re.findall(r"\bschema (\d+\.\d+)", readme) + re.findall(r"\(schema (\d+\.\d+)\)", doc)
    assert stated and set(stated) == {SCHEMA_VERSION}, stated
    assert f'"{SCHEMA_VERSION}"' in (ROOT / "kb" / "contract.py").read_text(encoding="utf-8")


def test_every_report_is_documented_with_all_its_fields():
    """docs/answer.md has a section per report whose table lists each field of the class."""
    import dataclasses

    doc = (ROOT / "docs" / "answer.md").read_text(encoding="utf-8")
    for name, cls in contract.REPORTS.items():
        head = f"### `{cls.__name__}` (`kb {name}`)"
        assert head in doc, head
        section = doc.split(head, 1)[1].split("\n### ", 1)[0]
        own = [f.name for f in dataclasses.fields(cls)]
        if cls is contract.MemReport:  # the Memory fields are documented with Memory
            own = [n for n in own if n not in contract.Memory.__dataclass_fields__]
        for n in own:
            assert f"| `{n}` |" in section, f"{cls.__name__}.{n} is not in docs/answer.md"


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
    text = render_answer(ans, fmt, long=True)
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
