"""The shape of tests/eval/frontends_heldout.yaml (issue 21): ids, languages, areas, splits, sources, expected answers.

Nothing here asserts retrieval quality: the figures are bench/frontends_eval.py's. The scorer's matching rules are
checked on hand-made results, without an index.
"""

import re
from types import SimpleNamespace

import pytest
import yaml

from bench import frontends_eval as fe
from tests.conftest import ENTRIES, ROOT

FILE = ROOT / "tests" / "eval" / "frontends_heldout.yaml"
AREAS = {"trl", "vllm", "swift", "llamafactory", "axolotl", "rename", "other"}
FACTS = {"renamed", "removed", "added", "option"}
PACKAGES = {"trl", "ms-swift", "llamafactory", "axolotl", "transformers", "accelerate", "peft", "deepspeed", "torch"}
# the threads the questions are drawn from: issues and pull requests of these repositories only
SOURCE = re.compile(
    r"^https://github\.com/(huggingface/trl|hiyouga/LlamaFactory|hiyouga/LLaMA-Factory|axolotl-ai-cloud/axolotl|"
    r"modelscope/ms-swift|huggingface/transformers|deepspeedai/DeepSpeed|microsoft/DeepSpeed|huggingface/accelerate|"
    r"huggingface/peft)/(issues|pull|discussions)/\d+$"
)
REGISTRY_ID = re.compile(r"^[a-z][a-z0-9_-]*:[A-Za-z_][\w./-]*$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def items():
    data = yaml.safe_load(FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and isinstance(data["items"], list)
    return data["items"]


@pytest.fixture(scope="module")
def entry_ids():
    ids = {}
    for f in ENTRIES.glob("*.yaml"):
        e = yaml.safe_load(f.read_text(encoding="utf-8"))
        ids[e["id"]] = e
    return ids


def test_ids_unique_and_numbered(items):
    ids = [it["id"] for it in items]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"fh\d{3}", i) for i in ids), ids
    assert ids == sorted(ids)


def test_size_languages_areas_splits(items):
    assert len(items) >= 80
    langs = [it["lang"] for it in items]
    assert set(langs) == {"en", "zh"}
    assert 2 * langs.count("zh") >= len(items)  # at least half in Chinese
    assert {it["area"] for it in items} == AREAS  # every area has questions
    splits = [it["split"] for it in items]
    assert set(splits) == {"dev", "heldout"}
    assert 3 * splits.count("heldout") >= len(items)  # at least a third never used to write an entry or a rule
    for it in items:
        assert set(it) >= {"id", "lang", "area", "split", "query", "source", "expected"}, it["id"]
        assert isinstance(it["query"], str) and len(it["query"].strip()) >= 20, it["id"]


def test_language_matches_the_text(items):
    for it in items:
        has_cjk = bool(CJK.search(it["query"]))
        assert has_cjk == (it["lang"] == "zh"), it["id"]


def test_sources_are_thread_urls(items):
    for it in items:
        assert SOURCE.match(it["source"]), (it["id"], it["source"])


def test_queries_unique(items):
    queries = [it["query"].strip().lower() for it in items]
    assert len(queries) == len(set(queries))


def test_expected_one_kind_each(items, entry_ids):
    kinds = {"entry": 0, "registry": 0, "none": 0}
    for it in items:
        exp = it["expected"]
        present = [k for k in ("entry", "registry", "none") if k in exp]
        assert len(present) == 1, it["id"]
        kinds[present[0]] += 1
        if "entry" in exp:
            assert exp["entry"] in entry_ids, (it["id"], exp["entry"])
            assert not entry_ids[exp["entry"]].get("withdrawn"), (it["id"], exp["entry"])
            assert "checked" not in it, it["id"]
        elif "none" in exp:
            assert exp == {"none": True} and it["area"] == "other", it["id"]
        else:
            assert exp["fact"] in FACTS, it["id"]
            assert exp["package"] in PACKAGES, it["id"]
            assert REGISTRY_ID.match(exp["registry"]), (it["id"], exp["registry"])
            assert exp["registry"].split(":", 1)[0] == exp["package"], it["id"]  # the record lives in its package
            for key in ("release", "removed_in"):
                if key in exp:
                    assert VERSION.match(str(exp[key])), (it["id"], key, exp[key])
            if exp["fact"] in ("renamed", "removed", "added"):
                assert "release" in exp, it["id"]
            if exp["fact"] == "renamed":
                assert "to" in exp, it["id"]
            if "to" in exp:
                assert REGISTRY_ID.match(exp["to"]) and exp["to"] != exp["registry"], it["id"]
            # the fact was verified in the package source on both sides of the boundary, and the check says so
            assert isinstance(it.get("checked"), str) and len(it["checked"]) >= 30, it["id"]
            assert isinstance(it.get("versions_stated"), bool), it["id"]
    assert all(n >= 10 for n in kinds.values()), kinds


