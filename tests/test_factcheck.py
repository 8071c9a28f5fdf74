"""`kb factcheck` never accuses a real name, and still catches invented ones where it can know.

Fixtures: tests/fixtures/names/real.yaml (real names of the packages, NCCL and CUDA, with where they
are real) and tests/fixtures/names/invented.yaml (near-misses of real keys, with the did-you-mean).
"""

import json
import re

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.main import main
from kb.registry.factcheck import VERDICTS, check_names, judge
from tests.conftest import ROOT, fuzz_examples
from tests.test_lint import check_verdicts

FIX = ROOT / "tests" / "fixtures" / "names"
REAL = yaml.safe_load((FIX / "real.yaml").read_text(encoding="utf-8"))["names"]
INVENTED = yaml.safe_load((FIX / "invented.yaml").read_text(encoding="utf-8"))["names"]
ISSUE = "set NCCL_P2P_DISABLE=1 and CUDA_LAUNCH_BLOCKING=1, TORCH_CUDA_ARCH_LIST=9.0, torchrun --nproc_per_node 2"


def _nest(parent: str, key: str, value) -> dict:
    d = {key: value}
    for part in reversed([p for p in parent.split(".") if p]):
        d = {part: d}
    return d


def written(name: str, context: str) -> str:
    """The name as a user would write it in that context."""
    if context == "env":
        return f"export {name}=1\npython train.py"
    if context.startswith("cli:"):
        command = context[4:]
        if command.endswith(".py"):
            return f"python {command} ckpt_dir out_dir {name}"
        return f"{command} {name} 2 train.py --output_dir out"
    if context.startswith("ds_config:"):
        cfg = _nest(context.split(":", 1)[1], name, 1)
        cfg.setdefault("train_batch_size", 8)
        return "my ds_config.json:\n```json\n" + json.dumps(cfg, indent=2) + "\n```\n"
    if context.startswith("accelerate_yaml:"):
        parent = context.split(":", 1)[1]
        base = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "DEEPSPEED"}
        base.pop(name, None)
        if parent:
            base[parent] = {name: 1}
        else:
            base[name] = 1
        return "```yaml\n" + yaml.safe_dump(base, sort_keys=False) + "```\n"
    if context in ("TrainingArguments", "LoraConfig"):
        return f"args = {context}(\n    output_dir='out',\n    {name}=1,\n)\n"
    if context == "method":
        return f"model = model.{name}()"
    if context == "script":
        return f"python {name} ckpt_dir out_dir"
    if context == "ds_form":
        return f"In the DeepSpeed config, set {name} to true and the OOM goes away."
    raise AssertionError(context)


def _leaf(label: str) -> str:
    return re.split(r"[.:/ ]", label)[-1].lstrip("-").replace("-", "_")


def test_fixture_sizes_and_sources():
    assert len(REAL) >= 150 and len(INVENTED) >= 50
    assert len({(r["name"], r["context"]) for r in REAL}) == len(REAL)
    for r in REAL:
        assert r["kind"] and r["context"] and r["real_at"], r
        if "registry_id" in r:
            assert re.search(r"\S+:\d+$", r["real_at"]), r  # package file:line
        else:
            assert r["real_at"].startswith("https://docs.nvidia.com/"), r
    assert any(r["real_at"].startswith("https://docs.nvidia.com/deeplearning/nccl") for r in REAL)
    assert any("cuda-programming-guide" in r["real_at"] for r in REAL)


def test_real_fixture_names_are_in_the_registry_where_it_says(registry):
    """Each package name of the fixture is the record it cites, at the file:line it cites."""
    for r in REAL:
        if "registry_id" not in r:
            continue
        rec = registry.get(r["registry_id"])
        assert rec is not None, r
        assert r["name"] in [rec["name"], *rec["aliases"]], (r, rec["name"])
        assert r["real_at"].endswith(f"{rec['source_file']}:{rec['source_line']}"), (r, rec)


@pytest.mark.parametrize("row", REAL, ids=lambda r: f"{r['context']}-{r['name']}")
def test_real_names_are_never_accused(registry, row):
    for text in (written(row["name"], row["context"]), f"Try {row['name']} here, e.g. in train.py."):
        for v in check_names(text, registry):
            assert v.verdict != "does-not-exist", (text, v.name, v.message)


def test_all_real_names_in_one_text(registry):
    text = "\n".join(written(r["name"], r["context"]) for r in REAL)
    accused = [v.name for v in check_names(text, registry) if v.verdict == "does-not-exist"]
    assert accused == []


@pytest.mark.parametrize("row", INVENTED, ids=lambda r: f"{r['context']}-{r['name']}")
def test_invented_names_are_flagged_with_a_did_you_mean(registry, row):
    assert registry.resolve(row["name"]).status == "unknown", row  # really invented
    text = written(row["name"], row["context"])
    v = {n.name: n for n in check_names(text, registry)}[row["name"]]
    assert v.verdict == "does-not-exist", (text, v.message)
    assert v.reason and "`" + row["name"] + "`" in v.message
    if row["did_you_mean"]:
        assert _leaf(row["did_you_mean"]) in [_leaf(s) for s in v.suggestions], (row, v.suggestions)


