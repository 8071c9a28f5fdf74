"""Front-end equivalents (issue 12, deliverable 3).

The mapping records are rebuilt here from the installed accelerate / transformers source
(indexer/registry_frontends.py) and checked against what accelerate and transformers themselves do
with the same settings: a DeepSpeedPlugin built from the field, an ``accelerate launch`` argument list
or config YAML pushed through accelerate's own launch code into the plugin, TrainingArguments pushed
through transformers' "auto" filling. No expected mapping is typed here except the few known pairs
the issue names, and those are checked against accelerate too.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import string
from pathlib import Path

import pytest
import yaml

from indexer import registry_frontends as rf
from indexer.registry_build import _pkg_root
from kb.doctor import frontends as fe
from kb.registry.store import Registry

FIX = {
    "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
    "gradient_accumulation_steps": 4,
    "gradient_clipping": 0.5,
    "train_micro_batch_size_per_gpu": 2,
    "bf16": {"enabled": True},
}


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def acc_records():
    import importlib.metadata as md

    return rf.frontend_records("accelerate", md.version("accelerate"))


@pytest.fixture(scope="module")
def hf_records():
    import importlib.metadata as md

    return rf.frontend_records("transformers", md.version("transformers"))


@pytest.fixture(scope="module")
def reg(registry, acc_records, hf_records):
    """The committed registry plus the provider's records (the live one may not hold them yet)."""
    base = [r for r in registry.records if r["kind"] != "mapping"]
    return Registry(base + acc_records + hf_records)


@pytest.fixture
def clean_env(monkeypatch):
    for k in list(os.environ):
        if k.startswith("ACCELERATE_"):
            monkeypatch.delenv(k)
    return monkeypatch


def _get(cfg: dict, path: str):
    for part in path.split("."):
        if not isinstance(cfg, dict) or part not in cfg:
            return KeyError(path)
        cfg = cfg[part]
    return cfg


def _put(cfg: dict, path: str, value) -> dict:
    *heads, leaf = path.split(".")
    node = cfg
    for h in heads:
        node = node.setdefault(h, {})
    node[leaf] = value
    return cfg


def _plugin_type(field: str) -> type:
    from accelerate.utils import DeepSpeedPlugin

    return {f.name: f.type for f in dataclasses.fields(DeepSpeedPlugin)}[field]


def _sample(typ, when: str | None = None):
    """A value of the field's type that differs from accelerate's defaults."""
    if when:
        return "/local_nvme"
    return {int: 3, float: 0.5, bool: True, str: "cpu"}[typ]


def _when_kwargs(when: str | None) -> dict:
    if not when:
        return {}
    m = re.fullmatch(r"(\w+) == '(\w+)'", when)
    assert m, f"condition the test cannot apply: {when}"
    return {m.group(1): m.group(2)}


