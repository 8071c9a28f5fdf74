"""Front ends linted by their own parsers (KB030-KB038), proven against the real parsers.

Launch lines: every case is linted (kb, registry records only) and parsed by the launcher's own argparse
parser (deepspeed's runner ``parse_args``, accelerate's ``launch_command_parser()``, torch's
``get_args_parser()``); the verdicts (exit 2 or not), the script and the script's arguments must agree.
The registry here is built from ``indexer.registry_build._argparse_records`` run now against the
installed packages (the shipped data/registry may be older than the builder).

TrainingArguments: ``HfArgumentParser(TrainingArguments).parse_dict`` and ``TrainingArguments(...)`` on CPU.
Duplicate keys: DeepSpeed's own loader (``DeepSpeedConfig(path)``) and accelerate's ``HfDeepSpeedConfig``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata as md
import io
import json
import logging
import sys

import pytest
import yaml

from indexer import registry_build as rb
from kb.doctor.configs import parse_config
from kb.doctor.lint import RULES, lint_config
from kb.doctor.rules import frontends as fe
from kb.registry.store import Registry

deepspeed = pytest.importorskip("deepspeed")
logging.getLogger("DeepSpeed").setLevel(logging.ERROR)

CLIS = [
    # (package, file, command) as the registry builders record them
    ("deepspeed", "deepspeed/launcher/runner.py", "deepspeed"),
    ("accelerate", "accelerate/commands/launch.py", "accelerate launch"),
    ("torch", "torch/distributed/run.py", "torchrun"),
    ("torch", "torch/distributed/launch.py", "torch.distributed.launch"),
]
REJECTS = ("KB030", "KB031", "KB032")


def _version(pkg: str) -> str:
    return md.version(pkg).split("+", 1)[0]


@pytest.fixture(scope="module")
def cli_records() -> list[dict]:
    return [r for pkg, rel, cmd in CLIS for r in rb._argparse_records(pkg, _version(pkg), rel, cmd)]


@pytest.fixture(scope="module")
def ta_records() -> list[dict]:
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    # the field names, from the installed dataclasses (rb._dataclass_records would add source lines, slowly)
    v = _version("transformers")
    return [
        rb._record(
            id=f"transformers:{cls.__name__}.{f.name}",
            package="transformers",
            version=v,
            kind="field",
            name=f.name,
            path=f"{cls.__name__}.{f.name}",
            source_file="transformers/training_args.py",
            source_line=1,
        )
        for cls in (TrainingArguments, Seq2SeqTrainingArguments)
        for f in dataclasses.fields(cls)
    ]


@pytest.fixture(scope="module")
def reg(cli_records, ta_records) -> Registry:
    return Registry(cli_records + ta_records)


def _real_parse(command: str, argv: list[str]):
    """(exit status, script, script args) from the launcher's own parser."""
    if command == "deepspeed":
        from deepspeed.launcher.runner import parse_args

        run, script, rest = parse_args, "user_script", "user_args"
    elif command == "accelerate launch":
        from accelerate.commands.launch import launch_command_parser

        run, script, rest = launch_command_parser().parse_args, "training_script", "training_script_args"
    elif command == "torchrun":
        from torch.distributed.run import get_args_parser

        run, script, rest = get_args_parser().parse_args, "training_script", "training_script_args"
    else:
        from torch.distributed.launch import get_args_parser

        run, script, rest = get_args_parser().parse_args, "training_script", "training_script_args"
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            ns = run(argv)
        except SystemExit as e:
            return e.code, None, None
    return 0, getattr(ns, script), list(getattr(ns, rest))


