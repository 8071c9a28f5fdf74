"""The type rules (kb/doctor/rules/types.py, KB040-KB046), proven by running the real code on CPU.

Values DeepSpeed reads without pydantic go straight into comparisons, truth tests and constructors, so
building a ``DeepSpeedConfig`` is not enough: where a rule says "at deepspeed.initialize" or "at the
first step", the case is run through ``deepspeed.initialize`` on a tiny model (one CPU process, gloo)
and stepped; where it names the HF Trainer, through ``HfTrainerDeepSpeedConfig.trainer_config_process``
/ ``trainer_config_finalize`` with a ``TrainingArguments`` made on CPU; where it names accelerate,
through ``DeepSpeedPlugin.deepspeed_config_process`` as ``Accelerator.prepare`` calls it.

For every bad case, each finding's claim (which exception, raised where, at which step; or what the
value ends up as) is checked; every ok case is accepted by the same code. The file:line each message
cites is checked against the installed sources. Follows tests/test_lint_oracle.py.
"""

import copy
import json
import logging
import re
import traceback
from pathlib import Path

import pytest
import yaml

from kb.doctor.configs import parse_config
from kb.doctor.lint import RULES
from kb.doctor.rules import types as T
from tests.ds_dist import cpu_process_group

deepspeed = pytest.importorskip("deepspeed")
import torch  # noqa: E402
from deepspeed.runtime.config import DeepSpeedConfig  # noqa: E402

logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
SITE = Path(deepspeed.__file__).parent.parent
CODES = sorted(c for c in RULES if "KB040" <= c <= "KB049")
# what a one-step run needs besides the case: an optimizer DeepSpeed builds without compiling an op
# (torch's AdamW; DeepSpeed's FusedAdam would JIT-build a C++ extension first)
TORCH_OPT = {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}


# ---------------------------------------------------------------- running the real code


@pytest.fixture(scope="module")
def dist():
    """One CPU process group for deepspeed.initialize, torn down after this module (tests/ds_dist.py)."""
    with cpu_process_group():
        yield


def _where(exc: BaseException) -> tuple[str, int]:
    """(file relative to site-packages, line) of the frame that raised."""
    fr = traceback.extract_tb(exc.__traceback__)[-1]
    return fr.filename.split("site-packages/")[-1], fr.lineno


class Run:
    """What happened when a config went through deepspeed.initialize and `steps` training steps."""

    def __init__(self, stage: str, exc: BaseException | None, engine=None):
        self.stage, self.exc, self.engine = stage, exc, engine

    @property
    def where(self) -> tuple[str, int] | None:
        return _where(self.exc) if self.exc else None

    def __repr__(self):
        return f"Run({self.stage}, {self.exc!r} at {self.where})"


def run(cfg: dict, steps: int = 2, torch_adam: bool = True) -> Run:
    """deepspeed.initialize on a 4->2 Linear, then `steps` steps; the stage it stopped at ("config" when
    DeepSpeedConfig itself raised, "init", "step", or "done")."""
    cfg = copy.deepcopy(cfg)
    opt = cfg.get("optimizer")
    if isinstance(opt, dict) and torch_adam and str(opt.get("type", "")).lower() in T.ADAM_TYPES:
        opt.setdefault("params", {}).setdefault("torch_adam", True)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    client = None if "optimizer" in cfg else torch.optim.AdamW(model.parameters(), lr=1e-3)
    try:
        DeepSpeedConfig(copy.deepcopy(cfg))
    except Exception as e:  # noqa: BLE001 - the exception is what the test looks at
        return Run("config", e)
    try:
        engine, *_ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), optimizer=client, config=cfg
        )
    except Exception as e:  # noqa: BLE001
        return Run("init", e)
    try:
        for _ in range(steps):
            loss = engine(torch.randn(2, 4)).sum()
            engine.backward(loss)
            engine.step()
    except Exception as e:  # noqa: BLE001
        return Run("step", e, engine)
    return Run("done", None, engine)