def _launch_env(argv: list[str]) -> dict[str, str]:
    """What ``accelerate launch <argv> train.py`` exports to the training process (accelerate's own code)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    args = launch_command_parser().parse_args([*argv, "train.py"])
    args, defaults, mp_from_config = _validate_launch_command(args)
    assert args.use_deepspeed
    args.deepspeed_fields_from_accelerate_config = ""
    _, env = prepare_deepspeed_cmd_env(args)
    return {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}


def _plugin_config(monkeypatch, env: dict[str, str]) -> dict:
    from accelerate.utils import DeepSpeedPlugin

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    plugin = DeepSpeedPlugin()
    if "ACCELERATE_MIXED_PRECISION" in env:
        plugin.set_mixed_precision(env["ACCELERATE_MIXED_PRECISION"])
    return plugin.deepspeed_config


def _yaml_file(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "accelerate.yaml"
    head = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_machines: 1\nnum_processes: 1\n"
    p.write_text(head + body + "\n", encoding="utf-8")
    return p


def _by(records, front_end, fill=None):
    return [r for r in records if r["front_end"] == front_end and (fill is None or r["fill"] == fill)]


# ---------------------------------------------------------------- the provider's records


def test_records_are_well_formed_and_deterministic(acc_records, hf_records):
    again = rf.frontend_records("accelerate", acc_records[0]["version"])
    assert again == acc_records
    for r in acc_records + hf_records:
        assert r["kind"] == "mapping" and r["front_end"] in rf.FRONT_ENDS
        assert r["name"] == r["front_name"] and r["path"]
        assert r["fill"] in ("direct", "auto", "file", "not_forwarded")
        # the cited line (or the call it starts) names the ds key or the front-end name
        lines = (_pkg_root(r["package"]) / r["source_file"]).read_text(encoding="utf-8").splitlines()
        window = "\n".join(lines[r["source_line"] - 1 : r["source_line"] + 3])
        leaves = {r["path"].rsplit(".", 1)[-1], r["front_name"].lstrip("-").rsplit(".", 1)[-1]}
        leaves |= {w.rsplit(".", 1)[-1] for w in re.findall(r"[\w.]{4,}", r["chain"][-1][2])}
        assert any(leaf in window for leaf in leaves), (r["id"], window)
        for file, line, _ in r["chain"]:
            assert (_pkg_root(r["package"]) / file).exists() and line >= 0
    assert len({r["id"] for r in acc_records + hf_records}) == len(acc_records + hf_records)
    assert rf.SKIPPED[("accelerate", acc_records[0]["version"])] == []


def test_front_names_are_real_registry_names(registry, acc_records, hf_records):
    """Each mapping's front_id is a record the registry builder made from the same package."""
    ids = [r["front_id"] for r in acc_records + hf_records if r["front_id"]]
    assert ids
    missing = [i for i in ids if registry.get(i) is None]
    assert not missing


def test_transformers_mappings_reuse_auto_fill_records(registry, hf_records):
    auto = {r["id"] for r in registry.records if r["kind"] == "auto_fill"} | set(
        r["id"] for rs in getattr(registry, "auto_fill", {}).values() for r in rs
    )
    for r in _by(hf_records, "training_args", "auto"):
        assert r["auto_fill"] in auto, r["id"]


def test_issue_pairs_match_accelerate(acc_records, clean_env):
    """The pairs named in the issue, read by the provider, and what accelerate does with them."""
    from accelerate.utils import DeepSpeedPlugin

    plugin = {r["front_name"]: r["path"] for r in _by(acc_records, "accelerate_plugin", "direct")}
    assert plugin["zero_stage"] == "zero_optimization.stage"
    assert plugin["offload_optimizer_device"] == "zero_optimization.offload_optimizer.device"
    cfg = DeepSpeedPlugin(zero_stage=3, offload_optimizer_device="cpu").deepspeed_config
    assert _get(cfg, plugin["zero_stage"]) == 3
    assert _get(cfg, plugin["offload_optimizer_device"]) == "cpu"
    launch = {r["front_name"]: r for r in _by(acc_records, "accelerate_launch")}
    assert "--zero-stage" in launch["--zero_stage"]["aliases"]


def test_every_plugin_field_mapping_matches_accelerate(acc_records, clean_env):
    from accelerate.utils import DeepSpeedPlugin

    recs = [r for r in _by(acc_records, "accelerate_plugin", "direct") if r["owner"] == "DeepSpeedPlugin"]
    assert len(recs) >= 6
    for r in recs:
        when = (r["transform"] or {}).get("when")
        value = _sample(_plugin_type(r["front_name"]), when)
        cfg = DeepSpeedPlugin(**{r["front_name"]: value, **_when_kwargs(when)}).deepspeed_config
        assert _get(cfg, r["path"]) == value, r["id"]


