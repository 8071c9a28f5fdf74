"""Answers from the registry's release history (kb/ask/facts.py): results of kind "registry".

The facts asserted here are read from the committed registry (data/registry, with its timelines), never typed: each
test takes the record's own span and checks the answer states it.
"""

from __future__ import annotations

import pytest

from kb.ask.facts import LIFECYCLE, PREFIX, fact_result, registry_facts
from kb.contract import Result


def _facts(registry, names, text, versions=None):
    view = registry.at(versions or {})
    return registry_facts(tuple(names), text, registry, view), view


def _removed_field(registry) -> str:
    """A TrainingArguments field the timeline shows removed between two minors, with no rename on record."""
    for r in registry.records:
        if (
            r["id"].startswith("transformers:TrainingArguments.")
            and r["status"] == "removed"
            and not r.get("renamed_to")
            and registry.removed_in(r["id"])
            and r["id"] in registry.timelines["transformers"].names
        ):
            return r["id"]
    raise AssertionError("no removed TrainingArguments field in the registry")


def test_a_removed_field_is_answered_with_the_exact_minor(registry):
    rid = _removed_field(registry)
    name = rid.rsplit(".", 1)[1]
    first, last = registry.span(rid)
    gone = registry.removed_in(rid)
    assert gone and last != registry.newest["transformers"]
    (f,), view = _facts(registry, [name], f"is {name} removed from TrainingArguments?")
    assert (f.rid, f.event, f.release, f.last) == (rid, "removed", gone, last)
    r = fact_result(f, "en", view)
    assert isinstance(r, Result) and r.kind == "registry" and r.id == PREFIX + rid
    assert gone in r.title and last in r.title
    assert r.sources and r.sources[0].file and r.sources[0].line
    assert len(r.param_facts) == len(r.params)
    zh = fact_result(f, "zh", view)
    assert gone in zh.title and "没有" in zh.title


def test_the_users_side_is_said_when_their_version_is_known(registry):
    rid = _removed_field(registry)
    name = rid.rsplit(".", 1)[1]
    _, last = registry.span(rid)
    (after,), view = _facts(registry, [name], f"{name} removed?", {"transformers": "5.24.0"})
    assert after.user_side is True
    (before,), view_b = _facts(registry, [name], f"{name} removed?", {"transformers": last})
    assert before.user_side is False and after.score > before.score
    assert "still has it" in fact_result(before, "en", view_b).summary


def test_a_replacement_the_source_states_is_a_rename_from_that_release(registry):
    """warmup_ratio: transformers' own deprecation says to write warmup_steps (the timeline's replacement)."""
    rid = "transformers:TrainingArguments.warmup_ratio"
    rec = registry.get(rid)
    assert rec["renamed_to"] == "transformers:TrainingArguments.warmup_steps"
    tl = registry.timelines["transformers"].names[rid]
    since = min((r for r, y in tl.replacement.items() if y), key=registry.timelines["transformers"].releases.index)
    (f,), view = _facts(registry, ["warmup_ratio"], "warmup_ratio deprecated?")
    assert f.event == "renamed" and f.release == since and since in fact_result(f, "en", view).title


def test_a_rename_names_both_spellings(registry):
    rec = registry.get("transformers:TrainingArguments.evaluation_strategy")
    assert rec["renamed_to"]
    (f,), view = _facts(registry, ["evaluation_strategy"], "evaluation_strategy is deprecated, use eval_strategy")
    r = fact_result(f, "en", view)
    assert f.event == "renamed" and "`eval_strategy`" in r.title and rec["renamed_to"] in r.params


def test_a_name_of_several_classes_is_judged_on_the_class_the_question_names(registry):
    recs = [r for r in registry.by_name.get("max_prompt_length", []) if r["package"] == "trl"]
    assert len({r["path"].split(".")[0] for r in recs}) > 1  # the name is a field of several TRL configs
    facts, _ = _facts(registry, ["max_prompt_length"], "GRPOConfig: is max_prompt_length removed in the new trl?")
    assert facts and facts[0].rid.startswith("trl:GRPOConfig.")


def test_no_fact_when_the_question_is_not_about_the_names_life(registry):
    # a real, current name in a question about something else: the answer's notes speak of it, no result
    facts, _ = _facts(registry, ["per_device_train_batch_size"], "per_device_train_batch_size 1 still OOM on zero3")
    assert facts == []
    facts, _ = _facts(registry, ["warmup_ratio"], "what warmup_ratio should I use for a 7b sft")
    assert facts == []  # removed, but neither the question nor a known version makes that the point


@pytest.mark.parametrize(
    "text",
    [
        "TypeError: __init__() got an unexpected keyword argument 'x'",
        "ValueError: Some keys are not used by the HfArgumentParser: ['x']",
        "ImportError: cannot import name 'x' from 'peft'",
        "x 这个参数是不是被弃用了",
    ],
)
def test_the_lifecycle_cue_is_the_packages_own_wording(text):
    assert LIFECYCLE.search(text)


def test_a_registry_result_is_ranked_with_the_entries(fake_engine):
    a = fake_engine.ask(
        "ValueError: Some keys are not used by the HfArgumentParser: ['warmup_ratio'] on transformers 5.24"
    )
    kinds = [r.kind for r in a.results]
    assert "registry" in kinds and a.answered
    reg = next(r for r in a.results if r.kind == "registry")
    assert reg.id == PREFIX + "transformers:TrainingArguments.warmup_ratio"
    d = a.to_dict()
    assert any(r["kind"] == "registry" for r in d["results"])
