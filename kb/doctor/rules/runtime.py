"""What is refused or ignored outside the JSON schema (KB070-KB089, KB100-KB119), mined from the code that runs it.

A config can pass every pydantic model and still fail, or run differently, because of checks made elsewhere:

* DeepSpeed's engine (deepspeed 0.19.8 runtime/engine.py): the optimizer and LR scheduler named in the config are
  looked up by name when ``deepspeed.initialize`` builds them (``_do_sanity_check``, ``_configure_basic_optimizer``,
  ``_do_optimizer_sanity_check``, ``_scheduler_from_config``); KB070-KB074. Removed sections are KB004's.
* The HF Trainer and accelerate read the same DeepSpeed JSON with plain dict lookups (transformers 5.24.0
  integrations/deepspeed.py, accelerate 1.15.0 utils/deepspeed.py ``HfDeepSpeedConfig``): a quoted stage or
  precision switch that DeepSpeed's pydantic models convert stays a string there; KB075-KB076.
* accelerate's launcher on several machines (accelerate 1.15.0 utils/launch.py); KB077-KB079, and KB100 for what
  releases before 0.29.0 leave out (0.28.0 / 0.29.0 utils/launch.py, read from the released wheels).
* The front ends' own argument checks: LLaMA-Factory (0.9.5 and 0.9.4: hparams/parser.py, hparams/*_args.py,
  train/tuner.py) and axolotl (0.19.0: utils/schemas/validation.py, deprecated.py); KB080-KB089.

Every file:line a message cites is in ``CODE`` (installed packages) or ``FRONT`` (the front ends' releases), and
``tests/test_lint_oracle_runtime.py`` checks each against the source and runs every bad and ok case through the real
code: DeepSpeed's engine methods and accelerate's launcher on CPU; LLaMA-Factory's ``get_train_args`` and axolotl's
``AxolotlInputConfig`` when those packages are importable (kb's own environment does not install them, so there
those tests are skipped and the rules stand on the citations).

Names this module lists (optimizers, schedulers, a front end's choices) were generated from the sources named next
to them; the oracle re-reads each list from the installed package.
"""

from __future__ import annotations

import difflib
import re
import weakref
from typing import Any

from kb.doctor.configs import _int, deepspeed_setting
from kb.doctor.engine import VIEWS, Case, Ctx, rule

ORACLE = "tests/test_lint_oracle_runtime.py"  # proves this module's validity rules (kb.doctor.engine.Rule.oracle)

# ---------------------------------------------------------------- what the installed packages do (file:line)

# key -> (file:line, text that line holds); the oracle checks each against the installed source
CODE: dict[str, tuple[str, str]] = {
    "ds.lower": ("deepspeed/runtime/config.py:519", "self.optimizer_name.lower() in DEEPSPEED_OPTIMIZERS"),
    "ds.opt_assert": ("deepspeed/runtime/engine.py:2018", "assert self._is_supported_optimizer("),
    "ds.opt_known": (
        "deepspeed/runtime/engine.py:1986",
        "optimizer_name in DEEPSPEED_OPTIMIZERS or getattr(torch.optim",
    ),
    "ds.untested": ("deepspeed/runtime/engine.py:2298", "if not is_zero_supported_optimizer(basic_optimizer):"),
    "ds.untested_msg": ("deepspeed/runtime/engine.py:2301", "You are using an untested ZeRO Optimizer"),
    "ds.zero_list": ("deepspeed/runtime/zero/utils.py:45", "ZERO_SUPPORTED_OPTIMIZERS = ["),
    "ds.zero_type": ("deepspeed/runtime/zero/utils.py:77", "return type(optimizer) in ZERO_SUPPORTED_OPTIMIZERS"),
    "ds.force": ("deepspeed/runtime/engine.py:2344", "if self.zero_force_ds_cpu_optimizer():"),
    "ds.sched_ds": ("deepspeed/runtime/engine.py:1926", "if hasattr(lr_schedules, scheduler_name):"),
    "ds.sched_assert": ("deepspeed/runtime/engine.py:1929", "assert hasattr(torch.optim.lr_scheduler,"),
    "ds.sched_call": (
        "deepspeed/runtime/engine.py:1935",
        "instantiated_scheduler = scheduler(optimizer, **scheduler_params)",
    ),
    "hf.untested": ("transformers/integrations/deepspeed.py:589", 'config["zero_allow_untested_optimizer"] = True'),
    "hf.fill_fp16": ("transformers/integrations/deepspeed.py:183", 'self.fill_match("fp16.enabled"'),
    "hf.fill_bf16": ("transformers/integrations/deepspeed.py:184", 'self.fill_match("bf16.enabled"'),
    "hf.is_true": ("transformers/integrations/deepspeed.py:187", 'if self.is_true("bf16.enabled"):'),
    "hf.mismatch": ("transformers/integrations/deepspeed.py:260", "raise ValueError("),
    "hf.zero3_init": ("transformers/modeling_utils.py:1435", "needs_zero3_init = is_deepspeed_zero3_enabled()"),
    "hf.save": ("transformers/trainer.py:4114", 'zero3_sharding = self.deepspeed.config.get("zero_optimization", {})'),
    "hf.adamw": ("transformers/trainer_optimizer.py:605", "OptimizerNames.ADAMW_TORCH: _get_adamw_torch,"),
    "hf.adamw_fused": ("transformers/trainer_optimizer.py:606", "OptimizerNames.ADAMW_TORCH_FUSED: _get_adamw_torch,"),
    "hf.create_opt": ("transformers/integrations/deepspeed.py:587", "optimizer = trainer.create_optimizer()"),
    "hf.do_eval": ("transformers/training_args.py:1572", "self.do_eval = True"),
    "acc.stage": ("accelerate/utils/deepspeed.py:166", 'self._stage = self.get_value("zero_optimization.stage", -1)'),
    "acc.is_zero3": ("accelerate/utils/deepspeed.py:247", "return self._stage == 3"),
    "acc.plugin_stage": ("accelerate/utils/dataclasses.py:1300", "setattr(self, key, config_value)"),
    "acc.init_flag": (
        "accelerate/utils/dataclasses.py:1338",
        'warnings.warn("DeepSpeed Zero3 Init flag is only applicable',
    ),
    "acc.no_sync": ("accelerate/accelerator.py:1175", "self.state.deepspeed_plugin.zero_stage < 2"),
    "acc.state_dict": (
        "accelerate/accelerator.py:4071",
        'zero3_sharding = self.deepspeed_config["zero_optimization"]["stage"] == 3',
    ),
    "acc.mixed": ("accelerate/state.py:1066", 'if config.get("fp16", {}).get("enabled", False):'),
    "acc.swap_if": ("accelerate/accelerator.py:2376", '"zero_force_ds_cpu_optimizer", True'),
    "acc.swap": ("accelerate/accelerator.py:2383", "optimizer = map_pytorch_optim_to_deepspeed(optimizer)"),
    "acc.cpu_adam": ("accelerate/utils/deepspeed.py:43", "optimizer_class = DeepSpeedCPUAdam"),
    "acc.adam_mode": ("accelerate/utils/deepspeed.py:47", 'defaults["adamw_mode"] = False'),
    "acc.cpu_adagrad": ("accelerate/utils/deepspeed.py:81", "optimizer_class = DeepSpeedCPUAdagrad"),
    "acc.launcher": (
        "accelerate/utils/launch.py:450",
        "args.deepspeed_multinode_launcher = DEEPSPEED_MULTINODE_LAUNCHERS[0]",
    ),
    "acc.hostfile": ("accelerate/utils/launch.py:454", 'cmd.extend(["--hostfile", str(args.deepspeed_hostfile)])'),
    "acc.rdzv_ds": ("accelerate/utils/launch.py:496", 'args.rdzv_endpoint = f"{main_process_ip}:{main_process_port}"'),
    "acc.master_ds": ("accelerate/utils/launch.py:493", "args.master_addr = str(main_process_ip)"),
    "acc.rdzv_gpu": ("accelerate/utils/launch.py:224", 'args.rdzv_endpoint = f"{main_process_ip}:{main_process_port}"'),
    "acc.master_gpu": ("accelerate/utils/launch.py:221", "args.master_addr = str(main_process_ip)"),
    "acc.assert_ip": ("accelerate/utils/launch.py:154", "assert args.main_process_ip is not None, ("),
    "acc.assert_port": ("accelerate/utils/launch.py:157", "assert args.main_process_port is not None, ("),
    "ds.no_hostfile": ("deepspeed/launcher/runner.py:213", "if not os.path.isfile(hostfile_path):"),
    "ds.local_only": ("deepspeed/launcher/runner.py:472", "resource_pool['localhost'] = device_count"),
}


def at(key: str) -> str:
    return CODE[key][0]


# DeepSpeed's own optimizer names (deepspeed 0.19.8 runtime/config.py DEEPSPEED_OPTIMIZERS), matched lowercased
DS_OPTIMIZERS = ("adagrad", "adam", "adamw", "lamb", "muadam", "muadamw", "musgd", "lion", "muon")
# names DeepSpeed 0.19.6 still had (its runtime/config.py:75-77) and 0.19.7 dropped, with the 1-bit optimizers
REMOVED_OPTIMIZERS = ("onebitadam", "zerooneadam", "onebitlamb")
REMOVED_AFTER = "0.19.6"
# the torch.optim optimizer classes (torch 2.13): any other `optimizer.type` fails the engine's name check
TORCH_OPTIMIZERS = (
    "ASGD",
    "Adadelta",
    "Adafactor",
    "Adagrad",
    "Adam",
    "AdamW",
    "Adamax",
    "LBFGS",
    "Muon",
    "NAdam",
    "RAdam",
    "RMSprop",
    "Rprop",
    "SGD",
    "SparseAdam",
)
# which names build an optimizer class ZeRO does not list as tested (zero/utils.py:45-48, an exact type test): of
# DeepSpeed's own, FusedLamb and mup's MuAdam / MuAdamW / MuSGD; of torch's, every class but Adam, AdamW, Adagrad
ZERO_UNTESTED_DS = ("lamb", "muadam", "muadamw", "musgd")
ZERO_TESTED_TORCH = ("Adam", "AdamW", "Adagrad")
# torch.optim.lr_scheduler's schedulers (torch 2.13): the engine's fallback when lr_schedules has no such name
TORCH_SCHEDULERS = (
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
)
# the HF Trainer `optim` values accelerate keeps as an AdamW when it swaps in DeepSpeed's CPU optimizer: the two
# that build torch.optim.AdamW (transformers 5.24.0 trainer_optimizer.py:605-606)
HF_TORCH_ADAMW = ("adamw_torch", "adamw_torch_fused")

# accelerate's launcher per `distributed_type` (accelerate 1.15.0 commands/launch.py:1393-1413): the types it starts
# through torchrun (multi_gpu_launcher) and the ones it starts with the simple launcher
TORCHRUN_TYPES = (
    "MULTI_GPU",
    "MULTI_NPU",
    "MULTI_MLU",
    "MULTI_SDAA",
    "MULTI_MUSA",
    "MULTI_XPU",
    "MULTI_HPU",
    "MULTI_NEURON",
    "FSDP",
    "MEGATRON_LM",
)
SIMPLE_TYPES = ("NO", "MULTI_CPU")


def _ds_version(c: Ctx) -> str:
    return c.reg.versions.get("deepspeed", "0.19.8")


def _older(a: str, b: str) -> bool:
    """Release ``a`` is ``b`` or older."""
    from packaging.version import Version

    try:
        return Version(a) <= Version(b)
    except Exception:  # noqa: BLE001 - an unparsable version is treated as current
        return False


_SCHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def ds_schedulers(reg: Any) -> dict[str, set[str]]:
    """DeepSpeed's LR scheduler classes in this registry view -> the keyword arguments their constructor takes
    (deepspeed runtime/lr_schedules.py, from the registry's class and kwarg records)."""
    if reg not in _SCHED:
        prefix = "deepspeed:runtime.lr_schedules."
        live = [r for r in reg.records if r["id"].startswith(prefix) and r.get("status") not in ("removed", "absent")]
        out: dict[str, set[str]] = {r["name"]: set() for r in live if r["kind"] == "class"}
        for r in live:
            if r["kind"] == "kwarg":
                cls = r["id"][len(prefix) :].split(".")[0]
                if cls in out and r["name"] != "optimizer":
                    out[cls].add(r["name"])
        _SCHED[reg] = out
    return _SCHED[reg]


