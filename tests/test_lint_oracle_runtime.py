"""The runtime rules (kb/doctor/rules/runtime.py, KB070-KB089) proven against the code that makes the check, on CPU.

Every bad case of every rule is linted (it must fire) and run through the real code the finding names; every ok case
must fire nothing and go through that code cleanly:

* DeepSpeed: the engine's own methods on a bare engine that holds only the built config (``_do_sanity_check``,
  ``_configure_basic_optimizer`` + ``_do_optimizer_sanity_check``, ``_configure_optimizer``, ``_scheduler_from_config``),
  and ``deepspeed.initialize`` of a ZeRO-3 model on one CPU process (gloo) where a finding is about what gets saved.
* The HF Trainer / accelerate: ``HfTrainerDeepSpeedConfig`` with a CPU ``TrainingArguments``, ``DeepSpeedPlugin``,
  ``Accelerator.no_sync`` / ``get_state_dict`` / ``AcceleratorState.mixed_precision`` on stand-in objects, accelerate's
  optimizer swap, and ``accelerate launch`` up to the launcher (the launcher itself replaced), then DeepSpeed's runner.
* LLaMA-Factory's ``get_train_args`` and axolotl's ``AxolotlInputConfig``, in a subprocess, when the package is
  importable. kb's environment does not install either (their pins conflict with it), so there these tests skip and
  the rules stand on the citations; with the wheels unpacked on PYTHONPATH they run (see the rule module's docstring).

Each file:line the module cites (``CODE``) is checked against the installed sources, and each list it keeps is re-read
from the installed package.
"""

import ast
import copy
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import logging
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
import yaml

from kb.doctor.configs import parse_config
from kb.doctor.lint import RULES
from kb.doctor.rules import runtime as R
from tests.ds_dist import cpu_process_group

deepspeed = pytest.importorskip("deepspeed")
import torch  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402
from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: E402

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
SITE = Path(deepspeed.__file__).parent.parent
BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1}
CODES = sorted(c for c in RULES if RULES[c].check.__module__ == "kb.doctor.rules.runtime")
PROVEN: dict[str, str] = {}  # rule code -> the test below that runs its cases


def proves(code: str):
    def mark(fn):
        PROVEN[code] = fn.__name__
        return fn

    return mark


def cases(code: str):
    r = RULES[code]
    return [("bad", i, c) for i, c in enumerate(r.bad)] + [("ok", i, c) for i, c in enumerate(r.ok)]


def fires(case, registry, code) -> bool:
    return code in {f.code for f in case.lint(registry)}


def ds_of(case) -> tuple[dict, dict | None]:
    """(the DeepSpeed mapping, the TrainingArguments file or None) of a case."""
    cfg = parse_config(case.config)
    if cfg.kind == "training_args":
        data = yaml.safe_load(case.config)
        return copy.deepcopy(data["deepspeed"]), data
    return copy.deepcopy(cfg.data), None


def engine(ds: dict) -> DeepSpeedEngine:
    """The real engine class holding only the built config: its checking methods run as in deepspeed.initialize."""
    e = object.__new__(DeepSpeedEngine)
    e.__dict__.update(
        _config=DeepSpeedConfig({**BASE, **copy.deepcopy(ds)}),
        client_optimizer=None,
        client_lr_scheduler=None,
        global_rank=0,
        has_moe_layers=False,
    )
    return e


def params():
    return [torch.nn.Parameter(torch.zeros(2))]


@pytest.fixture
def rank0():
    """is_zero_supported_optimizer asks deepspeed.comm for the rank; without a process group it would fail."""
    import deepspeed.comm as ds_comm

    with mock.patch.object(ds_comm, "get_rank", lambda *a, **k: 0):
        yield


def light(cls):
    """Construct a DeepSpeed fused / CPU optimizer as a plain torch Optimizer of its own type (no C++ op build)."""

    def init(self, params, *a, **k):
        self.param_groups, self.defaults, self.state, self.kwargs = list(params), dict(k), {}, k

    return mock.patch.object(cls, "__init__", init)


def hf_fill(ds: dict, ta: dict | None, tmp_path) -> dict:
    """The DeepSpeed mapping after the HF Trainer's two passes (its "auto" filled), as deepspeed.initialize gets it."""
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    kw = {k: v for k, v in (ta or {}).items() if k not in ("deepspeed", "output_dir")}
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], **kw)
    hf = HfTrainerDeepSpeedConfig(copy.deepcopy(ds))
    hf.trainer_config_process(args)
    hf.trainer_config_finalize(args, torch.nn.Linear(4, 2), 100)
    return hf.config