LINES = [
    # deepspeed: allow_abbrev (argparse default), REMAINDER after the script
    "deepspeed --num_gpus 2 --master_port 29501 train.py --deepspeed ds.json",
    "deepspeed --num_gpu 2 train.py",  # a unique prefix: accepted
    "deepspeed --num_g=2 train.py",
    "deepspeed --num 2 train.py",  # --num_nodes / --num_gpus / --num_accelerators
    "deepspeed train.py --num 2",  # ambiguous even after the script
    "deepspeed train.py --master_p 2",  # a unique prefix after the script: the script's
    "deepspeed --master_prot 29501 train.py",
    "deepspeed --num_gpus two train.py",
    "deepspeed --num_gpus",
    "deepspeed --no_ssh train.py --x",
    "deepspeed --no_ssh=1 train.py",
    "deepspeed -i localhost:0,1 train.py",
    "deepspeed -ilocalhost:0 train.py",
    "deepspeed --autotuning tune train.py",
    "deepspeed --autotuning tuned train.py",
    "deepspeed --num_gpus 2 train.py --num_gpus two --unknown",
    "deepspeed --num_gpus -1 train.py",
    "deepspeed --launcher_args train.py",  # the value swallows the script
    "deepspeed --num_accelerators 2 train.py",
    "deepspeed --module mypkg.train --lr 1",
    "deepspeed -- train.py",
    "deepspeed train.py -- --num 2",  # after "--" nothing is classified: the script gets "--num 2"
    "deepspeed -- train.py --num 2",
    "deepspeed --num_gpus 2 -- train.py -- -- --x",
    # accelerate launch: allow_abbrev=False, generated dash spellings
    "accelerate launch --num_processes 2 --mixed_precision bf16 train.py",
    "accelerate launch --num-processes 2 --mixed-precision bf16 train.py",
    "accelerate launch --zero-stage 3 --use_deepspeed train.py",
    "accelerate launch --num_processes=2 train.py",
    "accelerate launch --num-processes=2 train.py",
    "accelerate launch --mixed bf16 train.py",  # no abbreviations
    "accelerate launch --mixed_precisionn bf16 train.py",
    "accelerate launch --mixed_precision bf17 train.py",
    "accelerate launch --mixed-precision fp8 train.py",
    "accelerate launch --num_processes train.py",
    "accelerate launch --num_processes 2",
    "accelerate launch -q train.py",
    "accelerate launch -m mypkg.train --lr 1",
    "accelerate launch train.py --mixed x --num-processes y",
    "accelerate launch --multi_gpu --num_machines 1 --machine_rank 0 train.py",
    "accelerate launch --config_file cfg.yaml train.py",
    "accelerate launch --config-file cfg.yaml train.py",
    # torchrun: dash first, underscore alias, custom env / check_env actions
    "torchrun --nproc-per-node 2 train.py",
    "torchrun --nproc_per_node=2 --nnodes 1 train.py",
    "torchrun --nproc 2 train.py",  # two spellings of one flag: still ambiguous in 3.11
    "torchrun train.py --nproc 2",
    "torchrun --nproc_per 2 train.py",
    "torchrun --standalone --nproc-per-node gpu train.py",
    "torchrun --standalone=1 train.py",
    "torchrun --start-method fork train.py",
    "torchrun --start-method thread train.py",
    "torchrun --max-restarts x train.py",
    "torchrun --max-restarts 3 train.py",
    "torchrun --monitor-interval 0.5 train.py",
    "torchrun --monitor-interval fast train.py",
    "torchrun --master-port 29500 --master-addr 10.0.0.1 train.py",
    "torchrun --master_port=abc train.py",
    "torchrun -m mypkg.train",
    "torchrun --nnodes 2",
    "torchrun --rdzv_backend c10d --rdzv_endpoint host:29400 train.py",
    "python -m torch.distributed.run --nproc-per-node 2 train.py",
    "python -m torch.distributed.launch --use-env --nproc_per_node 2 train.py",
    "python -m torch.distributed.launch --use_envv train.py",
    # more corners: repeats, attached short values, empty values, negative numbers, bare launchers
    "accelerate launch --num_processes=2 --num-processes 3 train.py",
    "deepspeed --include=localhost:0 train.py",
    "deepspeed -Hhostfile train.py",
    "deepspeed -H",
    "deepspeed --num_gpus=-1 train.py",
    "deepspeed --num_gpus -1.5 train.py",
    "deepspeed -x train.py",
    "deepspeed train.py",
    "deepspeed --num_nodes=1 --num_gpus=1 --no_local_rank --force_multi train.py",
    "accelerate launch -x train.py",
    "accelerate launch train.py",
    "accelerate launch --gpu_ids all train.py",
    "accelerate launch --dynamo_backend inductor train.py",
    "accelerate launch --dynamo-backend xyz train.py",
    "accelerate launch --num_machines x train.py",
    "torchrun --nproc-per-node= train.py",
    "torchrun -r 3 -t 3 train.py",
    "torchrun -r3 train.py",
    "torchrun --nnodes 1:2 --rdzv-id=x train.py",
    "torchrun --no-python echo hi",
    "torchrun --local-ranks-filter 0 train.py",
    "torchrun --numa-binding node train.py",
    "torchrun --numa-binding nodes train.py",
]