def test_the_same_invented_names_in_prose_are_only_unverified(registry):
    """Outside a covered namespace an unknown name is unverified, with the reason, never accused."""
    prose = [r for r in INVENTED if r["context"] != "ds_form" and not r["name"].startswith(("zero_", "stage3_"))]
    assert len(prose) > 40
    for r in prose:
        v = {n.name: n for n in check_names(f"Someone on a forum said {r['name']} helps.", registry)}.get(r["name"])
        if v is not None:
            assert v.verdict == "unverified" and v.reason, (r, v.verdict)


def test_the_issue_sentence():
    from kb.registry.store import Registry

    reg = Registry.load()
    v = {n.name: n.verdict for n in check_names(ISSUE, reg)}
    assert set(v) == {"NCCL_P2P_DISABLE", "CUDA_LAUNCH_BLOCKING", "TORCH_CUDA_ARCH_LIST", "--nproc_per_node"}
    assert "does-not-exist" not in v.values()
    assert v["--nproc_per_node"] == "valid"  # torchrun's own argparse defines it (alias of --nproc-per-node)


def test_unverified_env_var_has_a_bilingual_reason(registry):
    for lang in ("en", "zh"):
        (v,) = check_names("export NCCL_SOME_FUTURE_KNOB=1", registry, lang)
        assert v.verdict == "unverified" and v.suggestions == []
        assert v.reason and v.reason in v.message
        assert bool(re.search(r"[\u4e00-\u9fff]", v.message)) == (lang == "zh")


@pytest.mark.parametrize(
    "text",
    [
        "see https://pytorch.org/docs/stable/elastic/run.html#launcher_api and www.deepspeed.ai/docs/config_json",
        "run train.py with ds_config_zero3.json; the log is in train_log.txt",
        "e.g. this, i.e. that, etc. in ZeRO-3",
        "vLLM: LLM(model, tensor_parallel_size=2, gpu_memory_utilization=0.9) with deepspeed installed",
        "pip install --no-build-isolation --no-cache-dir deepspeed",
        "docker run --shm-size 16g --ipc host",
        "DeepSpeed creates zero_stage_3/ under nvme_path and calls os.path.join(nvme_path, 'zero_stage_3')",
        "ZeRO-3 checkpoints ship zero_to_fp32; run it (or ds_to_universal) on global_step100",
        "pip install deepspeed==0.14.4 torch==2.1.0+cu121 'transformers>=4.46.3,<5' (v4.46.3, py3.10, sm_90)",
    ],
)
def test_not_accused(registry, text):
    assert [v.name for v in check_names(text, registry) if v.verdict == "does-not-exist"] == []


def test_urls_files_and_abbreviations_are_not_judged(registry):
    names = {v.name for v in check_names("https://a.org/x_y.html train.py e.g. i.e. ds.json pytorch.org", registry)}
    assert names == set()


def test_script_flags_are_unverified_launcher_flags_are_judged(registry):
    v = {n.name: n for n in check_names("deepspeed --num_gpus 2 train.py --my_own_flag 3", registry)}
    assert v["--num_gpus"].verdict == "valid"
    assert v["--my_own_flag"].verdict == "unverified"
    v = {n.name: n for n in check_names("deepspeed --num_gpuz 2 train.py", registry)}
    assert v["--num_gpuz"].verdict == "does-not-exist" and "--num_gpus" in v["--num_gpuz"].suggestions


def test_optimizer_params_are_passed_through(registry):
    text = (
        '{"optimizer": {"type": "AdamW", "params": {"torch_adam": true, "adam_w_mode": true}}, "train_batch_size": 8}'
    )
    v = {n.name: n for n in check_names(text, registry)}
    assert v["torch_adam"].verdict == "unverified" and "params" in v["torch_adam"].reason


def test_unknown_section_children_are_not_accused(registry):
    text = 'ds_config.json: {"zero_optimisation": {"overlap_comm": true, "stage_x_y": 1}, "train_batch_size": 8}'
    v = {n.name: n for n in check_names(text, registry)}
    assert v["zero_optimisation"].verdict == "does-not-exist"
    assert v["stage_x_y"].verdict == "unverified"


def test_seed_thread_inventions_still_caught(registry):
    text = (
        "ZeRO-3 on one A100 OOMs. 试试把zero_force_opt_offload设成true，"
        "再把 stage3_prefetch_bucket_size 调小；NCCL_DEBUG=INFO 看看。"
    )
    v = {n.name: n.verdict for n in check_names(text, registry)}
    assert v["zero_force_opt_offload"] == "does-not-exist"
    assert v["stage3_prefetch_bucket_size"] == "valid"
    assert v["NCCL_DEBUG"] != "does-not-exist"


