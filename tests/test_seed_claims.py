"""data/seed-claims.yaml: every claim of the seed thread has a verdict and an entry that explains it."""

import re

import yaml

from kb.ask.text import identifiers
from tests.conftest import ROOT, shared_file

CLAIMS = yaml.safe_load((ROOT / "data" / "seed-claims.yaml").read_text(encoding="utf-8"))
ENTRY_DIR = ROOT / "data" / "entries"


def test_every_claim_maps_to_an_existing_entry_with_a_verdict():
    ids = [c["id"] for c in CLAIMS["claims"]]
    assert len(ids) == len(set(ids))
    for c in CLAIMS["claims"]:
        assert c["verdict"] in {"right", "wrong", "partly", "depends"}, c["id"]
        assert (ENTRY_DIR / f"{c['entry']}.yaml").exists(), f"{c['id']}: no entry {c['entry']}"
        assert c["claim"]["en"] and re.search(r"[\u4e00-\u9fff]", c["claim"]["zh"]), c["id"]


def test_each_name_a_claim_uses_is_discussed_in_its_entry():
    for c in CLAIMS["claims"]:
        text = (ENTRY_DIR / f"{c['entry']}.yaml").read_text(encoding="utf-8").lower()
        for name in c["names"]:
            leaf = name.rsplit(".", 1)[-1].lower()
            assert leaf in text, f"{c['id']}: entry {c['entry']} never mentions {name}"


def test_wrong_claims_have_a_myth_in_their_entry():
    for c in CLAIMS["claims"]:
        if c["verdict"] == "wrong":
            doc = yaml.safe_load((ENTRY_DIR / f"{c['entry']}.yaml").read_text(encoding="utf-8"))
            assert doc.get("myths"), f"{c['id']}: wrong claim but {c['entry']} has no myths"


def test_every_name_in_the_thread_is_covered():
    thread = shared_file("seeds/000_a786f7a16dad11d9.txt").read_text(encoding="utf-8")
    covered = {n for c in CLAIMS["claims"] for n in c["names"]} | set(CLAIMS["not_parameters"])
    missing = [n for n in identifiers(thread) if n not in covered]
    assert not missing, f"names in the seed thread no claim covers: {missing}"


def test_invented_names_in_claims_are_unknown_to_the_registry(registry):
    for name in ("zero_force_opt_offload", "zero_3_leaf_modules", "zero_force_ds_cpu_offload"):
        assert any(name in c["names"] for c in CLAIMS["claims"])
        assert registry.resolve(name).status == "unknown"