def _lint_line(reg, line):
    cfg = parse_config(line)
    return cfg, lint_config(cfg, reg)


@pytest.mark.parametrize("line", LINES)
def test_launch_line_verdicts_match_the_real_parsers(reg, line):
    cfg, findings = _lint_line(reg, line)
    command, argv = cfg.data["command"], cfg.data["argv"]
    code, script, rest = _real_parse(command, argv)
    ours = [f for f in findings if f.code in REJECTS]
    assert (code == 2) == bool(ours), (line, code, [(f.code, f.message) for f in findings])
    assert all(f.severity == "error" for f in ours)
    if code == 0:
        out = fe.cli_for(reg, command).parse(argv)
        assert argv[out.script] == script and out.script_args == rest, (line, script, rest)


# lines whose flag values the shell expands (issue 21: LLaMA-Factory issue 176 passes `--num_processes $WORKER_GPU`):
# (line, the environment the shell expands them with)
SHELL_LINES = [
    (
        "accelerate launch --num_processes $WORKER_GPU --num_machines $WORKER_NUM --machine_rank $WORKER_IDX "
        "--main_process_ip $HOST0 --main_process_port $PORT0 train.py",
        {"WORKER_GPU": "8", "WORKER_NUM": "2", "WORKER_IDX": "0", "HOST0": "10.0.0.1", "PORT0": "29500"},
    ),
    ("accelerate launch --mixed_precision ${MP} train.py", {"MP": "bf16"}),
    ("deepspeed --num_gpus ${NGPU} --master_port $PORT train.py", {"NGPU": "2", "PORT": "29501"}),
    ("torchrun --nproc-per-node $NPROC train.py", {"NPROC": "4"}),
]


@pytest.mark.parametrize("line,env", SHELL_LINES, ids=[x[0][:40] for x in SHELL_LINES])
def test_shell_expanded_values_are_not_judged(reg, line, env, monkeypatch):
    """kb sees `$VAR`; the launcher sees what the shell put there, which its parser accepts: no KB032."""
    import os

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cfg, findings = _lint_line(reg, line)
    assert not [f for f in findings if f.code == "KB032"], [(f.code, f.message) for f in findings]
    expanded = [os.path.expandvars(a) for a in cfg.data["argv"]]
    assert _real_parse(cfg.data["command"], expanded)[0] == 0, expanded
    # the same flags with a wrong literal value are still refused, by kb and by the parser
    bad = parse_config(line.split(" $")[0].split(" ${")[0] + " two train.py")
    if bad.data["argv"][-2:] == ["two", "train.py"] and _real_parse(bad.data["command"], bad.data["argv"])[0] == 2:
        assert [f for f in lint_config(bad, reg) if f.code == "KB032"]


def test_the_oracle_covers_every_verdict(reg):
    """The lines above exercise every launch rule, accepted and rejected, on every launcher."""
    seen = {f.code for line in LINES for f in _lint_line(reg, line)[1]}
    assert {"KB030", "KB031", "KB032", "KB033"} <= seen
    commands = {parse_config(line).data["command"] for line in LINES}
    assert commands == {cmd for _, _, cmd in CLIS}


def test_records_are_the_parsers_own(cli_records):
    """Every option string, nargs, choices, default and allow_abbrev of the real parser objects is recorded."""
    import argparse

    for pkg, rel, cmd in CLIS:
        parser, _ = rb._real_parser(rel)
        recs = {r["name"]: r for r in cli_records if r["id"].startswith(f"{pkg}:cli/{cmd}/")}
        for act in parser._actions:
            if not any(o.startswith("--") for o in act.option_strings):
                continue
            name = next(o for o in act.option_strings if o.startswith("--"))
            r = recs[name]
            assert sorted([r["name"], *r["aliases"]]) == sorted(act.option_strings)
            assert r["nargs"] == act.nargs and r["allow_abbrev"] == parser.allow_abbrev
            assert r["choices"] == (list(act.choices) if act.choices is not None else None)
            if act.default is not argparse.SUPPRESS:
                assert r["default"] == rb._default_repr(act.default)
            src = (rb._pkg_root(pkg) / r["source_file"]).read_text().splitlines()
            near = "\n".join(src[r["source_line"] - 1 : r["source_line"] + 3])
            assert f'"{name}"' in near or f"'{name}'" in near or name == "--help", (cmd, name, near)


