"""`kb ask` / Engine.ask: answers, declines, notes, config conditions, bad input, JSON and JSONL."""

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from kb.answer import Engine, QueryError
from kb.cli import main
from kb.configs import ConfigError
from kb.index import IndexCorrupt, load_index
from tests.conftest import ROOT

SEED_EN, SEED_ZH = "zero3 oom first step", "ZeRO-3第一步就OOM"


def test_seed_query_both_languages_same_top(engine):
    en, zh = engine.ask(SEED_EN), engine.ask(SEED_ZH)
    assert en["answered"] and zh["answered"]
    assert en["results"][0]["id"] == zh["results"][0]["id"] == "zero3-single-gpu-no-offload"
    assert en["lang"] == "en" and zh["lang"] == "zh"
    assert "单卡" in zh["results"][0]["title"]  # the answer follows the query's language


def test_json_shape(engine):
    ans = engine.ask(SEED_EN, k=3)
    assert set(ans) >= {"query", "lang", "answered", "results", "findings", "notes"}
    r = ans["results"][0]
    assert set(r) >= {"id", "title", "score", "params", "why", "fixes"}
    assert all(set(f) >= {"title", "params"} for f in r["fixes"])
    assert all(p.split(":", 1)[0] in engine.registry.versions for p in r["params"])
    assert r["why"]


@pytest.mark.parametrize(
    "query",
    [
        "how do i install the cuda toolkit on windows 11 for my 4090? nvidia installer keeps failing",
        "做 RAG 的中文 embedding 选 bge-large-zh 还是 m3e，有人对比过召回率吗",
        "how do I center a div in css",
    ],
)
def test_out_of_scope_is_declined(engine, query):
    ans = engine.ask(query)
    assert not ans["answered"] and ans["results"] == []
    assert 0 < len(ans["closest"]) <= 3 and all(c["closest"] for c in ans["closest"])
    assert "confident" in ans["message"] or "把握" in ans["message"]


def test_invented_parameter_in_query_gets_a_registry_note(engine):
    ans = engine.ask("should I set zero_force_opt_offload: true to make offload work?")
    notes = {n["name"]: n for n in ans["notes"]}
    assert notes["zero_force_opt_offload"]["verdict"] == "does-not-exist"
    assert ans["results"][0]["id"] == "zero-force-ds-cpu-optimizer"
    touched = [m for m in ans["results"][0]["myths"] if m["touched"]]
    assert touched, "the myth about the invented key is flagged as touched"


def test_deprecated_and_misplaced_names_are_explained(engine):
    ans = engine.ask("is zero_optimization.cpu_offload_use_pin_memory still needed? and zero_optimization.nvme_path?")
    v = {n["name"]: n["verdict"] for n in ans["notes"]}
    assert v["zero_optimization.cpu_offload_use_pin_memory"] == "deprecated"
    assert v["zero_optimization.nvme_path"] == "misplaced"


def test_real_names_are_confirmed(engine):
    ans = engine.ask("what does stage3_max_live_parameters do")
    assert [(n["name"], n["verdict"]) for n in ans["notes"]] == [("stage3_max_live_parameters", "valid")]
    assert ans["results"][0]["id"] == "stage3-max-live-parameters-prefetch"


def test_pasted_traceback_matches_signature(engine):
    tb = (
        'Traceback (most recent call last):\n  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/stage3.py", '
        'line 840, in _configure_tensor_swapping\n    self.swap_folder = os.path.join(offload_optimizer_config.nvme_path, "zero_stage_3")\n'
        "TypeError: expected str, bytes or os.PathLike object, not NoneType"
    )
    ans = engine.ask(tb)
    assert ans["results"][0]["id"] == "nvme-offload-setup"
    assert "signature" in ans["results"][0]["why"]


