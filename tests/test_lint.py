"""`kb lint` on real files, `kb factcheck` on free text, the seed thread, and fuzzing both."""

import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.main import main
from kb.doctor.configs import ConfigError, parse_config
from kb.doctor.lint import RULES, lint_config
from kb.registry.factcheck import VERDICTS, check_names
from tests.conftest import ROOT, fuzz_examples, shared_file

FIX = ROOT / "tests" / "fixtures" / "configs"


def lint_file(name, *args):
    r = CliRunner().invoke(main, ["lint", str(FIX / name), "--json", *args])
    return r, (json.loads(r.output) if r.output.startswith("{") else None)


def by_code(out):
    return {(f["code"], f["path"]): f for f in out["findings"]}


def test_seed_style_config(registry):
    r, out = lint_file("seed_ds_config.json", "--world-size", "1")
    assert r.exit_code == 1 and out["kind"] == "lint" and out["config_kind"] == "deepspeed"
    f = by_code(out)
    assert f[("KB002", "zero_optimization.nvme_path")]["line"] == 9
    assert "offload_optimizer.nvme_path" in f[("KB002", "zero_optimization.nvme_path")]["message"]
    assert ("KB005", "zero_force_opt_offload") in f  # top-level: silently ignored
    assert ("KB001", "zero_optimization.zero_3_leaf_modules") in f  # inside the section: DeepSpeed raises
    assert f[("KB009", "zero_optimization.offload_optimizer.device")]["entry"] == "nvme-offload-setup"
    assert ("KB008", "zero_optimization.offload_param") in f
    assert ("KB006", "zero_optimization.reduce_bucket_size") in f
    assert ("KB003", "zero_optimization.cpu_offload_use_pin_memory") in f
    assert ("KB012", "train_batch_size") in f
    assert ("KB016", "activation_checkpointing") in f
    assert ("KB005", "activation_checkpointing.partitioned_activations") in f
    for x in out["findings"]:  # the contract's Finding, in the report's language (--lang)
        assert set(x) == {"code", "severity", "path", "line", "message", "suggestion", "entry"}
    assert out["counts"] == {s: sum(x["severity"] == s for x in out["findings"]) for s in ("error", "warning", "info")}


def test_hf_auto_zero2():
    r, out = lint_file("hf_auto_zero2.json")
    f = by_code(out)
    assert ("KB017", "zero_optimization.offload_optimizer.ratio") in f
    assert ("KB010", "zero_optimization.offload_param") in f
    assert "1.9 GiB" in f[("KB013", "zero_optimization.overlap_comm")]["message"]
    # every "auto" of the file in one finding, at the first one (fp16.enabled, line 2)
    autos = [x for x in out["findings"] if x["code"] == "KB007"]
    assert len(autos) == 1 and autos[0]["path"] == "fp16.enabled" and autos[0]["line"] == 2
    msg = autos[0]["message"]
    assert "TypeError in the batch-size check" in msg and "`train_micro_batch_size_per_gpu`" in msg
    assert "accelerate takes `fp16.enabled` from its `mixed_precision`" in msg  # the registry's mapping record
    assert not [x for x in out["findings"] if x["code"] in ("KB044", "KB045")]


def test_hjson_with_comments():
    r, out = lint_file("hjson_config.hjson")
    assert out["config_format"] == "hjson"
    f = by_code(out)
    assert f[("KB018", "zero_optimization.cpu_offload")]["line"] == 5
    assert f[("KB001", "bf16.check_overflow")]["line"] == 8
    assert "bf16.check_grad_overflow" in f[("KB001", "bf16.check_overflow")]["suggestion"]
    assert ("KB011", "fp16.enabled") in f and ("KB004", "amp") in f


def test_accelerate_yaml_with_deepspeed_keys():
    r, out = lint_file("accelerate_zero3.yaml")
    assert r.exit_code == 0 and out["config_kind"] == "accelerate"
    f = by_code(out)
    assert f[("KB015", "deepspeed_config.stage3_max_live_parameters")]["line"] == 9
    assert ("KB015", "deepspeed_config.zero_force_ds_cpu_optimizer") in f
    assert not any(c == "KB015" and "zero3_init_flag" in p for c, p in f)  # real accelerate key