def _section(c: Ctx, name: str) -> tuple[Any, dict[str, Any]]:
    sec = c.data.get(name)
    if not isinstance(sec, dict):
        return None, {}
    params = sec.get("params")
    return sec.get("type"), (params if isinstance(params, dict) else {})


def _near(word: str, names: list[str]) -> list[str]:
    by_case = [n for n in names if n.lower() == word.lower()]
    return by_case or difflib.get_close_matches(word, names, n=3, cutoff=0.7)


def _ticks(names: list[str], sep: str = ", ") -> str:
    return sep.join(f"`{n}`" for n in names)


# ---------------------------------------------------------------- DeepSpeed: optimizer and scheduler by name


def _optimizer_known(c: Ctx, t: str) -> bool:
    if t.lower() in DS_OPTIMIZERS or t in TORCH_OPTIMIZERS:
        return True
    return t.lower() in REMOVED_OPTIMIZERS and _older(_ds_version(c), REMOVED_AFTER)


@rule(
    "KB070",
    "optimizer-type-unknown",
    "error",
    None,
    views=("deepspeed",),
    summary="`optimizer.type` that is neither one of DeepSpeed's optimizers (any case) nor a torch.optim class "
    "(exact case): `sgd`, `FusedAdam`, `AdamW8bit`, `OneBitAdam` (removed after 0.19.6)",
    effect='AssertionError "... is not a supported DeepSpeed Optimizer" at deepspeed.initialize (the engine\'s '
    "_do_sanity_check; the HF Trainer passes a DummyOptim, so DeepSpeed builds it there too)",
    bad=[
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "sgd", "params": {"lr": 0.1}}},
            "lowercase torch name",
        ),
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-4}}},
            "1-bit Adam",
        ),
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "FusedAdam", "params": {"lr": 1e-4}}},
            "class name",
        ),
    ],
    ok=[
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}, "torch's name"
        ),
        Case({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "ADAMW", "params": {"lr": 1e-4}}}, "any case"),
        Case({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Lion", "params": {"lr": 1e-4}}}, "Lion"),
    ],
    validity=True,
)
def kb070(c: Ctx) -> None:
    t, _ = _section(c, "optimizer")
    if not isinstance(t, str) or _optimizer_known(c, t):
        return
    ver = _ds_version(c)
    names = sorted(set(DS_OPTIMIZERS) | set(TORCH_OPTIMIZERS))
    if t.lower() in REMOVED_OPTIMIZERS:
        why = f"`{t}` was one of DeepSpeed's 1-bit optimizers, which DeepSpeed {REMOVED_AFTER} still had and {ver} does not"
        why_zh = f"`{t}` 是 DeepSpeed 的 1-bit 优化器，DeepSpeed {REMOVED_AFTER} 还有，{ver} 已经没有了"
        fix = f'use `"Adam"` / `"AdamW"` (DeepSpeed\'s fused Adam), or deepspeed<={REMOVED_AFTER} for 1-bit Adam'
        fix_zh = (
            f'改用 `"Adam"` / `"AdamW"`（DeepSpeed 的 fused Adam）；确实要 1-bit Adam 就用 deepspeed<={REMOVED_AFTER}'
        )
    else:
        near = _near(t, names)
        why = (
            f"`{t}` is not one of DeepSpeed {ver}'s optimizers (matched in any case, {at('ds.lower')}) nor a torch.optim "
            f"class (matched in exact case, {at('ds.opt_known')})"
        )
        why_zh = (
            f"`{t}` 既不是 DeepSpeed {ver} 自带的优化器（不区分大小写，{at('ds.lower')}），也不是 torch.optim 里的类"
            f"（区分大小写，{at('ds.opt_known')}）"
        )
        fix = (
            f"did you mean {_ticks(near)}?"
            if near
            else f"use one of {_ticks(list(DS_OPTIMIZERS))} or a torch.optim class name"
        )
        fix_zh = (
            f"是不是想写 {_ticks(near, '、')}？"
            if near
            else f"改用 {_ticks(list(DS_OPTIMIZERS), '、')} 之一或 torch.optim 的类名"
        )
    c.add(
        c.prefix + "optimizer.type",
        f"{why}: deepspeed.initialize raises AssertionError ({t} is not a supported DeepSpeed Optimizer, "
        f"{at('ds.opt_assert')}).",
        fix,
        f"{why_zh}：deepspeed.initialize 会报 AssertionError（{t} is not a supported DeepSpeed Optimizer，"
        f"{at('ds.opt_assert')}）。",
        fix_zh,
    )


def _zero_untested(t: str) -> bool:
    if t.lower() in DS_OPTIMIZERS:
        return t.lower() in ZERO_UNTESTED_DS
    return t in TORCH_OPTIMIZERS and t not in ZERO_TESTED_TORCH


@rule(
    "KB071",
    "zero-untested-optimizer",
    "error",
    None,
    views=("deepspeed",),
    summary="ZeRO (stage 1-3) with an `optimizer.type` ZeRO has not tested (`SGD`, `RMSprop`, `Lamb`, `MuAdam`, ...) "
    "and no `zero_allow_untested_optimizer: true`",
    effect='AssertionError "You are using an untested ZeRO Optimizer" at deepspeed.initialize; the HF Trainer adds '
    "the switch only when the config has no `optimizer` section",
    bad=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "zero_optimization": {"stage": 2},
                "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
            },
            "SGD at stage 2",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  zero_optimization: {stage: 3}\n  optimizer:\n    type: RMSprop\n    params: {lr: auto}\n",
            "under the HF Trainer",
        ),
    ],
    ok=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "zero_optimization": {"stage": 2},
                "zero_allow_untested_optimizer": True,
                "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
            },
            "allowed",
        ),
        Case({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}, "no ZeRO"),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "zero_optimization": {"stage": 3},
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
            },
            "a tested one",
        ),
    ],
    validity=True,
)
def kb071(c: Ctx) -> None:
    t, _ = _section(c, "optimizer")
    if not isinstance(t, str) or c.stage < 1 or not _optimizer_known(c, t) or not _zero_untested(t):
        return
    if c.data.get("zero_allow_untested_optimizer"):
        return  # tested for truth as it is (a string "false" passes too: KB041)
    c.add(
        c.prefix + "optimizer.type",
        f"ZeRO stage {c.stage} accepts only the optimizer classes it lists as tested ({at('ds.zero_list')}, an exact "
        f"type test at {at('ds.zero_type')}); `{t}` builds another one, so deepspeed.initialize raises AssertionError "
        f"(You are using an untested ZeRO Optimizer, {at('ds.untested_msg')}). The HF Trainer sets "
        f"`zero_allow_untested_optimizer` itself only when the config has no `optimizer` section ({at('hf.untested')}).",
        'add `"zero_allow_untested_optimizer": true` at the top level (ZeRO then runs it untested), or use Adam / AdamW',
        f"ZeRO stage {c.stage} 只接受它列为已测试的优化器类（{at('ds.zero_list')}，{at('ds.zero_type')} 按类型精确比较）；"
        f"`{t}` 建出来的是别的类，所以 deepspeed.initialize 会报 AssertionError（You are using an untested ZeRO Optimizer，"
        f"{at('ds.untested_msg')}）。HF Trainer 只有在配置里没有 `optimizer` 段时才会自己打开 "
        f"`zero_allow_untested_optimizer`（{at('hf.untested')}）。",
        '在顶层加 `"zero_allow_untested_optimizer": true`（ZeRO 会照常运行这个未测试的优化器），或者改用 Adam / AdamW',
    )


@rule(
    "KB072",
    "offload-replaces-trainer-optim",
    "warning",
    "offload-optimizer-silently-replaced",
    views=("training_args",),
    summary="TrainingArguments `optim` other than torch AdamW with an inline DeepSpeed config that offloads the "
    "optimizer and has no `optimizer` section",
    effect="accelerate replaces the Trainer's optimizer with a DeepSpeed CPU optimizer: CPU Adam (L2 weight decay) for "
    "`sgd`, `adafactor`, 8-bit AdamW ...; `adagrad` becomes DeepSpeedCPUAdagrad, which deepspeed.initialize then refuses",
    bad=[
        Case(
            "output_dir: out\noptim: sgd\ndeepspeed:\n  zero_optimization:\n    stage: 2\n"
            "    offload_optimizer: {device: cpu}\n",
            "sgd",
        ),
        Case(
            "output_dir: out\noptim: adagrad\ndeepspeed:\n  zero_optimization:\n    stage: 3\n"
            "    offload_optimizer: {device: nvme, nvme_path: /nvme}\n",
            "adagrad",
        ),
    ],
    ok=[
        Case(
            "output_dir: out\noptim: adamw_torch\ndeepspeed:\n  zero_optimization:\n    stage: 2\n"
            "    offload_optimizer: {device: cpu}\n",
            "torch AdamW",
        ),
        Case(
            "output_dir: out\noptim: sgd\ndeepspeed:\n  zero_force_ds_cpu_optimizer: false\n  zero_optimization:\n"
            "    stage: 2\n    offload_optimizer: {device: cpu}\n",
            "swap turned off",
        ),
        Case(
            "output_dir: out\noptim: sgd\ndeepspeed:\n  optimizer: {type: AdamW, params: {lr: auto}}\n"
            "  zero_optimization:\n    stage: 2\n    offload_optimizer: {device: cpu}\n",
            "the config's optimizer is used (the Trainer's optim is not)",
        ),
    ],
)
def kb072(c: Ctx) -> None:
    optim, ds = c.data.get("optim"), deepspeed_setting(c.cfg)
    if not isinstance(optim, str) or optim in HF_TORCH_ADAMW or not isinstance(ds, dict) or "optimizer" in ds:
        return
    z = ds.get("zero_optimization")
    off = z.get("offload_optimizer") if isinstance(z, dict) else None
    if not isinstance(off, dict) or off.get("device") not in ("cpu", "nvme"):
        return
    if not ds.get("zero_force_ds_cpu_optimizer", True):
        return  # accelerate tests the raw value for truth (a string "false" still swaps)
    if optim == "adagrad":
        becomes = (
            f"DeepSpeedCPUAdagrad ({at('acc.cpu_adagrad')}), and deepspeed.initialize then raises "
            f"ZeRORuntimeException: with offload it takes only DeepSpeedCPUAdam / DeepSpeedCPULion ({at('ds.force')})"
        )
        becomes_zh = (
            f"DeepSpeedCPUAdagrad（{at('acc.cpu_adagrad')}），随后 deepspeed.initialize 报 ZeRORuntimeException："
            f"开了 offload 它只接受 DeepSpeedCPUAdam / DeepSpeedCPULion（{at('ds.force')}）"
        )
    else:
        becomes = (
            f"DeepSpeedCPUAdam in Adam mode, with L2-style weight decay ({at('acc.cpu_adam')}, {at('acc.adam_mode')}; "
            "a 32-bit bitsandbytes Lion becomes DeepSpeedCPULion): the run trains, with another optimizer than "
            f"`optim: {optim}`"
        )
        becomes_zh = (
            f"Adam 模式的 DeepSpeedCPUAdam，weight decay 是 L2 式的（{at('acc.cpu_adam')}、{at('acc.adam_mode')}；"
            f"32-bit 的 bitsandbytes Lion 会换成 DeepSpeedCPULion）：训练照跑，但用的已经不是 `optim: {optim}`"
        )
    c.add(
        "optim",
        f"The DeepSpeed config offloads the optimizer and has no `optimizer` section, so the Trainer builds "
        f"`optim: {optim}` ({at('hf.create_opt')}) and accelerate swaps it before deepspeed.initialize "
        f"({at('acc.swap_if')}, {at('acc.swap')}) for {becomes}.",
        'put the optimizer in the DeepSpeed config (`"optimizer": {"type": ...}`), use `optim: adamw_torch`, or set '
        '`"zero_force_ds_cpu_optimizer": false` to keep this optimizer (slow on CPU)',
        f"DeepSpeed 配置开了 optimizer offload 又没有 `optimizer` 段，所以 Trainer 按 `optim: {optim}` 建优化器"
        f"（{at('hf.create_opt')}），accelerate 在 deepspeed.initialize 之前把它换掉（{at('acc.swap_if')}、"
        f"{at('acc.swap')}），换成 {becomes_zh}。",
        '把优化器写进 DeepSpeed 配置（`"optimizer": {"type": ...}`），或者用 `optim: adamw_torch`，或者设 '
        '`"zero_force_ds_cpu_optimizer": false` 保留这个优化器（在 CPU 上会很慢）',
    )