def test_every_launch_flag_mapping_matches_accelerate(acc_records, clean_env):
    recs = [r for r in _by(acc_records, "accelerate_launch", "direct") if not (r["transform"] or {}).get("values")]
    assert len(recs) >= 5
    for r in recs:
        plugin = next(p for p in _by(acc_records, "accelerate_plugin") if p["path"] == r["path"])
        value = _sample(_plugin_type(plugin["front_name"]))
        flag = (r["aliases"] or [r["front_name"]])[0]  # the dash spelling where accelerate adds one
        env = _launch_env([r["requires"]["flag"], "--num_machines", "1", "--num_processes", "1", flag, str(value)])
        got = _get(_plugin_config(clean_env, env), r["path"])
        assert got == value or str(got).lower() == str(value).lower(), r["id"]


def test_mixed_precision_mapping_matches_accelerate(acc_records, clean_env):
    recs = [r for r in _by(acc_records, "accelerate_launch") if (r["transform"] or {}).get("values")]
    assert {r["path"] for r in recs} >= {"bf16.enabled", "fp16.enabled"}
    for r in recs:
        for value in r["transform"]["values"][:1]:
            env = _launch_env(
                [r["requires"]["flag"], "--num_machines", "1", "--num_processes", "1", r["front_name"], value]
            )
            cfg = _plugin_config(clean_env, env)
            assert _get(cfg, r["path"]) is r["transform"]["ds_value"], r["id"]


def test_yaml_mappings_match_accelerate(acc_records, clean_env, tmp_path):
    recs = _by(acc_records, "accelerate_yaml", "direct")
    assert len(recs) >= 6
    expect: dict[str, object] = {}
    block: dict[str, object] = {}
    top: dict[str, object] = {}
    for r in recs:
        t = r["transform"] or {}
        if t.get("values"):
            if r["path"] == "bf16.enabled":
                top[r["front_name"]] = t["values"][0]
                expect[r["path"]] = t["ds_value"]
            continue
        plugin = next(p for p in _by(acc_records, "accelerate_plugin") if p["path"] == r["path"])
        value = _sample(_plugin_type(plugin["front_name"]))
        block[r["front_name"].split(".", 1)[1]] = value
        expect[r["path"]] = value
    path = _yaml_file(tmp_path, yaml.safe_dump({**top, "deepspeed_config": block}))
    cfg = _plugin_config(clean_env, _launch_env(["--config_file", str(path)]))
    for ds_path, value in expect.items():
        got = _get(cfg, ds_path)
        assert got == value or str(got).lower() == str(value).lower(), ds_path


def test_not_forwarded_keys_really_are_dropped(acc_records, clean_env, tmp_path):
    """accelerate accepts the YAML key but never passes it to the plugin: the provider marks it, accelerate agrees."""
    recs = _by(acc_records, "accelerate_yaml", "not_forwarded")
    for r in recs:
        when = next(p for p in _by(acc_records, "accelerate_plugin") if p["path"] == r["path"])["transform"]["when"]
        block = {**_when_kwargs(when), r["front_name"].split(".", 1)[1]: "/local_nvme"}
        path = _yaml_file(tmp_path, yaml.safe_dump({"deepspeed_config": {"zero_stage": 3, **block}}))
        cfg = _plugin_config(clean_env, _launch_env(["--config_file", str(path)]))
        assert _get(cfg, r["path"]) != "/local_nvme", r["id"]


def test_training_args_mappings_match_transformers(hf_records, tmp_path):
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    types = {f.name: f.type for f in dataclasses.fields(TrainingArguments)}
    recs = [
        r
        for r in _by(hf_records, "training_args")
        if r["fill"] in ("auto", "direct")
        and "computed" not in (r["transform"] or {})
        and (r["transform"] or {}).get("primary", True)
        and not r["front_name"].startswith("fp16")  # fp16 training needs a GPU; the CPU run cannot build it
    ]
    assert {r["front_name"] for r in recs} >= {"per_device_train_batch_size", "max_grad_norm", "bf16"}
    for r in recs:
        typ = types[r["front_name"]]
        value = True if "bool" in str(typ) else 7 if "int" in str(typ) else 0.25
        args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **{r["front_name"]: value})
        cfg = HfTrainerDeepSpeedConfig(_put({"zero_optimization": {"stage": 2}}, r["path"], "auto"))
        cfg.trainer_config_process(args)
        got = _get(cfg.config, r["path"])
        if "index" in (r["transform"] or {}):
            got = got[r["transform"]["index"]]
        assert got == value, r["id"]