def test_training_args_yaml_with_nested_deepspeed():
    r, out = lint_file("llamafactory_args.yaml")
    assert out["config_kind"] == "llamafactory"  # kb.doctor.dialect: stage, finetuning_type are LLaMA-Factory's own
    f = by_code(out)
    assert f[("KB002", "deepspeed.zero_optimization.nvme_path")]["line"] == 14
    # judged at the transformers LLaMA-Factory requires (<= 5.6), where gradient_checkpointing is not deprecated yet
    # (transformers 5.23 deprecates it: data/registry/timeline/transformers.json)
    assumed = {v["package"]: v for v in out["versions"]}
    assert assumed["llamafactory"]["origin"] == "assumed" and assumed["transformers"]["origin"] == "assumed"
    assert "requires transformers" in assumed["transformers"]["reason"]
    assert ("KB003", "gradient_checkpointing") not in f
    assert ("KB084", "do_train") in f  # LLaMA-Factory's own check: training without a dataset
    assert not any(c == "KB007" for c, _ in f)  # the HF Trainer fills bf16.enabled "auto"


def test_launch_command():
    r, out = lint_file("launch_deepspeed.txt")
    assert out["config_kind"] == "launch" and out["config_format"] == "cmdline"
    f = by_code(out)
    assert ("KB005", "env.CUDA_VISIBLE_DEVICES") in f
    assert ("KB003", "script_args.gradient_checkpointing") in f


def test_model_does_not_fit_single_gpu(registry):
    cfg = parse_config('{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}')
    f = lint_config(cfg, registry, world_size=1, model_params=7e9)
    assert [x.code for x in f] == ["KB014"] and "117 GiB" in f[0].message
    assert lint_config(cfg, registry, world_size=8, model_params=7e9) == []  # unknown beyond one GPU
    off = parse_config('{"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}')
    assert lint_config(off, registry, world_size=1, model_params=7e9) == []


def test_lint_model_accepts_presets_and_sizes():
    cfg = str(FIX / "good_zero3_offload.json")
    bare = '{"zero_optimization": {"stage": 3}}'
    for model in ("llama2-7b", "7b"):
        r = CliRunner().invoke(main, ["lint", "-", "--json", "--world-size", "1", "--model", model], input=bare)
        assert r.exit_code == 1 and json.loads(r.output)["findings"][0]["code"] == "KB014", model
    r = CliRunner().invoke(main, ["lint", cfg, "--model", "gpt-99"])
    assert r.exit_code == 2 and "--model" in r.output


def test_clean_config_exit_zero():
    r, out = lint_file("good_zero3_offload.json")
    assert r.exit_code == 0 and out["findings"] == []


def test_bad_input_clear_and_nonzero(tmp_path):
    r = CliRunner().invoke(main, ["lint", str(FIX / "broken.json")])
    assert r.exit_code == 2 and "broken.json:5" in r.output
    big = tmp_path / "big.json"
    big.write_text("{" + '"a": 1,' * 300_000 + '"b": 2}')
    r = CliRunner().invoke(main, ["lint", str(big)])
    assert r.exit_code == 2 and "larger than" in r.output
    r = CliRunner().invoke(main, ["lint", str(tmp_path / "nope.json")])
    assert r.exit_code == 2 and "cannot read" in r.output
    r = CliRunner().invoke(main, ["lint", "-"], input="[1, 2]")
    assert r.exit_code == 2 and "mapping" in r.output


def test_every_rule_is_documented_and_linked():
    from kb.content.entries import load_entries

    ids = {le.entry.id for le in load_entries(ROOT / "data" / "entries")}
    for code, r in RULES.items():
        assert r.code == code and r.severity in ("error", "warning", "info") and r.name
        assert r.entry is None or r.entry in ids, (code, r.entry)


# ---------------------------------------------------------------- factcheck