def test_every_area_has_held_out_items(items):
    for area in AREAS:
        assert any(it["area"] == area and it["split"] == "heldout" for it in items), area


def test_bench_loads_and_counts(items):
    loaded = fe.load_items(FILE)
    assert [it["id"] for it in loaded] == [it["id"] for it in items]
    held = fe.load_items(FILE, "heldout")
    assert held and all(it["split"] == "heldout" for it in held)
    c = fe.counts(loaded)
    assert sum(c["kind"].values()) == sum(c["lang"].values()) == sum(c["split"].values()) == len(items)


# ---------------------------------------------------------------- the scorer's rules, on hand-made results


def _result(rid, kind="entry", params=(), facts=()):
    pfs = [SimpleNamespace(id=f, name=f.rsplit(".", 1)[-1], shown_name=None, spellings=[]) for f in facts]
    return SimpleNamespace(
        id=rid, kind=kind, params=list(params), param_facts=pfs, score=0.6, title="", summary="", why=""
    )


def _answer(results, answered=True, notes=()):
    return SimpleNamespace(answered=answered, results=list(results), closest=[], notes=list(notes))


REG = {"registry": "trl:GRPOConfig.vllm_device", "fact": "removed", "package": "trl", "release": "0.18.0"}
REN = {"registry": "trl:RLOOConfig.rloo_k", "to": "trl:RLOOConfig.num_generations", "fact": "renamed", "package": "trl"}


def test_name_matching():
    assert fe.name_matches("trl:GRPOConfig.vllm_device", "trl:GRPOConfig.vllm_device", "trl")
    assert fe.name_matches("registry:trl:GRPOConfig.vllm_device", "trl:GRPOConfig.vllm_device", "trl")
    assert fe.name_matches("trl:GRPOConfig.vllm_device", "vllm_device", "trl")  # the name as a user writes it
    assert fe.name_matches("ms-swift:cli/swift sft/--train_type", "train_type", "ms-swift")
    assert not fe.name_matches("transformers:TrainingArguments.vllm_device", "vllm_device", "trl")  # another package
    assert not fe.name_matches("trl:DPOConfig.beta", "trl:DPOTrainer.beta", "trl")  # another record


def test_registry_hits():
    # a registry-kind result naming the id, by its own id or one of its facts
    assert fe.result_hits(_result("registry:trl:GRPOConfig.vllm_device", "registry"), REG)
    assert fe.result_hits(_result("registry:x", "registry", facts=["trl:GRPOConfig.vllm_device"]), REG)
    # an entry whose params list the id
    assert fe.result_hits(_result("trl-grpo-vllm-zero3", params=["trl:GRPOConfig.vllm_device"]), REG)
    assert not fe.result_hits(_result("trl-grpo-vllm-zero3", params=["trl:GRPOConfig.vllm_mode"]), REG)
    # the new name counts for a registry-kind result (its record carries the rename), not for an entry that uses it
    assert fe.result_hits(_result("registry:trl:RLOOConfig.num_generations", "registry"), REN)
    assert not fe.result_hits(_result("some-entry", params=["trl:RLOOConfig.num_generations"]), REN)
    # an entry item is hit by that entry only
    assert fe.result_hits(_result("trl-grpo-vllm-zero3"), {"entry": "trl-grpo-vllm-zero3"})
    assert not fe.result_hits(_result("registry:trl-grpo-vllm-zero3", "registry"), {"entry": "trl-grpo-vllm-zero3"})


def test_score_rows():
    item = {"id": "x", "lang": "en", "area": "vllm", "split": "dev", "expected": REG}
    row = fe.score_item(_answer([_result("a"), _result("registry:trl:GRPOConfig.vllm_device", "registry")]), item)
    assert row["rank"] == 2 and row["release_ok"] is False and row["noted"] is False
    assert fe.score_item(_answer([], answered=False), item)["rank"] is None  # declined: a miss
    note = SimpleNamespace(registry_id="trl:GRPOConfig.vllm_device", suggestions=[])
    assert fe.score_item(_answer([], answered=False, notes=[note]), item)["noted"] is True
    off = {"id": "y", "lang": "zh", "area": "other", "split": "heldout", "expected": {"none": True}}
    assert fe.score_item(_answer([], answered=False), off)["declined"] is True
    assert fe.score_item(_answer([_result("a")]), off)["declined"] is False
    fig = fe.figures([row, fe.score_item(_answer([], answered=False), off)])
    assert fig["all"]["n"] == 1 and fig["all"]["hit@1"] == 0.0 and fig["all"]["hit@3"] == 1.0
    assert fig["all"]["none"] == {"n": 1, "declined": 1}
