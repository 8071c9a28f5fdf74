"""The site rules (kb/doctor/rules/sites.py, KB050-KB069) proven against the real code, on CPU.

Every bad case of every site rule is linted (it must fire) and then run through the code the rule cites:
DeepSpeedConfig and the engine's optimizer builder, accelerate's launcher (argument checks, the launch env,
DeepSpeedPlugin under that env), TrainingArguments. It must raise, with the message of the cited site (read
from the installed source by the scan, not typed here); every ok case must go through cleanly. The scan of
indexer/registry_sites.py is checked too: deterministic, and it finds sites located in the installed source
at test time.
"""

import ast
import json
import logging
import math
import os
import re
import shlex
from pathlib import Path
from unittest import mock

import pytest

from indexer import registry_sites as rs
from kb.doctor.configs import parse_config
from kb.doctor.lint import RULES
from kb.doctor.rules import sites as srules
from tests.ds_dist import cpu_process_group

deepspeed = pytest.importorskip("deepspeed")
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
SITE_CODES = sorted(srules.RULE_SITES)
CASES = [
    (code, kind, i) for code in SITE_CODES for kind in ("bad", "ok") for i in range(len(getattr(RULES[code], kind)))
]


@pytest.fixture(scope="module")
def scanned():
    """site id -> Site, for the three packages as installed."""
    out = {}
    for pkg in rs.TARGETS:
        sites, skipped = rs.scan(pkg)
        assert not skipped, (pkg, skipped)
        out.update(zip(rs.site_ids(pkg, sites), sites, strict=True))
    return out


def literal_head(template: str) -> str:
    """The message up to the first formatted value: what the raised text must contain."""
    return template.split("{", 1)[0].strip()


def expect(scanned, code, kinds=("raise_site",)):
    """(exception class names, regex over the messages) of the sites a rule cites."""
    sites = [scanned[sid] for sid in srules.RULE_SITES[code] if scanned[sid].kind in kinds]
    assert sites, code
    return {s.exc.rsplit(".", 1)[-1] for s in sites}, "|".join(re.escape(literal_head(s.message)) for s in sites)


# ---------------------------------------------------------------- running a case through the real code


def run_deepspeed(data: dict):
    """DeepSpeedConfig, then (when the config names an optimizer) the engine's own optimizer builder."""
    import torch
    from deepspeed.runtime.engine import DeepSpeedEngine

    data = json.loads(json.dumps(data))
    opt = data.get("optimizer")
    if isinstance(opt, dict) and str(opt.get("type", "")).lower() in ("adam", "adamw"):
        # torch's Adam(W) through the same builder: DeepSpeed's FusedAdam would JIT-compile a C++ op first
        # (about 70 s on 2 cores, once per machine); the checks the site rules cite run before the class is picked
        opt["params"] = {**(opt.get("params") or {}), "torch_adam": True}
    cfg = DeepSpeedConfig(data)
    if "optimizer" in data:
        eng = object.__new__(DeepSpeedEngine)  # the real method, on a bare engine that holds only the config
        eng._config, eng.client_optimizer = cfg, None
        DeepSpeedEngine._configure_basic_optimizer(eng, [torch.nn.Parameter(torch.zeros(2))])
    return cfg


def run_accelerate_yaml(text: str, tmp_path: Path, monkeypatch):
    """What `accelerate launch --config_file F train.py` does up to the script's DeepSpeedPlugin."""
    import accelerate.commands.launch as launch
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 2}}))
    (tmp_path / "acc.yaml").write_text(text)
    args = launch.launch_command_parser().parse_args(["--config_file", str(tmp_path / "acc.yaml"), "train.py"])
    got = {}
    with mock.patch.object(launch, "deepspeed_launcher", lambda a: got.setdefault("args", a)):
        launch.launch_command(args)
    assert "args" in got, "the launcher did not choose DeepSpeed"
    _, env = prepare_deepspeed_cmd_env(got["args"])
    with mock.patch.dict(os.environ, {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}):
        return DeepSpeedPlugin()


def run_launch(line: str):
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    argv = shlex.split(line)
    assert argv[:2] == ["accelerate", "launch"], line
    return _validate_launch_command(launch_command_parser().parse_args(argv[2:]))


def run_training_args(data: dict, tmp_path: Path):
    from transformers import TrainingArguments
    from transformers.utils import is_torch_bf16_gpu_available

    kw = {**data, "output_dir": str(tmp_path / "out")}
    if (
        any(kw.get(k) for k in ("bf16", "fp16", "bf16_full_eval", "fp16_full_eval"))
        and not is_torch_bf16_gpu_available()
    ):
        kw["use_cpu"] = True  # this machine has no GPU: say so, as a CPU run must (the device check comes first)
    return TrainingArguments(**kw)


