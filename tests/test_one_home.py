"""One home per fact: each shared fact is defined in exactly one module, and the others use it.

Each test scans the source (kb/, indexer/) for a second definition of the fact and checks that the
users of the fact agree with its home, so a copy that starts to disagree cannot come back unnoticed.
"""

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

SOURCES = sorted(p for d in ("kb", "cli", "indexer") for p in (ROOT / d).rglob("*.py"))


def _grep(rx: str, exclude: tuple[str, ...] = ()) -> list[str]:
    pat = re.compile(rx)
    hits = []
    for p in SOURCES:
        rel = p.relative_to(ROOT).as_posix()
        if rel in exclude:
            continue
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if pat.search(line):
                hits.append(f"{rel}:{n}: {line.strip()}")
    return hits


def test_cjk_range_and_language_detection_live_in_kb_lang():
    assert not _grep(r"\\u4e00|\\u3400|\\u9fff|[\u4e00]-", exclude=("kb/lang.py",))
    assert not _grep(r"def detect_lang|def query_lang", exclude=("kb/lang.py",))
    from kb.content.entries import CJK_RE
    from kb.lang import HAS_CJK, detect_lang

    assert CJK_RE is HAS_CJK and detect_lang("单卡") == "zh" and detect_lang("zero3") == "en"


def test_default_card_is_one_constant():
    assert not _grep(r"(?<![\d.])80\.0\b|gpu_mem\w*\W[^,)]*(?<![\d.])80(?![\d.])", exclude=("kb/memory/card.py",))
    import inspect

    from kb.doctor import lint
    from kb.memory import estimate as memory

    assert inspect.signature(lint.lint_config).parameters["gpu_mem_gib"].default == memory.DEFAULT_GPU_MEM_GIB
    assert memory.Setup().gpu_mem_gib == memory.DEFAULT_GPU_MEM_GIB


def test_the_deepspeed_block_has_one_reader():
    """Only kb.doctor.configs.deepspeed_block digs the DeepSpeed JSON out of a TrainingArguments file."""
    assert not _grep(
        r"""\.get\(\s*["']deepspeed["']\s*\)|\[\s*["']deepspeed["']\s*\]""", exclude=("kb/doctor/configs.py",)
    )


def test_param_likeness_is_one_function():
    assert not _grep(r"def _param_like|def _candidate")
    from kb.ask.text import looks_like_param

    assert looks_like_param("zero_optimization.stage") and looks_like_param("--deepspeed")
    assert not looks_like_param("memory")


def test_package_list_comes_from_the_registry_builders():
    pkgs = r"""["'](deepspeed|transformers|accelerate|peft|torch)["']"""
    lists = [h for h in _grep(rf"{pkgs}\s*,\s*{pkgs}\s*,\s*{pkgs}") if not h.startswith("indexer/registry_build.py")]
    assert not lists, lists
    from indexer.registry_build import BUILDERS
    from kb.registry.store import Registry

    reg = Registry.load()
    # the sampled libraries come from the builders; the front ends only from their timelines
    assert set(reg.versions) == set(BUILDERS) | set(reg.timelines)


def test_free_form_paths_are_defined_once():
    assert len(_grep(r"^FREE_FORM\s*=")) == 1


def test_entry_params_helper_is_shared():
    """'All params of an entry' (entry-level, then fixes', de-duplicated) is Entry.all_params and its dict twin."""
    from kb.ask.result import entry_result
    from kb.content.entries import load_entry
    from kb.registry.store import Registry

    e = load_entry(ROOT / "data" / "entries" / "zero3-single-gpu-no-offload.yaml").entry
    r = entry_result(e.model_dump(mode="json"), "en", Registry.load())
    assert r.params == e.all_params()


@pytest.mark.parametrize(
    "path",
    [ROOT / "kb" / "ask" / "engine.py", ROOT / "kb" / "ask" / "retrieve.py", ROOT / "kb" / "doctor" / "configs.py"],
)
def test_core_modules_do_not_reach_up(path: Path):
    src = path.read_text(encoding="utf-8")
    assert not re.search(r"^\s*(from|import) (indexer|kb\.cli|kb\.present|bot|rich)\b", src, re.M), path