def test_dash_spellings_and_abbreviation_settings(cli_records):
    by_id = {r["id"]: r for r in cli_records}
    acc = by_id["accelerate:cli/accelerate launch/--num_processes"]
    assert "--num-processes" in acc["aliases"] and acc["allow_abbrev"] is False
    assert "--zero-stage" in by_id["accelerate:cli/accelerate launch/--zero_stage"]["aliases"]
    assert by_id["deepspeed:cli/deepspeed/--num_gpus"]["allow_abbrev"] is True
    assert by_id["deepspeed:cli/deepspeed/--num_gpus"]["type"] == "int"
    assert by_id["torch:cli/torchrun/--standalone"]["nargs"] == 0
    assert by_id["torch:cli/torchrun/--start-method"]["choices"] == ["spawn", "fork", "forkserver"]


def test_source_fallback_agrees_with_the_parser_objects(monkeypatch):
    """Where the parser object cannot be built, the add_argument calls give the same records (deepspeed,
    torchrun; accelerate's generated dash spellings exist only in the object)."""
    for pkg, rel, cmd in [CLIS[0], CLIS[2]]:
        real = {r["id"]: r for r in rb._argparse_records(pkg, "x", rel, cmd) if r["name"] != "--help"}
        monkeypatch.setattr(rb, "ARGPARSE_FACTORIES", {})
        static = {r["id"]: r for r in rb._argparse_records(pkg, "x", rel, cmd)}
        monkeypatch.undo()
        assert set(real) == set(static)
        for rid, r in real.items():
            s = static[rid]
            assert (s["aliases"], s["nargs"], s["type"], s["allow_abbrev"]) == (
                r["aliases"],
                r["nargs"],
                r["type"],
                r["allow_abbrev"],
            ), rid
            assert s["choices"] in (r["choices"], None)  # a computed choices list is not readable statically
            assert s["source_line"] == r["source_line"]


def test_registry_without_argparse_details_still_judges_names(cli_records, ta_records):
    """Records from an older build (no nargs / allow_abbrev): names are judged, values are not."""
    old = [{k: v for k, v in r.items() if k not in ("nargs", "allow_abbrev")} for r in cli_records]
    reg_old = Registry(old + ta_records)
    codes = {f.code for f in _lint_line(reg_old, "deepspeed --master_prot 1 train.py")[1]}
    assert "KB030" in codes
    assert not {f.code for f in _lint_line(reg_old, "deepspeed --num_gpus two train.py")[1]} & set(REJECTS)


def test_unknown_flag_names_the_nearest_real_ones(reg):
    f = next(f for f in _lint_line(reg, "accelerate launch --mixed bf16 train.py")[1] if f.code == "KB030")
    assert "`--mixed_precision`" in f.suggestion and "allow_abbrev=False" in f.message
    f = next(f for f in _lint_line(reg, "accelerate launch --mixed-precison bf16 train.py")[1] if f.code == "KB030")
    assert f.suggestion.startswith("did you mean `--mixed-precision`")  # the user's dash style
    f = next(f for f in _lint_line(reg, "torchrun --nproc 2 train.py")[1] if f.code == "KB031")
    assert "two spellings of one flag" in f.message and "同一个参数" in f.message_zh


def test_a_launcher_the_view_does_not_record_is_not_judged(ta_records):
    assert not [
        f for f in _lint_line(Registry(ta_records), "deepspeed --master_prot 1 train.py")[1] if f.code in REJECTS
    ]


def test_removed_flag_says_until_when(cli_records, ta_records):
    gone = dict(cli_records[1], id="deepspeed:cli/deepspeed/--old_flag", name="--old_flag", aliases=[])
    gone.update(status="removed", until="0.14.4")
    f = [f for f in _lint_line(Registry(cli_records + ta_records + [gone]), "deepspeed --old_flag train.py")[1]]
    assert [x.code for x in f if x.code in REJECTS] == ["KB030"] and "until 0.14.4" in f[0].message


# ---------------------------------------------------------------- TrainingArguments / LLaMA-Factory