def test_older_or_partial_sources_do_not_crash(tmp_path, capsys, monkeypatch):
    """A release missing files / functions: what can be read is returned, the rest is named."""
    from indexer import registry_build as rb

    monkeypatch.setattr(rb, "SKIPPED", [])
    src = _pkg_root("accelerate")
    dst = tmp_path / "accelerate" / "utils"
    dst.mkdir(parents=True)
    text = (src / rf.ACC_PLUGIN).read_text(encoding="utf-8")
    text = text.replace("plugin_to_config_mapping", "renamed_mapping")  # an older layout: only the built config
    text = text.replace("def set_mixed_precision(", "def _gone(")
    (dst / "dataclasses.py").write_text(text, encoding="utf-8")
    recs = rf.frontend_records("accelerate", "0.0.1", root=tmp_path)
    plugin = {r["front_name"]: r["path"] for r in recs if r["front_end"] == "accelerate_plugin"}
    assert plugin["zero_stage"] == "zero_optimization.stage"  # from the config dict accelerate builds
    assert not [r for r in recs if r["front_end"] in ("accelerate_launch", "accelerate_yaml")]
    skipped = rf.SKIPPED[("accelerate", "0.0.1")]
    assert rf.ACC_LAUNCH in skipped and any("set_mixed_precision" in s for s in skipped)
    assert "could not read" in capsys.readouterr().err
    assert f"frontends: {rf.ACC_LAUNCH}" in rb.SKIPPED  # lands in the release's manifest "skipped"
    assert rf.frontend_records("transformers", "0.0.1", root=tmp_path / "nothing") == []
    assert rf.frontend_records("deepspeed", "0.19.8") == []


# ---------------------------------------------------------------- equivalents()


def test_equivalents_for_a_fix(reg):
    eqs = fe.equivalents(FIX, reg, None)
    got = {(e.front_end, e.ds_path): e for e in eqs}
    assert {k[0] for k in got} == set(fe.FRONT_ENDS)
    y = got[("accelerate_yaml", "zero_optimization.stage")]
    assert (y.name, y.front_value, y.registry_id) == (
        "deepspeed_config.zero_stage",
        3,
        "accelerate:yaml/deepspeed_config.zero_stage",
    )
    assert y.source.startswith("accelerate/utils/dataclasses.py:")
    launch = got[("accelerate_launch", "zero_optimization.offload_optimizer.device")]
    assert (launch.name, launch.front_value) == ("--offload_optimizer_device", "cpu")
    assert "--offload-optimizer-device" in launch.aliases and launch.requires == "--use_deepspeed"
    mp = got[("accelerate_yaml", "bf16.enabled")]
    assert (mp.name, mp.front_value) == ("mixed_precision", "bf16")
    ta = got[("training_args", "train_micro_batch_size_per_gpu")]
    assert (ta.name, ta.front_value, ta.via) == ("per_device_train_batch_size", 2, "auto")
    assert '"auto"' in ta.note and "auto" in ta.note_zh
    assert got[("training_args", "gradient_clipping")].name == "max_grad_norm"
    assert got[("training_args", "bf16.enabled")].front_value is True
    assert got[("accelerate_plugin", "gradient_accumulation_steps")].owner == "DeepSpeedPlugin"
    assert all(e.to_dict()["ds_path"] == e.ds_path for e in eqs)