def test_factcheck_seed_thread(registry):
    text = shared_file("seeds/000_a786f7a16dad11d9.txt").read_text(encoding="utf-8")
    v = {n.name: n for n in check_names(text, registry)}
    for invented in ("zero_force_opt_offload", "zero_3_leaf_modules", "zero_force_ds_cpu_offload"):
        assert v[invented].verdict == "does-not-exist", invented
    assert v["zero_offload_optimizer"].verdict == "not-a-config-key"  # an engine method, used as a key
    assert v["cpu_offload_use_pin_memory"].verdict == "deprecated"
    real_keys = [
        "reduce_bucket_size",
        "stage3_prefetch_bucket_size",
        "pin_memory",
        "zero_optimization",
        "stage3_gather_16bit_weights_on_model_save",
        "reduce_scatter",
        "zero_force_ds_cpu_optimizer",
        "offload_optimizer",
        "overlap_comm",
    ]
    for name in real_keys:
        assert v[name].verdict == "valid", name
    real_apis = [
        "from_pretrained",
        "device_map",
        "deepspeed.initialize",
        "load_state_dict",
        "tie_weights",
        "torch.cuda.memory_summary",
        "torch_dtype",
        "model.half",
        "model.to",
    ]
    for name in real_apis:
        assert v[name].verdict in ("not-a-config-key", "deprecated"), (name, v[name].verdict)
    flagged = {n for n, x in v.items() if x.verdict == "does-not-exist"}
    assert flagged == {"zero_force_opt_offload", "zero_3_leaf_modules", "zero_force_ds_cpu_offload", "zero_3"}


def test_factcheck_cli_json(tmp_path):
    f = tmp_path / "answer.md"
    f.write_text('Set "zero_force_opt_offload": true\nand zero_optimization.nvme_path, plus overlap_comm=false\n')
    r = CliRunner().invoke(main, ["factcheck", str(f), "--json"])
    assert r.exit_code == 1
    names = {n["name"]: n for n in json.loads(r.output)["names"]}
    assert (
        names["zero_force_opt_offload"]["verdict"] == "does-not-exist" and names["zero_force_opt_offload"]["line"] == 1
    )
    assert names["zero_optimization.nvme_path"]["verdict"] == "misplaced"
    assert names["overlap_comm"]["verdict"] == "valid" and names["overlap_comm"]["registry_id"].endswith("overlap_comm")
    assert set(names["overlap_comm"]) == {
        "name", "verdict", "message", "registry_id", "suggestions", "line", "lines", "reason"
    }  # fmt: skip
    assert names["overlap_comm"]["reason"] is None and names["overlap_comm"]["lines"] == [2]


# ---------------------------------------------------------------- into answers


def test_ask_with_config_puts_findings_first(engine):
    cfg = (FIX / "seed_ds_config.json").read_text()
    ans = engine.ask("zero3 oom first step", config_text=cfg).to_dict()
    codes = {f["code"] for f in ans["findings"]}
    assert {"KB002", "KB009"} <= codes
    top = [r["id"] for r in ans["results"]]
    assert top[0] in {f["entry"] for f in ans["findings"] if f["severity"] == "error"}


def test_ask_notes_carry_factcheck_verdicts(engine):
    ans = engine.ask("is overlap_comm or zero_force_opt_offload the reason?").to_dict()
    v = {n["name"]: n["verdict"] for n in ans["notes"]}
    assert v == {"overlap_comm": "valid", "zero_force_opt_offload": "does-not-exist"}


def test_findings_follow_the_answer_language(fake_engine, registry):
    """kb answers in Chinese when asked in Chinese, and the config findings inside come in Chinese too."""
    from kb.lang import has_cjk

    cfg = (FIX / "seed_ds_config.json").read_text()
    zh = fake_engine.ask("ZeRO-3 第一步就 OOM", config_text=cfg).to_dict()
    en = fake_engine.ask("zero3 oom first step", config_text=cfg).to_dict()
    assert zh["lang"] == "zh" and en["lang"] == "en" and len(zh["findings"]) == len(en["findings"]) > 5
    lint = lint_config(parse_config(cfg), registry)
    assert [f["message"] for f in zh["findings"]] == [f.message_zh for f in lint]
    assert [f["message"] for f in en["findings"]] == [f.message for f in lint]
    assert all(has_cjk(f["message"]) for f in zh["findings"])
    assert all(f["suggestion"] is None or has_cjk(f["suggestion"]) for f in zh["findings"])


# ---------------------------------------------------------------- fuzzing: properties of lint and factcheck on any input

SEVERITY_ORDER = ("error", "warning", "info")  # the documented severities, in the order findings sort by
ENTRY_IDS = {p.stem for p in (ROOT / "data" / "entries").glob("*.yaml")}
RULE_PACKAGES = ("deepspeed", "accelerate", "transformers")