def run_case(case, tmp_path, monkeypatch):
    cfg = parse_config(case.config)
    if cfg.kind == "accelerate":
        return run_accelerate_yaml(case.config, tmp_path, monkeypatch)
    if cfg.kind == "launch":
        return run_launch(case.config)
    if cfg.kind == "training_args":
        return run_training_args(cfg.data, tmp_path)
    return run_deepspeed(cfg.data)


@pytest.mark.parametrize("code,kind,i", CASES, ids=[f"{c}-{k}{i}" for c, k, i in CASES])
def test_site_rule_case_against_the_real_code(registry, scanned, tmp_path, monkeypatch, code, kind, i):
    case = getattr(RULES[code], kind)[i]
    fired = code in {f.code for f in case.lint(registry)}
    assert fired == (kind == "bad"), (code, case.note)
    if kind == "ok":
        if parse_config(case.config).kind == "launch" and not case.config.startswith("accelerate launch"):
            return  # another launcher: accelerate's checks do not run on it
        run_case(case, tmp_path, monkeypatch)  # goes through: no exception
        return
    classes, pattern = expect(scanned, code)
    with pytest.raises(Exception) as err:
        run_case(case, tmp_path, monkeypatch)
    assert type(err.value).__name__ in classes, (code, case.note, err.value)
    assert re.search(pattern, str(err.value)), (code, case.note, str(err.value)[:300])


def test_max_grad_norm_is_also_warned_by_deepspeed_config(scanned):
    """KB052 says DeepSpeedConfig warns first: its warning site logs, the config still builds."""
    import deepspeed.runtime.config as dsc

    _, pattern = expect(scanned, "KB052", kinds=("warn_site",))
    with mock.patch.object(dsc.logger, "warning") as warn:
        DeepSpeedConfig(json.loads(RULES["KB052"].bad[0].config))
    assert any(re.search(pattern, str(c.args[0])) for c in warn.call_args_list), warn.call_args_list


def test_deepspeed_block_is_not_read_by_other_distributed_types(registry, tmp_path, monkeypatch):
    """KB059: the launcher picks another mode, and the env it passes on holds nothing of the DeepSpeed block."""
    import accelerate.commands.launch as launch
    from accelerate.utils.launch import prepare_multi_gpu_env

    def launched(text: str):
        monkeypatch.chdir(tmp_path)
        (tmp_path / "acc.yaml").write_text(text)
        args = launch.launch_command_parser().parse_args(["--config_file", str(tmp_path / "acc.yaml"), "train.py"])
        got = {}
        names = ("deepspeed_launcher", "multi_gpu_launcher", "simple_launcher", "tpu_launcher", "tpu_pod_launcher")

        def catch(name):
            return lambda a: got.update({name: a})

        with mock.patch.multiple(launch, **{n: catch(n) for n in names}):
            launch.launch_command(args)
        assert len(got) == 1
        return got

    bad = RULES["KB059"].bad[0]
    assert "KB059" in {f.code for f in bad.lint(registry)}
    got = launched(bad.config)
    assert list(got) == ["multi_gpu_launcher"]
    env = prepare_multi_gpu_env(got["multi_gpu_launcher"])
    assert not [k for k in env if k.startswith("ACCELERATE_DEEPSPEED") or k == "ACCELERATE_USE_DEEPSPEED"]
    ok = RULES["KB059"].ok[0]
    assert "KB059" not in {f.code for f in ok.lint(registry)}
    assert list(launched(ok.config)) == ["deepspeed_launcher"]


@pytest.fixture(scope="module")
def dist():
    """One CPU process group for deepspeed.initialize, torn down after this module (tests/ds_dist.py)."""
    with cpu_process_group():
        yield


class _PerTensorNorm:
    """A client optimizer of a class ZeRO has not tested, recording the tensors it is asked to step (a LAMB-like
    optimizer takes one trust ratio per tensor it gets)."""

    def __new__(cls, params):
        import torch

        class Opt(torch.optim.SGD):
            seen: list = []

            def step(self, closure=None):
                Opt.seen.append([tuple(p.shape) for g in self.param_groups for p in g["params"]])
                return super().step(closure)

        return Opt(params, lr=0.1)