def training_args(case_yaml: dict, tmp_path):
    from transformers import TrainingArguments

    kw = {k: v for k, v in case_yaml.items() if k not in ("deepspeed", "output_dir")}
    return TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], **kw)


def hf_process(case_yaml: dict, tmp_path, num_training_steps: int = 100):
    """The HF Trainer's two passes over the DeepSpeed mapping: (config after them, ValueError or None)."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    args = training_args(case_yaml, tmp_path)
    hf = HfTrainerDeepSpeedConfig(copy.deepcopy(case_yaml["deepspeed"]))
    # at TrainingArguments creation (transformers/training_args.py); with auto_find_batch_size the Trainer
    # redoes it on a fresh config with auto_find_batch_size=True when training starts (trainer.py,
    # _update_auto_batch_size), which is the pass that counts
    hf.trainer_config_process(args, auto_find_batch_size=args.auto_find_batch_size)
    try:
        hf.trainer_config_finalize(args, torch.nn.Linear(4, 2), num_training_steps)  # at Trainer.train
    except ValueError as e:
        return hf.config, e
    return hf.config, None


# every "auto" accelerate fills in Accelerator.prepare (accelerate/accelerator.py, _prepare_deepspeed): the
# config_kwargs it passes to deepspeed_config_process, with stand-in values
ACC_KWARGS = {
    "gradient_clipping": 1.0,
    "zero_optimization.stage3_gather_16bit_weights_on_model_save": False,
    "train_micro_batch_size_per_gpu": 1,
    "train_batch_size": 1,
    "zero_optimization.reduce_bucket_size": 16,
    "zero_optimization.stage3_prefetch_bucket_size": 14,
    "zero_optimization.stage3_param_persistence_threshold": 40,
    "optimizer.params.lr": 1e-3,
    "optimizer.params.weight_decay": 0.0,
    "scheduler.params.warmup_min_lr": 0,
    "scheduler.params.warmup_max_lr": 1e-3,
    "scheduler.params.warmup_num_steps": 1,
    "scheduler.params.total_num_steps": 10,
}


def accelerate_process(ds: dict) -> ValueError | None:
    from accelerate.utils import DeepSpeedPlugin

    # DeepSpeedPlugin refuses a config without the section; stage 0 is DeepSpeed's own default
    plugin = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 0}, **copy.deepcopy(ds)})
    try:
        plugin.deepspeed_config_process(must_match=False, **ACC_KWARGS)
    except ValueError as e:
        return e
    return None


def case_data(case) -> tuple[dict, dict | None]:
    """(DeepSpeed mapping, TrainingArguments file or None) of a rule's case."""
    cfg = parse_config(case.config)
    if cfg.kind == "training_args":
        data = yaml.safe_load(case.config)
        return data["deepspeed"], data
    return cfg.data, None


def findings(case, registry, code):
    return [f for f in case.lint(registry) if f.code == code]


def leaf(path: str) -> str:
    return path.removeprefix("deepspeed.")


def _get(d: dict, path: str):
    for p in path.split("."):
        d = d[p]
    return d


# ---------------------------------------------------------------- per rule: what the finding claims, checked


def check_kb040(case, kind, registry, tmp_path):
    ds, _ = case_data(case)
    r = run({"optimizer": TORCH_OPT, **ds})
    if kind == "ok":
        assert r.stage == "done", r
        return
    for f in findings(case, registry, "KB040"):
        key = leaf(f.path)
        assert isinstance(r.exc, TypeError), r
        file, line = r.where
        if key == T.WALL_CLOCK[0]:
            assert r.stage == "config" and (file, line) == (T.WALL_CLOCK[1], T.WALL_CLOCK[2]), r
            continue
        when, cfile, cline = T.RAW_NUMERIC[key]
        if key in T.BATCH:
            assert r.stage == "config" and file == T.DS_CONFIG and 590 <= line <= 652, r
        elif when == "config":
            assert r.stage == "config" and (file, line) == (cfile, cline), r
        else:
            assert r.stage == "step" and (file, line) == (cfile, cline), r
        assert f"{cfile}:" in f.message