def _key_paths(data, parent: str = "") -> set[str]:
    """Every dotted key path of parsed config data (the items of a list sit under the list's key)."""
    out: set[str] = set()
    if isinstance(data, dict):
        for k, v in data.items():
            path = f"{parent}.{k}" if parent else str(k)
            out |= {path} | _key_paths(v, path)
    elif isinstance(data, list):
        for v in data:
            out |= _key_paths(v, parent)
    return out


def _names_a_real_key(path: str, registry) -> bool:
    """The path (or its tail after a view prefix such as ``deepspeed.``) is a config key the registry records."""
    parts = path.split(".")
    return any(registry.get(f"{pkg}:{'.'.join(parts[i:])}") for i in range(len(parts)) for pkg in RULE_PACKAGES)


def check_findings(text: str, cfg, findings, registry) -> None:
    """What every lint result must be, whatever the input."""
    keys = _key_paths(cfg.data)
    for f in findings:
        rule = RULES.get(f.code)
        assert rule is not None, f"{f.code} is not a registered rule"
        assert f.severity == rule.severity and f.severity in SEVERITY_ORDER, (f.code, f.severity)
        assert f.message and f.message_zh, f.code  # said in both languages
        assert (f.suggestion is None) == (f.suggestion_zh is None), f.code
        assert f.entry is None or f.entry in ENTRY_IDS, (f.code, f.entry)  # an entry `kb show` can open
        # it points at a key of this input, or names the real config key it is about (a setting that is missing)
        assert f.path in keys or _names_a_real_key(f.path, registry), (f.code, f.path, sorted(keys)[:10])
        # the line is the key's line in the text (a key written twice: the repeat's line)
        assert f.line == cfg.line(f.path) or (f.path, f.line) in cfg.duplicates, (f.code, f.path, f.line)
        assert f.line is None or 1 <= f.line <= max(1, len(text.splitlines())), (f.code, f.line)
    order = [(f.line or 0, SEVERITY_ORDER.index(f.severity), f.path, f.code) for f in findings]
    assert order == sorted(order), "findings are in file order: line, severity, path, code"


def lint_twice(text: str, registry, **kw):
    """Parse and lint ``text`` twice, from scratch: the same findings both times (None: not a config)."""
    try:
        cfg = parse_config(text)
    except ConfigError:
        with pytest.raises(ConfigError):
            parse_config(text)
        return None, None
    findings = lint_config(cfg, registry, **kw)
    assert [f.to_dict() for f in findings] == [f.to_dict() for f in lint_config(parse_config(text), registry, **kw)]
    return cfg, findings


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["auto", "cpu", "nvme", "none", "5e8", "3"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "zero_optimization",
                    "stage",
                    "offload_optimizer",
                    "offload_param",
                    "device",
                    "nvme_path",
                    "bf16",
                    "fp16",
                    "enabled",
                    "ratio",
                    "overlap_comm",
                    "reduce_bucket_size",
                    "train_batch_size",
                    "train_micro_batch_size_per_gpu",
                    "gradient_accumulation_steps",
                    "deepspeed_config",
                    "deepspeed",
                    "activation_checkpointing",
                    "zero_stage",
                    "x",
                ]
            )
            | st.text(max_size=8),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=fuzz_examples(4000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values, st.sampled_from(["json", "yaml"]), st.integers(1, 8) | st.none(), st.sampled_from([None, 7e9]))
def test_fuzz_lint_structured(registry, value, fmt, world, params):
    """Any JSON / YAML value: the findings keep check_findings, linting is deterministic, and `kb lint` prints
    the same findings and exits 1 exactly when one of them is an error (2 when the text is not a config)."""
    import yaml

    text = json.dumps(value) if fmt == "json" else yaml.safe_dump(value)
    cfg, findings = lint_twice(text, registry, world_size=world, model_params=params)
    opts = (["--world-size", str(world)] if world else []) + (["--model", "7b"] if params else [])
    r = CliRunner().invoke(main, ["lint", "-", "--json", *opts], input=text)
    out = json.loads(r.stdout)
    if cfg is None:
        assert r.exit_code == 2 and out["kind"] == "config", r.output
        return
    check_findings(text, cfg, findings, registry)
    assert r.exit_code == (1 if any(f.severity == "error" for f in findings) else 0), r.output
    assert [(x["code"], x["severity"], x["path"], x["line"], x["message"]) for x in out["findings"]] == [
        (f.code, f.severity, f.path, f.line, f.message) for f in findings
    ]
    assert out["counts"] == {s: sum(f.severity == s for f in findings) for s in SEVERITY_ORDER}