def test_key_without_equivalent_gets_the_ds_config_file_note(reg):
    eqs = fe.equivalents(FIX, reg, None)
    got = {(e.front_end, e.ds_path): e for e in eqs}
    file_names = {r["front_end"]: r["front_name"] for r in reg.records if r["kind"] == "mapping" and r["path"] == "*"}
    for front in ("accelerate_yaml", "accelerate_launch", "accelerate_plugin"):
        e = got[(front, "train_micro_batch_size_per_gpu")]
        assert e.name is None and e.via == "file"
        assert f"`{file_names[front]}`" in e.note and f"`{file_names[front]}`" in e.note_zh
        assert "accelerate/accelerator.py:" in e.note  # accelerate fills "auto" for it
    e = got[("training_args", "zero_optimization.stage")]
    assert e.name is None and "`deepspeed`" in e.note and "ds_config" in e.note_zh
    assert e.registry_id == "transformers:TrainingArguments.deepspeed"


def test_not_forwarded_key_says_so(reg):
    [e] = fe.equivalents({"zero_optimization": {"offload_param": {"nvme_path": "/nvme"}}}, reg, "accelerate_launch")
    assert e.name is None and e.via == "not_forwarded"
    assert "--offload_param_nvme_path" in e.note and "--deepspeed_config_file" in e.note


def test_rendered_yaml_does_what_the_fix_says(reg, clean_env, tmp_path):
    """The YAML block built for the fix, fed to accelerate, gives the fix's ds_config values."""
    snippets = fe.render_snippets(fe.equivalents(FIX, reg, "accelerate_yaml"))
    path = _yaml_file(tmp_path, snippets["accelerate_yaml"])
    cfg = _plugin_config(clean_env, _launch_env(["--config_file", str(path)]))
    for ds_path in (
        "zero_optimization.stage",
        "zero_optimization.offload_optimizer.device",
        "gradient_clipping",
        "bf16.enabled",
    ):
        assert _get(cfg, ds_path) == _get(FIX, ds_path), ds_path


def test_rendered_launch_line_does_what_the_fix_says(reg, clean_env):
    line = fe.render_snippets(fe.equivalents(FIX, reg, "accelerate_launch"))["accelerate_launch"]
    argv = shlex.split(line)
    assert argv[:2] == ["accelerate", "launch"]
    cfg = _plugin_config(clean_env, _launch_env([*argv[2:], "--num_machines", "1", "--num_processes", "1"]))
    for ds_path in (
        "zero_optimization.stage",
        "zero_optimization.offload_optimizer.device",
        "gradient_clipping",
        "bf16.enabled",
    ):
        assert _get(cfg, ds_path) == _get(FIX, ds_path), ds_path


