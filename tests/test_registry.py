"""The registry knows the real names and says plainly what is wrong with the others."""

import filecmp
import importlib.util
import json

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize(
    "name,context,status,rid",
    [
        # real keys, where they really live
        ("zero_force_ds_cpu_optimizer", None, "exact", "deepspeed:zero_force_ds_cpu_optimizer"),
        (
            "zero_optimization.offload_optimizer.pin_memory",
            None,
            "exact",
            "deepspeed:zero_optimization.offload_optimizer.pin_memory",
        ),
        ("offload_param.nvme_path", None, "exact", "deepspeed:zero_optimization.offload_param.nvme_path"),
        (
            "stage3_prefetch_bucket_size",
            "zero_optimization",
            "exact",
            "deepspeed:zero_optimization.stage3_prefetch_bucket_size",
        ),
        # alias accepted by DeepSpeed (populate_by_name)
        (
            "prefetch_bucket_size",
            "zero_optimization",
            "alias",
            "deepspeed:zero_optimization.stage3_prefetch_bucket_size",
        ),
        # deprecated no-op alias
        (
            "cpu_offload_use_pin_memory",
            "zero_optimization",
            "deprecated",
            "deepspeed:zero_optimization.cpu_offload_use_pin_memory",
        ),
        (
            "stage3_gather_fp16_weights_on_model_save",
            None,
            "deprecated",
            "deepspeed:zero_optimization.stage3_gather_fp16_weights_on_model_save",
        ),
        # removed in 0.19.8: DeepSpeed raises
        ("amp", None, "removed", "deepspeed:amp"),
        # APIs, not config keys
        ("zero_offload_optimizer", None, "not-a-config-key", "deepspeed:DeepSpeedEngine.zero_offload_optimizer"),
        ("set_z3_leaf_modules", None, "not-a-config-key", "deepspeed:utils.set_z3_leaf_modules"),
        ("device_map", None, "not-a-config-key", "transformers:PreTrainedModel.from_pretrained.device_map"),
    ],
)
def test_resolve_known(registry, name, context, status, rid):
    lk = registry.resolve(name, context=context)
    assert lk.status == status
    assert lk.record["id"] == rid


def test_deprecated_noop_is_flagged(registry):
    rec = registry.get("deepspeed:zero_optimization.cpu_offload_use_pin_memory")
    assert rec["deprecated"] and rec["noop"]
    rec = registry.get("deepspeed:zero_optimization.cpu_offload")
    assert rec["deprecated"] and not rec["noop"] and rec["replacement"] == "offload_optimizer"


@pytest.mark.parametrize(
    "name,context,where",
    [
        (
            "nvme_path",
            "zero_optimization",
            {"zero_optimization.offload_optimizer.nvme_path", "zero_optimization.offload_param.nvme_path"},
        ),
        ("zero_force_ds_cpu_optimizer", "zero_optimization", {"zero_force_ds_cpu_optimizer"}),
        (
            "pin_memory",
            "zero_optimization",
            {"zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory"},
        ),
    ],
)
def test_misplaced_says_where(registry, name, context, where):
    lk = registry.resolve(name, context=context)
    assert lk.status == "misplaced"
    assert {c["path"] for c in lk.candidates} == where


@pytest.mark.parametrize("name", ["zero_force_opt_offload", "zero_3_leaf_modules", "zero_force_ds_cpu_offload"])
def test_invented_seed_names_are_unknown(registry, name):
    assert registry.resolve(name).status == "unknown"
    assert registry.resolve(name, context="zero_optimization").status == "unknown"


def test_did_you_mean(registry):
    assert (
        "zero_optimization.stage3_prefetch_bucket_size"
        in registry.resolve("zero_optimization.stage3_prefetch_bucket").suggestions
    )
    assert "bf16.check_grad_overflow" in registry.resolve("check_overflow", context="bf16").suggestions
    assert "zero_force_ds_cpu_optimizer" in registry.resolve("zero_force_ds_cpu_offload").suggestions


def test_counts_and_sources(registry):
    ds = [r for r in registry.records if r["package"] == "deepspeed" and r["kind"] in ("config_key", "config_section")]
    zero = [r for r in ds if r["path"].startswith("zero_optimization.")]
    top = [r for r in ds if "." not in r["path"] and r["status"] == "active"]
    assert len(zero) >= 70
    assert len(top) >= 45
    for r in registry.records:
        assert r["source_file"] and r["source_line"] >= 1, r["id"]


def test_records_are_sorted_and_unique():
    for p in sorted((ROOT / "data" / "registry").glob("*.jsonl")):
        ids = [json.loads(line)["id"] for line in p.read_text().splitlines()]
        assert ids == sorted(ids) and len(ids) == len(set(ids)), p.name


def test_versions_can_coexist(registry):
    from kb.registry import Registry

    old = dict(
        registry.get("deepspeed:zero_optimization.offload_optimizer.pin_memory"), version="0.19.4", default="false"
    )
    reg = Registry([*registry._all, old])
    assert reg.get("deepspeed:zero_optimization.offload_optimizer.pin_memory")["default"] == "true"  # newest wins
    hist = reg.history("deepspeed:zero_optimization.offload_optimizer.pin_memory")
    assert [h["version"] for h in hist] == ["0.19.4", "0.19.8"]


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_committed_registry_equals_fresh_build(tmp_path):
    import importlib.metadata as md

    from indexer.registry_build import build_registry

    committed = ROOT / "data" / "registry"
    manifest = json.loads((committed / "manifest.json").read_text())
    for info in manifest["files"].values():
        if md.version(info["package"]).split("+")[0] != info["version"]:
            pytest.skip(f"installed {info['package']} differs from the committed {info['version']}")
    build_registry(tmp_path)
    for fname in manifest["files"]:
        assert filecmp.cmp(committed / fname, tmp_path / fname, shallow=False), (
            f"{fname} is stale: run `kb registry build`"
        )
