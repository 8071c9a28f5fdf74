"""The trl command's subcommands per release (indexer/registry_timeline.py ``read_trl_cli``) and KB093, which judges
``trl X`` by them. The reader is tested on the three forms trl's CLI took (written here, in the shape of each
release's file); the committed timeline on boundaries checked against the wheels on both sides."""

from __future__ import annotations

import json
import textwrap

import pytest

from indexer.registry_static import Tree
from indexer.registry_timeline import Release, read_trl_cli
from tests.conftest import ROOT

FORMS = {
    "0.12": {
        "trl/__init__.py": "",
        "trl/commands/__init__.py": "",
        "trl/commands/cli.py": 'import sys\nSUPPORTED_COMMANDS = ["sft", "dpo", "chat", "env"]\n',
    },
    "0.2x": {
        "trl/__init__.py": "",
        "trl/cli.py": """
            def main():
                args = make().parse_args()
                if args.command == "sft":
                    pass
                elif args.command == "vllm-serve":
                    pass
            """,
    },
    "1.x": {
        "trl/__init__.py": "",
        "trl/cli/__init__.py": "",
        "trl/cli/commands/__init__.py": """
            from .env import EnvCommand
            from .training import TrainingCommand

            def get_commands():
                return [TrainingCommand("grpo", "grpo.py", None), EnvCommand()]
            """,
        "trl/cli/commands/env.py": """
            class EnvCommand(Command):
                def __init__(self):
                    super().__init__(name="env", help_text="Print the environment")
            """,
        "trl/cli/commands/training.py": "class TrainingCommand(Command):\n    pass\n",
    },
}
EXPECT = {"0.12": ["chat", "dpo", "env", "sft"], "0.2x": ["sft", "vllm-serve"], "1.x": ["env", "grpo"]}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_of_trl_s_cli_is_read(tmp_path, form):
    for rel, src in FORMS[form].items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(src), encoding="utf-8")
    rel = Release("trl", "0.0.0", Tree(tmp_path, "trl"))
    read_trl_cli(rel)
    got = {r["path"].split(" ", 1)[1]: r for r in rel.names.values()}
    assert sorted(got) == EXPECT[form] and not rel.skipped
    assert all(r["kind"] == "script" and r["file"].startswith("trl/") and r["line"] > 0 for r in got.values())


def test_a_release_without_a_cli_says_so(tmp_path):
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "__init__.py").write_text("", encoding="utf-8")
    rel = Release("trl", "0.0.0", Tree(tmp_path, "trl"))
    read_trl_cli(rel)
    assert not rel.names and rel.skipped == ["trl cli subcommands: none found"]


def test_the_committed_timeline_has_the_boundaries_read_in_the_wheels():
    """Checked by hand in each wheel on both sides (2026-12-03): grpo first in 0.14.0 (0.13.0 has none), vllm-serve in
    0.16.1 (not 0.15.2), chat last in 0.18.2 (not 0.19.1), rloo from 0.22.2 (not 0.21.0), reward from 0.24.0 (not
    0.23.1), distillation from 1.10.0 (not 1.9.2), skills 0.29.1-1.10.0 (not 1.11.0)."""
    names = json.loads((ROOT / "data" / "registry" / "timeline" / "trl.json").read_text(encoding="utf-8"))["names"]
    spans = {k.rsplit("/", 1)[1]: v["spans"] for k, v in names.items() if k.startswith("trl:cli/trl/")}
    assert spans["grpo"][0][0] == "0.14.0" and spans["vllm-serve"][0][0] == "0.16.1"
    assert spans["chat"] == [["0.12.2", "0.18.2"]] and spans["skills"] == [["0.29.1", "1.10.0"]]
    assert spans["rloo"][0][0] == "0.22.2" and spans["reward"][0][0] == "0.24.0"
    assert spans["distillation"][0][0] == "1.10.0" and spans["sft"] == [["0.12.2", "1.16.0"]]