@rule(
    "KB073",
    "scheduler-type-unknown",
    "error",
    None,
    views=("deepspeed",),
    summary="`scheduler.type` that is neither a DeepSpeed LR scheduler nor a torch.optim.lr_scheduler class "
    "(both matched in exact case: `warmuplr`, `Cosine`, `WarmupCosine`)",
    effect='AssertionError "DeepSpeed does not recognize LR scheduler ..." at deepspeed.initialize',
    bad=[
        Case({"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "warmuplr", "params": {}}}, "lowercase"),
        Case({"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "Cosine", "params": {}}}, "HF's name"),
    ],
    ok=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10}},
            },
            "DeepSpeed's",
        ),
        Case(
            {"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "CosineAnnealingLR", "params": {"T_max": 10}}},
            "torch's",
        ),
    ],
    validity=True,
)
def kb073(c: Ctx) -> None:
    t, _ = _section(c, "scheduler")
    ds = ds_schedulers(c.reg)
    if not isinstance(t, str) or t in ds or t in TORCH_SCHEDULERS:
        return
    near = _near(t, sorted(ds) + list(TORCH_SCHEDULERS))
    c.add(
        c.prefix + "scheduler.type",
        f"`{t}` is not a DeepSpeed LR scheduler ({_ticks(sorted(ds))}, {at('ds.sched_ds')}) nor a class of "
        f"torch.optim.lr_scheduler; names are matched in exact case, so deepspeed.initialize raises AssertionError "
        f"(DeepSpeed does not recognize LR scheduler {t}, {at('ds.sched_assert')}).",
        f"did you mean {_ticks(near)}?" if near else f"use one of {_ticks(sorted(ds))}",
        f"`{t}` 既不是 DeepSpeed 的学习率调度器（{_ticks(sorted(ds), '、')}，{at('ds.sched_ds')}），也不是 "
        f"torch.optim.lr_scheduler 里的类；名字区分大小写，所以 deepspeed.initialize 会报 AssertionError"
        f"（DeepSpeed does not recognize LR scheduler {t}，{at('ds.sched_assert')}）。",
        f"是不是想写 {_ticks(near, '、')}？" if near else f"改用 {_ticks(sorted(ds), '、')} 之一",
    )


@rule(
    "KB074",
    "scheduler-param-unknown",
    "error",
    None,
    views=("deepspeed",),
    summary="a `scheduler.params` key the DeepSpeed scheduler's constructor does not take (`WarmupLR` with "
    "`total_num_steps`, `WarmupCosineLR` with `warmup_max_lr`); torch schedulers' params are not checked",
    effect="TypeError (unexpected keyword argument) at deepspeed.initialize: the params are passed as keywords",
    bad=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10, "total_num_steps": 100}},
            },
            "WarmupLR has no total",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  scheduler:\n    type: WarmupCosineLR\n"
            "    params: {warmup_max_lr: auto, warmup_num_steps: auto, total_num_steps: auto}\n",
            "WarmupCosineLR takes ratios, not lrs",
        ),
    ],
    ok=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "scheduler": {
                    "type": "WarmupDecayLR",
                    "params": {"warmup_num_steps": 10, "total_num_steps": 100, "warmup_max_lr": 1e-4},
                },
            },
            "WarmupDecayLR takes all three",
        ),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100, "cos_min_ratio": 0.1}},
            },
            "WarmupCosineLR's own",
        ),
    ],
    validity=True,
)
def kb074(c: Ctx) -> None:
    t, params = _section(c, "scheduler")
    takes = ds_schedulers(c.reg).get(t) if isinstance(t, str) else None
    if takes is None:
        return
    for key in params:
        if key in takes:
            continue
        key = str(key)
        near = _near(key, sorted(takes))
        c.add(
            f"{c.prefix}scheduler.params.{key}",
            f"{t}.__init__ takes {_ticks(sorted(takes))}, not `{key}`; DeepSpeed passes `scheduler.params` as keywords "
            f"({at('ds.sched_call')}), so deepspeed.initialize raises TypeError (unexpected keyword argument '{key}').",
            f"did you mean {_ticks(near)}?"
            if near
            else f"{t} has no such setting: check what it should do in {t}'s own keys",
            f"{t}.__init__ 的参数是 {_ticks(sorted(takes), '、')}，没有 `{key}`；DeepSpeed 把 `scheduler.params` 当关键字参数传进去"
            f"（{at('ds.sched_call')}），所以 deepspeed.initialize 会报 TypeError（unexpected keyword argument '{key}'）。",
            f"是不是想写 {_ticks(near, '、')}？" if near else f"{t} 没有这个设置：对照 {t} 自己的参数看它该怎么写",
        )


# ---------------------------------------------------------------- the HF Trainer / accelerate reading the same JSON


def _quoted_int(v: Any) -> int | None:
    return int(v.strip()) if isinstance(v, str) and v.strip().isdigit() else None


@rule(
    "KB075",
    "zero-stage-string",
    "warning",
    None,
    views=("deepspeed",),
    summary='`zero_optimization.stage` written as a string (`"3"`)',
    effect="DeepSpeed converts it and runs that stage; transformers and accelerate compare the string with 3: no "
    "zero.Init, accelerate's zero3_init_flag forced off, a ZeRO-3 model saved as its empty partitions, and "
    "`zero_stage < 2` raising TypeError in accelerate's no_sync",
    bad=[
        Case({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": "3"}}, "stage 3"),
        Case("output_dir: out\ndeepspeed:\n  zero_optimization: {stage: '2'}\n", "stage 2 in TrainingArguments"),
    ],
    ok=[
        Case({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}, "an int"),
        Case({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": "auto"}}, '"auto" is KB007'),
    ],
)
def kb075(c: Ctx) -> None:
    n = _quoted_int(c.zero.get("stage"))
    if n is None:
        return
    v = c.zero["stage"]
    if n == 3:
        tail = (
            f"; so at stage 3 from_pretrained loads the whole model on every rank without zero.Init "
            f"({at('hf.zero3_init')}), accelerate turns `zero3_init_flag` off with a warning ({at('acc.init_flag')}), "
            f"and accelerator.get_state_dict / Trainer.save_model take the model for unsharded ({at('acc.state_dict')}, "
            f"{at('hf.save')}) and save ZeRO-3's empty parameter partitions instead of the weights"
        )
        tail_zh = (
            f"；所以在 stage 3 下，from_pretrained 不走 zero.Init，每个 rank 都加载完整模型（{at('hf.zero3_init')}），"
            f"accelerate 会打 warning 并关掉 `zero3_init_flag`（{at('acc.init_flag')}），accelerator.get_state_dict / "
            f"Trainer.save_model 把模型当成没切分（{at('acc.state_dict')}、{at('hf.save')}），保存的是 ZeRO-3 切分后的"
            "空参数，而不是权重"
        )
    else:
        tail, tail_zh = "", ""
    c.add(
        c.prefix + "zero_optimization.stage",
        f"`zero_optimization.stage` = {v!r} is a string: DeepSpeed's pydantic model converts it and runs stage {n}, but "
        f"transformers and accelerate read the raw value ({at('acc.stage')}) and compare it with ints: is_zero3() is "
        f"false ({at('acc.is_zero3')}), accelerate keeps {v!r} as its zero_stage ({at('acc.plugin_stage')}) and "
        f"`zero_stage < 2` in Accelerator.no_sync raises TypeError ({at('acc.no_sync')}; accelerator.accumulate calls it "
        f"between optimizer steps with more than one process){tail}.",
        f"write {n} without quotes",
        f"`zero_optimization.stage` = {v!r} 是字符串：DeepSpeed 的 pydantic 模型会把它转成整数，按 stage {n} 运行；"
        f"但 transformers 和 accelerate 读的是原始值（{at('acc.stage')}），拿它和整数比较：is_zero3() 为假"
        f"（{at('acc.is_zero3')}），accelerate 把 {v!r} 原样存成 zero_stage（{at('acc.plugin_stage')}），"
        f"Accelerator.no_sync 里的 `zero_stage < 2` 会报 TypeError（{at('acc.no_sync')}；多进程时 "
        f"accelerator.accumulate 在两次 optimizer step 之间会调用它）{tail_zh}。",
        f"去掉引号，写 {n}",
    )


@rule(
    "KB076",
    "precision-switch-string",
    "warning",
    "hf-ds-config-value-mismatch",
    views=("deepspeed",),
    summary='`fp16.enabled` / `bf16.enabled` written as a string (`"true"`, `"false"`) in a DeepSpeed JSON file '
    "(inside a TrainingArguments file it is KB046)",
    effect="plain DeepSpeed converts it; the HF Trainer compares it with its own bool and raises ValueError "
    '(mismatch) at Trainer.train; accelerate reports the raw value for truth, so `"false"` counts as on',
    bad=[
        Case({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "true"}}, '"true"'),
        Case({"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": "false"}, "bf16": {"enabled": True}}, '"false"'),
    ],
    ok=[
        Case({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}}, "a JSON bool"),
        Case({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "auto"}}, '"auto" (KB007)'),
        Case("output_dir: out\ndeepspeed:\n  bf16: {enabled: 'true'}\n", "in TrainingArguments: KB046"),
    ],
)
def kb076(c: Ctx) -> None:
    if c.hf or c.prefix:
        return  # a TrainingArguments file's own mapping: KB046 says what the Trainer does with it
    for sec in ("fp16", "bf16"):
        blk = c.data.get(sec)
        v = blk.get("enabled") if isinstance(blk, dict) else None
        if not isinstance(v, str) or v == "auto":
            continue
        on = v.strip().lower() in ("true", "1", "yes", "on", "t", "y")
        c.add(
            f"{sec}.enabled",
            f"`{sec}.enabled` = {v!r} is a string. Plain DeepSpeed converts it (to {on}). The HF Trainer, when it reads "
            f"this file, compares it with its own bool ({at('hf.fill_' + sec)}): a string never equals one, so "
            f"Trainer.train raises ValueError (config values that mismatch TrainingArguments, {at('hf.mismatch')}). "
            f"accelerate tests the raw value for truth for its mixed_precision ({at('acc.mixed')}), where any non-empty "
            "string is on.",
            'write true or false without quotes (or "auto" when the HF Trainer reads the file)',
            f"`{sec}.enabled` = {v!r} 是字符串。直接用 DeepSpeed 会被转换（成 {on}）。HF Trainer 读这个文件时会拿它和自己的 bool "
            f"比较（{at('hf.fill_' + sec)}）：字符串永远不等于 bool，所以 Trainer.train 会报 ValueError（mismatch "
            f"TrainingArguments，{at('hf.mismatch')}）。accelerate 判断 mixed_precision 时只看原始值的真假"
            f"（{at('acc.mixed')}），非空字符串一律算开启。",
            '去掉引号写 true 或 false（HF Trainer 读这个文件时也可以写 "auto"）',
        )


# ---------------------------------------------------------------- accelerate on several machines


def _machines(c: Ctx) -> int:
    if str(c.data.get("compute_environment") or "LOCAL_MACHINE") != "LOCAL_MACHINE":
        return 0  # SageMaker: the YAML's machine settings go to SageMaker, not to this launcher
    return _int(c.data.get("num_machines")) or 1