LAUNCH_WORDS = [
    "deepspeed ",
    "accelerate launch ",
    "torchrun ",
    "python train.py ",
    "train.py ",
    "--num_gpus 2 ",
    "--num_gpuz ",
    "--zero_stage 3 ",
    "--deepspeed ds.json ",
    "--gradient_checkpointing ",
    "--mixed_precision bf16 ",
    "--use_deepspeed ",
    "--multi_gpu ",
    "--bf16 ",
    "CUDA_VISIBLE_DEVICES=0 ",
    "NCCL_P2P_DISABLE=1 ",
    "\\\n",
    "\n",
    "x",
    "=",
]


@settings(max_examples=fuzz_examples(3500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300) | st.lists(st.sampled_from(LAUNCH_WORDS), max_size=14).map("".join))
def test_fuzz_lint_text(registry, text):
    """Any text, launch command lines among it: parse + lint raise nothing but ConfigError, the findings keep
    check_findings, and the same text gives the same findings."""
    cfg, findings = lint_twice(text, registry)
    if cfg is not None:
        check_findings(text, cfg, findings, registry)


@settings(max_examples=fuzz_examples(3000), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=200)
    | st.lists(
        st.sampled_from(
            [
                "zero_",
                "offload",
                ".",
                "--",
                "_param",
                "显存",
                "stage3",
                "=",
                ":",
                " ",
                "\n",
                '"',
                "deepspeed.",
                "model.",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_fuzz_factcheck(registry, text):
    check_verdicts(text, check_names(text, registry), registry)
    assert [v.to_dict() for v in check_names(text, registry)] == [v.to_dict() for v in check_names(text, registry)]


def check_verdicts(text: str, verdicts, registry) -> None:
    """What every factcheck result must be, whatever the text."""
    lines = text.splitlines() or [text]
    names = [v.name for v in verdicts]
    assert len(names) == len(set(names)), "one verdict per distinct name"
    assert [v.line for v in verdicts] == sorted(v.line for v in verdicts), "in order of first appearance"
    for v in verdicts:
        assert v.verdict in VERDICTS, v
        assert v.message, v.name
        # a name the registry records is never called invented, whatever the context
        assert not (registry.by_name.get(v.name) and v.verdict == "does-not-exist"), (v.name, text)
        # an accusation says where it was judged, an "unverified" why kb cannot say; nothing else carries a reason
        assert bool(v.reason) == (v.verdict in ("does-not-exist", "unverified")), (v.name, v.verdict, v.reason)
        assert v.verdict != "does-not-exist" or v.registry_id is None, (v.name, v.registry_id)
        assert v.verdict != "valid" or registry.get(v.registry_id) is not None, (v.name, v.registry_id)
        # the lines it is on: where it first appears, each holding the name, in order
        assert v.lines and v.line == v.lines[0] and v.lines == sorted(set(v.lines)), (v.name, v.lines)
        assert all(1 <= n <= len(lines) and v.name in lines[n - 1] for n in v.lines), (v.name, v.lines)


@pytest.mark.parametrize("text", ["", "   ", "deepspeed", "accelerate launch", "{", "- a\n- b", "a: [", "\x00\x01"])
def test_odd_inputs(registry, text):
    try:
        cfg = parse_config(text)
    except ConfigError:
        return
    lint_config(cfg, registry)


@pytest.mark.parametrize(
    "ds_block,path",
    [
        ("  deepspeed_multinode_launcher: pdsh\n", "deepspeed_config.deepspeed_hostfile"),  # the launcher is named
        ("  zero_stage: 3\n", "deepspeed_config.deepspeed_multinode_launcher"),  # unset: accelerate picks pdsh
    ],
)
def test_multinode_without_hostfile_names_what_decides_it(registry, ds_block, path):
    """KB077 sits on the missing hostfile of a launcher the YAML names, or on the launcher it leaves unset
    (accelerate issues 1795, 1867, 2601)."""
    text = (
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_machines: 2\nnum_processes: 16\n"
        "deepspeed_config:\n" + ds_block
    )
    hit = [f for f in lint_config(parse_config(text), registry) if f.code == "KB077"]
    assert [f.path for f in hit] == [path], hit
    assert ("is not set, so accelerate uses `pdsh`" in hit[0].message) == path.endswith("launcher")