def check_kb041(case, kind, registry, tmp_path):
    ds, _ = case_data(case)
    cfg = {"optimizer": TORCH_OPT, **ds}
    r = run(cfg, torch_adam=False)
    assert r.stage == "done", r  # accepted either way: the rule is about what the string does
    if kind == "ok":
        if "bf16" in ds:  # validated: pydantic converts "false"
            assert DeepSpeedConfig(copy.deepcopy(ds)).bfloat16_config.enabled is False
        if "prescale_gradients" in ds:
            assert r.engine.postscale_gradients() is True
        return
    conf = DeepSpeedConfig(copy.deepcopy(cfg))
    for f in findings(case, registry, "KB041"):
        path = leaf(f.path)
        value = _get(ds, path)
        if path in T.RAW_BOOL:
            assert getattr(conf, path) == value  # kept as the string, not converted
        if path == "prescale_gradients":
            assert r.engine.postscale_gradients() is False  # "false" switched prescaling on
            assert run({**cfg, path: False}).engine.postscale_gradients() is True
        elif path == "zero_allow_untested_optimizer":
            # "false" let an untested optimizer through ZeRO; the JSON false stops it
            with_false = run({**cfg, path: False})
            assert with_false.stage == "init" and isinstance(with_false.exc, AssertionError), with_false
            assert "untested ZeRO Optimizer" in str(with_false.exc)
        elif path == "optimizer.params.torch_adam":
            assert type(r.engine.basic_optimizer) is torch.optim.AdamW  # torch's AdamW, as with true
        else:
            raise AssertionError(f"no engine check for {path}")


def check_kb042(case, kind, registry, tmp_path):
    ds, _ = case_data(case)
    conf = DeepSpeedConfig(copy.deepcopy(ds))  # accepted in both kinds
    values = [conf.train_batch_size, conf.train_micro_batch_size_per_gpu, conf.gradient_accumulation_steps]
    if kind == "ok":
        assert all(type(v) is int for v in values), values
        return
    for f in findings(case, registry, "KB042"):
        assert isinstance(getattr(conf, leaf(f.path)), float)
    assert run({"optimizer": TORCH_OPT, **ds}).stage == "done"


def _claimed_exc(message: str) -> type[Exception]:
    return ValueError if "raises ValueError" in message else TypeError


def check_kb043(case, kind, registry, tmp_path):
    ds, ta = case_data(case)
    if ta is not None:
        ds, err = hf_process(ta, tmp_path)  # what the HF Trainer hands to DeepSpeed
        assert err is None, err
    r = run(ds)
    if kind == "ok":
        assert r.stage == "done", r
        return
    hits = findings(case, registry, "KB043")
    assert len(hits) == 1  # each bad case has one wrong value: the run stops at it
    f = hits[0]
    assert r.stage == "init" and isinstance(r.exc, _claimed_exc(f.message)), r
    file, line = r.where
    assert f"{file}:{line}" in f.message, (r, f.message)


def check_kb044(case, kind, registry, tmp_path):
    ds, ta = case_data(case)
    if ta is not None:
        ds, err = hf_process(ta, tmp_path)
        assert err is None and "auto" not in json.dumps(ds), (err, ds)  # the Trainer filled every "auto"
    r = run(ds)
    if kind == "ok":
        assert r.stage == "done", r
        return
    f = findings(case, registry, "KB044")[0]
    assert r.stage == "init" and isinstance(r.exc, _claimed_exc(f.message)), r
    file, line = r.where
    assert f"{file}:{line}" in f.message, (r, f.message)
    # and the integrations named do fill it
    assert accelerate_process(ds) is None