def _ds_launcher(c: Ctx) -> str:
    dsc = c.data.get("deepspeed_config")
    v = dsc.get("deepspeed_multinode_launcher") if isinstance(dsc, dict) else None
    return str(v) if v else "pdsh"  # accelerate's default (utils/launch.py:450)


def _dtype(c: Ctx) -> str:
    return str(c.data.get("distributed_type") or "NO").upper()


ACC_DS = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 16\n"


@rule(
    "KB077",
    "accelerate-multinode-no-hostfile",
    "warning",
    "multi-node-hostfile-ssh",
    views=("accelerate",),
    summary="accelerate YAML for DeepSpeed on several machines (`num_machines` > 1) with the pdsh / MPI / slurm / "
    "nossh launcher and no `deepspeed_hostfile`",
    effect="accelerate runs `deepspeed --hostfile None`; DeepSpeed's runner finds no such file, warns and trains on "
    "this machine only",
    bad=[
        Case(
            ACC_DS + "num_machines: 2\nmain_process_ip: 10.0.0.1\ndeepspeed_config:\n  zero_stage: 2\n",
            "default launcher",
        ),
        Case(
            ACC_DS + "num_machines: 2\ndeepspeed_config:\n  zero_stage: 3\n  deepspeed_multinode_launcher: nossh\n",
            "nossh",
        ),
    ],
    ok=[
        Case(
            ACC_DS + "num_machines: 2\ndeepspeed_config:\n  zero_stage: 2\n  deepspeed_hostfile: /job/hostfile\n",
            "hostfile given",
        ),
        Case(
            ACC_DS + "num_machines: 2\nmain_process_ip: 10.0.0.1\nmain_process_port: 29500\ndeepspeed_config:\n"
            "  zero_stage: 2\n  deepspeed_multinode_launcher: standard\n",
            "standard launcher: torchrun on every machine",
        ),
        Case(ACC_DS + "num_machines: 1\ndeepspeed_config:\n  zero_stage: 2\n", "one machine"),
    ],
)
def kb077(c: Ctx) -> None:
    if _dtype(c) != "DEEPSPEED" or _machines(c) <= 1 or _ds_launcher(c) == "standard":
        return
    dsc = c.data.get("deepspeed_config")
    if isinstance(dsc, dict) and dsc.get("deepspeed_hostfile"):
        return
    n, launcher = _machines(c), _ds_launcher(c)
    written = isinstance(dsc, dict) and bool(dsc.get("deepspeed_multinode_launcher"))
    # the finding sits on what decides it: the missing hostfile of a launcher the file names, or the launcher the
    # file leaves unset (accelerate then picks pdsh, which needs the hostfile)
    path = "deepspeed_config.deepspeed_hostfile" if written else "deepspeed_config.deepspeed_multinode_launcher"
    unset = (
        ""
        if written
        else f"`deepspeed_multinode_launcher` is not set, so accelerate uses `{launcher}` ({at('acc.launcher')}). "
    )
    unset_zh = (
        ""
        if written
        else f"没有设 `deepspeed_multinode_launcher`，accelerate 就用 `{launcher}`（{at('acc.launcher')}）。"
    )
    c.add(
        path,
        f"{unset}With `num_machines: {n}` and the `{launcher}` launcher, accelerate starts DeepSpeed's runner from this machine "
        f"with `--hostfile {{deepspeed_hostfile}}` ({at('acc.hostfile')}), and there is no `deepspeed_hostfile`: the "
        f'runner gets `--hostfile None`, finds no such file, logs "Unable to find hostfile, will proceed with training '
        f'with local resources only" ({at("ds.no_hostfile")}) and launches on this machine alone '
        f"({at('ds.local_only')}); the other machines never join.",
        "add `deepspeed_hostfile: /path/to/hostfile` (lines `host slots=N`) under `deepspeed_config`, or pass "
        "--deepspeed_hostfile; or use `deepspeed_multinode_launcher: standard` and start accelerate on every machine",
        f"{unset_zh}`num_machines: {n}` 加上 `{launcher}` launcher 时，accelerate 在这台机器上用 `--hostfile {{deepspeed_hostfile}}` "
        f"启动 DeepSpeed 的 runner（{at('acc.hostfile')}），而这里没有 `deepspeed_hostfile`：runner 拿到的是 "
        f'`--hostfile None`，找不到这个文件，打一句 "Unable to find hostfile, will proceed with training with local '
        f'resources only"（{at("ds.no_hostfile")}），然后只在本机启动（{at("ds.local_only")}），其他机器根本不会加入。',
        "在 `deepspeed_config` 下加 `deepspeed_hostfile: /path/to/hostfile`（每行 `host slots=N`），或者命令行传 "
        "--deepspeed_hostfile；或者改用 `deepspeed_multinode_launcher: standard`，在每台机器上各启动一次 accelerate",
    )


@rule(
    "KB078",
    "accelerate-multinode-no-main-ip",
    "warning",
    "accelerate-multi-node-machine-rank",
    views=("accelerate",),
    summary="accelerate YAML on several machines launched through torchrun (multi-GPU, FSDP, Megatron-LM, DeepSpeed "
    "with the `standard` launcher) without `main_process_ip`",
    effect='torchrun is told to meet at host "None" (`--rdzv_endpoint None:29500`, or `--master_addr None`): the '
    "machines cannot rendezvous",
    bad=[
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 2\n"
            "machine_rank: 0\n",
            "multi-GPU",
        ),
        Case(
            ACC_DS + "num_machines: 2\ndeepspeed_config:\n  zero_stage: 2\n  deepspeed_multinode_launcher: standard\n",
            "DeepSpeed, standard launcher",
        ),
    ],
    ok=[
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 2\n"
            "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n",
            "IP given",
        ),
        Case(
            ACC_DS + "num_machines: 2\ndeepspeed_config:\n  zero_stage: 2\n  deepspeed_hostfile: hosts\n",
            "pdsh: hostfile",
        ),
    ],
)
def kb078(c: Ctx) -> None:
    n, dt = _machines(c), _dtype(c)
    if n <= 1 or c.data.get("main_process_ip"):
        return
    if not (dt in TORCHRUN_TYPES or (dt == "DEEPSPEED" and _ds_launcher(c) == "standard")):
        return
    same = c.data.get("same_network") is True
    port = c.data.get("main_process_port") or 29500
    ds = dt == "DEEPSPEED"
    where = at("acc.master_ds" if ds else "acc.master_gpu") if same else at("acc.rdzv_ds" if ds else "acc.rdzv_gpu")
    told = "--master_addr None" if same else f"--rdzv_endpoint None:{port}"
    c.add(
        "num_machines",
        f"With `num_machines: {n}` accelerate starts torchrun on every machine and tells it where machine 0 is from "
        f'`main_process_ip`, which is not set: torchrun gets `{told}` ({where}), a host named "None", and the '
        "machines never meet (the job hangs or fails to connect at start).",
        "set `main_process_ip` to an address of machine 0 that the others can reach (and `main_process_port`), and "
        "give every machine its own `machine_rank`",
        f"`num_machines: {n}` 时 accelerate 在每台机器上启动 torchrun，并用 `main_process_ip` 告诉它 0 号机器在哪，而这里没设："
        f'torchrun 拿到的是 `{told}`（{where}），也就是一台叫 "None" 的主机，各台机器永远连不到一起（启动时卡住或连接失败）。',
        "把 `main_process_ip` 设成其他机器能访问到的 0 号机器地址（再设 `main_process_port`），每台机器的 `machine_rank` 各不相同",
    )


@rule(
    "KB079",
    "accelerate-multinode-simple-launcher",
    "error",
    "accelerate-multi-node-machine-rank",
    views=("accelerate",),
    summary="accelerate YAML with `distributed_type` `MULTI_CPU` / `NO` and `num_machines` > 1 but no "
    "`main_process_ip` or `main_process_port`",
    effect='AssertionError "When using multiple machines, you need to specify the main process IP" (or port) '
    "from `accelerate launch`",
    bad=[
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\n",
            "no IP",
        ),
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\n"
            "main_process_ip: 10.0.0.1\n",
            "no port",
        ),
    ],
    ok=[
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\n"
            "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n",
            "both",
        ),
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 1\n",
            "one machine",
        ),
    ],
    validity=True,
)
def kb079(c: Ctx) -> None:
    if _machines(c) <= 1 or _dtype(c) not in SIMPLE_TYPES:
        return
    for key, cite in (("main_process_ip", "acc.assert_ip"), ("main_process_port", "acc.assert_port")):
        if c.data.get(key) is not None:
            continue
        what = "IP" if key == "main_process_ip" else "port"
        c.add(
            "num_machines",
            f"With `num_machines` > 1 and `distributed_type: {_dtype(c)}`, `accelerate launch` uses its simple launcher, "
            f"which asserts that `{key}` is set: AssertionError (When using multiple machines, you need to specify the "
            f"main process {what}., {at(cite)}).",
            f"set `{key}` (machine 0's reachable {'address' if what == 'IP' else 'port'})",
            f"`num_machines` 大于 1、`distributed_type: {_dtype(c)}` 时，`accelerate launch` 走 simple launcher，它要求必须设 "
            f"`{key}`：否则报 AssertionError（When using multiple machines, you need to specify the main process {what}.，"
            f"{at(cite)}）。",
            f"设置 `{key}`（0 号机器可访问的{'地址' if what == 'IP' else '端口'}）",
        )
        return


# accelerate before 0.29.0 builds the DeepSpeed runner's command without --master_addr (accelerate 0.28.0
# utils/launch.py:281-300: --hostfile, --launcher, --num_gpus / filters, then --master_port); 0.29.0 added
# `if main_process_ip: cmd.extend(["--master_addr", ...])` (0.29.0 and 0.29.3 utils/launch.py:309-310; PR 2495,
# DeepSpeed issue 5136). Without it the runner asks the hostfile's first host for `hostname -I` and takes its first address.
ACC_MASTER_ADDR_SINCE = "0.29.0"
OLD_ACC: dict[str, tuple[str, str]] = {
    "acc.ds_cmd_028": (
        "accelerate 0.28.0 utils/launch.py:281",
        "if num_machines > 1 and args.deepspeed_multinode_launcher != DEEPSPEED_MULTINODE_LAUNCHERS[1]:",
    ),
    "acc.master_addr_029": (
        "accelerate 0.29.0 utils/launch.py:310",
        'cmd.extend(["--master_addr", str(main_process_ip)])',
    ),
}
CODE["ds.master_from_host"] = ("deepspeed/launcher/runner.py:501", 'ssh_check_cmd += f" {first_host} hostname -I"')


def _acc_version(c: Ctx) -> str | None:
    return c.reg.versions.get("accelerate")


