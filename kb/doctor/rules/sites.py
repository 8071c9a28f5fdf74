"""Rules from the raise / warn sites of the front ends (KB050-KB069): settings the package refuses or drops
beyond its pydantic models.

The sites were found by ``indexer/registry_sites.py`` (an AST scan of the config paths of accelerate, the
transformers DeepSpeed integration and DeepSpeed itself) and classified there (``SITE_CLASSES``); the
config-triggerable ones that no other rule covers are here. Each rule cites its site (file:line): from the
registry record when the registry holds the site, else from ``CITE`` (checked against the installed source
by tests/test_lint_oracle_sites.py, which also runs every bad and ok case through the real code on CPU).
"""

from __future__ import annotations

from typing import Any

from kb.doctor.configs import _int
from kb.doctor.engine import Case, Ctx, rule, truthy
from kb.memory.estimate import registry_default

# the site each rule stands on -> where it was in the releases the registry was built from (the registry's
# own record wins when present: it follows the release the user has)
CITE: dict[str, str] = {
    "deepspeed:site.DeepSpeedConfig._do_error_check.ValueError.sum-is-not-supported-with-zero": (
        "deepspeed/runtime/config.py:696"
    ),
    "deepspeed:site.DeepSpeedConfig._do_error_check.AssertionError.fp16_master_weights_and_grads-is-only-supported-with-zero": (
        "deepspeed/runtime/config.py:703"
    ),
    "deepspeed:site.DeepSpeedConfig._do_error_check.AssertionError.bf16_master_weights_and_grads-is-only-supported-with-zero": (
        "deepspeed/runtime/config.py:707"
    ),
    "deepspeed:site.DeepSpeedConfig._do_error_check.AssertionError.bf16_optimizer_states-is-only-supported-with-zero": (
        "deepspeed/runtime/config.py:711"
    ),
    "deepspeed:site.DeepSpeedConfig._do_error_check.AssertionError.bf16_optimizer_states-requires-bf16_master_weights_and_grads-to-be-enabled": (
        "deepspeed/runtime/config.py:714"
    ),
    "deepspeed:site.DeepSpeedEngine._configure_basic_optimizer.ValueError.max_grad_norm-is-not-supported-as-an": (
        "deepspeed/runtime/engine.py:2482"
    ),
    "deepspeed:site.DeepSpeedConfig._do_warning_check.warning.deepspeedconfig-is-not-supported-as-an": (
        "deepspeed/runtime/config.py:726"
    ),
    "accelerate:site.DeepSpeedPlugin._deepspeed_config_checks.ValueError.when-using-deepspeed_config_file-the-following-accelerate": (
        "accelerate/utils/dataclasses.py:1526"
    ),
    "accelerate:site._validate_launch_command.ValueError.you-can-only-use-one-of": "accelerate/commands/launch.py:1205",
    "accelerate:site._validate_launch_command.ValueError.you-need-to-use-at-least": "accelerate/commands/launch.py:1209",
    "transformers:site.TrainingArguments._validate_args.ValueError.load_best_model_at_end-requires-the-save-and-eval": (
        "transformers/training_args.py:1751"
    ),
    "transformers:site.TrainingArguments._validate_args.ValueError.load_best_model_at_end-requires-the-saving-steps-to.3": (
        "transformers/training_args.py:1771"
    ),
    "transformers:site.TrainingArguments._validate_args.ValueError.at-most-one-of-fp16-and.2": (
        "transformers/training_args.py:1788"
    ),
    "transformers:site.TrainingArguments._validate_args.ValueError.lr_scheduler_type-reduce_lr_on_plateau-requires-an-eval-strategy": (
        "transformers/training_args.py:1792"
    ),
    "transformers:site.TrainingArguments._validate_args.ValueError.lr_scheduler_type-greedy-requires-an-eval-strategy": (
        "transformers/training_args.py:1798"
    ),
}
# the rule of each site (SITE_CLASSES in indexer/registry_sites.py says the same, "rule:KBnnn")
RULE_SITES: dict[str, tuple[str, ...]] = {
    "KB050": ("deepspeed:site.DeepSpeedConfig._do_error_check.ValueError.sum-is-not-supported-with-zero",),
    "KB051": tuple(k for k in CITE if "master_weights" in k or "bf16_optimizer_states" in k),
    "KB052": tuple(k for k in CITE if "max_grad_norm" in k or "is-not-supported-as-an" in k),
    "KB053": tuple(k for k in CITE if "_deepspeed_config_checks" in k),
    "KB054": ("accelerate:site._validate_launch_command.ValueError.you-can-only-use-one-of",),
    "KB055": ("accelerate:site._validate_launch_command.ValueError.you-need-to-use-at-least",),
    "KB056": tuple(k for k in CITE if "load_best_model_at_end" in k),
    "KB057": tuple(k for k in CITE if "requires-an-eval" in k),
    "KB058": tuple(k for k in CITE if "at-most-one-of-fp16-and" in k),
}
# DeepSpeedPlugin._deepspeed_config_checks: the accelerate settings refused next to `deepspeed_config_file`
# (its list of ACCELERATE_* variables, with the prefixes stripped as the code strips them; the test re-reads it)
IGNORED_WITH_DS_FILE = (
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "offload_param_nvme_path",
    "offload_optimizer_nvme_path",
    "zero3_save_16bit_model",
    "mixed_precision",
)
# _validate_launch_command: the launch modes of which only one may be given (its sum([...]) test)
LAUNCH_MODES = ("multi_gpu", "cpu", "tpu", "use_deepspeed", "use_fsdp")
# TrainingArguments._validate_args: the `lr_scheduler_type` values that need an eval strategy (SchedulerType
# members REDUCE_ON_PLATEAU and GREEDY; the test re-reads their values)
EVAL_SCHEDULERS = ("reduce_lr_on_plateau", "greedy")