def check_kb045(case, kind, registry, tmp_path):
    ds, ta = case_data(case)
    if ta is not None:
        ds, err = hf_process(ta, tmp_path)
        assert err is None, err
    err = accelerate_process(ds)
    if kind == "ok":
        assert err is None, err
        return
    for f in findings(case, registry, "KB045"):
        path = leaf(f.path)
        assert isinstance(err, ValueError) and f"`{path}` not found in kwargs" in str(err), err
        assert _where(err) == T.ACC_AUTO
        # plain DeepSpeed hands the string on unconverted
        conf = DeepSpeedConfig(copy.deepcopy({**ds, "train_micro_batch_size_per_gpu": 1}))
        sec, _, key = path.split(".")
        assert (conf.optimizer_params if sec == "optimizer" else conf.scheduler_params)[key] == "auto"


def check_kb046(case, kind, registry, tmp_path):
    ds, ta = case_data(case)
    if ta is None:  # plain DeepSpeed (the ok case): pydantic converts "true"
        assert DeepSpeedConfig(copy.deepcopy(ds)).bfloat16_config.enabled is True
        return
    _, err = hf_process(ta, tmp_path)
    if kind == "ok":
        assert err is None, err
        return
    assert isinstance(err, ValueError) and "mismatch TrainingArguments" in str(err), err
    assert _where(err) == (T.HF_DS, T.HF_RAISE_LINE)
    for f in findings(case, registry, "KB046"):
        assert f"- ds {leaf(f.path)}=" in str(err)


def check_kb047(case, kind, registry, tmp_path):
    """The Trainer's own two passes refuse the bad cases with its mismatch error and accept the ok ones."""
    _, err = hf_process(yaml.safe_load(case.config), tmp_path)
    if kind == "ok":
        assert err is None, err
        return
    assert isinstance(err, ValueError) and "mismatch TrainingArguments" in str(err), err
    assert _where(err) == (T.HF_DS, T.HF_RAISE_LINE)
    for f in findings(case, registry, "KB047"):
        assert f"- ds {leaf(f.path)}=" in str(err)


CHECKS = {code: globals()[f"check_{code.lower()}"] for code in CODES}
CASES = [
    (code, kind, i)
    for code in CODES
    for kind, cases in (("bad", RULES[code].bad), ("ok", RULES[code].ok))
    for i in range(len(cases))
]


def test_every_type_rule_has_an_oracle():
    assert CODES and set(CHECKS) == set(CODES)


@pytest.mark.parametrize("code,kind,i", CASES, ids=[f"{c}-{k}{i}" for c, k, i in CASES])
def test_rule_case_against_the_real_code(registry, dist, tmp_path, code, kind, i):
    case = (RULES[code].bad if kind == "bad" else RULES[code].ok)[i]
    fired = findings(case, registry, code)
    assert bool(fired) is (kind == "bad")
    CHECKS[code](case, kind, registry, tmp_path)


# ---------------------------------------------------------------- the tables behind the messages


def _line(file: str, line: int) -> str:
    return (SITE / file).read_text(encoding="utf-8").splitlines()[line - 1]