def test_rendered_training_args_fill_the_auto_config(reg, tmp_path):
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    snippets = fe.render_snippets(fe.equivalents(FIX, reg, "training_args"))
    fields = yaml.safe_load(snippets["training_args_yaml"])
    assert (
        snippets["training_args"].startswith("TrainingArguments(") and "max_grad_norm=0.5" in snippets["training_args"]
    )
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **fields)
    auto = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
    }
    cfg = HfTrainerDeepSpeedConfig({**auto, "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}})
    cfg.trainer_config_process(args)
    for ds_path in (
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "bf16.enabled",
    ):
        assert _get(cfg.config, ds_path) == _get(FIX, ds_path), ds_path


def test_front_end_selection(reg):
    assert fe.equivalents(FIX, reg, "deepspeed") == []
    acc = fe.equivalents(FIX, reg, "accelerate")
    assert {e.front_end for e in acc} == set(fe.FAMILIES["accelerate"])
    only = fe.equivalents(FIX, reg, "training_args")
    assert {e.front_end for e in only} == {"training_args"}
    with pytest.raises(ValueError, match="unknown front end"):
        fe.equivalents(FIX, reg, "fsdp")
    with pytest.raises(TypeError):
        fe.equivalents("zero_optimization.stage=3", reg, None)  # type: ignore[arg-type]


def test_alias_spelling_in_a_fix_is_canonicalised(reg):
    aliased = [
        (r["path"], a)
        for r in reg.records
        for a in r["aliases"]
        if r["package"] == "deepspeed" and r["kind"] == "config_key" and r["aliases"] and "." in r["path"]
    ]
    if not aliased:
        pytest.skip("the registry records no aliased DeepSpeed key")
    path, alias = aliased[0]
    alias_path = path.rsplit(".", 1)[0] + "." + alias
    [first, *_] = fe.equivalents(_put({}, alias_path, 1), reg, "training_args")
    assert first.ds_path == path


def test_notes_exist_in_both_languages(reg):
    formatter = string.Formatter()
    for key, (en, zh) in fe.NOTES.items():
        en_fields = {f for _, f, _, _ in formatter.parse(en) if f} - {"label"}
        zh_fields = {f for _, f, _, _ in formatter.parse(zh) if f} - {"label_zh"}
        assert en_fields == zh_fields, key
        assert re.search(r"[\u4e00-\u9fff]", zh), key
    for e in fe.equivalents(FIX, reg, None):
        if e.note:
            assert e.note_zh and re.search(r"[\u4e00-\u9fff]", e.note_zh)


# ---------------------------------------------------------------- detect_front_end()


@pytest.mark.parametrize(
    "query,expected",
    [
        ("how do I set zero stage 3 in my accelerate config", "accelerate_yaml"),
        ("accelerate launch --zero_stage 3 OOM", "accelerate_launch"),
        ("HF Trainer zero3 oom", "training_args"),
        ("TrainingArguments deepspeed offload", "training_args"),
        ("LLaMA-Factory sft zero3 oom", "training_args"),
        ("llamafactory-cli train fails with zero3", "training_args"),
        ("DeepSpeedPlugin zero_stage ignored", "accelerate_plugin"),
        ("accelerate 配置文件里怎么开 ZeRO-3", "accelerate_yaml"),
        ("用 accelerate launch 启动 ZeRO-3 显存爆了", "accelerate_launch"),
        ("用Trainer训练时ZeRO-3第一步就OOM", "training_args"),
        ("LLaMA-Factory 微调 zero3 显存不够", "training_args"),
        ("训练参数里怎么设置梯度累积", "training_args"),
        ("accelerate zero3 oom", "accelerate"),
        ("accelerate launch and accelerate config disagree", "accelerate"),
        ("zero3 oom first step", None),
        ("ZeRO-3第一步就OOM", None),
        ("accelerate launch with the HF Trainer", None),  # two different front ends: show all
    ],
)
def test_detect_front_end_from_query(query, expected):
    assert fe.detect_front_end(None, query) == expected


def test_detect_front_end_from_config():
    from kb.doctor.configs import parse_config

    assert fe.detect_front_end("deepspeed", "HF Trainer") == "deepspeed"
    assert fe.detect_front_end("accelerate", "") == "accelerate_yaml"
    assert fe.detect_front_end("training_args", "accelerate launch") == "training_args"
    acc = parse_config("accelerate launch --zero-stage 3 train.py\n")
    assert fe.detect_front_end(acc.kind, "", acc.data) == "accelerate_launch"
    hf = parse_config("torchrun --nproc_per_node 2 train.py --deepspeed ds.json\n")
    assert fe.detect_front_end(hf.kind, "", hf.data) == "training_args"
    plain = parse_config("python train.py --lr 1e-4\n")
    assert fe.detect_front_end(plain.kind, "accelerate config", plain.data) == "accelerate_yaml"


def test_equivalent_is_json_ready(reg):
    import json

    for e in fe.equivalents(FIX, reg, None):
        d = e.to_dict()
        assert json.loads(json.dumps(d)) == d
        assert list(d) == [f.name for f in dataclasses.fields(fe.Equivalent) if f.name != "parts"]


def test_provider_types_no_deepspeed_key():
    """The provider reads names from the package source; its code holds no DeepSpeed key of its own."""
    import ast

    tree = ast.parse(Path(rf.__file__).read_text(encoding="utf-8"))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    strings = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]
    typed = [
        s for s in strings if re.search(r"zero_optimization|train_micro_batch|gradient_clipping|\.enabled|offload_", s)
    ]
    assert not typed


def test_mapping_paths_are_deepspeed_keys(registry, acc_records, hf_records):
    """Every ds path a mapping names is a DeepSpeed config key, or a key of a free-form section (kb.doctor.lint.FREE_FORM)."""
    from kb.doctor.lint import FREE_FORM

    for r in acc_records + hf_records:
        if r["path"] == rf.WHOLE_CONFIG:
            continue
        lk = registry.resolve(r["path"], package="deepspeed")
        assert lk.status in ("exact", "alias") or r["path"].startswith(FREE_FORM), (r["id"], lk.status)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_answer_form_groups_per_front_end(reg, lang):
    """With ``lang``: the answer contract's Equivalent, one per front end, notes in that language, said once."""
    from kb import contract as C

    out = fe.equivalents(FIX, reg, None, lang)
    assert [e.front_end for e in out] == list(fe.FRONT_ENDS)
    assert all(isinstance(e, C.Equivalent) for e in out)
    by = {e.front_end: e for e in out}
    assert by["accelerate_yaml"].snippet.lang == "yaml" and "zero_stage: 3" in by["accelerate_yaml"].snippet.code
    assert by["accelerate_launch"].snippet.code.startswith("accelerate launch --use_deepspeed ")
    ta = by["training_args"]
    assert "per_device_train_batch_size=2" in ta.snippet.code
    # the two ZeRO keys TrainingArguments cannot set share one "ds_config file" sentence
    file_notes = [n for n in ta.notes if "zero_optimization.stage" in n]
    assert len(file_notes) == 1 and "zero_optimization.offload_optimizer.device" in file_notes[0]
    for e in out:
        assert len(e.notes) == len(set(e.notes))
        assert all(bool(re.search(r"[\u4e00-\u9fff]", n)) == (lang == "zh") for n in e.notes)
        assert all("note" not in n and "ds_path" in n for n in e.names)
    assert fe.equivalents(FIX, reg, "deepspeed", lang) == []


def test_registry_without_mappings_claims_nothing(registry):
    base = Registry([r for r in registry.records if r["kind"] != "mapping"])
    assert fe.equivalents(FIX, base, None) == []


def test_non_deepspeed_keys_are_not_translated(reg):
    eqs = fe.equivalents({"zero_optimisation": {"stage": 3}, "zero_optimization": {"stage": 2}}, reg, "training_args")
    assert [e.ds_path for e in eqs] == ["zero_optimization.stage"]


def test_release_view_uses_that_releases_mappings(registry):
    """In the view for an older release, only mappings recorded in that release answer, with its lines."""
    if not hasattr(registry, "at") or not any(r["kind"] == "mapping" for r in getattr(registry, "_all", [])):
        pytest.skip("the committed registry has no multi-release mapping records yet")
    rel = registry.releases["accelerate"][0]
    view = registry.at({"accelerate": rel})
    eqs = fe.equivalents({"zero_optimization": {"stage": 3}}, view, "accelerate")
    assert eqs and all(e.version == rel for e in eqs)
    base = {r["id"]: r for r in registry._all}
    for e in eqs:
        rec = base[e.mapping_id]
        assert rel in rec["releases"]
        hist = rec.get("history", {}).get(rel, {})
        assert (
            e.source == f"{hist.get('source_file', rec['source_file'])}:{hist.get('source_line', rec['source_line'])}"
        )