def _zero_run(ds: dict):
    """deepspeed.initialize with the script's own optimizer (a class ZeRO has not tested), one step on CPU."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = _PerTensorNorm(model.parameters())
    eng, *_ = deepspeed.initialize(model=model, optimizer=opt, config=json.loads(json.dumps(ds)))
    loss = eng(torch.ones(2, 4)).sum()
    eng.backward(loss)
    eng.step()
    return type(opt).seen[-1], [tuple(p.shape) for p in model.parameters()]


@pytest.mark.parametrize("stage", [1, 3])
def test_kb060_untested_client_optimizer_runs_on_flat_partitions(registry, dist, stage):
    """KB060: without the switch ZeRO refuses the script's optimizer; with it the optimizer runs, and each step it
    is handed one flat fp32 partition, not the model's four tensors. The cited lines are the installed ones."""
    bad = next(b for b in RULES["KB060"].bad if parse_config(b.config).data["zero_optimization"]["stage"] == stage)
    assert "KB060" in {f.code for f in bad.lint(registry)}
    ds = {**parse_config(bad.config).data}
    with pytest.raises(AssertionError, match="untested ZeRO Optimizer"):
        _zero_run({k: v for k, v in ds.items() if k != "zero_allow_untested_optimizer"})
    stepped, model_shapes = _zero_run(ds)
    total = sum(math.prod(s) for s in model_shapes)
    # one tensor, 1-D, holding every element of the four (ZeRO pads the flat buffer to its alignment)
    assert len(model_shapes) == 4 and len(stepped) == 1 and len(stepped[0]) == 1, (stepped, model_shapes)
    assert total <= stepped[0][0] < total + 64, (stepped, total)


def test_kb060_hf_trainer_sets_the_switch_itself(registry):
    """KB060's ok case with "auto": under the HF Trainer a config without an `optimizer` section gets the switch
    from transformers itself, so the file's own switch changes nothing."""
    from types import SimpleNamespace

    import torch
    from transformers.integrations.deepspeed import HfDeepSpeedConfig, deepspeed_optim_sched

    ok = next(o for o in RULES["KB060"].ok if '"auto"' in o.config)
    assert "KB060" not in {f.code for f in ok.lint(registry)}
    cfg = {k: v for k, v in parse_config(ok.config).data.items() if k != "zero_allow_untested_optimizer"}
    hf = HfDeepSpeedConfig(cfg)
    trainer = SimpleNamespace(create_optimizer=lambda: torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1))
    deepspeed_optim_sched(trainer, hf, SimpleNamespace(), 10, None)
    assert hf.config["zero_allow_untested_optimizer"] is True


def test_code_lines_are_where_the_source_has_them():
    for where, statement in srules.CODE_LINES.values():
        relfile, line = where.rsplit(":", 1)
        lines = (rs.package_root(relfile.split("/")[0]) / relfile).read_text().splitlines()
        assert [i + 1 for i, ln in enumerate(lines) if ln.strip() == statement] == [int(line)], where


def test_every_site_rule_is_proven_here():
    assert SITE_CODES and all(RULES[c].validity and RULES[c].bad and RULES[c].ok for c in SITE_CODES)
    # warnings proven by their own tests above: KB059 (the launcher's mode), KB060 (deepspeed.initialize on CPU)
    assert {c for c in RULES if "KB050" <= c <= "KB069"} == set(SITE_CODES) | {"KB059", "KB060"}


# ---------------------------------------------------------------- the rules' data, re-read from the source


def test_rule_sites_exist_and_are_cited_where_the_source_has_them(scanned):
    for code, sids in srules.RULE_SITES.items():
        assert sids, code
        for sid in sids:
            s = scanned[sid]
            assert srules.CITE[sid] == f"{s.source_file}:{s.source_line}", sid
            assert rs.classify(sid)[0] == f"rule:{code}", sid
    assert set(srules.CITE) == {sid for sids in srules.RULE_SITES.values() for sid in sids}


def _function(relfile: str, qualname: str) -> ast.AST:
    tree = ast.parse((rs.package_root(relfile.split("/")[0]) / relfile).read_text())
    return rs._functions(tree)[qualname]


def test_ignored_with_ds_file_is_accelerates_list():
    fn = _function("accelerate/utils/dataclasses.py", "DeepSpeedPlugin._deepspeed_config_checks")
    lists = [
        [e.value for e in n.value.elts]
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.List)
        and ast.unparse(n.targets[0]) == "env_variable_names_to_ignore"
    ]
    assert len(lists) == 1
    names = [v.replace("ACCELERATE_", "").replace("DEEPSPEED_", "").lower() for v in lists[0]]  # as the code maps them
    assert tuple(names) == srules.IGNORED_WITH_DS_FILE


def test_eval_schedulers_are_the_ones_the_check_names(scanned):
    from transformers.trainer_utils import SchedulerType

    members = [n for sid in srules.RULE_SITES["KB057"] for n in scanned[sid].reads if n.isupper() and n != "NO"]
    assert tuple(SchedulerType[m].value for m in members) == srules.EVAL_SCHEDULERS