def _hf_parse(text: str):
    from transformers import HfArgumentParser, Seq2SeqTrainingArguments

    return HfArgumentParser(Seq2SeqTrainingArguments).parse_dict({**yaml.safe_load(text), "use_cpu": True})


TA_CASES = [
    # (yaml, the rule that must fire or None)
    ("output_dir: out\nlearning_rat: 1.0e-5\n", "KB034"),
    ("output_dir: out\nnum_train_epoch: 3\n", "KB034"),
    ("output_dir: out\nevaluation_strategy: steps\n", "KB034"),  # gone in this release: its nearest is eval_strategy
    ("output_dir: out\neval_strategy: steps\neval_steps: 10\n", None),
    ("output_dir: out\nfp16: true\nbf16: true\n", "KB036"),
    ("output_dir: out\nfp16: false\nbf16: true\n", None),
    ("output_dir: out\npredict_with_generate: true\nlearning_rate: 1.0e-5\n", None),
]


@pytest.mark.parametrize("text,code", TA_CASES)
def test_training_args_verdicts_match_hf_argument_parser(reg, text, code):
    codes = {f.code for f in lint_config(parse_config(text), reg)}
    if code is None:
        assert not codes & {"KB034", "KB035", "KB036"}, codes
        _hf_parse(text)
    else:
        assert code in codes
        with pytest.raises(ValueError):
            _hf_parse(text)


def test_typo_is_a_type_error_for_training_arguments_itself():
    from transformers import TrainingArguments

    with pytest.raises(TypeError, match="learning_rat"):
        TrainingArguments(output_dir="out", learning_rat=1e-5)


def test_fp16_bf16_raise_site():
    """transformers raises at training_args.py:1784 (5.24.0); on this CPU machine the bf16 support check just
    before it raises first, unless use_cpu=True."""
    import torch
    from transformers import TrainingArguments

    if _version("transformers") == "5.24.0":
        src = (rb._pkg_root("transformers") / fe.FP16_BF16_SITE[0]).read_text().splitlines()
        at = fe.FP16_BF16_SITE[1]
        assert src[at - 1].strip() == "if self.fp16 and self.bf16:"
        assert "At most one of fp16 and bf16 can be True, but not both" in src[at]
    with pytest.raises(ValueError, match="At most one of fp16 and bf16"):
        TrainingArguments(output_dir="out", fp16=True, bf16=True, use_cpu=True, report_to="none")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="doesn't support bf16"):
            TrainingArguments(output_dir="out", fp16=True, bf16=True, report_to="none")


LF = "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: qwen\nlora_target: all\noutput_dir: out\n"


def test_llamafactory_keys_are_not_unknown(registry):
    """A LLaMA-Factory file is judged by LLaMA-Factory's own arguments (the registry's llamafactory timeline), its
    TrainingArguments keys by TrainingArguments: neither KB034 nor KB090 for real keys of either."""
    reg = registry
    good = LF + "cutoff_len: 2048\ndataset: alpaca\nlora_rank: 8\npure_bf16: true\n"
    f = lint_config(parse_config(good), reg)
    assert not [x for x in f if x.code in ("KB034", "KB090")], f
    f = [x for x in lint_config(parse_config(LF + "learning_rat: 1.0e-4\n"), reg) if x.code in ("KB034", "KB090")]
    assert [x.code for x in f] == ["KB090"] and "`learning_rate`" in f[0].suggestion
    assert "llamafactory" in f[0].message and "HfArgumentParser" in f[0].message_zh


def test_a_field_llamafactory_keeps_is_not_removed_in_its_files(registry):
    """transformers 5.0 dropped `overwrite_output_dir`; LLaMA-Factory 0.9.4+ has its own (hparams/training_args.py)."""
    reg = registry
    lf = reg.get("llamafactory:TrainingArguments.overwrite_output_dir")
    assert lf is not None and "0.9.5" in lf["releases"]
    codes = {f.code for f in lint_config(parse_config(LF + "overwrite_output_dir: true\n"), reg)}
    assert not codes & {"KB034", "KB035", "KB090"}
    plain = {f.code for f in lint_config(parse_config("output_dir: out\noverwrite_output_dir: true\n"), reg)}
    assert "KB035" in plain