@rule(
    "KB100",
    "accelerate-old-pdsh-ignores-main-process-ip",
    "warning",
    "multi-node-hostfile-ssh",
    views=("accelerate",),
    summary="accelerate before 0.29.0, DeepSpeed on several machines through DeepSpeed's runner (pdsh / MPI / slurm "
    "launcher) and a `main_process_ip`",
    effect="the IP is not passed on: DeepSpeed's runner takes the first address `hostname -I` prints on the "
    "hostfile's first host, which may be an interface the other machines cannot reach",
    bad=[
        Case(
            ACC_DS + "num_machines: 2\nmain_process_ip: 10.0.0.1\nmain_process_port: 29500\ndeepspeed_config:\n"
            "  zero_stage: 3\n  deepspeed_hostfile: /job/hostfile\n  deepspeed_multinode_launcher: pdsh\n",
            "accelerate 0.28.0, pdsh",
            versions={"accelerate": "0.28.0"},
        ),
    ],
    ok=[
        Case(
            ACC_DS + "num_machines: 2\nmain_process_ip: 10.0.0.1\nmain_process_port: 29500\ndeepspeed_config:\n"
            "  zero_stage: 3\n  deepspeed_hostfile: /job/hostfile\n  deepspeed_multinode_launcher: pdsh\n",
            "accelerate 0.29.0 passes --master_addr",
            versions={"accelerate": "0.29.0"},
        ),
        Case(
            ACC_DS + "num_machines: 2\nmain_process_ip: 10.0.0.1\nmain_process_port: 29500\ndeepspeed_config:\n"
            "  zero_stage: 3\n  deepspeed_multinode_launcher: standard\n",
            "standard launcher: torchrun gets the IP",
            versions={"accelerate": "0.28.0"},
        ),
        Case(
            ACC_DS + "num_machines: 2\nmain_process_ip: 10.0.0.1\ndeepspeed_config:\n  zero_stage: 3\n"
            "  deepspeed_hostfile: /job/hostfile\n",
            "release not given: judged at the newest, which passes it",
        ),
    ],
)
def kb100(c: Ctx) -> None:
    ver = _acc_version(c)
    ip = c.data.get("main_process_ip")
    if not ver or not ip or _machines(c) <= 1 or _dtype(c) != "DEEPSPEED" or _ds_launcher(c) == "standard":
        return
    if not _older(ver, "0.28.99"):
        return
    launcher = _ds_launcher(c)
    c.add(
        "main_process_ip",
        f"accelerate before {ACC_MASTER_ADDR_SINCE} (here {ver}) hands a {launcher} launch to DeepSpeed's runner without "
        "`--master_addr` "
        f"({OLD_ACC['acc.ds_cmd_028'][0]}-300 builds the command; {OLD_ACC['acc.master_addr_029'][0]} adds it from "
        f"{ACC_MASTER_ADDR_SINCE}): `main_process_ip: {ip}` is not used, and the runner takes the first address "
        f"`hostname -I` prints on the hostfile's first host ({at('ds.master_from_host')}), which can be an "
        "interface the other machines cannot reach.",
        f"upgrade accelerate to {ACC_MASTER_ADDR_SINCE} or later; or launch with `deepspeed --hostfile ... "
        f"--master_addr {ip}` yourself, or use `deepspeed_multinode_launcher: standard` and start accelerate on every "
        "machine",
        f"{ACC_MASTER_ADDR_SINCE} 之前的 accelerate（这里是 {ver}）把 {launcher} 启动交给 DeepSpeed 的 runner 时不带 `--master_addr`"
        f"（{OLD_ACC['acc.ds_cmd_028'][0]}-300 拼命令；{ACC_MASTER_ADDR_SINCE} 起才加上，"
        f"{OLD_ACC['acc.master_addr_029'][0]}）：`main_process_ip: {ip}` 不会生效，runner 会在 hostfile 第一台机器上执行 "
        f"`hostname -I`，取第一个地址（{at('ds.master_from_host')}），这可能是其他机器连不上的网卡。",
        f"把 accelerate 升级到 {ACC_MASTER_ADDR_SINCE} 或更新；或者自己用 `deepspeed --hostfile ... --master_addr {ip}` "
        "启动，或改用 `deepspeed_multinode_launcher: standard`，在每台机器上各启动一次 accelerate",
    )


# ---------------------------------------------------------------- the front ends' own checks

# check -> ({release: "file:line"}, the text on that line); the oracle compares them with an installed release
FRONT: dict[str, tuple[dict[str, str], str]] = {
    "lf.finetuning_type": (
        {"0.9.5": "hparams/finetuning_args.py:576", "0.9.4": "hparams/finetuning_args.py:542"},
        '"Invalid fine-tuning method."',
    ),
    "lf.stage": ({"0.9.5": "train/tuner.py:127", "0.9.4": "train/tuner.py:98"}, "Unknown task"),
    "lf.adapter": ({"0.9.5": "hparams/parser.py:186", "0.9.4": "hparams/parser.py:123"}, "Adapter is only valid"),
    "lf.quantization": (
        {"0.9.5": "hparams/parser.py:190", "0.9.4": "hparams/parser.py:127"},
        "Quantization is only compatible with the LoRA or OFT method.",
    ),
    "lf.loraplus_lr_ratio": (
        {"0.9.5": "hparams/finetuning_args.py:606", "0.9.4": "hparams/finetuning_args.py:572"},
        "`loraplus_lr_ratio` is only valid for LoRA training.",
    ),
    "lf.use_rslora": (
        {"0.9.5": "hparams/finetuning_args.py:609", "0.9.4": "hparams/finetuning_args.py:575"},
        "`use_rslora` is only valid for LoRA training.",
    ),
    "lf.use_dora": (
        {"0.9.5": "hparams/finetuning_args.py:612", "0.9.4": "hparams/finetuning_args.py:578"},
        "`use_dora` is only valid for LoRA training.",
    ),
    "lf.pissa_init": (
        {"0.9.5": "hparams/finetuning_args.py:615", "0.9.4": "hparams/finetuning_args.py:581"},
        "`pissa_init` is only valid for LoRA training.",
    ),
    "lf.max_steps": (
        {"0.9.5": "hparams/parser.py:357", "0.9.4": "hparams/parser.py:304"},
        "Please specify `max_steps` in streaming mode.",
    ),
    "lf.max_samples": (
        {"0.9.5": "hparams/data_args.py:180", "0.9.4": "hparams/data_args.py:174"},
        "`max_samples` is incompatible with `streaming`.",
    ),
    "lf.streaming_val": (
        {"0.9.5": "hparams/data_args.py:177", "0.9.4": "hparams/data_args.py:171"},
        "Streaming mode should have an integer val size.",
    ),
    "lf.predict_with_generate": (
        {"0.9.5": "hparams/parser.py:318", "0.9.4": "hparams/parser.py:267"},
        "`predict_with_generate` cannot be set as True except SFT.",
    ),
    "lf.neat_packing": (
        {"0.9.5": "hparams/parser.py:321", "0.9.4": "hparams/parser.py:270"},
        "`neat_packing` cannot be set as True except SFT.",
    ),
    "lf.train_on_prompt": (
        {"0.9.5": "hparams/parser.py:324", "0.9.4": "hparams/parser.py:273"},
        "`train_on_prompt` or `mask_history` cannot be set as True except SFT.",
    ),
    "lf.mask_and_prompt": (
        {"0.9.5": "hparams/data_args.py:183", "0.9.4": "hparams/data_args.py:177"},
        "`mask_history` is incompatible with `train_on_prompt`.",
    ),
    "lf.do_predict": (
        {"0.9.5": "hparams/parser.py:327", "0.9.4": "hparams/parser.py:276"},
        "Please enable `predict_with_generate` to save model predictions.",
    ),
    "lf.dataset": (
        {"0.9.5": "hparams/parser.py:360", "0.9.4": "hparams/parser.py:307"},
        "Please specify dataset for training.",
    ),
    "lf.eval_data": (
        {"0.9.5": "hparams/parser.py:365", "0.9.4": "hparams/parser.py:312"},
        "Please make sure eval_dataset be provided or val_size >1e-6",
    ),
    "lf.val_size_eval": (
        {"0.9.5": "hparams/data_args.py:163", "0.9.4": "hparams/data_args.py:157"},
        "Cannot specify `val_size` if `eval_dataset` is not None.",
    ),
    "lf.val_size_none": (
        {"0.9.5": "hparams/data_args.py:160", "0.9.4": "hparams/data_args.py:154"},
        "Cannot specify `val_size` if `dataset` is None.",
    ),
    "lf.z3.predict_with_generate": (
        {"0.9.5": "hparams/parser.py:369", "0.9.4": "hparams/parser.py:316"},
        "`predict_with_generate` is incompatible with DeepSpeed ZeRO-3.",
    ),
    "lf.z3.pissa_init": (
        {"0.9.5": "hparams/parser.py:378", "0.9.4": "hparams/parser.py:325"},
        "Please use scripts/pissa_init.py to initialize PiSSA in DeepSpeed ZeRO-3.",
    ),
    "lf.z3.pure_bf16": (
        {"0.9.5": "hparams/parser.py:385", "0.9.4": "hparams/parser.py:332"},
        "`pure_bf16` is incompatible with DeepSpeed ZeRO-3.",
    ),
    "lf.z3.use_unsloth": (
        {"0.9.5": "hparams/parser.py:410", "0.9.4": "hparams/parser.py:354"},
        "Unsloth is incompatible with DeepSpeed ZeRO-3.",
    ),
    "lf.z3.use_kt": (
        {"0.9.5": "hparams/parser.py:413", "0.9.4": "hparams/parser.py:357"},
        "KTransformers is incompatible with DeepSpeed ZeRO-3.",
    ),
    "lf.ds.galore": (
        {"0.9.5": "hparams/parser.py:401", "0.9.4": "hparams/parser.py:348"},
        "GaLore and APOLLO are incompatible with DeepSpeed yet.",
    ),
    "ax.fsdp": ({"0.19.0": "utils/schemas/validation.py:1354"}, "deepspeed and fsdp cannot be used together."),
    "ax.relora": ({"0.19.0": "utils/schemas/validation.py:1754"}, "deepspeed not supported with ReLoRA"),
    "ax.muon": ({"0.19.0": "utils/schemas/validation.py:934"}, "raise ValueError("),
    "ax.warmup": (
        {"0.19.0": "utils/schemas/validation.py:301"},
        "warmup_steps and warmup_ratio are mutually exclusive",
    ),
    "ax.gas_bsz": ({"0.19.0": "utils/schemas/validation.py:279"}, "raise ValueError("),
    "ax.batch_fields": ({"0.19.0": "utils/schemas/validation.py:228"}, "At least two of"),
    "ax.save_strategy": ({"0.19.0": "utils/schemas/validation.py:312"}, "raise ValueError("),
    "ax.saves_per_epoch": ({"0.19.0": "utils/schemas/validation.py:316"}, "raise ValueError("),
    "ax.eval_strategy": ({"0.19.0": "utils/schemas/validation.py:340"}, "raise ValueError("),
    "ax.val_zero": ({"0.19.0": "utils/schemas/validation.py:350"}, "raise ValueError("),
    "ax.evals_per_epoch": ({"0.19.0": "utils/schemas/validation.py:354"}, "raise ValueError("),
    "ax.evals_strategy": ({"0.19.0": "utils/schemas/validation.py:362"}, "raise ValueError("),
    "ax.packing_rl": ({"0.19.0": "utils/schemas/validation.py:708"}, "does not work with RLHF training"),
    "ax.sharegpt": ({"0.19.0": "utils/schemas/validation.py:55"}, "raise ValueError("),
    "ax.unsloth": ({"0.19.0": "utils/schemas/validation.py:74"}, "raise ValueError("),
    "ax.deprecated": ({"0.19.0": "utils/schemas/deprecated.py:12"}, "class DeprecatedParameters(BaseModel):"),
    "ax.datasets": ({"0.19.0": "utils/schemas/validation.py:85"}, "either datasets or pretraining_dataset is required"),
    "ax.pretraining_steps": ({"0.19.0": "utils/schemas/validation.py:1482"}, "raise ValueError("),
    "ax.streaming_steps": ({"0.19.0": "utils/schemas/validation.py:1538"}, "raise ValueError("),
    "ax.pretraining_val": ({"0.19.0": "utils/schemas/validation.py:1518"}, "raise ValueError("),
    "ax.streaming_val": ({"0.19.0": "utils/schemas/validation.py:1528"}, "raise ValueError("),
}
LF_RELEASES = ("0.9.5", "0.9.4")
AX_RELEASE = "0.19.0"


def lf_at(key: str) -> str:
    lines = FRONT[key][0]
    new, old = lines["0.9.5"], lines["0.9.4"]
    return f"llamafactory 0.9.5 {new}, 0.9.4 :{old.rsplit(':', 1)[1]}"


def ax_at(key: str) -> str:
    return f"axolotl {AX_RELEASE} {FRONT[key][0][AX_RELEASE]}"


