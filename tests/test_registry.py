"""The registry knows the real names and says plainly what is wrong with the others."""

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
            {
                "zero_optimization.offload_optimizer.pin_memory",
                "zero_optimization.offload_param.pin_memory",
                # read statically from deepspeed/runtime/data_pipeline/config.py (the timeline), since 0.16
                "data_efficiency.data_sampling.pin_memory",
            },
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


def test_record_type_declares_every_field_the_files_have():
    """kb.registry.store.Record lists every field of the committed records (kind-specific ones NotRequired),
    and a field it requires is in every record; the kinds are those KINDS names."""
    from kb.registry.store import KINDS, Record

    declared, required = set(Record.__annotations__), set(Record.__required_keys__)
    view_only = {"absent", "since", "until", "unrecorded_in", "removed_in"}  # added by Registry.at, never written
    # the fields of the records a timeline makes for names no sampled release built (kb.registry.timeline)
    view_only |= {"owners", "inherits", "from_timeline"}
    seen: set[str] = set()
    for p in sorted((ROOT / "data" / "registry").glob("*.jsonl")):
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            r = json.loads(line)
            assert required <= set(r), (p.name, n, sorted(required - set(r)))
            assert r["kind"] in KINDS, (p.name, n, r["kind"])
            seen |= set(r) | {k for h in r["history"].values() for k in h}
    assert seen <= declared, sorted(seen - declared)
    assert declared - seen == view_only  # nothing declared that no record has


def test_versions_can_coexist(registry):
    rid = "deepspeed:zero_optimization.offload_optimizer.pin_memory"
    assert registry.get(rid)["default"] == "true"  # the default view is the newest release
    assert registry.at({"deepspeed": "0.19.4"}).get(rid)["default"] == "false"
    assert registry.at({"deepspeed": "0.19.6"}).get(rid)["default"] == "false"  # nearest recorded at or below
    assert registry.at({"deepspeed": "0.19.8"}).get(rid)["default"] == "true"


def _format2(pkg: str) -> list[dict]:
    from indexer.registry_releases import read_format2

    return read_format2(ROOT / "data" / "registry" / f"{pkg}.jsonl")


@pytest.mark.slow  # rebuilds the registry from the installed packages (about 45 s)
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_committed_registry_equals_fresh_build(tmp_path):
    """Rebuild the installed (newest) releases and compare them with the newest-release view of the
    format-2 files. Older releases: `kb registry build --release PKG==VERSION` (docs/registry.md)."""
    import importlib.metadata as md

    from indexer.registry_build import build_registry
    from indexer.registry_releases import view_at

    manifest = json.loads((ROOT / "data" / "registry" / "manifest.json").read_text())
    assert manifest["format"] == 2
    for pkg, info in manifest["packages"].items():
        if md.version(pkg).split("+")[0] != info["releases"][-1]:
            pytest.skip(f"installed {pkg} differs from the newest recorded {info['releases'][-1]}")
    build_registry(tmp_path)
    for pkg, info in manifest["packages"].items():
        newest = info["releases"][-1]
        view = [v for v in (view_at(r, newest) for r in _format2(pkg)) if v is not None]
        committed = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in view)
        fresh = (tmp_path / f"{pkg}-{newest}.jsonl").read_text(encoding="utf-8")
        assert committed == fresh, f"data/registry/{pkg}.jsonl is stale for {newest}: run `kb registry build`"
        assert info["per_release"][newest] == len(view)


def test_manifest_matches_the_records():
    from indexer.registry_releases import RELEASES

    manifest = json.loads((ROOT / "data" / "registry" / "manifest.json").read_text())
    assert manifest["format"] == 2
    assert {p: i["releases"] for p, i in manifest["packages"].items()} == RELEASES
    for pkg, info in manifest["packages"].items():
        recs = _format2(pkg)
        assert info["records"] == len(recs)
        for v in info["releases"]:
            assert info["per_release"][v] == sum(v in r["releases"] for r in recs), (pkg, v)
            assert info["built"][v] in ("import", "static")
        for r in recs:
            assert r["version"] == r["releases"][-1] and set(r["history"]) <= set(r["releases"][:-1]), r["id"]


@pytest.mark.parametrize(
    "rid,release,field,value",
    [
        # DeepSpeed turned the offload pin_memory default on after 0.19.4
        ("deepspeed:zero_optimization.offload_optimizer.pin_memory", "0.19.4", "default", "false"),
        ("deepspeed:zero_optimization.offload_optimizer.pin_memory", "0.19.8", "default", "true"),
        ("deepspeed:zero_optimization.offload_param.pin_memory", "0.14.4", "default", "false"),
        # `amp` is accepted up to 0.19.4 and rejected by 0.19.8
        ("deepspeed:amp", "0.19.4", "status", "active"),
        ("deepspeed:amp", "0.19.8", "status", "removed"),
        ("transformers:PreTrainedModel.from_pretrained.torch_dtype", "4.46.3", "deprecated", False),
        ("transformers:PreTrainedModel.from_pretrained.torch_dtype", "4.57.6", "deprecated", True),
        ("transformers:TrainingArguments.gradient_checkpointing", "4.57.6", "deprecated", False),
        ("transformers:TrainingArguments.gradient_checkpointing", "5.24.0", "deprecated", True),
    ],
)
def test_values_per_release(rid, release, field, value):
    from indexer.registry_releases import view_at

    rec = next(r for r in _format2(rid.split(":")[0]) if r["id"] == rid)
    assert view_at(rec, release)[field] == value


@pytest.mark.parametrize(
    "rid,releases,renamed_to",
    [
        ("transformers:TrainingArguments.activation_checkpointing", ["5.24.0"], None),
        (
            "transformers:TrainingArguments.gradient_checkpointing",
            ["4.46.3", "4.57.6", "5.24.0"],
            "transformers:TrainingArguments.activation_checkpointing",
        ),
        (
            "transformers:TrainingArguments.evaluation_strategy",
            ["4.46.3"],
            "transformers:TrainingArguments.eval_strategy",
        ),
        (
            "transformers:PreTrainedModel.from_pretrained.torch_dtype",
            ["4.46.3", "4.57.6", "5.24.0"],
            "transformers:PreTrainedModel.from_pretrained.dtype",
        ),
        ("transformers:PreTrainedModel.from_pretrained.dtype", ["4.57.6", "5.24.0"], None),
        ("transformers:PretrainedConfig", ["4.46.3", "4.57.6"], "transformers:PreTrainedConfig"),
        ("deepspeed:zero_optimization.leaf_module", ["0.18.9", "0.19.4", "0.19.8"], None),
        (
            "deepspeed:zero_optimization.cpu_offload",
            ["0.14.4", "0.16.9", "0.18.9", "0.19.4", "0.19.8"],
            "deepspeed:zero_optimization.offload_optimizer",
        ),
        ("peft:LoraConfig.target_parameters", ["0.17.1", "0.21.2"], None),
        ("accelerate:cli/accelerate launch/--fsdp_version", ["1.6.0", "1.15.0"], None),
    ],
)
def test_releases_and_renames(rid, releases, renamed_to):
    rec = next(r for r in _format2(rid.split(":")[0]) if r["id"] == rid)
    assert rec["releases"] == releases
    assert rec["renamed_to"] == renamed_to
    if renamed_to:
        target = next(r for r in _format2(rid.split(":")[0]) if r["id"] == renamed_to)
        assert rid in target["renamed_from"]