ORACLE = "tests/test_lint_oracle_sites.py"  # proves this module's validity rules (kb.doctor.engine.Rule.oracle)


def cite(c: Ctx, sid: str) -> str:
    rec = c.reg.get(sid)
    if rec and rec.get("source_file") and rec.get("source_line"):
        return f"{rec['source_file']}:{rec['source_line']}"
    return CITE[sid]


def _ta(c: Ctx, name: str) -> Any:
    """A TrainingArguments value as the file gives it, else its default from the registry."""
    if name in c.data:
        return c.data[name]
    try:
        return registry_default(f"transformers:TrainingArguments.{name}", c.reg)
    except KeyError:
        return None


def _default(c: Ctx, path: str) -> Any:
    """DeepSpeed's default for a config key as JSON text (the registry's), "unset" when it records none."""
    rec = c.reg.get(f"deepspeed:{path}")
    return rec["default"] if rec and rec.get("default") is not None else "unset"


def _flags(c: Ctx) -> dict[str, Any]:
    args = c.data.get("launcher_args")
    return {str(k).replace("-", "_"): v for k, v in args.items()} if isinstance(args, dict) else {}


def _on(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.lower() in ("true", "1", "yes"))


def _ds(obj: dict[str, Any]) -> dict[str, Any]:
    return {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, **obj}


ACC = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 2\n"


# ---------------------------------------------------------------- DeepSpeed config