# LLaMA-Factory's FinetuningArguments choices (0.9.5 and 0.9.4 hparams/finetuning_args.py:460 and :464, Literal[...]);
# HfArgumentParser.parse_dict does not enforce a Literal, the checks named in FRONT do
LF_STAGES = ("pt", "sft", "rm", "ppo", "dpo", "kto")
LF_METHODS = ("lora", "oft", "freeze", "full")
# keys only a LLaMA-Factory file has (FinetuningArguments / DataArguments fields no TrainingArguments has)
LF_MARKERS = ("stage", "finetuning_type", "template", "cutoff_len", "lora_target")
# axolotl 0.19.0 DeprecatedParameters fields whose validator raises DeprecationWarning (deprecated.py), and how it
# tests the value ("truthy": `if value:`, "set": `if value is not None:`), with the line of the raise
AX_REMOVED: dict[str, tuple[str, int]] = {
    "max_packed_sequence_len": ("truthy", 33),
    "rope_scaling": ("truthy", 40),
    "dpo_use_logits_to_keep": ("set", 91),
    "dpo_generate_during_eval": ("set", 101),
    "dpo_norm_loss": ("set", 111),
    "rpo_alpha": ("set", 121),
    "s2_attention": ("truthy", 131),
    "flash_attn_rms_norm": ("truthy", 140),
}
# what axolotl's own message names in place of a removed option (deprecated.py / validation.py:74-78)
AX_INSTEAD = {"rope_scaling": "a `rope_scaling` key under `model_config`"}
# axolotl 0.19.0 validation.py:64-71: removed unsloth switches, refused when set to a true value
AX_UNSLOTH = (
    "unsloth_cross_entropy_loss",
    "unsloth_lora_mlp",
    "unsloth_lora_qkv",
    "unsloth_lora_o",
    "unsloth_rms_norm",
    "unsloth_rope",
)


def _view(name: str) -> tuple[str, ...]:
    """The views a front end's rule reads: the front end's own (kb.doctor.dialect decides it from the registry) and,
    while a file's dialect is not decided, the TrainingArguments view it is linted as until then."""
    return ("training_args", name) if name in VIEWS else ("training_args",)


def _is_lf(d: dict[str, Any]) -> bool:
    return any(k in d for k in LF_MARKERS)


def _is_ax(d: dict[str, Any]) -> bool:
    return "base_model" in d and ("datasets" in d or "pretraining_dataset" in d)


def _front(c: Ctx, name: str) -> bool:
    """This view is the whole file of front end ``name`` (its own view, or the TrainingArguments one of a file whose
    dialect is not decided)."""
    if c.view == name:
        return True
    if c.view != "training_args" or c.cfg.dialect is not None:
        return False
    return _is_lf(c.data) if name == "llamafactory" else _is_ax(c.data)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


LF = (
    "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\ndo_train: true\nfinetuning_type: lora\ntemplate: qwen\n"
    "dataset: alpaca_en_demo\noutput_dir: out\n"
)


def _lf_say(
    c: Ctx, path: str, key: str, what: str, what_zh: str, fix: str, fix_zh: str, exc: str = "ValueError"
) -> None:
    text = FRONT[key][1].strip('"')
    c.add(
        path,
        f"{what}: LLaMA-Factory raises {exc} ({text!r}, {lf_at(key)}).",
        fix,
        f"{what_zh}：LLaMA-Factory 会报 {exc}（{text!r}，{lf_at(key)}）。",
        fix_zh,
    )


@rule(
    "KB080",
    "llamafactory-invalid-choice",
    "error",
    None,
    views=_view("llamafactory"),
    summary="LLaMA-Factory `finetuning_type` other than lora / oft / freeze / full (`qlora`), or `stage` other than "
    "pt / sft / rm / ppo / dpo / kto (`grpo`)",
    effect='AssertionError "Invalid fine-tuning method." while the arguments are parsed; an unknown stage passes '
    'the parser and train/tuner.py raises ValueError "Unknown task" before loading the model',
    bad=[
        Case(LF.replace("finetuning_type: lora", "finetuning_type: qlora") + "quantization_bit: 4\n", "qlora"),
        Case(LF.replace("stage: sft", "stage: grpo"), "grpo"),
    ],
    ok=[
        Case(LF + "quantization_bit: 4\n", "QLoRA is lora + quantization_bit"),
        Case(LF.replace("stage: sft", "stage: dpo"), "dpo"),
    ],
    validity=True,
)
def kb080(c: Ctx) -> None:
    if not _front(c, "llamafactory"):
        return
    ft, st = c.data.get("finetuning_type", "lora"), c.data.get("stage", "sft")
    if ft not in LF_METHODS:
        fix = (
            "write `finetuning_type: lora` with `quantization_bit: 4` (that is QLoRA)"
            if ft == "qlora"
            else (f"use one of {_ticks(list(LF_METHODS))}")
        )
        fix_zh = (
            "写 `finetuning_type: lora` 再加 `quantization_bit: 4`（这就是 QLoRA）"
            if ft == "qlora"
            else (f"改用 {_ticks(list(LF_METHODS), '、')} 之一")
        )
        _lf_say(
            c,
            "finetuning_type",
            "lf.finetuning_type",
            f"`finetuning_type: {ft}` is not one of {_ticks(list(LF_METHODS))}",
            f"`finetuning_type: {ft}` 不在 {_ticks(list(LF_METHODS), '、')} 之中",
            fix,
            fix_zh,
            exc="AssertionError",
        )
    if st not in LF_STAGES:
        _lf_say(
            c,
            "stage",
            "lf.stage",
            f"`stage: {st}` is not one of {_ticks(list(LF_STAGES))}; the parser lets it through and the trainer "
            "dispatch refuses it before the model is loaded",
            f"`stage: {st}` 不在 {_ticks(list(LF_STAGES), '、')} 之中；参数解析不拦它，分派训练流程时才拒绝（还没加载模型）",
            f"use one of {_ticks(list(LF_STAGES))} (GRPO and other RL recipes are not LLaMA-Factory stages)",
            f"改用 {_ticks(list(LF_STAGES), '、')} 之一（GRPO 等 RL 训练不是 LLaMA-Factory 的 stage）",
        )


@rule(
    "KB081",
    "llamafactory-lora-only-option",
    "error",
    None,
    views=_view("llamafactory"),
    summary="LLaMA-Factory LoRA-only settings with another `finetuning_type`: `quantization_bit` with full / freeze, "
    "`adapter_name_or_path`, `use_dora`, `use_rslora`, `loraplus_lr_ratio`, `pissa_init` with anything but lora",
    effect="ValueError while the arguments are parsed (before the model is loaded)",
    bad=[
        Case(LF.replace("finetuning_type: lora", "finetuning_type: full") + "quantization_bit: 4\n", "quantized full"),
        Case(LF.replace("finetuning_type: lora", "finetuning_type: freeze") + "use_dora: true\n", "DoRA with freeze"),
    ],
    ok=[
        Case(LF + "quantization_bit: 4\nuse_dora: true\n", "lora"),
        Case(LF.replace("finetuning_type: lora", "finetuning_type: oft") + "quantization_bit: 4\n", "quantized OFT"),
    ],
    validity=True,
)
def kb081(c: Ctx) -> None:
    if not _front(c, "llamafactory"):
        return
    ft = c.data.get("finetuning_type", "lora")
    if ft not in LF_METHODS:
        return  # KB080
    if c.data.get("quantization_bit") is not None and ft not in ("lora", "oft"):
        _lf_say(
            c,
            "quantization_bit",
            "lf.quantization",
            f"`quantization_bit` quantizes a frozen base for LoRA / OFT; with `finetuning_type: {ft}` it is refused",
            f"`quantization_bit` 是给 LoRA / OFT 量化冻结底座用的；`finetuning_type: {ft}` 时不允许",
            "train LoRA on the quantized model (`finetuning_type: lora`), or train without `quantization_bit`",
            "改成在量化模型上训 LoRA（`finetuning_type: lora`），或者不用 `quantization_bit` 训练",
        )
    if ft == "lora":
        return
    if c.data.get("adapter_name_or_path") is not None:
        _lf_say(
            c,
            "adapter_name_or_path",
            "lf.adapter",
            f"`adapter_name_or_path` loads a LoRA adapter; with `finetuning_type: {ft}` it is refused",
            f"`adapter_name_or_path` 加载的是 LoRA adapter；`finetuning_type: {ft}` 时不允许",
            "set `finetuning_type: lora` to go on training the adapter, or merge it into the model first",
            "要继续训这个 adapter 就设 `finetuning_type: lora`，否则先把它合并进模型",
        )
    for key in ("loraplus_lr_ratio", "use_rslora", "use_dora", "pissa_init"):
        v = c.data.get(key)
        if (v is not None) if key == "loraplus_lr_ratio" else bool(v):
            _lf_say(
                c,
                key,
                f"lf.{key}",
                f"`{key}` is a LoRA setting; with `finetuning_type: {ft}` it is refused",
                f"`{key}` 是 LoRA 的设置；`finetuning_type: {ft}` 时不允许",
                f"set `finetuning_type: lora` to use it; `{ft}` training has no such setting",
                f"要用它就设 `finetuning_type: lora`；`{ft}` 训练没有这个设置",
            )


@rule(
    "KB082",
    "llamafactory-streaming",
    "error",
    None,
    views=_view("llamafactory"),
    summary="LLaMA-Factory `streaming: true` without `max_steps`, with `max_samples`, or with a fractional `val_size`",
    effect="ValueError while the arguments are parsed: a stream has no length to count epochs or a fraction from",
    bad=[
        Case(LF + "streaming: true\n", "no max_steps"),
        Case(LF + "streaming: true\nmax_steps: 1000\nval_size: 0.1\n", "fraction"),
    ],
    ok=[
        Case(LF + "streaming: true\nmax_steps: 1000\nval_size: 500\n", "steps, val rows"),
        Case(LF + "max_samples: 1000\n", "no stream"),
    ],
    validity=True,
)
def kb082(c: Ctx) -> None:
    if not _front(c, "llamafactory") or not c.data.get("streaming"):
        return
    if _int(c.data.get("max_steps", -1)) in (None, -1):
        _lf_say(
            c,
            "streaming",
            "lf.max_steps",
            "`streaming: true` needs `max_steps`: a streamed dataset has no length to derive the steps from",
            "`streaming: true` 必须设 `max_steps`：流式数据集没有长度，算不出总步数",
            "set `max_steps` to the number of optimizer steps to train",
            "把 `max_steps` 设成要训练的 optimizer step 数",
        )
    if c.data.get("max_samples") is not None:
        _lf_say(
            c,
            "max_samples",
            "lf.max_samples",
            "`max_samples` cannot cut a streamed dataset",
            "流式数据集不能用 `max_samples` 截断",
            "bound the run with `max_steps` instead",
            "改用 `max_steps` 控制训练长度",
        )
    vs = _num(c.data.get("val_size"))
    if vs is not None and 1e-6 < vs < 1:
        _lf_say(
            c,
            "val_size",
            "lf.streaming_val",
            f"`val_size: {vs}` is a fraction, and a stream has no size to take it of",
            f"`val_size: {vs}` 是比例，而流式数据集没有总量可按比例切",
            "give `val_size` as a number of examples (an integer), or an `eval_dataset`",
            "把 `val_size` 写成样本条数（整数），或者另给 `eval_dataset`",
        )