# ---------------------------------------------------------------- every cited line, every kept list


@pytest.mark.parametrize("key", sorted(R.CODE))
def test_cited_lines_are_what_the_module_says(key):
    where, text = R.CODE[key]
    rel, line = where.rsplit(":", 1)
    lines = (SITE / rel).read_text(encoding="utf-8").splitlines()
    assert text in lines[int(line) - 1], (where, lines[int(line) - 1])


def test_optimizer_and_scheduler_lists_are_the_installed_ones(registry):
    from deepspeed.runtime import lr_schedules
    from deepspeed.runtime.config import DEEPSPEED_OPTIMIZERS
    from deepspeed.runtime.zero.utils import ZERO_SUPPORTED_OPTIMIZERS

    assert R.DS_OPTIMIZERS == tuple(DEEPSPEED_OPTIMIZERS)
    assert not set(R.REMOVED_OPTIMIZERS) & set(DEEPSPEED_OPTIMIZERS)
    opt = torch.optim
    classes = {n for n in dir(opt) if isinstance(getattr(opt, n), type) and issubclass(getattr(opt, n), opt.Optimizer)}
    assert set(R.TORCH_OPTIMIZERS) == classes - {"Optimizer"}
    torch_tested = {c.__name__ for c in ZERO_SUPPORTED_OPTIMIZERS if c.__module__.startswith("torch.optim")}
    assert set(R.ZERO_TESTED_TORCH) == torch_tested
    sch = torch.optim.lr_scheduler
    scheds = {
        n
        for n in dir(sch)
        if not n.startswith("_")
        and isinstance(getattr(sch, n), type)
        and (issubclass(getattr(sch, n), sch.LRScheduler) or n == "ReduceLROnPlateau")
    }
    assert set(R.TORCH_SCHEDULERS) == scheds - {"LRScheduler"}
    # DeepSpeed's schedulers and what their constructors take, as the registry holds them
    got = R.ds_schedulers(registry)
    assert set(got) == set(lr_schedules.VALID_LR_SCHEDULES)
    for name, takes in got.items():
        sig = inspect.signature(getattr(lr_schedules, name).__init__).parameters
        assert takes == set(sig) - {"self", "optimizer"}, name


def test_zero_verdict_per_deepspeed_name(rank0):
    """Which of DeepSpeed's own names build an optimizer ZeRO lists as tested: built through the engine's builder."""
    from deepspeed.ops.adam import FusedAdam
    from deepspeed.ops.lamb import FusedLamb
    from deepspeed.ops.lion import FusedLion
    from deepspeed.runtime.zero.utils import ZERO_SUPPORTED_OPTIMIZERS, is_zero_supported_optimizer

    with light(FusedAdam), light(FusedLamb), light(FusedLion):
        for name in ("adam", "adamw", "adagrad", "lion", "lamb"):
            opt = DeepSpeedEngine._configure_basic_optimizer(engine({"optimizer": {"type": name}}), params())
            assert is_zero_supported_optimizer(opt) == (name not in R.ZERO_UNTESTED_DS), (name, type(opt))
    # mup's optimizers (muadam, muadamw, musgd) are not installed here; none of their classes is on the list
    assert not {c.__name__ for c in ZERO_SUPPORTED_OPTIMIZERS} & {"MuAdam", "MuAdamW", "MuSGD"}
    assert {"muadam", "muadamw", "musgd"} <= set(R.ZERO_UNTESTED_DS)


def test_hf_adamw_names_are_the_trainers():
    from transformers.trainer_optimizer import _OPTIMIZER_HANDLERS, _get_adamw_torch

    assert {str(k.value) for k, v in _OPTIMIZER_HANDLERS.items() if v is _get_adamw_torch} == set(R.HF_TORCH_ADAMW)


def _launched(text: str, tmp_path, monkeypatch) -> dict:
    """`accelerate launch --config_file F train.py` up to the launcher it picks: {launcher name: its args}."""
    import accelerate.commands.launch as launch

    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(text)
    args = launch.launch_command_parser().parse_args(["--config_file", str(tmp_path / "acc.yaml"), "train.py"])
    got: dict = {}
    names = ("deepspeed_launcher", "multi_gpu_launcher", "simple_launcher", "tpu_launcher", "tpu_pod_launcher")

    def catch(name):
        return lambda a: got.update({name: a})

    with mock.patch.multiple(launch, **{n: catch(n) for n in names}):
        launch.launch_command(args)
    assert len(got) == 1, got
    return got