def test_launch_modes_are_the_ones_the_check_sums(scanned):
    s = scanned[srules.RULE_SITES["KB054"][0]]
    assert tuple(s.reads) == srules.LAUNCH_MODES


# ---------------------------------------------------------------- the scan


def _line_of(relfile: str, text: str) -> int:
    """The line of the raise / assert / log call whose message holds ``text``, found in the installed source."""
    lines = (rs.package_root(relfile.split("/")[0]) / relfile).read_text().splitlines()
    hits = [i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1, (relfile, text, hits)
    i = hits[0]
    while not re.search(r"\b(raise|assert)\b|\.warn(ing)?\(", lines[i]):
        i -= 1
    return i + 1


SPOTS = [
    ("deepspeed", "deepspeed/runtime/config.py", "is not supported with ZeRO stage 3", "raise_site", "ValueError"),
    ("deepspeed", "deepspeed/runtime/config.py", "train_batch_size is not equal ", "raise_site", "AssertionError"),
    (
        "deepspeed",
        "deepspeed/runtime/engine.py",
        "is not supported as an optimizer parameter, please switch",
        "raise_site",
        "ValueError",
    ),
    ("accelerate", "accelerate/commands/launch.py", "You need to use at least 2 processes", "raise_site", "ValueError"),
    ("accelerate", "accelerate/utils/dataclasses.py", "Zero3 Init flag is only applicable", "warn_site", "warning"),
    (
        "transformers",
        "transformers/training_args.py",
        "At most one of fp16 and bf16 can be True, but not both",
        "raise_site",
        "ValueError",
    ),
    (
        "transformers",
        "transformers/integrations/deepspeed.py",
        "ZeRO inference only makes sense",
        "raise_site",
        "ValueError",
    ),
]


@pytest.mark.parametrize("pkg,relfile,text,kind,exc", SPOTS, ids=[s[2][:30] for s in SPOTS])
def test_scan_finds_known_sites(scanned, pkg, relfile, text, kind, exc):
    line = _line_of(relfile, text)
    hits = [s for s in scanned.values() if s.source_file == relfile and s.source_line == line and s.kind == kind]
    assert hits and hits[0].exc.rsplit(".", 1)[-1] == exc, (relfile, line, hits)
    assert text.split("{")[0][:20] in hits[0].message or text in hits[0].message


def test_scan_is_deterministic_and_records_are_well_formed():
    for pkg in rs.TARGETS:
        a, b = rs.site_records(pkg, "x"), rs.site_records(pkg, "x")
        assert a == b and a, pkg
        ids = [r["id"] for r in a]
        assert len(ids) == len(set(ids))
        for r in a:
            assert (
                r["kind"] in ("raise_site", "warn_site") and r["package"] == pkg and r["id"].startswith(f"{pkg}:site.")
            )
            assert r["source_file"].startswith(f"{pkg}/") and r["source_line"] > 0 and r["function"] and r["type"]
            assert r["trigger"] != "unclassified", r["id"]
    assert rs.site_records("peft", "x") == [] and rs.site_records("torch", "x") == []


def test_scan_skips_what_an_older_release_lacks(tmp_path):
    """A release without some of the files / functions: the scan records what it finds and lists the rest."""
    (tmp_path / "accelerate" / "commands").mkdir(parents=True)
    (tmp_path / "accelerate" / "commands" / "launch.py").write_text(
        "def _validate_launch_command(args):\n    if args.x:\n        raise ValueError(f'bad {args.x} here')\n"
    )
    sites, skipped = rs.scan("accelerate", root=tmp_path)
    assert [(s.qualname, s.source_line, s.exc, s.message, s.reads) for s in sites] == [
        ("_validate_launch_command", 3, "ValueError", "bad {args.x} here", ["x"])
    ]
    assert "accelerate/commands/launch.py:launch_command" in skipped and "accelerate/accelerator.py" in skipped


def test_docs_quote_the_scan():
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "lint.md").read_text()
    begin, end = (
        "<!-- sites:begin (generated by `python -m indexer.registry_sites`; do not edit) -->",
        "<!-- sites:end -->",
    )
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.split(begin, 1)[1].split(end, 1)[0].strip("\n") == rs.sites_markdown()
    for code in SITE_CODES:
        assert f"({code}" in text.split(begin, 1)[1], f"{code} not described in the sites section"


def test_every_site_in_the_registry_is_classified(registry):
    """Sites of older releases (in the registry, not installed here) have a class too."""
    ids = [r["id"] for r in registry.records if r["kind"] in ("raise_site", "warn_site")]
    assert [i for i in ids if rs.classify(i)[0] == "unclassified"] == []