@rule(
    "KB083",
    "llamafactory-sft-only-option",
    "error",
    None,
    views=_view("llamafactory"),
    summary="LLaMA-Factory SFT-only settings in another stage (`predict_with_generate`, `neat_packing`, "
    "`train_on_prompt`, `mask_history`), both of the last two, or SFT `do_predict` without `predict_with_generate`",
    effect="ValueError while the arguments are parsed",
    bad=[
        Case(LF.replace("stage: sft", "stage: dpo") + "neat_packing: true\n", "DPO with neat_packing"),
        Case(LF + "do_predict: true\nval_size: 0.1\n", "predict without generate"),
    ],
    ok=[
        Case(LF + "train_on_prompt: true\n", "SFT"),
        Case(LF + "do_predict: true\npredict_with_generate: true\nval_size: 0.1\n", "predict with generate"),
    ],
    validity=True,
)
def kb083(c: Ctx) -> None:
    if not _front(c, "llamafactory"):
        return
    st = c.data.get("stage", "sft")
    if st not in LF_STAGES:
        return  # KB080
    if st != "sft":
        for key, cite in (
            ("predict_with_generate", "lf.predict_with_generate"),
            ("neat_packing", "lf.neat_packing"),
            ("train_on_prompt", "lf.train_on_prompt"),
            ("mask_history", "lf.train_on_prompt"),
        ):
            if c.data.get(key):
                _lf_say(
                    c,
                    key,
                    cite,
                    f"`{key}` works only in the SFT stage; this file runs `stage: {st}`",
                    f"`{key}` 只能用在 SFT 阶段；这个文件是 `stage: {st}`",
                    f"train this stage without `{key}`; it exists only for `stage: sft`",
                    f"这个阶段不支持 `{key}`（它只给 `stage: sft` 用）",
                )
    if c.data.get("mask_history") and c.data.get("train_on_prompt"):
        _lf_say(
            c,
            "mask_history",
            "lf.mask_and_prompt",
            "`mask_history` (loss on the last turn only) and `train_on_prompt` (loss on the prompt too) contradict",
            "`mask_history`（只在最后一轮上算 loss）和 `train_on_prompt`（prompt 也算 loss）互相矛盾",
            "choose one of them",
            "两者只能选一个",
        )
    if st == "sft" and c.data.get("do_predict") and not c.data.get("predict_with_generate"):
        _lf_say(
            c,
            "do_predict",
            "lf.do_predict",
            "`do_predict` in SFT saves generated predictions, which needs `predict_with_generate: true`",
            "SFT 里的 `do_predict` 要保存生成结果，必须设 `predict_with_generate: true`",
            "add `predict_with_generate: true`",
            "加上 `predict_with_generate: true`",
        )


@rule(
    "KB084",
    "llamafactory-dataset-split",
    "error",
    None,
    views=_view("llamafactory"),
    summary="LLaMA-Factory training without `dataset`, evaluation (`do_eval`, an `eval_strategy`, `do_predict`, "
    "`predict_with_generate`) without `eval_dataset` or `val_size`, or `val_size` next to `eval_dataset`",
    effect="ValueError while the arguments are parsed",
    bad=[
        Case(LF + "eval_strategy: steps\neval_steps: 100\n", "evaluating nothing"),
        Case(LF + "val_size: 0.1\neval_dataset: my_eval\n", "both splits"),
    ],
    ok=[Case(LF + "eval_strategy: steps\neval_steps: 100\nval_size: 0.05\n", "val split"), Case(LF, "no eval")],
    validity=True,
)
def kb084(c: Ctx) -> None:
    if not _front(c, "llamafactory"):
        return
    d = c.data
    vs = _num(d.get("val_size")) or 0.0
    if d.get("do_train") and d.get("dataset") is None:
        _lf_say(
            c,
            "do_train",
            "lf.dataset",
            "`do_train` without `dataset`",
            "设了 `do_train` 却没有 `dataset`",
            "name the training data in `dataset` (a name from dataset_info.json)",
            "在 `dataset` 里写训练数据（dataset_info.json 里的名字）",
        )
    if d.get("dataset") is None and vs > 1e-6:
        _lf_say(
            c,
            "val_size",
            "lf.val_size_none",
            "`val_size` splits `dataset`, which is not set",
            "`val_size` 是从 `dataset` 里切分，而 `dataset` 没设",
            "set `dataset`, or give the evaluation data as `eval_dataset`",
            "设置 `dataset`，或者把验证数据写成 `eval_dataset`",
        )
    if d.get("eval_dataset") is not None and vs > 1e-6:
        _lf_say(
            c,
            "val_size",
            "lf.val_size_eval",
            "`val_size` and `eval_dataset` both give the evaluation data",
            "`val_size` 和 `eval_dataset` 都在指定验证数据",
            "keep one of them",
            "两者只留一个",
        )
    strategy = str(d.get("eval_strategy") or d.get("evaluation_strategy") or "no").lower()
    evaluates = [k for k in ("do_eval", "do_predict", "predict_with_generate") if d.get(k)]
    if strategy != "no":
        evaluates.append("eval_strategy")
    if evaluates and d.get("eval_dataset") is None and vs < 1e-6:
        key = evaluates[0]
        also = f" (`eval_strategy: {strategy}` sets do_eval, {at('hf.do_eval')})" if key == "eval_strategy" else ""
        also_zh = (
            f"（`eval_strategy: {strategy}` 会打开 do_eval，{at('hf.do_eval')}）" if key == "eval_strategy" else ""
        )
        _lf_say(
            c,
            key,
            "lf.eval_data",
            f"`{key}` evaluates{also}, and there is no evaluation data: no `eval_dataset` and no `val_size`",
            f"`{key}` 要做评估{also_zh}，但没有验证数据：既没有 `eval_dataset` 也没有 `val_size`",
            "add `val_size: 0.05` (a split of `dataset`) or an `eval_dataset`",
            "加上 `val_size: 0.05`（从 `dataset` 切分）或者 `eval_dataset`",
        )


_Z3_NAME = re.compile(r"(?:^|[/_.-])z(?:ero)?[_-]?3(?=[_.-]|$)", re.I)


def _lf_zero3(c: Ctx) -> tuple[bool, str, str]:
    """Does LLaMA-Factory see ZeRO-3 (transformers' is_deepspeed_zero3_enabled: `stage == 3` in the DeepSpeed JSON)?"""
    ds = deepspeed_setting(c.cfg)
    if isinstance(ds, dict):
        z = ds.get("zero_optimization")
        st = z.get("stage") if isinstance(z, dict) else None
        ok = isinstance(st, int) and not isinstance(st, bool) and st == 3
        return ok, "the `deepspeed` mapping sets ZeRO stage 3", "`deepspeed` 里设的是 ZeRO stage 3"
    if isinstance(ds, str) and _Z3_NAME.search(ds.replace("\\", "/").rsplit("/", 1)[-1]):
        return True, f"`deepspeed: {ds}` is by its name a ZeRO-3 config", f"`deepspeed: {ds}` 从文件名看是 ZeRO-3 配置"
    return False, "", ""


@rule(
    "KB085",
    "llamafactory-zero3-refused",
    "error",
    "lf-predict-with-generate-zero3",
    views=_view("llamafactory"),
    summary="LLaMA-Factory settings it refuses under DeepSpeed ZeRO-3 (`predict_with_generate`, `pure_bf16`, "
    "`pissa_init`, `use_unsloth`, `use_kt`) or under any DeepSpeed (`use_galore`, `use_apollo`); ZeRO-3 read from "
    "an inline `deepspeed` mapping or a file named like `ds_z3_config.json`",
    effect="ValueError while the arguments are parsed",
    bad=[
        Case(
            LF + "deepspeed: examples/deepspeed/ds_z3_config.json\npredict_with_generate: true\nval_size: 0.1\n",
            "generate",
        ),
        Case(LF + "deepspeed:\n  zero_optimization: {stage: 3}\npure_bf16: true\n", "pure_bf16"),
        Case(
            LF.replace("finetuning_type: lora", "finetuning_type: full")
            + "deepspeed: ds_z2_config.json\nuse_galore: true\n",
            "GaLore",
        ),
    ],
    ok=[
        Case(
            LF + "deepspeed: examples/deepspeed/ds_z2_config.json\npredict_with_generate: true\nval_size: 0.1\n",
            "ZeRO-2",
        ),
        Case(LF + "deepspeed: examples/deepspeed/ds_z3_config.json\nbf16: true\n", "ZeRO-3, bf16 AMP"),
    ],
    validity=True,
)
def kb085(c: Ctx) -> None:
    if not _front(c, "llamafactory"):
        return
    d = c.data
    if deepspeed_setting(c.cfg) and (d.get("use_galore") or d.get("use_apollo")):
        key = "use_galore" if d.get("use_galore") else "use_apollo"
        _lf_say(
            c,
            key,
            "lf.ds.galore",
            f"`{key}` does not work with DeepSpeed",
            f"`{key}` 不能和 DeepSpeed 一起用",
            "train with GaLore / APOLLO without `deepspeed` (single GPU or DDP)",
            "GaLore / APOLLO 训练时不要用 `deepspeed`（单卡或 DDP）",
        )
    z3, why, why_zh = _lf_zero3(c)
    if not z3:
        return
    fixes = {
        "predict_with_generate": (
            "predict without `deepspeed` (or with a ZeRO-2 config), or merge the adapter and generate with vLLM",
            "预测时去掉 `deepspeed`（或换 ZeRO-2 配置），或者合并 adapter 后用 vLLM 生成",
        ),
        "pure_bf16": ("use `bf16: true` (mixed precision) with ZeRO-3", "ZeRO-3 下改用 `bf16: true`（混合精度）"),
        "pissa_init": (
            "initialize PiSSA first with scripts/pissa_init.py, then train the saved adapter",
            "先用 scripts/pissa_init.py 初始化 PiSSA，再训练保存下来的 adapter",
        ),
        "use_unsloth": ("use ZeRO-2 (or no DeepSpeed) with Unsloth", "用 Unsloth 时改用 ZeRO-2（或不用 DeepSpeed）"),
        "use_kt": (
            "use ZeRO-2 (or no DeepSpeed) with KTransformers",
            "用 KTransformers 时改用 ZeRO-2（或不用 DeepSpeed）",
        ),
    }
    for key, (fix, fix_zh) in fixes.items():
        if d.get(key):
            _lf_say(
                c,
                key,
                f"lf.z3.{key}",
                f"`{key}` is refused under ZeRO-3, and {why}",
                f"ZeRO-3 下不允许 `{key}`，而{why_zh}",
                fix,
                fix_zh,
            )


AX = (
    "base_model: NousResearch/Llama-3.2-1B\ndatasets:\n  - path: tatsu-lab/alpaca\n    type: alpaca\n"
    "micro_batch_size: 2\ngradient_accumulation_steps: 4\nsequence_len: 2048\nlearning_rate: 2.0e-5\n"
    "output_dir: ./outputs/out\n"
)


def _ax_say(
    c: Ctx, path: str, key: str, what: str, what_zh: str, fix: str, fix_zh: str, exc: str = "ValueError"
) -> None:
    c.add(
        path,
        f"{what}: axolotl's config validation raises {exc} ({ax_at(key)}).",
        fix,
        f"{what_zh}：axolotl 校验配置时会报 {exc}（{ax_at(key)}）。",
        fix_zh,
    )


@rule(
    "KB086",
    "axolotl-deepspeed-conflict",
    "error",
    "axolotl-deepspeed-fsdp-together",
    views=_view("axolotl"),
    summary="axolotl `deepspeed` together with the `fsdp` list, `relora`, or `optimizer: muon`",
    effect="ValueError from axolotl's config validation (deepspeed and fsdp cannot be used together, ...)",
    bad=[
        Case(AX + "deepspeed: deepspeed_configs/zero3_bf16.json\nfsdp:\n  - full_shard\n  - auto_wrap\n", "fsdp list"),
        Case(AX + "deepspeed: deepspeed_configs/zero2.json\noptimizer: muon\n", "muon"),
    ],
    ok=[
        Case(AX + "deepspeed: deepspeed_configs/zero3_bf16.json\n", "DeepSpeed alone"),
        Case(AX + "fsdp:\n  - full_shard\noptimizer: muon\nfsdp_version: 2\n", "FSDP2 with muon"),
    ],
    validity=True,
)
def kb086(c: Ctx) -> None:
    if not _front(c, "axolotl") or not deepspeed_setting(c.cfg):
        return
    d = c.data
    if d.get("fsdp"):
        _ax_say(
            c,
            "fsdp",
            "ax.fsdp",
            "`deepspeed` and `fsdp` are two sharding strategies, and axolotl takes one",
            "`deepspeed` 和 `fsdp` 是两种分片策略，axolotl 只能用一种",
            "keep either `deepspeed` or the `fsdp` settings",
            "`deepspeed` 和 `fsdp` 只保留一种",
        )
    if d.get("optimizer") == "muon":
        _ax_say(
            c,
            "optimizer",
            "ax.muon",
            "`optimizer: muon` does not work with DeepSpeed in axolotl",
            "axolotl 里 `optimizer: muon` 不能和 DeepSpeed 一起用",
            "use Muon with FSDP2 (`fsdp_version: 2`), or another optimizer under DeepSpeed",
            "Muon 改配 FSDP2（`fsdp_version: 2`），或者 DeepSpeed 下换别的优化器",
        )
    if d.get("relora"):
        _ax_say(
            c,
            "relora",
            "ax.relora",
            "ReLoRA does not work with DeepSpeed in axolotl",
            "axolotl 里 ReLoRA 不能和 DeepSpeed 一起用",
            "train ReLoRA without `deepspeed`",
            "训练 ReLoRA 时不要用 `deepspeed`",
        )