CITED = {
    (T.DS_CONFIG, 590): "def _batch_assertion",
    (T.DS_CONFIG, 602): "assert train_batch == micro_batch * grad_acc * self.world_size",
    (T.DS_CONFIG, 718): "vocabulary_size % TENSOR_CORE_ALIGN_SIZE",
    (T.DS_CONFIG, 533): "get_wall_clock_breakdown(param_dict) | self.flops_profiler_config.enabled",
    (T.DS_ENGINE, 3506): "if self.gradient_clipping() > 0.0",
    (T.DS_ENGINE, 3554): "% self.steps_per_print()",
    (T.DS_ENGINE, 3809): "1.0 / self.gradient_predivide_factor()",
    (T.DS_ENGINE, 1737): "return not self._config.prescale_gradients",
    (T.DS_ENGINE, 2300): "self.zero_allow_untested_optimizer()",
    (T.DS_ENGINE, 2344): "if self.zero_force_ds_cpu_optimizer():",
    (T.DS_ENGINE, 2934): "force=self.memory_breakdown()",
    (T.DS_ENGINE, 714): "if self.dump_state():",
    (T.DS_ENGINE, 2880): "dataloader_drop_last=self.dataloader_drop_last()",
    (T.DS_ENGINE, 1278): "if self._config.disable_python_gc:",
    (T.DS_ENGINE, 2030): "if not self.managed_gradient_accumulation():",
    (T.DS_ENGINE, 2380): "if torch_adam:",
    (T.DS_ENGINE, 2490): "or adam_w_mode",
    ("torch/optim/adam.py", 58): "0.0 <= lr",
    ("torch/optim/adam.py", 60): "0.0 <= eps",
    ("torch/optim/adam.py", 62): "0.0 <= betas[0]",
    ("torch/optim/adam.py", 66): "0.0 <= weight_decay",
    (T.DS_SCHED, 734): "warmup_num_steps must be a positive integer",
    (T.DS_SCHED, 875): "warmup_num_steps must be a positive integer",
    (T.DS_SCHED, 743): "big - small",
    (T.DS_SCHED, 826): "self.total_num_steps < self.warmup_num_steps",
    (T.DS_SCHED, 893): "self.total_num_steps < self.warmup_num_steps",
    (T.HF_DS, T.HF_RAISE_LINE): "raise ValueError(",
    # cited by docs/lint.md's table only
    ("deepspeed/runtime/config_utils.py", 193): "def get_scalar_param",
    (T.DS_CONFIG, 257): "DISABLE_ALLGATHER",
    (T.DS_CONFIG, 376): "USE_DATA_BEFORE_EXPERT_PARALLEL",
    (T.DS_ENGINE, 857): "use_data_before_expert_parallel=self._config.use_data_before_expert_parallel_",
    (T.DS_SCHED, 746): "if warmup_type not in",
    (T.HF_DS, 172): 'self.fill_only("scheduler.params.warmup_min_lr"',
    ("deepspeed/runtime/zero/stage_1_and_2.py", 351): "assert self.postscale_gradients",
    T.ACC_AUTO: "raise ValueError(",
}


def test_every_cited_line_is_what_it_says():
    cited = set(CITED)
    cited |= {(f, ln) for _w, f, ln in T.RAW_NUMERIC.values()} | {T.WALL_CLOCK[1:]}
    cited |= set(T.RAW_BOOL.values()) | set(T.OPT_BOOL.values()) | set(T.ADAM_NUMBERS.values())
    cited |= {(f, ln) for sched in T.SCHED_NUMBERS.values() for _e, f, ln in sched.values()}
    missing = cited - set(CITED)
    assert not missing, f"cited without a snippet to check: {missing}"
    for (file, line), snippet in CITED.items():
        assert snippet in _line(file, line), (file, line, _line(file, line))
    assert "Please correct the following DeepSpeed config values that mismatch" in _line(T.HF_DS, T.HF_RAISE_LINE + 1)
    assert "not found in kwargs" in _line(T.ACC_AUTO[0], T.ACC_AUTO[1] + 1)


def test_hf_matched_keys_are_what_transformers_compares():
    """HF_MATCHED is every key trainer_config_process / _finalize pass to fill_match (not fill_only)."""
    lines = (SITE / T.HF_DS).read_text(encoding="utf-8").splitlines()
    matched = {}
    for n, text in enumerate(lines, 1):
        m = re.search(r"self\.fill_match\(\s*$", text) or re.search(r'self\.fill_match\("([^"]+)"', text)
        if not m:
            continue
        key = m.group(1) if m.groups() else re.search(r'"([^"]+)"', lines[n]).group(1)
        matched[key] = n
    assert matched == T.HF_MATCHED