def test_config_conditions_boost_and_demote(engine):
    q = "out of memory with zero3 on one gpu"
    no_offload = json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}})
    with_offload = json.dumps(
        {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": True}}
    )
    a = {r["id"]: r["score"] for r in engine.ask(q, config_text=no_offload, k=10)["results"]}
    b = {r["id"]: r["score"] for r in engine.ask(q, config_text=with_offload, k=10)["results"]}
    assert a["zero3-single-gpu-no-offload"] > b.get("zero3-single-gpu-no-offload", 0)
    assert engine.ask(q, config_text=no_offload)["config_facts"] == {
        "zero_stage": 3,
        "offload_optimizer": "none",
        "offload_param": "none",
        "precision": "bf16",
    }


def test_bad_inputs(engine):
    with pytest.raises(QueryError):
        engine.ask("   ")
    with pytest.raises(ConfigError, match=r"<config>:3:"):
        engine.ask("oom", config_text='{\n "zero_optimization": {\n  "stage": 3,,\n}')
    with pytest.raises(ConfigError, match="larger than"):
        engine.ask("oom", config_text="{" + " " * 2_000_000 + "}")
    long = engine.ask("zero3 oom " * 5000)
    assert any(n["kind"] == "input" for n in long["notes"])


def test_cli_ask_json_and_exit_codes(cli_env):
    r = CliRunner().invoke(main, ["ask", SEED_ZH, "--json"])
    assert r.exit_code == 0
    obj = json.loads(r.output)
    assert obj["results"][0]["id"] == "zero3-single-gpu-no-offload"
    r = CliRunner().invoke(main, ["ask", "how do I center a div in css", "--json"])
    assert r.exit_code == 3 and json.loads(r.output)["answered"] is False
    r = CliRunner().invoke(main, ["ask", ""])
    assert r.exit_code == 2 and "empty query" in r.output


def test_cli_ask_terminal_render(cli_env):
    r = CliRunner().invoke(main, ["ask", SEED_EN])
    assert r.exit_code == 0
    assert "deepspeed:zero_optimization.offload_optimizer.device" in r.output  # verified params
    assert "stage3.py:4016-4050" in r.output  # sources with file and line


def test_cli_config_file_errors(cli_env, tmp_path):
    bad = tmp_path / "ds.json"
    bad.write_text('{"zero_optimization": {"stage": 3,}\n')
    r = CliRunner().invoke(main, ["ask", SEED_EN, "--config", str(bad)])
    assert r.exit_code == 2 and "ds.json" in r.output
    r = CliRunner().invoke(main, ["ask", SEED_EN, "--config", str(tmp_path / "missing.json")])
    assert r.exit_code == 2 and "cannot read config" in r.output


def test_cli_jsonl(cli_env, tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(
        "\n".join(
            [
                json.dumps({"query": SEED_EN}),
                json.dumps(
                    {"query": "zero2 + cpu offload uses more memory", "config": '{"zero_optimization": {"stage": 2}}'}
                ),
                "not json",
                json.dumps({"query": ""}),
            ]
        )
        + "\n"
    )
    r = CliRunner().invoke(main, ["ask", "--jsonl", str(f)])
    lines = [json.loads(x) for x in r.output.strip().splitlines()]
    assert len(lines) == 4
    assert lines[0]["answered"] and lines[1]["config_facts"]["zero_stage"] == 2
    assert "error" in lines[2] and "error" in lines[3]
    assert r.exit_code == 2


# ---------------------------------------------------------------- index lifecycle


@pytest.fixture()
def scratch(tmp_path, built_index):
    """A private copy of the entries and of the session index, brought up to date (reuses its vectors)."""
    from indexer.build import build_index

    entries = tmp_path / "entries"
    shutil.copytree(ROOT / "data" / "entries", entries)
    index = tmp_path / "index"
    shutil.copytree(built_index, index, symlinks=True)
    rep = build_index(index, entries)
    assert rep.embedded == 0
    return entries, index


def test_incremental_rebuild_reembeds_only_changed_entry(scratch):
    from indexer.build import build_index

    entries, index = scratch
    p = entries / "tie-weights-not-a-memory-fix.yaml"
    p.write_text(
        p.read_text().replace(
            "symptoms:\n  en:\n", "symptoms:\n  en:\n    - embedding weights counted twice in memory\n", 1
        )
    )
    rep = build_index(index, entries)
    assert rep.changed_entries == ["tie-weights-not-a-memory-fix"]
    assert rep.embedded == 1 and rep.reused > 400


def test_stale_index_is_rebuilt_on_ask(scratch):
    entries, index = scratch
    (entries / "tie-weights-not-a-memory-fix.yaml").unlink()
    msgs = []
    eng = Engine(index_path=index, entries_root=entries, progress=msgs.append)
    assert "tie-weights-not-a-memory-fix" not in eng.index.entries
    assert any("updating the index" in m for m in msgs)


def test_crash_mid_build_leaves_previous_index(scratch, monkeypatch):
    import faiss

    from indexer.build import build_index

    entries, index = scratch
    before = load_index(index).manifest["built_at"], os.readlink(index / "current")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(faiss, "write_index", boom)
    with pytest.raises(RuntimeError):
        build_index(index, entries)
    after = load_index(index)
    assert (after.manifest["built_at"], os.readlink(index / "current")) == before
    assert not list((index / "builds").glob(".tmp-*"))


def test_corrupt_index_gives_clear_error(scratch):
    entries, index = scratch
    (index / "current" / "units.jsonl").write_text("garbage\n")
    with pytest.raises(IndexCorrupt, match="kb build --full"):
        load_index(index)


def test_invalid_entry_is_skipped_not_fatal(scratch):
    from indexer.build import build_index

    entries, index = scratch
    (entries / "broken.yaml").write_text("id: broken\narea: [\n")
    rep = build_index(index, entries)
    assert rep.skipped and "broken.yaml" in rep.skipped[0]
    assert rep.entries == len(list(entries.glob("*.yaml"))) - 1