def test_launcher_per_distributed_type(tmp_path, monkeypatch):
    from accelerate.utils import DistributedType

    seen: dict[str, list[str]] = {}
    for dt in DistributedType:
        got = _launched(
            f"compute_environment: LOCAL_MACHINE\ndistributed_type: {dt.value}\nnum_processes: 4\nnum_machines: 2\n",
            tmp_path,
            monkeypatch,
        )
        seen.setdefault(next(iter(got)), []).append(dt.value)
    assert set(seen["multi_gpu_launcher"]) == set(R.TORCHRUN_TYPES)
    assert set(seen["simple_launcher"]) == set(R.SIMPLE_TYPES)
    assert seen["deepspeed_launcher"] == ["DEEPSPEED"]


# ---------------------------------------------------------------- DeepSpeed: optimizer and scheduler by name


@proves("KB070")
@pytest.mark.parametrize("kind,i,case", cases("KB070"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb070_optimizer_name_check(registry, kind, i, case):
    assert fires(case, registry, "KB070") == (kind == "bad")
    e = engine(ds_of(case)[0])
    if kind == "bad":
        with pytest.raises(AssertionError, match="is not a supported DeepSpeed Optimizer"):
            DeepSpeedEngine._do_sanity_check(e)
    else:
        DeepSpeedEngine._do_sanity_check(e)


def _build_and_check(ds: dict):
    """The basic optimizer as the engine builds it, then the ZeRO check (torch's Adam(W) for DeepSpeed's Adam)."""
    ds = copy.deepcopy(ds)
    opt = ds.get("optimizer") or {}
    if str(opt.get("type", "")).lower() in ("adam", "adamw"):
        opt["params"] = {**(opt.get("params") or {}), "torch_adam": True}  # FusedAdam would build a C++ op first
    e = engine(ds)
    basic = DeepSpeedEngine._configure_basic_optimizer(e, params())
    return DeepSpeedEngine._do_optimizer_sanity_check(e, basic)


@proves("KB071")
@pytest.mark.parametrize("kind,i,case", cases("KB071"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb071_untested_optimizer_under_zero(registry, rank0, tmp_path, kind, i, case):
    from accelerate.utils import DummyOptim
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig, deepspeed_optim_sched

    assert fires(case, registry, "KB071") == (kind == "bad")
    ds, ta = ds_of(case)
    if ta is not None:  # the HF Trainer: its "auto" filled, and its optimizer step adds nothing with a section
        ds = hf_fill(ds, ta, tmp_path)
        hf = HfTrainerDeepSpeedConfig(ds)
        opt, _ = deepspeed_optim_sched(SimpleNamespace(), hf, SimpleNamespace(), 100, params())
        assert isinstance(opt, DummyOptim) and "zero_allow_untested_optimizer" not in hf.config
        ds = hf.config
    if kind == "bad":
        with pytest.raises(AssertionError, match="untested ZeRO Optimizer"):
            _build_and_check(ds)
    else:
        _build_and_check(ds)


def _swap_condition():
    """The test accelerate's _prepare_deepspeed makes before it swaps a client optimizer, compiled from its source."""
    from accelerate.accelerator import Accelerator

    tree = ast.parse(textwrap.dedent(inspect.getsource(Accelerator._prepare_deepspeed)))
    tests = [
        n.test for n in ast.walk(tree) if isinstance(n, ast.If) and "zero_force_ds_cpu_optimizer" in ast.unparse(n.test)
    ]
    assert len(tests) == 1
    return compile(ast.Expression(tests[0]), "accelerator._prepare_deepspeed", "eval")


@proves("KB072")
@pytest.mark.parametrize("kind,i,case", cases("KB072"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb072_accelerate_swaps_the_trainers_optimizer(registry, rank0, tmp_path, kind, i, case):
    from accelerate.utils import DummyOptim
    from accelerate.utils.deepspeed import map_pytorch_optim_to_deepspeed
    from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    from deepspeed.runtime.zero.utils import ZeRORuntimeException
    from transformers import Trainer, TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig, deepspeed_optim_sched

    assert fires(case, registry, "KB072") == (kind == "bad")
    ds, ta = ds_of(case)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], optim=ta["optim"])
    cls, kw = Trainer.get_optimizer_cls_and_kwargs(args)
    model = torch.nn.Linear(2, 2)
    trainer = SimpleNamespace(create_optimizer=lambda: cls(model.parameters(), **kw))
    opt, _ = deepspeed_optim_sched(
        trainer, HfTrainerDeepSpeedConfig(copy.deepcopy(ds)), args, 10, list(model.parameters())
    )
    swaps = not isinstance(opt, DummyOptim) and bool(
        eval(_swap_condition(), {}, {"self": SimpleNamespace(deepspeed_config=ds)})  # noqa: S307 - accelerate's own test
    )
    with light(DeepSpeedCPUAdam), light(DeepSpeedCPUAdagrad):
        swapped = map_pytorch_optim_to_deepspeed(opt) if swaps else opt
    if kind == "ok":  # not swapped, or swapped for the same algorithm (torch AdamW -> CPU Adam in AdamW mode)
        assert not swaps or (type(opt) is torch.optim.AdamW and swapped.kwargs["adamw_mode"] is True), (swaps, opt)
        return
    assert swaps
    if ta["optim"] == "adagrad":
        assert type(swapped) is DeepSpeedCPUAdagrad
        e = engine(ds)
        e.__dict__["module"] = model
        with pytest.raises(ZeRORuntimeException, match="ZeRO-Offload with a client provided optimizer"):
            DeepSpeedEngine._configure_optimizer(e, swapped, list(model.parameters()))
    else:
        assert type(swapped) is DeepSpeedCPUAdam and swapped.kwargs["adamw_mode"] is False, swapped.kwargs


@proves("KB073")
@pytest.mark.parametrize("kind,i,case", cases("KB073"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb073_scheduler_name(registry, kind, i, case):
    assert fires(case, registry, "KB073") == (kind == "bad")
    e = engine(ds_of(case)[0])
    opt = torch.optim.SGD(params(), lr=0.1)
    if kind == "bad":
        with pytest.raises(AssertionError, match="DeepSpeed does not recognize LR scheduler"):
            DeepSpeedEngine._scheduler_from_config(e, opt)
    else:
        assert DeepSpeedEngine._scheduler_from_config(e, opt) is not None


@proves("KB074")
@pytest.mark.parametrize("kind,i,case", cases("KB074"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb074_scheduler_params(registry, tmp_path, kind, i, case):
    assert fires(case, registry, "KB074") == (kind == "bad")
    ds, ta = ds_of(case)
    if ta is not None:
        ds = hf_fill(ds, ta, tmp_path)  # the Trainer fills "auto"; it never removes a key
    e = engine(ds)
    opt = torch.optim.SGD(params(), lr=0.1)
    if kind == "bad":
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            DeepSpeedEngine._scheduler_from_config(e, opt)
    else:
        DeepSpeedEngine._scheduler_from_config(e, opt)


# ---------------------------------------------------------------- the HF Trainer / accelerate reading the same JSON


@pytest.fixture(scope="module")
def dist():
    """One CPU process group for deepspeed.initialize, torn down after this module (tests/ds_dist.py)."""
    with cpu_process_group():
        yield


def _no_sync(stage):
    from accelerate.accelerator import Accelerator
    from accelerate.utils import DistributedType

    acc = SimpleNamespace(
        is_fsdp2=False,
        use_distributed=True,
        distributed_type=DistributedType.DEEPSPEED,
        state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(zero_stage=stage)),
    )
    with Accelerator.no_sync(acc, torch.nn.Linear(2, 2)):
        pass


@proves("KB075")
@pytest.mark.parametrize("kind,i,case", cases("KB075"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb075_stage_string(registry, kind, i, case):
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.deepspeed import HfDeepSpeedConfig

    assert fires(case, registry, "KB075") == (kind == "bad")
    ds, _ = ds_of(case)
    v = ds["zero_optimization"]["stage"]
    if v == "auto":
        return  # KB007's
    n = int(v)
    assert DeepSpeedConfig({**BASE, **copy.deepcopy(ds)}).zero_optimization_stage == n  # DeepSpeed converts it
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        plugin = DeepSpeedPlugin(hf_ds_config=copy.deepcopy(ds), zero3_init_flag=True)
    if kind == "bad":
        assert plugin.zero_stage == v and not HfDeepSpeedConfig(copy.deepcopy(ds)).is_zero3()
        assert not plugin.zero3_init_flag and any("Zero3 Init flag" in str(x.message) for x in w)
        with pytest.raises(TypeError, match="'<' not supported"):
            _no_sync(plugin.zero_stage)
    else:
        assert plugin.zero_stage == n and HfDeepSpeedConfig(copy.deepcopy(ds)).is_zero3() == (n == 3)
        _no_sync(plugin.zero_stage)


def test_kb075_zero3_saved_as_empty_partitions(dist):
    """Stage "3": DeepSpeed partitions the model, accelerate's get_state_dict takes it for unsharded and returns the
    empty partitions; with the int it gathers (and, without gather-on-save, refuses instead of saving nothing)."""
    from accelerate.accelerator import Accelerator
    from accelerate.utils import DistributedType

    def state_dict(stage):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        cfg = {
            **BASE,
            "zero_optimization": {"stage": stage},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
        }
        eng, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=copy.deepcopy(cfg))
        assert eng.zero_optimization_stage() == 3
        acc = SimpleNamespace(
            distributed_type=DistributedType.DEEPSPEED, deepspeed_config=cfg, unwrap_model=lambda m: m.module
        )
        return Accelerator.get_state_dict(acc, eng)

    assert all(t.numel() == 0 for t in state_dict("3").values())
    with pytest.raises(ValueError, match="Cannot get 16bit model weights"):
        state_dict(3)


@proves("KB076")
@pytest.mark.parametrize("kind,i,case", cases("KB076"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb076_precision_string(registry, tmp_path, kind, i, case):
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType
    from transformers import TrainingArguments
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    assert fires(case, registry, "KB076") == (kind == "bad")
    ds, ta = ds_of(case)
    if ta is not None:
        return  # a TrainingArguments file's mapping: KB046 (tests/test_lint_oracle_types.py)
    on = {s: ds.get(s, {}).get("enabled") for s in ("fp16", "bf16")}
    built = DeepSpeedConfig({**BASE, **copy.deepcopy(ds)}) if "auto" not in on.values() else None
    args = TrainingArguments(
        output_dir=str(tmp_path), use_cpu=True, report_to=[], bf16=on["bf16"] is True, per_device_train_batch_size=1
    )
    hf = HfTrainerDeepSpeedConfig(copy.deepcopy(ds))
    hf.trainer_config_process(args)
    mixed = AcceleratorState.mixed_precision.fget(
        SimpleNamespace(
            distributed_type=DistributedType.DEEPSPEED,
            _mixed_precision="no",
            deepspeed_plugin=SimpleNamespace(deepspeed_config=ds),
        )
    )
    if kind == "bad":
        strings = {s: v for s, v in on.items() if isinstance(v, str)}
        for s, v in strings.items():  # DeepSpeed converts
            cfg = built.float16_config if s == "fp16" else built.bfloat16_config
            assert cfg.enabled is (v == "true")
        with pytest.raises(ValueError, match="mismatch TrainingArguments") as err:
            hf.trainer_config_finalize(args, torch.nn.Linear(4, 2), 10)
        assert all(f"ds {s}.enabled={v}" in str(err.value) for s, v in strings.items()), str(err.value)
        first = "fp16" if on["fp16"] else "bf16"  # accelerate: the raw value's truth, fp16 first
        assert mixed == first
    else:
        hf.trainer_config_finalize(args, torch.nn.Linear(4, 2), 10)


# ---------------------------------------------------------------- accelerate on several machines


@proves("KB077")
@pytest.mark.parametrize("kind,i,case", cases("KB077"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb077_no_hostfile_runs_locally(registry, tmp_path, monkeypatch, kind, i, case):
    import deepspeed.launcher.runner as runner
    from accelerate.utils.launch import prepare_deepspeed_cmd_env
    from deepspeed.accelerator import get_accelerator

    assert fires(case, registry, "KB077") == (kind == "bad")
    got = _launched(case.config, tmp_path, monkeypatch)
    cmd, _ = prepare_deepspeed_cmd_env(got["deepspeed_launcher"])
    if kind == "ok":
        assert cmd is None or cmd[cmd.index("--hostfile") + 1] != "None"
        return
    assert cmd[cmd.index("--hostfile") + 1] == "None"
    launched = []

    class Popen:
        def __init__(self, cmd, env=None, **kw):
            launched.append(cmd)
            self.returncode = 0

        def wait(self):
            return 0

    acc = type(get_accelerator())
    with mock.patch.object(acc, "device_count", lambda self: 8), mock.patch.object(runner.subprocess, "Popen", Popen):
        runner.main(cmd[1:])
    (local,) = launched
    import base64

    world = json.loads(
        base64.urlsafe_b64decode(next(a for a in local if a.startswith("--world_info=")).split("=", 1)[1])
    )
    assert list(world) == ["localhost"] and "--master_addr=127.0.0.1" in local


@proves("KB078")
@pytest.mark.parametrize("kind,i,case", cases("KB078"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb078_rendezvous_at_none(registry, tmp_path, monkeypatch, kind, i, case):
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    assert fires(case, registry, "KB078") == (kind == "bad")
    ((name, args),) = _launched(case.config, tmp_path, monkeypatch).items()
    cmd = prepare_deepspeed_cmd_env(args)[0] if name == "deepspeed_launcher" else prepare_multi_gpu_env(args)
    endpoint = getattr(args, "rdzv_endpoint", None)
    if kind == "bad":
        assert endpoint is not None and endpoint.startswith("None:"), endpoint
    else:
        assert endpoint is None or not endpoint.startswith("None:")
        assert name != "deepspeed_launcher" or cmd is None or "--hostfile" in cmd


@proves("KB079")
@pytest.mark.parametrize("kind,i,case", cases("KB079"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb079_simple_launcher_asserts(registry, tmp_path, monkeypatch, kind, i, case):
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env

    assert fires(case, registry, "KB079") == (kind == "bad")
    args = _launched(case.config, tmp_path, monkeypatch)["simple_launcher"]
    if kind == "bad":
        with pytest.raises(AssertionError, match="When using multiple machines, you need to specify the main process"):
            prepare_simple_launcher_cmd_env(args)
    else:
        prepare_simple_launcher_cmd_env(args)


@proves("KB100")
@pytest.mark.parametrize("kind,i,case", cases("KB100"), ids=lambda x: getattr(x, "note", str(x)))
def test_kb100_master_addr_passed_from_029(registry, tmp_path, monkeypatch, kind, i, case):
    """The rule fires for releases before 0.29.0 only; the installed accelerate passes `--master_addr` to the runner
    for exactly the ok cases judged at a release that has the line."""
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    assert fires(case, registry, "KB100") == (kind == "bad")
    from packaging.version import Version

    if kind == "ok" and Version((case.versions or {}).get("accelerate", "0.29.0")) >= Version("0.29.0"):
        ((name, args),) = _launched(case.config, tmp_path, monkeypatch).items()
        cmd, _ = prepare_deepspeed_cmd_env(args)
        assert cmd is not None and cmd[cmd.index("--master_addr") + 1] == "10.0.0.1"


def _old_accelerate_launch(version: str) -> str | None:
    """accelerate VERSION's utils/launch.py from the timeline's download cache (.cache/kb/dist), if there."""
    import zipfile

    from indexer.registry_timeline import DIST

    for whl in sorted((DIST / "accelerate").glob(f"accelerate-{version}-*.whl")):
        with zipfile.ZipFile(whl) as z:
            return z.read("accelerate/utils/launch.py").decode()
    return None


def test_kb100_citations_in_the_released_wheels():
    """0.28.0 builds the runner's command without --master_addr; 0.29.x adds it on the line KB100 cites. Read from
    the released wheels when the timeline's cache has them (`python -m indexer.registry_timeline --package
    accelerate` downloads them), skipped otherwise."""
    old, new = _old_accelerate_launch("0.28.0"), _old_accelerate_launch("0.29.3")
    if old is None or new is None:
        pytest.skip("accelerate 0.28.0 / 0.29.3 wheels not in .cache/kb/dist (the timeline build downloads them)")
    for key, src in (("acc.ds_cmd_028", old), ("acc.master_addr_029", new)):
        where, text = R.OLD_ACC[key]
        line = int(where.rsplit(":", 1)[1])
        assert text in src.splitlines()[line - 1], key

    def body(src: str) -> str:
        fn = next(
            n
            for n in ast.walk(ast.parse(src))
            if isinstance(n, ast.FunctionDef) and n.name == "prepare_deepspeed_cmd_env"
        )
        return ast.get_source_segment(src, fn)

    assert "--master_addr" not in body(old) and "--master_addr" in body(new)


# ---------------------------------------------------------------- the front ends, in a subprocess when installed

LF_CODES = [c for c in CODES if RULES[c].name.startswith("llamafactory")]
AX_CODES = [c for c in CODES if RULES[c].name.startswith("axolotl")]

LF_RUNNER = r"""
import json, os, socket, sys
from unittest import mock
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
# a one-process distributed run on CPU, as llamafactory-cli starts it (torchrun sets these); version pins off
os.environ.update({"DISABLE_VERSION_CHECK": "1", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "1",
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
import llamafactory.hparams.parser as P
out = []
for args in json.loads(sys.stdin.read()):
    try:
        # pure_bf16 is checked against the device first; a GPU with bf16 is what users have
        # and the optional-package checks (jieba for predict_with_generate, ...) are installation, not the config
        with mock.patch.object(P, "is_torch_bf16_gpu_available", lambda: True), \
             mock.patch.object(P, "_check_extra_dependencies", lambda *a, **k: None):
            P.get_train_args(args)
        out.append(None)
    except BaseException as e:  # noqa: BLE001
        out.append([type(e).__name__, str(e)])
print("RESULT" + json.dumps(out))
"""

AX_RUNNER = r"""
import json, sys
from axolotl.utils.schemas.config import AxolotlInputConfig

out = []
for data in json.loads(sys.stdin.read()):
    try:
        AxolotlInputConfig(**data)
        out.append(None)
    except BaseException as e:  # noqa: BLE001
        out.append([type(e).__name__, str(e)])
print("RESULT" + json.dumps(out))
"""


def _run(runner: str, inputs: list) -> list:
    p = subprocess.run(
        [sys.executable, "-c", runner], input=json.dumps(inputs), capture_output=True, text=True, timeout=600
    )
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT")]
    assert line, p.stderr[-3000:]
    return json.loads(line[-1][len("RESULT") :])


def _lf_args(case, tmp_path) -> dict:
    data = yaml.safe_load(case.config)
    ds = data.get("deepspeed")
    if isinstance(ds, str):  # a shipped file name: write one with the stage its name says
        stage = 3 if R._Z3_NAME.search(ds) else 2
        path = tmp_path / Path(ds).name
        path.write_text(json.dumps({"zero_optimization": {"stage": stage}, "train_micro_batch_size_per_gpu": "auto"}))
        data["deepspeed"] = str(path)
    return {**data, "output_dir": str(tmp_path / "out"), "use_cpu": True, "report_to": "none"}


def _installed(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _raise_text(root: Path, where: str) -> str:
    """The literal head of the message of the raise / assert statement at ``where`` (file:line) of the front end."""
    file, line = where.rsplit(":", 1)
    tree = ast.parse((root / file).read_text())
    for n in ast.walk(tree):
        if isinstance(n, (ast.Raise, ast.Assert)) and n.lineno <= int(line) <= n.end_lineno:
            arg = n.msg if isinstance(n, ast.Assert) else n.exc.args[0]
            if isinstance(arg, ast.JoinedStr):
                arg = next(v for v in arg.values if isinstance(v, ast.Constant))
            return arg.value.split("{")[0].strip()
    raise AssertionError(f"no raise at {where}")


def _expected(pkg: str, finding) -> list[str]:
    """The messages of the checks a finding cites, read from the installed front end (at a release it cites)."""
    rel, root = _installed(pkg), _front_root(pkg)
    out = []
    for _key, (lines, _text) in R.FRONT.items():
        where = lines.get(rel)
        shown = lines.get("0.9.5" if pkg == "llamafactory" else R.AX_RELEASE)
        if where and shown and shown in finding.message:
            out.append(_raise_text(root, where))
    if pkg == "axolotl" and "deprecated.py:" in finding.message:
        out.append("no longer supported")
    return out


def _front_cases(codes):
    return [(code, kind, i, c) for code in codes for kind, i, c in cases(code)]


for _code in LF_CODES + AX_CODES:
    PROVEN[_code] = "test_front_end_cases"


def _front_root(pkg: str) -> Path:
    return Path(importlib.util.find_spec(pkg).submodule_search_locations[0])


def test_front_end_cases(registry, tmp_path):
    """Every LLaMA-Factory / axolotl bad case raises in the front end with the message the finding quotes; every ok
    case parses. Runs for each front end that is importable (LLaMA-Factory 0.9.5 / 0.9.4, axolotl 0.19.0)."""
    ran = []
    for pkg, codes, runner, prep in (
        ("llamafactory", LF_CODES, LF_RUNNER, lambda c: _lf_args(c, tmp_path)),
        ("axolotl", AX_CODES, AX_RUNNER, lambda c: yaml.safe_load(c.config)),
    ):
        if importlib.util.find_spec(pkg) is None:
            continue
        todo = _front_cases(codes)
        results = _run(runner, [prep(c) for *_, c in todo])
        for (code, kind, _i, case), res in zip(todo, results, strict=True):
            found = [f for f in case.lint(registry) if f.code == code]
            assert bool(found) == (kind == "bad"), (code, case.note)
            if kind == "ok":
                assert res is None, (code, case.note, res)
                continue
            if code == "KB080" and "stage" in {f.path for f in found}:
                assert res is None, res  # the parser lets an unknown stage through: train/tuner.py refuses it
                continue
            assert res is not None, (code, case.note)
            exc, msg = res
            assert exc in ("ValueError", "AssertionError", "ValidationError", "DeprecationWarning"), exc
            if _installed(pkg) in (*R.LF_RELEASES, R.AX_RELEASE):
                texts = [t for f in found for t in _expected(pkg, f)]
                assert texts and any(t in msg for t in texts), (code, case.note, msg, texts)
        ran.append(pkg)
    print("front ends run:", ran)
    if not ran:
        pytest.skip("neither LLaMA-Factory nor axolotl is installed here (the rules stand on their citations)")


def test_front_end_citations_and_lists():
    """With a front end installed at a release the module cites: the cited lines, the choices and the removed names."""
    checked = False
    if importlib.util.find_spec("llamafactory") is not None and _installed("llamafactory") in R.LF_RELEASES:
        rel, root = _installed("llamafactory"), _front_root("llamafactory")
        for key, (lines, text) in R.FRONT.items():
            if key.startswith("lf."):
                file, line = lines[rel].rsplit(":", 1)
                assert text.strip('"') in (root / file).read_text().splitlines()[int(line) - 1], (key, rel)
        tree = ast.parse((root / "hparams/finetuning_args.py").read_text())
        lits = {
            n.target.id: ast.literal_eval(n.annotation.slice)
            for n in ast.walk(tree)
            if isinstance(n, ast.AnnAssign)
            and isinstance(n.target, ast.Name)
            and n.target.id in ("stage", "finetuning_type")
        }
        assert lits == {"stage": R.LF_STAGES, "finetuning_type": R.LF_METHODS}
        # the trainer dispatch compares `stage` with exactly these and raises for anything else
        tuner = (root / "train/tuner.py").read_text()
        assert all(f'finetuning_args.stage == "{s}"' in tuner for s in R.LF_STAGES) and "Unknown task" in tuner
        checked = True
    if importlib.util.find_spec("axolotl") is not None and _installed("axolotl") == R.AX_RELEASE:
        root = _front_root("axolotl")
        for key, (lines, text) in R.FRONT.items():
            if key.startswith("ax."):
                file, line = lines[R.AX_RELEASE].rsplit(":", 1)
                assert text in (root / file).read_text().splitlines()[int(line) - 1], key
        dep = ast.parse((root / "utils/schemas/deprecated.py").read_text())
        removed = {}
        for fn in ast.walk(dep):
            if not isinstance(fn, ast.FunctionDef):
                continue
            raises = [n for n in ast.walk(fn) if isinstance(n, ast.Raise) and "DeprecationWarning" in ast.unparse(n)]
            ifs = [n for n in fn.body if isinstance(n, ast.If)]
            if raises and ifs:
                name = fn.decorator_list[0].args[0].value
                test = "set" if isinstance(ifs[0].test, ast.Compare) else "truthy"
                removed[name] = (test, raises[0].lineno)
        assert removed == R.AX_REMOVED
        val = (root / "utils/schemas/validation.py").read_text()
        assert all(f'"{k}"' in val for k in R.AX_UNSLOTH)
        checked = True
    if not checked:
        pytest.skip("no front end installed at a release the module cites")


# ---------------------------------------------------------------- bookkeeping


def test_every_runtime_rule_is_proven_here():
    assert set(CODES) == set(PROVEN), sorted(set(CODES) ^ set(PROVEN))
    for code in CODES:
        r = RULES[code]
        assert r.oracle == "tests/test_lint_oracle_runtime.py" and r.check.__module__ == "kb.doctor.rules.runtime"
        assert r.validity == (r.severity == "error"), code