def test_raw_bool_keys_cover_the_registry(registry):
    """Every top-level bool DeepSpeed reads without pydantic is either a KB041 switch or KB040's
    wall_clock_breakdown, or listed here with the reason it is left out."""
    not_read_by_engine = {
        "disable_allgather": "only stored on DeepSpeedConfig; runtime/engine.py never reads it",
        "use_data_before_expert_parallelism": "passed to the MoE group setup, not truth-tested in the engine",
        "datastates_ckpt": "a section (datastates checkpointing), not a switch",
    }
    engine = (SITE / T.DS_ENGINE).read_text(encoding="utf-8")
    assert "disable_allgather" not in engine
    bools = {
        r["path"]
        for r in registry.records
        if r["package"] == "deepspeed"
        and r["kind"] == "config_key"
        and "." not in r["path"]
        and r["type"] == "bool"
        and not r["validated"]
    }
    assert bools == set(T.RAW_BOOL) | {T.WALL_CLOCK[0]} | set(not_read_by_engine)


def test_accelerate_fills_what_acc_kwargs_says():
    src = (SITE / "accelerate" / "accelerator.py").read_text(encoding="utf-8")
    for key in ACC_KWARGS:
        assert f'"{key}"' in src, key


# ---------------------------------------------------------------- docs/lint.md rows that no rule flags


def test_documented_values_without_a_rule(dist, tmp_path):
    """The rows of docs/lint.md's table marked "-" (or stage-limited), as observed."""
    base = {"train_micro_batch_size_per_gpu": 1, "optimizer": TORCH_OPT}
    r = run({**base, "gradient_accumulation_steps": True})  # a bool is an int
    assert r.stage == "done" and r.engine.gradient_accumulation_steps() is True
    assert run({**base, "gradient_clipping": True}).stage == "done"
    assert run({**base, "steps_per_print": 1.0}).stage == "done"
    r = run({**base, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 1000.0}}})
    assert r.stage == "done"
    r = run({**base, "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "Linear"}}})
    assert r.stage == "done" and r.engine.lr_scheduler.warmup_type == "log"
    # with ZeRO-2, gradient_predivide_factor other than 1.0 and prescaling are refused before any string matters
    z2 = {**base, "zero_optimization": {"stage": 2}}
    r = run({**z2, "gradient_predivide_factor": "2"})
    assert r.stage == "init" and isinstance(r.exc, AssertionError) and "gradient_predivide_factor" in str(r.exc)
    assert r.where == ("deepspeed/runtime/zero/stage_1_and_2.py", 350)
    r = run({**z2, "prescale_gradients": "false"})
    assert r.stage == "init" and isinstance(r.exc, AssertionError) and "pre-scale gradients" in str(r.exc)
    assert r.where == ("deepspeed/runtime/zero/stage_1_and_2.py", 351)
    # the HF Trainer: a float equal to the TrainingArguments int is no mismatch
    _, err = hf_process(
        {"per_device_train_batch_size": 8, "deepspeed": {"train_micro_batch_size_per_gpu": 8.0}}, tmp_path
    )
    assert err is None
    # the Trainer prepares the model through accelerate, whose _prepare_deepspeed fills (and refuses) "auto"
    trainer = (SITE / "transformers" / "trainer.py").read_text(encoding="utf-8")
    assert "self.accelerator.prepare(self.model, self.optimizer)" in trainer
    assert "propagate_args_to_deepspeed(self.accelerator, self.args, auto_find_batch_size=True)" in trainer
    acc = (SITE / "accelerate" / "accelerator.py").read_text(encoding="utf-8")
    assert "deepspeed_plugin.deepspeed_config_process(must_match=False, **config_kwargs)" in acc


@pytest.mark.parametrize("key", sorted(T.RAW_BOOL))
def test_bool_switches_keep_the_string(key):
    """KB041's premise for every switch it names: DeepSpeedConfig stores "false" as it is, and it is true."""
    conf = DeepSpeedConfig({"train_micro_batch_size_per_gpu": 1, key: "false"})
    assert getattr(conf, key) == "false" and bool(getattr(conf, key)) is True
    assert key in _line(*T.RAW_BOOL[key])  # the cited line is where the engine reads it