def test_script_keys_far_from_any_field_are_left_alone(reg):
    text = "output_dir: out\ndataset_name: wikitext\nmodel_name_or_path: gpt2\nblock_size: 512\n"
    assert not [f for f in lint_config(parse_config(text), reg) if f.code == "KB034"]


def test_removed_field_with_its_replacement(reg, ta_records):
    """The default view of a multi-release registry shows `evaluation_strategy` as removed (transformers
    4.46.3 still has it, deprecated, at training_args.py:1395; 4.57.6 has not): KB035 names `eval_strategy`."""
    base = next(r for r in ta_records if r["name"] == "eval_strategy")
    gone = dict(base, id="transformers:TrainingArguments.evaluation_strategy", name="evaluation_strategy")
    gone.update(path="TrainingArguments.evaluation_strategy", status="removed", until="4.46.3")
    gone["renamed_to"] = base["id"]
    view = Registry(list(reg._all) + [gone]) if hasattr(reg, "_all") else Registry(ta_records + [gone])
    f = [x for x in lint_config(parse_config("output_dir: out\nevaluation_strategy: steps\n"), view)]
    assert [x.code for x in f if x.code in ("KB034", "KB035")] == ["KB035"]
    assert (
        f[0].suggestion.startswith("write `eval_strategy`") and "4.46.3" in f[0].message and "4.46.3" in f[0].message_zh
    )
    # a view of a release that still has it (deprecated): not removed, KB003's business
    alive = dict(gone, status="active", deprecated=True)
    alive.pop("until")
    view = Registry(ta_records + [alive])
    assert not {x.code for x in lint_config(parse_config("output_dir: out\nevaluation_strategy: s\n"), view)} & {
        "KB034",
        "KB035",
    }


# ---------------------------------------------------------------- duplicate keys


DUP = '{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": 2},\n  "zero_optimization": {"stage": 3}\n}\n'


def test_duplicate_key_is_refused_by_deepspeed_and_kept_last_by_accelerate(registry, tmp_path):
    from accelerate.utils.deepspeed import HfDeepSpeedConfig
    from deepspeed.runtime.config import DeepSpeedConfig

    f = [x for x in lint_config(parse_config(DUP), registry) if x.code == "KB037"]
    assert [(x.path, x.line) for x in f] == [("zero_optimization", 4)] and "line 3" in f[0].message
    path = tmp_path / "ds.json"
    path.write_text(DUP)
    with pytest.raises(ValueError, match="Duplicate keys in DeepSpeed config"):
        DeepSpeedConfig(str(path))
    assert HfDeepSpeedConfig(str(path)).config["zero_optimization"] == {"stage": 3}  # silently the last
    once = tmp_path / "once.json"
    once.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}))
    assert DeepSpeedConfig(str(once)).zero_optimization_stage == 3
    assert not [x for x in lint_config(parse_config(once.read_text()), registry) if x.code == "KB037"]


def test_every_duplicate_case_of_kb037_is_refused_by_deepspeed(tmp_path):
    from deepspeed.runtime.config import DeepSpeedConfig

    for kind, cases in (("bad", RULES["KB037"].bad), ("ok", RULES["KB037"].ok)):
        for case in cases:
            path = tmp_path / "c.json"
            data = json.loads(case.config)
            path.write_text(case.config if kind == "bad" else json.dumps({"train_micro_batch_size_per_gpu": 1, **data}))
            if kind == "bad":
                with pytest.raises(ValueError, match="Duplicate keys"):
                    DeepSpeedConfig(str(path))
            else:
                DeepSpeedConfig(str(path))


def test_duplicates_in_yaml_and_nested_deepspeed_are_warnings(registry):
    text = "output_dir: out\ndeepspeed:\n  zero_optimization: {stage: 3}\n  zero_optimization: {stage: 2}\n"
    f = lint_config(parse_config(text), registry)
    assert [(x.code, x.path, x.line) for x in f if x.code in ("KB037", "KB038")] == [
        ("KB038", "deepspeed.zero_optimization", 4)
    ]
    assert yaml.safe_load(text)["deepspeed"]["zero_optimization"] == {"stage": 2}  # PyYAML: the last wins