@pytest.mark.parametrize(
    ("line", "trl", "says"),
    [
        ("trl grpo --model_name_or_path m --output_dir o", "0.13.0", "from 0.14.0 on"),
        ("trl chat --model_name_or_path m", "1.16.0", "until 0.18.2"),
        ("trl vllm_serve --model m", "1.16.0", "did you mean `trl vllm-serve`?"),
    ],
)
def test_kb093_names_the_release_boundary(tmp_path, line, trl, says):
    from click.testing import CliRunner

    from cli.main import main

    f = tmp_path / "run.sh"
    f.write_text(line + "\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["lint", str(f), "--versions", f"trl=={trl}", "--json"])
    found = [x for x in json.loads(r.stdout)["findings"] if x["code"] == "KB093"]
    assert r.exit_code == 1 and len(found) == 1, r.stdout
    assert says in found[0]["message"] + " " + (found[0].get("suggestion") or "")


@pytest.mark.parametrize(("line", "trl"), [("trl grpo --model_name_or_path m", "0.14.0"), ("trl env", "0.12.2")])
def test_kb093_passes_a_subcommand_of_the_release(tmp_path, line, trl):
    from click.testing import CliRunner

    from cli.main import main

    f = tmp_path / "run.sh"
    f.write_text(line + "\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["lint", str(f), "--versions", f"trl=={trl}", "--json"])
    assert not [x for x in json.loads(r.stdout)["findings"] if x["code"] == "KB093"], r.stdout


def test_vllm_serve_s_own_arguments_are_not_judged_as_trl_configs(tmp_path):
    """``trl vllm-serve --model M``: ``model`` is an argument of vllm_serve's own ScriptArguments, which the timeline
    does not read; KB091 used to call it "not an argument of trl" (a false warning). A training subcommand is judged."""
    from click.testing import CliRunner

    from cli.main import main

    serve, train = tmp_path / "serve.sh", tmp_path / "train.sh"
    serve.write_text("trl vllm-serve --model Qwen/Qwen2.5-7B --tensor_parallel_size 2\n", encoding="utf-8")
    train.write_text("trl sft --model_name_or_path m --dataset_name d --learning_rat 1e-5\n", encoding="utf-8")
    codes = [f["code"] for f in json.loads(CliRunner().invoke(main, ["lint", str(serve), "--json"]).stdout)["findings"]]
    assert "KB091" not in codes and "KB093" not in codes
    got = json.loads(CliRunner().invoke(main, ["lint", str(train), "--json"]).stdout)["findings"]
    assert [f["path"] for f in got if f["code"] == "KB091"] == ["learning_rat"]


def test_a_pasted_invalid_choice_is_answered_from_the_registry(engine):
    """argparse's "invalid choice" lists the user's release's subcommands: kb reads the release range from that list
    and answers with the release that added the subcommand (not with the GRPO + vLLM entry)."""
    err = "usage: trl [-h] {chat,dpo,env,grpo,kto,sft} ...\ntrl: error: argument command: invalid choice: 'vllm-serve' "
    ans = engine.ask(err + "(choose from 'chat', 'dpo', 'env', 'grpo', 'kto', 'sft')")
    top = ans.results[0]
    assert ans.answered and top.id == "registry:trl:cli/trl/vllm-serve" and top.kind == "registry"
    assert "0.16.1" in top.title and "0.14.0-0.15.2" in top.summary
    zh = engine.ask("trl 跑不了，报 invalid choice: 'grpo' (choose from 'chat', 'dpo', 'env', 'kto', 'sft')", lang="zh")
    assert zh.results[0].id == "registry:trl:cli/trl/grpo" and "0.12.2-0.13.0" in zh.results[0].summary


def test_choices_no_release_has_give_no_fact():
    from kb.ask.facts import subcommand_facts
    from kb.registry.store import default_registry

    base = default_registry()._default_view()
    assert not subcommand_facts("trl: error: invalid choice: 'vllm-serve' (choose from 'sft', 'banana')", base)
    assert not subcommand_facts(
        "invalid choice: 'vllm-serve' (choose from 'chat', 'dpo', 'env', 'grpo', 'kto', 'sft')", base
    )
    # the user's release already has it: not a release problem
    assert not subcommand_facts("trl: invalid choice: 'sft' (choose from 'chat', 'dpo', 'env', 'kto', 'sft')", base)


def test_swift_s_route_mapping_is_read_with_its_underscore_spellings(tmp_path):
    """ms-swift's ``swift/cli/main.py`` ROUTE_MAPPING (the 3.x form, with its ``.update`` of underscore spellings)."""
    from indexer.registry_timeline import read_swift_cli

    src = (
        "from typing import Dict\nROUTE_MAPPING: Dict[str, str] = {\n    'sft': 'swift.cli.sft',\n"
        "    'merge-lora': 'swift.cli.merge_lora',\n}\n"
        "ROUTE_MAPPING.update({k.replace('-', '_'): v for k, v in ROUTE_MAPPING.items()})\n"
    )
    for rel_path, text in (("swift/__init__.py", ""), ("swift/cli/__init__.py", ""), ("swift/cli/main.py", src)):
        f = tmp_path / rel_path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    rel = Release("ms-swift", "0.0.0", Tree(tmp_path, "swift"))
    read_swift_cli(rel)
    got = {r["path"]: r for r in rel.names.values()}
    assert sorted(got) == ["swift merge-lora", "swift sft"]
    assert got["swift merge-lora"]["aliases"] == ["swift merge_lora"] and got["swift sft"]["line"] == 3


def test_swift_rollout_boundary_and_kb093(tmp_path):
    """rollout: in 3.4.1.post1's ROUTE_MAPPING, not in 3.3.1's (checked in both wheels, 2026-12-03)."""
    from click.testing import CliRunner

    from cli.main import main

    names = json.loads((ROOT / "data" / "registry" / "timeline" / "ms-swift.json").read_text(encoding="utf-8"))["names"]
    assert names["ms-swift:cli/swift/rollout"]["spans"] == [["3.4.1.post1", "4.6.0"]]
    f = tmp_path / "run.sh"
    f.write_text("NPROC_PER_NODE=2 swift rollout --model m\n", encoding="utf-8")
    old = json.loads(CliRunner().invoke(main, ["lint", str(f), "--versions", "ms-swift==3.3.1", "--json"]).stdout)
    assert [x["code"] for x in old["findings"] if x["code"] == "KB093"] == ["KB093"]
    assert "from 3.4.1.post1 on" in next(x["message"] for x in old["findings"] if x["code"] == "KB093")
    new = json.loads(CliRunner().invoke(main, ["lint", str(f), "--versions", "ms-swift==4.6.0", "--json"]).stdout)
    assert not [x for x in new["findings"] if x["code"] == "KB093"]


def test_axolotl_s_click_commands_are_read(tmp_path):
    """``@cli.command()`` functions (click's name: ``_`` as ``-``), an explicit name, ``cli.add_command(f)`` of a
    command defined in another module, and 0.18's built-in lazy commands in ``axolotl/cli/plugins.py``."""
    from indexer.registry_timeline import read_axolotl_cli

    files = {
        "axolotl/__init__.py": "",
        "axolotl/cli/__init__.py": "",
        "axolotl/cli/main.py": textwrap.dedent(
            """
            import click
            from axolotl.integrations.lm_eval.cli import lm_eval

            @click.group()
            def cli():
                pass

            @cli.command()
            def merge_lora(config):
                pass

            @cli.command("config-schema")
            def config_schema():
                pass

            cli.add_command(lm_eval)
            """
        ),
        "axolotl/integrations/__init__.py": "",
        "axolotl/integrations/lm_eval/__init__.py": "",
        "axolotl/integrations/lm_eval/cli.py": "import click\n\n@click.command()\ndef lm_eval(config):\n    pass\n",
        "axolotl/cli/plugins.py": 'BUILTIN_COMMANDS = {"vllm-bench": PluginCommand(target="x:y")}\n',
    }
    for rel_path, text in files.items():
        f = tmp_path / rel_path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    rel = Release("axolotl", "0.0.0", Tree(tmp_path, "axolotl"))
    read_axolotl_cli(rel)
    got = {r["path"]: r["file"] for r in rel.names.values()}
    assert got == {
        "axolotl merge-lora": "axolotl/cli/main.py",
        "axolotl config-schema": "axolotl/cli/main.py",
        "axolotl lm-eval": "axolotl/integrations/lm_eval/cli.py",
        "axolotl vllm-bench": "axolotl/cli/plugins.py",
    }, got


def test_axolotl_command_boundaries():
    """Checked in the release files on both sides (2026-12-03): vllm-serve from 0.8.1 (not 0.7.0), quantize from
    0.10.0 (not 0.9.2), shard only in 0.6.0, lm-eval from 0.7.0 and still there in 0.18 as a built-in lazy command."""
    names = json.loads((ROOT / "data" / "registry" / "timeline" / "axolotl.json").read_text(encoding="utf-8"))["names"]
    spans = {k.rsplit("/", 1)[1]: v["spans"] for k, v in names.items() if k.startswith("axolotl:cli/axolotl/")}
    assert spans["vllm-serve"] == [["0.8.1", "0.19.0"]] and spans["quantize"] == [["0.10.0", "0.19.0"]]
    assert spans["shard"] == [["0.6.0", "0.6.0"]] and spans["lm-eval"] == [["0.7.0", "0.19.0"]]
    assert spans["train"] == [["0.6.0", "0.19.0"]]


def test_a_subcommand_the_user_s_release_dropped_is_a_removal():
    """'chat' with 0.19-era choices: removed after 0.18.2, not "added" (the second reader's case). Choices printed
    without quotes, as Python 3.12.8 / 3.13.1 and later print them, are read too."""
    from kb.ask.facts import subcommand_facts
    from kb.registry.store import default_registry

    base = default_registry()._default_view()
    err = "trl: error: argument command: invalid choice: 'chat' (choose from dpo, env, grpo, kto, sft, vllm-serve)"
    (f,) = subcommand_facts(err, base)
    assert (f.event, f.last, f.release, f.user_release) == ("removed", "0.18.2", "0.19.1", "0.19.1-0.21.0")
    quoted = "trl: invalid choice: 'vllm-serve' (choose from 'chat', 'dpo', 'env', 'grpo', 'kto', 'sft')"
    unquoted = "trl: invalid choice: 'vllm-serve' (choose from chat, dpo, env, grpo, kto, sft)"
    assert [(x.event, x.release) for x in subcommand_facts(quoted, base)] == [("added", "0.16.1")]
    assert [(x.event, x.release) for x in subcommand_facts(unquoted, base)] == [("added", "0.16.1")]
