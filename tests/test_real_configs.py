"""The real-config corpus (tests/fixtures/real_configs/, issue 21): every file parses and lints without an exception.

Shipped examples (good: true) must also parse: kb's clean ConfigError counts as a failure for them, since they are
configs the front ends run. Configs from bug threads (good: false) may be refused with a ConfigError (some are
pasted fragments), but never crash. The manifest's sources and problems have the required shape, and the test reads
nothing outside tests/ (the corpus stands alone). The figures (false alarms, wrong warnings) are bench/lint_corpus.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kb.doctor.configs import ConfigError, parse_config
from kb.doctor.lint import lint_config
from kb.registry.versions import parse_versions_arg

TESTS = Path(__file__).resolve().parent
CORPUS = TESTS / "fixtures" / "real_configs"
MANIFEST = CORPUS / "manifest.yaml"
REVIEWED = CORPUS / "reviewed.yaml"
NOT_ITEMS = {"manifest.yaml", "reviewed.yaml"}

DIALECTS = {"deepspeed", "accelerate", "training_args", "llamafactory", "axolotl", "trl", "swift", "launch"}
KINDS = {"invalid-key", "removed", "wrong-type", "mismatch", "missing", "unsupported", "other"}
REPO_SOURCE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+@[0-9a-f]{40}:[^\s:]+$")
THREAD_SOURCE = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+$")
SHIPPED_REPOS = {
    "dse": "microsoft/DeepSpeedExamples",
    "llamafactory": "hiyouga/LLaMA-Factory",
    "axolotl": "axolotl-ai-cloud/axolotl",
    "trl": "huggingface/trl",
    "accelerate": "huggingface/accelerate",
    "swift": "modelscope/ms-swift",
    "transformers": "huggingface/transformers",
}

ITEMS = yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))["items"]


def _path(name: str) -> Path:
    p = (CORPUS / name).resolve()
    assert p.is_relative_to(TESTS), f"{name} is outside tests/"
    return p


def test_manifest_lists_every_file_once():
    names = [i["file"] for i in ITEMS]
    assert len(names) == len(set(names)), "a file is listed twice"
    on_disk = {p.name for p in CORPUS.iterdir() if p.is_file()} - NOT_ITEMS
    assert set(names) == on_disk


def test_corpus_size_and_spread():
    shipped = [i for i in ITEMS if i["origin"] == "shipped"]
    threads = [i for i in ITEMS if i["origin"] == "bug-thread"]
    assert len(shipped) >= 110 and len(threads) >= 18
    per_repo = {short: sum(i["file"].startswith(short + "__") for i in shipped) for short in SHIPPED_REPOS}
    assert all(per_repo.values()), per_repo


@pytest.mark.parametrize("item", ITEMS, ids=[i["file"] for i in ITEMS])
def test_item_shape(item):
    assert item["dialect"] in DIALECTS
    assert item["origin"] in ("shipped", "bug-thread")
    assert isinstance(item["good"], bool)
    if item["origin"] == "shipped":
        assert REPO_SOURCE.match(item["source"]), item["source"]
        short = item["file"].split("__", 1)[0]
        repo, _, rest = item["source"].partition("@")
        assert repo == SHIPPED_REPOS[short]
        path = rest.split(":", 1)[1]
        assert item["file"] == f"{short}__{path.replace('/', '__')}"
        assert item.get("pins"), "a shipped example says which pins it was judged at"
    else:
        assert THREAD_SOURCE.match(item["source"]), item["source"]
        assert item["good"] is False
    if item["good"]:
        assert "problem" not in item
    else:
        problem = item["problem"]
        assert problem["kind"] in KINDS
        assert problem["path"] and isinstance(problem["path"], str)
        assert len(problem["summary"]) > 40
        assert isinstance(item.get("self_contained", True), bool)
    if item.get("versions"):
        parse_versions_arg(item["versions"])  # a spec kb accepts


@pytest.mark.parametrize("item", ITEMS, ids=[i["file"] for i in ITEMS])
def test_parses_and_lints_without_exception(item, registry):
    text = _path(item["file"]).read_text(encoding="utf-8")
    try:
        cfg = parse_config(text, item["file"])
    except ConfigError as e:
        if item["good"]:
            pytest.fail(f"kb cannot read a shipped example: {e}")
        return
    pins = parse_versions_arg(item["versions"]).as_pins() if item.get("versions") else {}
    findings = lint_config(cfg, registry.at(pins))
    assert all(f.code and f.severity in ("error", "warning", "info") for f in findings)


def test_reviews_point_at_corpus_files():
    reviews = yaml.safe_load(REVIEWED.read_text(encoding="utf-8"))["reviews"]
    files = {i["file"] for i in ITEMS if i["good"]}
    for r in reviews:
        assert r["file"] in files, r["file"]
        assert r["verdict"] in ("right", "wrong") and r["why"].strip()