@rule(
    "KB050",
    "allreduce-sum-with-zero3",
    "error",
    None,
    views=("deepspeed",),
    summary='`gradient_allreduce_op: "sum"` at ZeRO stage 3',
    effect="ValueError in DeepSpeedConfig",
    bad=[Case(_ds({"gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}), "sum at stage 3")],
    ok=[
        Case(_ds({"gradient_allreduce_op": "sum", "zero_optimization": {"stage": 2}}), "sum at stage 2"),
        Case(_ds({"zero_optimization": {"stage": 3}}), "stage 3, default op"),
    ],
    validity=True,
)
def kb050(c: Ctx) -> None:
    op = c.data.get("gradient_allreduce_op")
    if isinstance(op, str) and op.lower() == "sum" and c.stage == 3:
        sid = RULE_SITES["KB050"][0]
        c.add(
            c.prefix + "gradient_allreduce_op",
            f'`gradient_allreduce_op: "sum"` is refused at ZeRO stage 3: DeepSpeedConfig raises ValueError '
            f"({cite(c, sid)}).",
            "drop `gradient_allreduce_op` (the default averages), or use ZeRO stage 1/2 if you need a sum",
            f'ZeRO stage 3 不支持 `gradient_allreduce_op: "sum"`：DeepSpeedConfig 会报 ValueError（{cite(c, sid)}）。',
            "删掉 `gradient_allreduce_op`（默认是取平均）；确实要求和的话，改用 ZeRO stage 1/2",
        )


@rule(
    "KB051",
    "master-weights-need-zero",
    "error",
    None,
    views=("deepspeed",),
    summary="`fp16_master_weights_and_grads` / `bf16_master_weights_and_grads` / `bf16_optimizer_states` without "
    "ZeRO (stage 0), or `bf16_optimizer_states` without `bf16_master_weights_and_grads`",
    effect="AssertionError in DeepSpeedConfig",
    bad=[
        Case(_ds({"bf16": {"enabled": True, "bf16_master_weights_and_grads": True}}), "bf16 master weights, no ZeRO"),
        Case(
            _ds({"fp16": {"enabled": True, "fp16_master_weights_and_grads": True}, "zero_optimization": {"stage": 0}}),
            "fp16 master weights, stage 0",
        ),
        Case(
            _ds({"bf16": {"enabled": True, "bf16_optimizer_states": True}, "zero_optimization": {"stage": 2}}),
            "optimizer states without master weights",
        ),
    ],
    ok=[
        Case(
            _ds({"bf16": {"enabled": True, "bf16_master_weights_and_grads": True}, "zero_optimization": {"stage": 2}}),
            "bf16 master weights at stage 2",
        ),
        Case(
            _ds(
                {
                    "bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
                    "zero_optimization": {"stage": 1},
                }
            ),
            "both at stage 1",
        ),
    ],
    validity=True,
)
def kb051(c: Ctx) -> None:
    sites = RULE_SITES["KB051"]
    for sec, key in (
        ("fp16", "fp16_master_weights_and_grads"),
        ("bf16", "bf16_master_weights_and_grads"),
        ("bf16", "bf16_optimizer_states"),
    ):
        blk = c.data.get(sec) or (c.data.get("bfloat16") if sec == "bf16" else None)
        if not isinstance(blk, dict) or blk.get(key) is not True:
            continue
        default = _default(c, f"{sec}.{key}")
        if c.stage == 0:
            sid = next(s for s in sites if key.lower() in s.lower() and "only-supported" in s)
            c.add(
                f"{c.prefix}{sec}.{key}",
                f"`{sec}.{key}` needs ZeRO stage 1, 2 or 3; at stage 0 DeepSpeedConfig raises AssertionError "
                f"({cite(c, sid)}).",
                f"set `zero_optimization.stage` to 1 or more, or remove `{key}` (it is then {default}, "
                "DeepSpeed's default: that setting is off)",
                f"`{sec}.{key}` 只能配合 ZeRO stage 1、2、3 使用；stage 0 下 DeepSpeedConfig 会报 AssertionError"
                f"（{cite(c, sid)}）。",
                f"把 `zero_optimization.stage` 设成 1 及以上，或者删掉 `{key}`（那样它就是 DeepSpeed 的默认值 {default}，"
                "也就是不开这个设置）",
            )
        elif key == "bf16_optimizer_states" and blk.get("bf16_master_weights_and_grads") is not True:
            sid = next(s for s in sites if "requires-bf16_master" in s)
            c.add(
                f"{c.prefix}{sec}.{key}",
                f"`bf16.bf16_optimizer_states` requires `bf16.bf16_master_weights_and_grads: true`; without it "
                f"DeepSpeedConfig raises AssertionError ({cite(c, sid)}).",
                "add `bf16_master_weights_and_grads: true` to the `bf16` block, or remove `bf16_optimizer_states` "
                f"(it is then {_default(c, 'bf16.bf16_optimizer_states')}, DeepSpeed's default: optimizer states not "
                "kept in bf16)",
                f"`bf16.bf16_optimizer_states` 必须同时开 `bf16.bf16_master_weights_and_grads: true`，否则 "
                f"DeepSpeedConfig 会报 AssertionError（{cite(c, sid)}）。",
                "在 `bf16` 里加上 `bf16_master_weights_and_grads: true`，或者删掉 `bf16_optimizer_states`"
                f"（那样它就是 DeepSpeed 的默认值 {_default(c, 'bf16.bf16_optimizer_states')}，optimizer states 不用 bf16 保存）",
            )


@rule(
    "KB052",
    "max-grad-norm-in-optimizer-params",
    "error",
    None,
    views=("deepspeed",),
    summary="`max_grad_norm` inside `optimizer.params` (DeepSpeed's own optimizer)",
    effect="warning in DeepSpeedConfig, then ValueError when the engine builds the optimizer",
    bad=[
        Case(
            _ds({"optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "max_grad_norm": 1.0}}}),
            "max_grad_norm in AdamW params",
        )
    ],
    ok=[
        Case(_ds({"optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "gradient_clipping": 1.0}), "clipping"),
    ],
    validity=True,
)
def kb052(c: Ctx) -> None:
    opt = c.data.get("optimizer")
    params = opt.get("params") if isinstance(opt, dict) else None
    if isinstance(params, dict) and "max_grad_norm" in params:
        warn, err = (cite(c, s) for s in sorted(RULE_SITES["KB052"], key=lambda s: "warning" in s, reverse=True))
        c.add(
            c.prefix + "optimizer.params.max_grad_norm",
            f"DeepSpeed does not take `max_grad_norm` as an optimizer parameter: DeepSpeedConfig logs a warning "
            f"({warn}) and the engine raises ValueError when it builds the optimizer ({err}).",
            "remove it from `optimizer.params` and set the top-level `gradient_clipping` instead",
            f"DeepSpeed 不接受把 `max_grad_norm` 当作优化器参数：DeepSpeedConfig 先打一条 warning（{warn}），"
            f"engine 创建优化器时再报 ValueError（{err}）。",
            "从 `optimizer.params` 里删掉它，改在顶层设置 `gradient_clipping`",
        )


# ---------------------------------------------------------------- accelerate config and launch line


@rule(
    "KB053",
    "accelerate-settings-with-ds-config-file",
    "error",
    None,
    views=("accelerate",),
    summary="accelerate YAML with `deepspeed_config_file` and accelerate's own DeepSpeed settings "
    "(`zero_stage`, `offload_*`, `gradient_*`, `zero3_save_16bit_model`, or a top-level `mixed_precision`)",
    effect="ValueError from DeepSpeedPlugin when the script starts",
    bad=[
        Case(ACC + "deepspeed_config:\n  deepspeed_config_file: ds.json\n  zero_stage: 2\n", "zero_stage too"),
        Case(ACC + "mixed_precision: bf16\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n", "mixed_precision"),
    ],
    ok=[
        Case(ACC + "deepspeed_config:\n  deepspeed_config_file: ds.json\n  zero3_init_flag: false\n", "init flag only"),
        Case(ACC + "mixed_precision: bf16\ndeepspeed_config:\n  zero_stage: 2\n", "no config file"),
    ],
    validity=True,
)
def kb053(c: Ctx) -> None:
    dsc = c.data.get("deepspeed_config")
    if not isinstance(dsc, dict) or dsc.get("deepspeed_config_file") in (None, "", "none"):
        return
    if str(c.data.get("distributed_type", "")).upper() != "DEEPSPEED":
        return  # the launcher reads the deepspeed block only for DEEPSPEED
    clash = [k for k in dsc if k in IGNORED_WITH_DS_FILE]
    where = [f"deepspeed_config.{k}" for k in clash]
    if "mixed_precision" in c.data:  # the launcher adds it to the fields it reports when the YAML sets it
        clash.append("mixed_precision")
        where.append("mixed_precision")
    if not clash:
        return
    sid = RULE_SITES["KB053"][0]
    names = ", ".join(f"`{k}`" for k in clash)
    c.add(
        where[0],
        f"with `deepspeed_config_file` set, accelerate refuses its own DeepSpeed settings ({names}): "
        f"DeepSpeedPlugin raises ValueError when the script starts ({cite(c, sid)}), even for `mixed_precision: no`.",
        "move them into the DeepSpeed JSON (`zero_optimization.stage`, `bf16.enabled`, ...) and delete them from "
        "the YAML",
        f"设置了 `deepspeed_config_file` 之后，accelerate 不再接受它自己的 DeepSpeed 设置（{names}）："
        f"脚本一启动 DeepSpeedPlugin 就会报 ValueError（{cite(c, sid)}），哪怕写的是 `mixed_precision: no`。",
        "把这些设置挪进 DeepSpeed 的 JSON（`zero_optimization.stage`、`bf16.enabled` 等），再从 YAML 里删掉",
    )


@rule(
    "KB054",
    "conflicting-launch-modes",
    "error",
    None,
    views=("launch",),
    summary="`accelerate launch` with more than one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, "
    "`--use_fsdp`",
    effect="ValueError before anything starts",
    bad=[Case("accelerate launch --multi_gpu --use_deepspeed --num_processes 2 train.py", "multi_gpu + deepspeed")],
    ok=[
        Case("accelerate launch --use_deepspeed --num_processes 2 train.py", "deepspeed only"),
        Case("deepspeed --num_gpus 2 train.py --deepspeed ds.json", "deepspeed launcher"),
    ],
    validity=True,
)
def kb054(c: Ctx) -> None:
    if c.data.get("launcher") != "accelerate launch":
        return
    fl = _flags(c)
    on = [m for m in LAUNCH_MODES if _on(fl.get(m))]
    if len(on) > 1:
        sid = RULE_SITES["KB054"][0]
        names = ", ".join(f"`--{m}`" for m in on)
        c.add(
            f"launcher_args.{on[1]}",
            f"`accelerate launch` takes only one of `--cpu`, `--multi_gpu`, `--tpu`, `--use_deepspeed`, `--use_fsdp`; "
            f"with {names} it raises ValueError before anything starts ({cite(c, sid)}).",
            "keep one: `--use_deepspeed` already runs on several GPUs (set `--num_processes`)",
            f"`accelerate launch` 的 `--cpu`、`--multi_gpu`、`--tpu`、`--use_deepspeed`、`--use_fsdp` 只能选一个；"
            f"同时给 {names} 会直接报 ValueError，什么都不会启动（{cite(c, sid)}）。",
            "只留一个：`--use_deepspeed` 本身就能跑多卡（用 `--num_processes` 指定进程数）",
        )


@rule(
    "KB055",
    "multi-gpu-one-process",
    "error",
    None,
    views=("launch",),
    summary="`accelerate launch --multi_gpu` with `--num_processes` below 2",
    effect="ValueError before anything starts",
    bad=[Case("accelerate launch --multi_gpu --num_processes 1 train.py", "one process")],
    ok=[
        Case("accelerate launch --multi_gpu --num_processes 2 train.py", "two processes"),
        Case("accelerate launch --num_processes 1 train.py", "one process, no multi_gpu"),
    ],
    validity=True,
)
def kb055(c: Ctx) -> None:
    if c.data.get("launcher") != "accelerate launch":
        return
    fl = _flags(c)
    n = _int(fl.get("num_processes"))
    if _on(fl.get("multi_gpu")) and n is not None and n < 2:
        sid = RULE_SITES["KB055"][0]
        c.add(
            "launcher_args.num_processes",
            f"`--multi_gpu` needs at least 2 processes; with `--num_processes {n}` accelerate raises ValueError "
            f"({cite(c, sid)}).",
            "drop `--multi_gpu` for one GPU, or set `--num_processes` to the number of GPUs",
            f"`--multi_gpu` 至少要 2 个进程；`--num_processes {n}` 时 accelerate 会报 ValueError（{cite(c, sid)}）。",
            "单卡就去掉 `--multi_gpu`，多卡就把 `--num_processes` 设成 GPU 数",
        )


# ---------------------------------------------------------------- TrainingArguments


def _strategy(v: Any) -> str:
    return str(v).lower() if v is not None else "no"


@rule(
    "KB056",
    "load-best-model-strategy-mismatch",
    "error",
    None,
    views=("training_args",),
    summary="`load_best_model_at_end` with save and eval strategies that differ (the defaults included), or save "
    "steps that are not a multiple of the eval steps",
    effect="ValueError in TrainingArguments",
    bad=[
        Case({"output_dir": "out", "load_best_model_at_end": True}, "defaults: eval no, save steps"),
        Case(
            {
                "output_dir": "out",
                "load_best_model_at_end": True,
                "eval_strategy": "steps",
                "eval_steps": 300,
                "save_steps": 500,
            },
            "500 not a multiple of 300",
        ),
    ],
    ok=[
        Case(
            {
                "output_dir": "out",
                "load_best_model_at_end": True,
                "eval_strategy": "steps",
                "eval_steps": 250,
                "save_steps": 500,
            },
            "500 is a multiple of 250",
        ),
        Case(
            {"output_dir": "out", "load_best_model_at_end": True, "eval_strategy": "epoch", "save_strategy": "epoch"},
            "both epoch",
        ),
        Case({"output_dir": "out", "eval_strategy": "steps", "eval_steps": 300}, "no load_best_model_at_end"),
    ],
    validity=True,
)
def kb056(c: Ctx) -> None:
    if not truthy(c.data.get("load_best_model_at_end")):
        return
    save, ev = _strategy(_ta(c, "save_strategy")), _strategy(_ta(c, "eval_strategy"))
    if save == "best":
        return
    sites = RULE_SITES["KB056"]
    if ev != save:
        sid = next(s for s in sites if "save-and-eval" in s)
        c.add(
            "load_best_model_at_end",
            f"`load_best_model_at_end` needs the same save and eval strategy; here eval is `{ev}` and save is "
            f"`{save}` (unset ones are the defaults), so TrainingArguments raises ValueError ({cite(c, sid)}).",
            f'set `eval_strategy: {save}` (and `eval_steps`), or `save_strategy: "best"`',
            f"`load_best_model_at_end` 要求保存策略和评估策略一致；这里评估是 `{ev}`、保存是 `{save}`"
            f"（没写的取默认值），TrainingArguments 会报 ValueError（{cite(c, sid)}）。",
            f'把 `eval_strategy` 设成 `{save}`（并设 `eval_steps`），或者用 `save_strategy: "best"`',
        )
        return
    if ev != "steps":
        return
    save_steps = _ta(c, "save_steps")
    eval_steps = c.data.get("eval_steps")
    if eval_steps in (None, 0):  # TrainingArguments falls back to logging_steps
        eval_steps = _ta(c, "logging_steps")
    s, e = _int(save_steps), _int(eval_steps)
    if s is None or e is None or s < 1 or e < 1 or isinstance(save_steps, float) or isinstance(eval_steps, float):
        return  # ratios (< 1) are checked by TrainingArguments in ways this rule does not redo
    if s % e:
        sid = next(s for s in sites if s.endswith(".3"))
        c.add(
            "save_steps" if "save_steps" in c.data else "eval_steps",
            f"`load_best_model_at_end` needs `save_steps` to be a multiple of `eval_steps`; {s} is not a multiple "
            f"of {e}, so TrainingArguments raises ValueError ({cite(c, sid)}).",
            f"make `save_steps` a multiple of {e} (e.g. {e * max(1, s // e)})",
            f"`load_best_model_at_end` 要求 `save_steps` 是 `eval_steps` 的整数倍；{s} 不是 {e} 的整数倍，"
            f"TrainingArguments 会报 ValueError（{cite(c, sid)}）。",
            f"把 `save_steps` 改成 {e} 的整数倍（比如 {e * max(1, s // e)}）",
        )


@rule(
    "KB057",
    "plateau-scheduler-without-eval",
    "error",
    None,
    views=("training_args",),
    summary="`lr_scheduler_type` `reduce_lr_on_plateau` or `greedy` with no evaluation (`eval_strategy` `no`, the default)",
    effect="ValueError in TrainingArguments",
    bad=[
        Case({"output_dir": "out", "lr_scheduler_type": "reduce_lr_on_plateau"}, "no eval"),
        Case({"output_dir": "out", "lr_scheduler_type": "greedy", "eval_strategy": "no"}, "greedy, eval no"),
    ],
    ok=[
        Case({"output_dir": "out", "lr_scheduler_type": "reduce_lr_on_plateau", "eval_strategy": "epoch"}, "eval"),
        Case({"output_dir": "out", "lr_scheduler_type": "cosine"}, "cosine"),
    ],
    validity=True,
)
def kb057(c: Ctx) -> None:
    sched = str(c.data.get("lr_scheduler_type", "")).lower()
    if sched not in EVAL_SCHEDULERS:
        return
    if _strategy(_ta(c, "eval_strategy")) == "no":
        sid = next(s for s in RULE_SITES["KB057"] if sched in s)
        c.add(
            "lr_scheduler_type",
            f"`{sched}` changes the learning rate from the eval metric, and no evaluation is configured: "
            f"TrainingArguments raises ValueError ({cite(c, sid)}).",
            "set `eval_strategy` (`steps` with `eval_steps`, or `epoch`) and pass an eval dataset",
            f"`{sched}` 要根据评估指标调整学习率，但这里没有配置评估：TrainingArguments 会报 ValueError"
            f"（{cite(c, sid)}）。",
            "设置 `eval_strategy`（`steps` 加 `eval_steps`，或 `epoch`），并传入评估数据集",
        )


@rule(
    "KB058",
    "training-args-full-eval-fp16-and-bf16",
    "error",
    None,
    views=("training_args",),
    summary="TrainingArguments with both `fp16_full_eval` and `bf16_full_eval` true (`fp16` + `bf16` is KB036, "
    "the DeepSpeed blocks KB011)",
    effect="ValueError in TrainingArguments",
    bad=[Case({"output_dir": "out", "fp16_full_eval": True, "bf16_full_eval": True}, "both for eval")],
    ok=[
        Case({"output_dir": "out", "bf16_full_eval": True}, "bf16 eval only"),
        Case({"output_dir": "out", "fp16": True, "bf16_full_eval": True}, "fp16 training, bf16 eval"),
    ],
    validity=True,
)
def kb058(c: Ctx) -> None:
    if truthy(c.data.get("fp16_full_eval")) and truthy(c.data.get("bf16_full_eval")):
        sid = RULE_SITES["KB058"][0]
        c.add(
            "fp16_full_eval",
            f"`fp16_full_eval` and `bf16_full_eval` are both true: TrainingArguments raises ValueError ({cite(c, sid)}).",
            "keep one (`bf16_full_eval` on Ampere or newer)",
            f"`fp16_full_eval` 和 `bf16_full_eval` 同时为 true：TrainingArguments 会报 ValueError（{cite(c, sid)}）。",
            "只留一个（Ampere 及更新的卡用 `bf16_full_eval`）",
        )


# ---------------------------------------------------------------- silent drops (no raise / warn site: a code line)

# where accelerate's launcher decides whether DeepSpeed runs (the test finds this statement in the installed source)
CODE_LINES: dict[str, tuple[str, str]] = {
    "use_deepspeed": (
        "accelerate/commands/launch.py:1228",
        "args.use_deepspeed = defaults.distributed_type == DistributedType.DEEPSPEED",
    ),
}


@rule(
    "KB059",
    "deepspeed-block-not-read",
    "warning",
    None,
    views=("accelerate",),
    summary="accelerate YAML with a non-empty `deepspeed_config` and a `distributed_type` other than `DEEPSPEED`",
    effect="the launcher starts another mode and never passes the block on: no DeepSpeed, no warning "
    "(shown in `tests/test_lint_oracle_sites.py`)",
    bad=[
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\n"
            "deepspeed_config:\n  zero_stage: 3\n  offload_optimizer_device: cpu\n",
            "MULTI_GPU with a ZeRO-3 block",
        )
    ],
    ok=[
        Case(ACC + "deepspeed_config:\n  zero_stage: 3\n", "DEEPSPEED"),
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 2\ndeepspeed_config: {}\n",
            "empty block, as accelerate config writes it",
        ),
    ],
)
def kb059(c: Ctx) -> None:
    dsc, dt = c.data.get("deepspeed_config"), c.data.get("distributed_type")
    if not isinstance(dsc, dict) or not dsc or dt is None or str(dt).upper() == "DEEPSPEED":
        return
    where = CODE_LINES["use_deepspeed"][0]
    c.add(
        "deepspeed_config",
        f"`distributed_type` is `{dt}`, so `accelerate launch` does not start DeepSpeed ({where}) and this "
        "`deepspeed_config` block is never passed on: the run goes without ZeRO and without a warning.",
        "set `distributed_type: DEEPSPEED` (or add `--use_deepspeed` to the launch line), or delete the block "
        "(it is not used now, so deleting it changes nothing)",
        f"`distributed_type` 是 `{dt}`，`accelerate launch` 不会启动 DeepSpeed（{where}），这个 `deepspeed_config` "
        "块根本不会被传下去：训练照常跑，但没有 ZeRO，也没有任何提示。",
        "把 `distributed_type` 改成 `DEEPSPEED`（或在启动命令里加 `--use_deepspeed`），要么删掉这个块"
        "（它现在本来就没被用到，删了不会有任何变化）",
    )


# the switch that turns ZeRO's refusal of an optimizer it has not tested into a warning, and what ZeRO then does with
# that optimizer (deepspeed 0.19.8, transformers 5.24.0); tests/test_lint_oracle_sites.py checks each line and runs
# the rule's cases through deepspeed.initialize on CPU
CODE_LINES |= {
    "zero_test": ("deepspeed/runtime/engine.py:2298", "if not is_zero_supported_optimizer(basic_optimizer):"),
    "zero_warn": (
        "deepspeed/runtime/engine.py:2304",
        'logger.warning("**** You are using ZeRO with an untested optimizer, proceed with caution *****")',
    ),
    "zero_list": ("deepspeed/runtime/zero/utils.py:45", "ZERO_SUPPORTED_OPTIMIZERS = ["),
    "zero_type": ("deepspeed/runtime/zero/utils.py:77", "return type(optimizer) in ZERO_SUPPORTED_OPTIMIZERS"),
    "flat_12": (
        "deepspeed/runtime/zero/stage_1_and_2.py:584",
        "param_group['params'] = [self.single_partition_of_fp32_groups[i]]",
    ),
    "flat_3": ("deepspeed/runtime/zero/stage3.py:1235", "def _optimizer_step(self, sub_group_id):"),
    "hf_sets": ("transformers/integrations/deepspeed.py:589", 'config["zero_allow_untested_optimizer"] = True'),
}


def _has_auto(v: Any) -> bool:
    """An "auto" anywhere: the file is written for the HF Trainer / accelerate, which fill it."""
    if isinstance(v, dict):
        return any(_has_auto(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_auto(x) for x in v)
    return v == "auto"


@rule(
    "KB060",
    "zero-untested-optimizer-allowed",
    "warning",
    None,
    views=("deepspeed",),
    summary="`zero_allow_untested_optimizer: true` with ZeRO and no `optimizer` section in a config for plain "
    '`deepspeed.initialize` (no `"auto"`): the script\'s own optimizer runs under ZeRO whatever its class',
    effect="ZeRO's refusal of an optimizer class it has not tested becomes a warning; ZeRO hands the optimizer flat "
    "fp32 partitions, so one that looks at each tensor as a whole (LAMB / LARS trust ratios, Adafactor) sees a "
    "partition instead (shown in `tests/test_lint_oracle_sites.py`)",
    bad=[
        Case(
            _ds({"zero_optimization": {"stage": 1}, "zero_allow_untested_optimizer": True}),
            "the script's optimizer (DeepSpeed issue 1217: apex LAMB) let through at stage 1",
        ),
        Case(
            _ds({"zero_optimization": {"stage": 3}, "zero_allow_untested_optimizer": True}),
            "stage 3",
        ),
    ],
    ok=[
        Case(
            _ds(
                {
                    "zero_optimization": {"stage": 1},
                    "zero_allow_untested_optimizer": True,
                    "optimizer": {"type": "AdamW"},
                }
            ),
            "DeepSpeed builds the optimizer the config names (an untested `optimizer.type` is KB071's)",
        ),
        Case(
            {
                "train_micro_batch_size_per_gpu": "auto",
                "zero_optimization": {"stage": 2},
                "zero_allow_untested_optimizer": True,
            },
            "a config for the HF Trainer, which sets the switch itself",
        ),
        Case(_ds({"zero_optimization": {"stage": 0}, "zero_allow_untested_optimizer": True}), "no ZeRO"),
        Case(_ds({"zero_optimization": {"stage": 2}}), "no switch: an untested optimizer is refused"),
    ],
)
def kb060(c: Ctx) -> None:
    if c.stage < 1 or not c.data.get("zero_allow_untested_optimizer") or "optimizer" in c.data:
        return  # tested for truth as DeepSpeed tests it (engine.py's assert); an `optimizer` section: KB071
    if c.hf or _has_auto(c.data):
        return  # the HF Trainer sets the switch itself when the config names no optimizer: it changes nothing there
    w = {k: v[0] for k, v in CODE_LINES.items()}
    c.add(
        c.prefix + "zero_allow_untested_optimizer",
        f"With ZeRO stage {c.stage} and no `optimizer` section, the optimizer is the one the script passes to "
        f"deepspeed.initialize. ZeRO runs only the classes it lists as tested ({w['zero_list']}, an exact type test at "
        f"{w['zero_type']}, made at {w['zero_test']}) and refuses any other; `zero_allow_untested_optimizer: true` "
        f"turns that refusal into a warning ({w['zero_warn']}), so any optimizer runs. ZeRO hands it one flat fp32 "
        f"partition per parameter group in place of the model's tensors ({w['flat_12']}; ZeRO-3: {w['flat_3']}): an "
        "optimizer that looks at each tensor as a whole, such as LAMB's or LARS's layer-wise trust ratio (one norm "
        "per tensor) or Adafactor's factored second moment (for 2-D tensors), sees one flat 1-D partition instead "
        "and trains differently than it would without ZeRO. (Under the HF Trainer the switch changes nothing: with no "
        f"`optimizer` section the Trainer sets it itself, {w['hf_sets']}.)",
        'name an optimizer ZeRO is tested with in the config (`"optimizer": {"type": "AdamW", ...}`); keep '
        "the switch only for an optimizer that updates each element on its own (SGD, Adam-like)",
        f"ZeRO stage {c.stage}、配置里又没有 `optimizer` 段时，优化器是脚本传给 deepspeed.initialize 的那个。ZeRO "
        f"只运行它列为已测试的类（{w['zero_list']}，{w['zero_type']} 按类型精确比较，检查在 {w['zero_test']}），"
        f"其他的一律拒绝；`zero_allow_untested_optimizer: true` 把这个拒绝变成一条 warning（{w['zero_warn']}），"
        f"于是什么优化器都能跑。ZeRO 交给它的是每个参数组一块扁平的 fp32 分片，而不是模型原来的张量"
        f"（{w['flat_12']}；ZeRO-3：{w['flat_3']}）：把每个张量当作整体来看的优化器，比如 LAMB / LARS 的逐层 "
        "trust ratio（每个张量一个范数）、Adafactor 的分解二阶矩（针对二维张量），看到的只是一块扁平的一维分片，"
        "训练结果和不用 ZeRO 时不一样。（在 HF Trainer 下这个开关写不写都一样：配置里没有 `optimizer` 段时 Trainer "
        f"会自己把它打开，{w['hf_sets']}。）",
        '在配置里写一个 ZeRO 测试过的优化器（`"optimizer": {"type": "AdamW", ...}`）；只有逐元素更新的优化器'
        "（SGD、Adam 一类）才保留这个开关",
    )