@rule(
    "KB087",
    "axolotl-conflicting-settings",
    "error",
    None,
    views=_view("axolotl"),
    summary="axolotl settings it refuses together: `warmup_steps` + `warmup_ratio`, `gradient_accumulation_steps` + "
    "`batch_size` (or `batch_size` alone), `save_steps` / `eval_steps` with `*_per_epoch` or a non-steps strategy, "
    "evaluation with `val_set_size: 0`, `sample_packing` with `rl`",
    effect="ValueError from axolotl's config validation",
    bad=[
        Case(AX + "warmup_steps: 100\nwarmup_ratio: 0.05\n", "two warmups"),
        Case(AX + "save_strategy: epoch\nsave_steps: 500\n", "save_steps with epoch saving"),
        Case(AX + "val_set_size: 0\neval_strategy: steps\n", "evaluating without a split"),
    ],
    ok=[
        Case(AX + "warmup_ratio: 0.05\nsaves_per_epoch: 2\nevals_per_epoch: 4\nval_set_size: 0.05\n", "one of each"),
        Case(AX + "warmup_steps: 0\nwarmup_ratio: 0.1\n", "a zero counts as unset"),
    ],
    validity=True,
)
def kb087(c: Ctx) -> None:
    if not _front(c, "axolotl"):
        return
    d = c.data
    g = d.get
    pairs = []
    if g("warmup_steps") and g("warmup_ratio"):
        pairs.append(
            (
                "warmup_ratio",
                "ax.warmup",
                "`warmup_steps` and `warmup_ratio` both set the warmup",
                "`warmup_steps` 和 `warmup_ratio` 都在设 warmup",
                "keep one of them",
                "两者只留一个",
            )
        )
    if g("gradient_accumulation_steps") and g("batch_size"):
        pairs.append(
            (
                "batch_size",
                "ax.gas_bsz",
                "`batch_size` and `gradient_accumulation_steps` both set the accumulation",
                "`batch_size` 和 `gradient_accumulation_steps` 都在决定梯度累积",
                "keep `micro_batch_size` with one of them",
                "`micro_batch_size` 之外两者只留一个",
            )
        )
    elif g("batch_size") and not (g("micro_batch_size") or g("gradient_accumulation_steps")):
        pairs.append(
            (
                "batch_size",
                "ax.batch_fields",
                "`batch_size` alone does not fix the micro batch",
                "只写 `batch_size` 定不下 micro batch",
                "add `micro_batch_size`",
                "加上 `micro_batch_size`",
            )
        )
    if g("save_strategy") and g("save_steps") and g("save_strategy") != "steps":
        pairs.append(
            (
                "save_steps",
                "ax.save_strategy",
                f"`save_steps` with `save_strategy: {g('save_strategy')}`",
                f"`save_steps` 配的是 `save_strategy: {g('save_strategy')}`",
                "set `save_strategy: steps`, or save by epoch without `save_steps`",
                "设 `save_strategy: steps`，或者按 epoch 保存、不写 `save_steps`",
            )
        )
    if g("saves_per_epoch") and g("save_steps"):
        pairs.append(
            (
                "save_steps",
                "ax.saves_per_epoch",
                "`save_steps` and `saves_per_epoch` both set when to save",
                "`save_steps` 和 `saves_per_epoch` 都在决定何时保存",
                "keep one of them",
                "两者只留一个",
            )
        )
    if g("eval_strategy") and g("eval_steps") and g("eval_strategy") != "steps":
        pairs.append(
            (
                "eval_steps",
                "ax.eval_strategy",
                f"`eval_steps` with `eval_strategy: {g('eval_strategy')}`",
                f"`eval_steps` 配的是 `eval_strategy: {g('eval_strategy')}`",
                "set `eval_strategy: steps`, or evaluate by epoch without `eval_steps`",
                "设 `eval_strategy: steps`，或者按 epoch 评估、不写 `eval_steps`",
            )
        )
    if (
        g("val_set_size") == 0
        and (g("eval_steps") or g("eval_strategy"))
        and not g("test_datasets")
        and g("eval_strategy") != "no"
    ):
        pairs.append(
            (
                "val_set_size",
                "ax.val_zero",
                "evaluation is set up and `val_set_size: 0` leaves nothing to evaluate",
                "设了评估，但 `val_set_size: 0` 没有留出验证数据",
                "set `val_set_size` (e.g. 0.05) or give `test_datasets`",
                "设置 `val_set_size`（例如 0.05）或者给 `test_datasets`",
            )
        )
    if g("evals_per_epoch") and g("eval_steps"):
        pairs.append(
            (
                "eval_steps",
                "ax.evals_per_epoch",
                "`eval_steps` and `evals_per_epoch` both set when to evaluate",
                "`eval_steps` 和 `evals_per_epoch` 都在决定何时评估",
                "keep one of them",
                "两者只留一个",
            )
        )
    if g("evals_per_epoch") and g("eval_strategy") and g("eval_strategy") != "steps":
        pairs.append(
            (
                "eval_strategy",
                "ax.evals_strategy",
                f"`evals_per_epoch` with `eval_strategy: {g('eval_strategy')}`",
                f"`evals_per_epoch` 配的是 `eval_strategy: {g('eval_strategy')}`",
                "leave `eval_strategy` unset or `steps` with `evals_per_epoch`",
                "用 `evals_per_epoch` 时 `eval_strategy` 不写或写 `steps`",
            )
        )
    if g("sample_packing") and g("rl"):
        pairs.append(
            (
                "sample_packing",
                "ax.packing_rl",
                f"`sample_packing` does not work with `rl: {g('rl')}`",
                f"`sample_packing` 不能和 `rl: {g('rl')}` 一起用",
                "train the RL run without `sample_packing`",
                "RL 训练时不开 `sample_packing`",
            )
        )
    for path, key, what, what_zh, fix, fix_zh in pairs:
        _ax_say(c, path, key, what, what_zh, fix, fix_zh)


@rule(
    "KB088",
    "axolotl-removed-option",
    "error",
    None,
    views=_view("axolotl"),
    summary="axolotl options its validation refuses by name: dataset `type: sharegpt*`, the `unsloth_*` switches, "
    "`rope_scaling` at the top level, `max_packed_sequence_len`, `s2_attention`, `dpo_norm_loss`, `rpo_alpha`, ...",
    effect="ValueError (sharegpt, unsloth_*) or a raised DeprecationWarning from axolotl's config validation",
    bad=[
        Case(AX.replace("type: alpaca", "type: sharegpt\n    conversation: chatml"), "sharegpt"),
        Case(AX + "rope_scaling:\n  type: linear\n  factor: 2.0\n", "rope_scaling"),
        Case(AX + "unsloth_lora_mlp: true\n", "unsloth switch"),
    ],
    ok=[
        Case(AX.replace("type: alpaca", "type: chat_template"), "chat_template"),
        Case(
            AX + "model_config:\n  rope_scaling:\n    type: linear\n    factor: 2.0\nlora_mlp_kernel: true\n",
            "the new homes",
        ),
    ],
    validity=True,
)
def kb088(c: Ctx) -> None:
    if not _front(c, "axolotl"):
        return
    d = c.data
    for i, ds in enumerate(d.get("datasets") if isinstance(d.get("datasets"), list) else []):
        t = ds.get("type") if isinstance(ds, dict) else None
        if isinstance(t, str) and t.startswith("sharegpt"):
            _ax_say(
                c,
                "datasets",
                "ax.sharegpt",
                f"dataset {i} has `type: {t}`, which axolotl no longer has",
                f"第 {i} 个数据集写的是 `type: {t}`，axolotl 已经没有这个类型",
                "write `type: chat_template` (with `field_messages` and "
                "`message_property_mappings` for ShareGPT's from / value)",
                "改写成 `type: chat_template`（ShareGPT 的 from / value 用 "
                "`field_messages` 和 `message_property_mappings` 映射）",
            )
    found = [k for k in AX_UNSLOTH if d.get(k)]
    if found:
        _ax_say(
            c,
            found[0],
            "ax.unsloth",
            f"{_ticks(found)} {'was' if len(found) == 1 else 'were'} removed from axolotl",
            f"{_ticks(found, '、')} 已经从 axolotl 里移除",
            "use `lora_mlp_kernel`, `lora_qkv_kernel`, `lora_o_kernel`",
            "改用 `lora_mlp_kernel`、`lora_qkv_kernel`、`lora_o_kernel`",
        )
    for key, (test, line) in AX_REMOVED.items():
        v = d.get(key)
        if not (v if test == "truthy" else v is not None):
            continue
        instead = AX_INSTEAD.get(key)
        where = f"axolotl {AX_RELEASE} utils/schemas/deprecated.py:{line}"
        c.add(
            key,
            f"`{key}` is no longer supported by axolotl: its config validation raises DeprecationWarning ({where}).",
            f"write {instead}"
            if instead
            else f"axolotl {AX_RELEASE} has no such option: to keep that behaviour use a release that has it",
            f"axolotl 已不再支持 `{key}`：校验配置时会抛出 DeprecationWarning（{where}）。",
            f"改写成 {instead}"
            if instead
            else f"axolotl {AX_RELEASE} 没有这个选项：要保留这个行为，就用还支持它的版本",
        )


@rule(
    "KB089",
    "axolotl-streaming-dataset",
    "error",
    None,
    views=_view("axolotl"),
    summary="axolotl without `datasets` and `pretraining_dataset`, `streaming` / `pretraining_dataset` without "
    "`max_steps`, or either with `val_set_size`",
    effect="ValueError from axolotl's config validation: a stream has no length to schedule from or split",
    bad=[
        Case(AX + "streaming: true\n", "stream without max_steps"),
        Case(AX + "streaming: true\nmax_steps: 1000\nval_set_size: 0.05\n", "stream with a split"),
    ],
    ok=[
        Case(AX + "streaming: true\nmax_steps: 1000\n", "stream with max_steps"),
        Case(AX + "val_set_size: 0.05\n", "no stream"),
    ],
    validity=True,
)
def kb089(c: Ctx) -> None:
    if not _front(c, "axolotl"):
        return
    d = c.data
    if d.get("datasets") is None and d.get("pretraining_dataset") is None:
        _ax_say(
            c,
            "base_model",
            "ax.datasets",
            "there is neither `datasets` nor `pretraining_dataset`",
            "既没有 `datasets` 也没有 `pretraining_dataset`",
            "add `datasets` (or `pretraining_dataset` for a stream)",
            "加上 `datasets`（流式预训练用 `pretraining_dataset`）",
        )
    for key, steps, val in (
        ("pretraining_dataset", "ax.pretraining_steps", "ax.pretraining_val"),
        ("streaming", "ax.streaming_steps", "ax.streaming_val"),
    ):
        if not d.get(key):
            continue
        if not d.get("max_steps"):
            _ax_say(
                c,
                key,
                steps,
                f"`{key}` is read as a stream, which has no length, and `max_steps` is not set",
                f"`{key}` 是按流读取的，没有长度，而 `max_steps` 没设",
                "set `max_steps`",
                "设置 `max_steps`",
            )
        if d.get("val_set_size"):
            _ax_say(
                c,
                "val_set_size",
                val,
                f"`val_set_size` cannot split a stream (`{key}`)",
                f"`val_set_size` 不能切分流式数据（`{key}`）",
                "give the evaluation data as `test_datasets`",
                "把验证数据写成 `test_datasets`",
            )