def test_parse_config_records_every_repeat_with_its_line():
    cfg = parse_config('{\n  "a": 1,\n  "z": {"stage": 3,\n        "stage": 2},\n  "a": 2\n}\n')
    assert cfg.duplicates == [("z.stage", 4), ("a", 5)] and cfg.data == {"a": 2, "z": {"stage": 2}}
    assert parse_config("a: 1\nb:\n  c: 1\n  c: 2\n").duplicates == [("b.c", 4)]
    hj = parse_config("{\n  a: 1 // a comment\n  a: 2\n}\n")
    assert hj.fmt == "hjson" and [p for p, _ in hj.duplicates] == ["a"] and hj.data == {"a": 2}
    assert parse_config('{"a": {"x": 1}, "b": {"x": 1}}').duplicates == []


@pytest.mark.parametrize(
    "line,command,argv",
    [
        ("deepspeed --num_gpus 2 train.py --x", "deepspeed", ["--num_gpus", "2", "train.py", "--x"]),
        ("accelerate launch --cpu t.py", "accelerate launch", ["--cpu", "t.py"]),
        ("NCCL_DEBUG=INFO torchrun --standalone t.py", "torchrun", ["--standalone", "t.py"]),
        ("python -m torch.distributed.run t.py", "torchrun", ["t.py"]),
        ("python3 -m torch.distributed.launch --use-env t.py", "torch.distributed.launch", ["--use-env", "t.py"]),
        ("python train.py --lr 1", None, ["train.py", "--lr", "1"]),
    ],
)
def test_launch_lines_keep_the_launchers_argv(line, command, argv):
    d = parse_config(line).data
    assert (d["command"], d["argv"]) == (command, argv)


# The error rules of kb/doctor/rules/frontends.py and the tests above that prove them against the real tool
# (the launchers' argparse parsers, HfArgumentParser / TrainingArguments, DeepSpeed's file loader); they are
# proven here rather than in tests/test_lint_oracle.py, whose cases are built with DeepSpeed's config classes.
PROVEN_HERE = {
    "KB039": ["test_a_broken_continuation_drops_the_flags_below"],
    "KB030": ["test_launch_line_verdicts_match_the_real_parsers"],
    "KB031": ["test_launch_line_verdicts_match_the_real_parsers"],
    "KB032": ["test_launch_line_verdicts_match_the_real_parsers", "test_shell_expanded_values_are_not_judged"],
    "KB034": [
        "test_training_args_verdicts_match_hf_argument_parser",
        "test_typo_is_a_type_error_for_training_arguments_itself",
    ],
    "KB035": ["test_training_args_verdicts_match_hf_argument_parser", "test_removed_field_with_its_replacement"],
    "KB036": ["test_training_args_verdicts_match_hf_argument_parser", "test_fp16_bf16_raise_site"],
    "KB037": [
        "test_duplicate_key_is_refused_by_deepspeed_and_kept_last_by_accelerate",
        "test_every_duplicate_case_of_kb037_is_refused_by_deepspeed",
    ],
}


def test_every_front_end_error_rule_is_proven_here():
    errors = {c for c, r in RULES.items() if "KB030" <= c <= "KB039" and r.severity == "error"}
    assert errors == set(PROVEN_HERE)
    for code, tests in PROVEN_HERE.items():
        assert RULES[code].validity and RULES[code].oracle == "tests/test_lint_frontends.py"
        assert all(callable(globals().get(t)) for t in tests), tests


def test_a_broken_continuation_drops_the_flags_below(tmp_path, registry):
    """KB039's oracle: bash itself runs the script; the flags after the line without a backslash never reach it."""
    import shutil
    import subprocess

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    probe = tmp_path / "argv.py"
    probe.write_text("import sys\nprint(' '.join(sys.argv[1:]))\n")
    script = f"{sys.executable} {probe} \\\n  --deepspeed ds.json \\\n  --learning_rate 1e-5\n  --bf16 \\\n  --num_train_epochs 1\n"
    (tmp_path / "run.sh").write_text(script)
    out = subprocess.run([bash, str(tmp_path / "run.sh")], capture_output=True, text=True)
    assert out.stdout.strip() == "--deepspeed ds.json --learning_rate 1e-5"  # --bf16 and the rest are gone
    assert "--bf16" in out.stderr  # the shell ran `--bf16 ...` as a command of its own
    cfg = parse_config(script.replace(f"{sys.executable} {probe}", "deepspeed train.py"))
    found = [f for f in lint_config(cfg, registry) if f.code == "KB039"]
    assert len(found) == 1 and found[0].path == "script_args.learning_rate" and found[0].line == 3