def test_judge_without_context_reads_kb_queries_as_deepspeed(registry):
    """kb ask passes bare names: a zero_* name is a DeepSpeed key there, an env var only unverified."""
    assert judge("zero_force_opt_offload", registry).verdict == "does-not-exist"
    assert judge("NCCL_NOT_A_KNOB", registry).verdict == "unverified"
    assert judge("zero_force_opt_offload", registry, about_ds=False).verdict == "unverified"


def test_verdicts_are_the_documented_set(registry):
    text = "\n".join(written(r["name"], r["context"]) for r in INVENTED[:20]) + "\n" + ISSUE
    assert {v.verdict for v in check_names(text, registry)} <= set(VERDICTS)


def test_cli_exit_codes_and_json_reason(tmp_path):
    f = tmp_path / "a.md"
    f.write_text(ISSUE + "\nexport NCCL_NOT_A_KNOB=1\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["factcheck", str(f), "--json"])
    assert r.exit_code == 0, r.output  # unverified never fails the check
    names = {n["name"]: n for n in json.loads(r.output)["names"]}
    assert names["NCCL_NOT_A_KNOB"]["verdict"] == "unverified" and names["NCCL_NOT_A_KNOB"]["reason"]
    assert names["NCCL_P2P_DISABLE"]["reason"] is None
    f.write_text("deepspeed --num_gpuz 2 train.py\n", encoding="utf-8")
    r = CliRunner().invoke(main, ["factcheck", str(f), "--lang", "zh"])
    assert r.exit_code == 1 and "不存在" in r.output and "--num_gpus" in r.output


FRAGMENTS = [
    "{",
    "}",
    '"',
    ":",
    ",",
    "\n",
    "```json\n",
    "```\n",
    "  ",
    "zero_optimization",
    "zero_fake_key",
    "stage3_x",
    "deepspeed --",
    "torchrun --",
    "accelerate launch --",
    "train.py",
    "TrainingArguments(",
    "LoraConfig(",
    ")",
    "=",
    "NCCL_X_Y",
    "params",
    "optimizer",
    "e.g.",
    "https://x.org/a_b",
    "key: v",
    "- a",
    "\\\n",
    "--num_gpuz",
]


@settings(max_examples=fuzz_examples(1500, 150), deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join))
def test_fuzz_factcheck_on_fragments(registry, text):
    """Config, launcher and call fragments run together: every verdict keeps check_verdicts (in the documented set,
    a recorded name never "does-not-exist", a reason exactly where one is due, the right lines), and a Chinese
    report judges the same names the same way, in Chinese."""
    from kb.lang import has_cjk

    en = check_names(text, registry)
    check_verdicts(text, en, registry)
    zh = check_names(text, registry, "zh")
    same = [(v.name, v.verdict, v.registry_id, v.suggestions, v.lines) for v in en]
    assert [(v.name, v.verdict, v.registry_id, v.suggestions, v.lines) for v in zh] == same
    assert all(has_cjk(v.message) and (v.reason is None or has_cjk(v.reason)) for v in zh)


def test_a_key_of_another_release_is_other_version_never_does_not_exist(registry):
    """With the user's older release pinned, a key that only later releases have is not called invented."""
    releases = registry.releases.get("deepspeed", [])
    if len(releases) < 2:
        pytest.skip("one recorded DeepSpeed release")
    oldest = releases[0]
    newer = [
        r
        for r in registry.records
        if r["package"] == "deepspeed" and r["kind"] == "config_key" and "_" in r["name"] and r["releases"][0] != oldest
    ]
    view = registry.at({"deepspeed": oldest})
    provably_new = [r for r in newer if view.get(r["id"])["status"] == "absent"]
    unrecorded = [r for r in newer if view.get(r["id"]).get("unrecorded_in")]
    assert provably_new and unrecorded
    # under a section the old release did not validate, absence is not proven: unverified, never accused
    u = unrecorded[0]
    text_u = "```json\n" + json.dumps(_nest(u["path"].rpartition(".")[0], u["name"], 1)) + "\n```"
    vu = {n.name: n for n in check_names(text_u, view)}[u["name"]]
    assert vu.verdict == "unverified" and oldest in vu.message, (u["id"], vu.verdict)
    rec = provably_new[0]
    text = "```json\n" + json.dumps(_nest(rec["path"].rpartition(".")[0], rec["name"], 1)) + "\n```"
    v = {n.name: n for n in check_names(text, view)}[rec["name"]]
    assert v.verdict == "other-version", (rec["id"], v.verdict)
    assert rec["releases"][0] in v.message


def test_a_name_at_the_start_of_a_line_is_judged_like_anywhere_else(registry):
    for text in ("zero_force_opt_offload fixed my ZeRO-3 OOM", "My ZeRO-3 OOM: zero_force_opt_offload fixed it"):
        v = {n.name: n.verdict for n in check_names(text, registry)}
        assert v["zero_force_opt_offload"] == "does-not-exist", text
