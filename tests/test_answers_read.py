"""What a user reads (issue 22): the short default answer, --long, and notes on invented names in a question."""

from __future__ import annotations

import math

from click.testing import CliRunner

from cli.main import main
from kb.present import render_answer


def _terminal_lines(text: str, width: int = 100) -> int:
    """Lines on a terminal of ``width`` columns that folds long lines (kb never hard-wraps)."""
    return sum(max(1, math.ceil(len(ln) / width)) for ln in text.splitlines())


def test_the_readme_query_is_short_by_default_and_long_keeps_everything(cli_env_real):
    short = CliRunner().invoke(main, ["ask", "zero3 oom first step", "--format", "plain"])
    assert short.exit_code == 0
    assert _terminal_lines(short.output) <= 60, short.output
    # what a user acts on: the first result's first fix with its snippet, the other results' titles
    assert '"offload_optimizer"' in short.output and "2. " in short.output and "3. " in short.output
    # other front ends' equivalents are one line pointing at --front-end, not four blocks
    assert "Same settings in" not in short.output and "--front-end accelerate_yaml" in short.output
    assert "--long" in short.output
    long = CliRunner().invoke(main, ["ask", "zero3 oom first step", "--format", "plain", "--long"])
    assert long.exit_code == 0 and _terminal_lines(long.output) > 3 * _terminal_lines(short.output)
    for must in ("Verified parameters", "Myths", "Sources", "Same settings in"):
        assert must in long.output and must not in short.output, must


def test_a_named_front_end_gets_its_equivalent_in_the_short_answer(engine):
    ans = engine.ask("zero3 offload optimizer to cpu oom", front_end="accelerate_yaml")
    text = render_answer(ans, "plain")
    assert "Same settings in the accelerate config YAML" in text and "offload_optimizer_device" in text
    assert "accelerate launch flags" not in text


def test_front_end_all_shows_every_equivalent_even_when_short(cli_env_real):
    r = CliRunner().invoke(main, ["ask", "zero3 oom first step", "--format", "plain", "--front-end", "all"])
    assert r.exit_code == 0 and r.output.count("Same settings in") >= 3


def test_chinese_short_answer_is_chinese(cli_env_real):
    r = CliRunner().invoke(main, ["ask", "ZeRO-3第一步就OOM", "--format", "plain"])
    assert r.exit_code == 0
    assert "这是简短回答" in r.output and "--long 还会列出" in r.output and "Short answer" not in r.output


def test_an_invented_argument_of_a_named_class_gets_a_note_from_that_class(fake_engine):
    ans = fake_engine.ask("the Trainer dies once I pass TrainingArguments(save_every_steps=500) under deepspeed")
    note = next(n for n in ans.notes if n.name == "save_every_steps")
    assert note.verdict == "does-not-exist" and note.suggestions == ["transformers:TrainingArguments.save_steps"]
    zh = fake_engine.ask("TrainingArguments(warmup_percent=0.1, bf16=True) 配 zero2 就报错")
    assert any(n.name == "warmup_percent" and n.verdict == "does-not-exist" for n in zh.notes)


def test_a_real_argument_of_a_named_class_is_never_accused(fake_engine):
    ans = fake_engine.ask("TrainingArguments(save_steps=500, eval_strategy='steps') with zero3 hangs at the save")
    assert not [n for n in ans.notes if n.verdict == "does-not-exist"]


def test_closest_entries_are_listed_only_when_something_matched(fake_engine):
    for q in ("how do I center a div in css", "今天天气怎么样"):
        ans = fake_engine.ask(q)
        assert not ans.answered and all(c.score > 0 for c in ans.closest), [(c.id, c.score) for c in ans.closest]
