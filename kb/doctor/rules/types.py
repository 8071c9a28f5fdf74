"""Values DeepSpeed reads without validation: the wrong JSON type where no pydantic model converts it.

Most top-level keys (batch sizes, clipping, logging switches) and every optimizer / scheduler parameter
are read with a plain ``dict.get`` (deepspeed 0.19.8 runtime/config_utils.py ``get_scalar_param``) and
used as they are. A quoted number then meets an int in a comparison, a string "false" is tested for
truth, a float passes an int check, and "auto" reaches a constructor. The HF Trainer compares several
of these values with TrainingArguments, where a string never equals a number.

Every effect a message states was observed by running the real code on CPU:
``tests/test_lint_oracle_types.py`` (one test per bad and ok case of these rules, and the file:line
cited here checked against the installed sources). The table in docs/lint.md ("Values DeepSpeed reads
without validation") lists every such key.
"""

from __future__ import annotations

import re
from typing import Any

# shared with the "auto" rule (KB007): the engine holds them, this module re-exports them
from kb.doctor.engine import ACC_AUTO, ADAM_NUMBERS, ADAM_TYPES, DS_SCHED, SCHED_NUMBERS, Case, Ctx, rule  # noqa: F401

# --------------------------------------------------------------- what the installed packages do (file:line)

DS_CONFIG = "deepspeed/runtime/config.py"
DS_ENGINE = "deepspeed/runtime/engine.py"
HF_DS = "transformers/integrations/deepspeed.py"

# top-level keys DeepSpeed computes with as read; a string there raises TypeError (where, and at which step)
#   key: (when, file, line)
RAW_NUMERIC: dict[str, tuple[str, str, int]] = {
    # batch keys: the derivation (train_batch // micro_batch, ...) or the check (train_batch > 0, ...) of
    # _set_batch_related_parameters / _batch_assertion, whichever meets the string first
    "train_batch_size": ("config", DS_CONFIG, 590),
    "train_micro_batch_size_per_gpu": ("config", DS_CONFIG, 590),
    "gradient_accumulation_steps": ("config", DS_CONFIG, 590),
    "vocabulary_size": ("config", DS_CONFIG, 718),  # vocabulary_size % TENSOR_CORE_ALIGN_SIZE
    "gradient_clipping": ("step", DS_ENGINE, 3506),  # if self.gradient_clipping() > 0.0
    "steps_per_print": ("step", DS_ENGINE, 3554),  # (self.global_steps + 1) % self.steps_per_print()
    "gradient_predivide_factor": ("step0", DS_ENGINE, 3809),  # 1.0 / self.gradient_predivide_factor() (no ZeRO)
}
BATCH_CODE = "_batch_assertion / _set_batch_related_parameters"  # deepspeed/runtime/config.py:590-652
# a bool switch read raw and combined with `|`: any string raises TypeError when the config is built
WALL_CLOCK = ("wall_clock_breakdown", DS_CONFIG, 533)

# top-level bool switches read raw and only tested for truth: a string "false" is a non-empty string, so true
#   key: (file, line) of where the engine tests it
RAW_BOOL: dict[str, tuple[str, int]] = {
    "prescale_gradients": (DS_ENGINE, 1737),  # return not self._config.prescale_gradients
    "zero_allow_untested_optimizer": (DS_ENGINE, 2300),  # assert (self.zero_allow_untested_optimizer())
    "zero_force_ds_cpu_optimizer": (DS_ENGINE, 2344),  # if self.zero_force_ds_cpu_optimizer():
    "memory_breakdown": (DS_ENGINE, 2934),  # see_memory_usage(..., force=self.memory_breakdown())
    "dump_state": (DS_ENGINE, 714),  # if self.dump_state():
    "dataloader_drop_last": (DS_ENGINE, 2880),  # passed as DataLoader's drop_last
    "disable_python_gc": (DS_ENGINE, 1278),  # if self._config.disable_python_gc:
    "managed_gradient_accumulation": (DS_ENGINE, 2030),  # if not self.managed_gradient_accumulation():
}
# optimizer.params switches DeepSpeed pops and tests for truth when it builds Adam / AdamW
OPT_BOOL: dict[str, tuple[str, int]] = {
    "torch_adam": (DS_ENGINE, 2380),  # if torch_adam:
    "adam_w_mode": (DS_ENGINE, 2490),  # ... == ADAMW_OPTIMIZER or adam_w_mode
}

BATCH = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")


# keys the HF Trainer compares with TrainingArguments (fill_match with must_match): a value that is not
# "auto" and differs (a string never equals the number) is a mismatch; trainer_config_finalize raises
# ValueError for them at Trainer.train (transformers 5.24.0 integrations/deepspeed.py)
HF_MATCHED: dict[str, int] = {
    "train_micro_batch_size_per_gpu": 144,
    "gradient_accumulation_steps": 150,
    "train_batch_size": 155,
    "gradient_clipping": 161,
    "optimizer.params.lr": 163,
    "optimizer.params.betas": 164,
    "optimizer.params.eps": 169,
    "optimizer.params.weight_decay": 170,
    "scheduler.params.warmup_max_lr": 173,
    "fp16.enabled": 183,
    "bf16.enabled": 184,
    "scheduler.params.total_num_steps": 245,
    "scheduler.params.warmup_num_steps": 252,
}
HF_RAISE_LINE = 260  # raise ValueError("Please correct the following DeepSpeed config values that mismatch ...")

_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_FALSE = ("false", "no", "off", "0", "f", "n")

ORACLE = "tests/test_lint_oracle_types.py"  # proves this module's validity rules (kb.doctor.engine.Rule.oracle)


def quoted_number(v: Any) -> bool:
    """A JSON string that reads as a number ("8", "1.0", "5e-5")."""
    return isinstance(v, str) and bool(_NUMBER.fullmatch(v))


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _false_string(v: Any) -> bool:
    return isinstance(v, str) and v.strip().lower() in _FALSE


def _at(file: str, line: int) -> str:
    return f"{file}:{line}"


def _section(c: Ctx, name: str) -> tuple[str | None, dict[str, Any]]:
    """(type, params) of the `optimizer` / `scheduler` section, when it is a mapping."""
    sec = c.data.get(name)
    if not isinstance(sec, dict):
        return None, {}
    params = sec.get("params")
    t = sec.get("type")
    return (t if isinstance(t, str) else None), (params if isinstance(params, dict) else {})


# with auto_find_batch_size the Trainer fills these two but does not compare them (must_match=False)
HF_NOT_MATCHED_WITH_AUTO_FIND = ("train_micro_batch_size_per_gpu", "train_batch_size")


def _hf_checks(c: Ctx, path: str) -> bool:
    """The HF Trainer compares this key with TrainingArguments first (KB046 says what happens)."""
    if not c.hf or path not in HF_MATCHED:
        return False
    return not (path in HF_NOT_MATCHED_WITH_AUTO_FIND and c.cfg.data.get("auto_find_batch_size") is True)


def _string_param(v: Any) -> bool:
    """A number written as a string, or a list (betas) holding one."""
    if isinstance(v, list):
        return any(isinstance(x, str) and x != "auto" for x in v)
    return isinstance(v, str) and v != "auto"


# --------------------------------------------------------------- the rules


@rule(
    "KB040",
    "quoted-number",
    "error",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed",),
    summary="a number written as a string in a top-level key DeepSpeed does not validate (batch sizes, "
    "`gradient_clipping`, `steps_per_print`, ...), or any string in `wall_clock_breakdown`",
    effect="TypeError when the config is built (batch sizes, `vocabulary_size`, `wall_clock_breakdown`) or at "
    "the first step (`gradient_clipping`, `steps_per_print`)",
    bad=[
        Case({"train_micro_batch_size_per_gpu": "8", "gradient_accumulation_steps": 1}, "quoted micro batch"),
        Case({"train_batch_size": "16", "train_micro_batch_size_per_gpu": 1}, "quoted train_batch_size, derived"),
        Case({"train_micro_batch_size_per_gpu": 1, "gradient_clipping": "1.0"}, "quoted clipping"),
        Case({"train_micro_batch_size_per_gpu": 1, "steps_per_print": "10"}, "quoted steps_per_print"),
        Case({"train_micro_batch_size_per_gpu": 1, "wall_clock_breakdown": "false"}, "wall_clock_breakdown string"),
        Case({"train_micro_batch_size_per_gpu": 1, "vocabulary_size": "32000"}, "quoted vocabulary_size"),
        Case({"train_micro_batch_size_per_gpu": 1, "gradient_predivide_factor": "2"}, "quoted predivide, no ZeRO"),
    ],
    ok=[
        Case({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1}, "numbers"),
        Case({"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0, "steps_per_print": 10}, "numbers"),
        Case({"train_micro_batch_size_per_gpu": 1, "wall_clock_breakdown": False}, "a JSON bool"),
        Case({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": "2"}}, "validated: KB019"),
    ],
    validity=True,
)
def kb040(c: Ctx) -> None:
    stage = c.stage
    for key, (when, file, line) in RAW_NUMERIC.items():
        v = c.data.get(key)
        if not quoted_number(v) or _hf_checks(c, key) or (when == "step0" and stage != 0):
            continue
        where = f"{BATCH_CODE}, {DS_CONFIG}:590-652" if key in BATCH else _at(file, line)
        if when == "config":
            at = "when the config is built, inside deepspeed.initialize"
            at_zh = "`deepspeed.initialize` 构建 config 时就会报 TypeError"
        else:
            at = "at the first optimizer step, after deepspeed.initialize has succeeded"
            at_zh = "`deepspeed.initialize` 能通过，到第一次 optimizer step 才报 TypeError"
        c.add(
            c.prefix + key,
            f"`{key}` = {v!r} is a string: DeepSpeed does not validate this key and computes with the string "
            f"as it is: TypeError {at} ({where}).",
            f"write the number: {v.strip()}",
            f"`{key}` = {v!r} 是字符串：DeepSpeed 不校验这个 key，直接拿字符串去做比较和运算，{at_zh}（{where}）。",
            f"去掉引号，直接写数字 {v.strip()}",
        )
    key, file, line = WALL_CLOCK
    v = c.data.get(key)
    if isinstance(v, str):
        c.add(
            c.prefix + key,
            f"`{key}` = {v!r} is a string: DeepSpeed combines it with a bool using `|`, which raises TypeError "
            f"when the config is built ({_at(file, line)}).",
            "write true or false without quotes",
            f"`{key}` = {v!r} 是字符串：DeepSpeed 会用 `|` 把它和一个 bool 合并，构建 config 时就报 TypeError"
            f"（{_at(file, line)}）。",
            "去掉引号，写 true 或 false",
        )


@rule(
    "KB041",
    "bool-as-string",
    "warning",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed",),
    summary='`"false"` (a string) for a switch DeepSpeed does not validate (`prescale_gradients`, '
    "`zero_allow_untested_optimizer`, `memory_breakdown`, `optimizer.params.torch_adam`, ...)",
    effect='kept as a string and tested for truth: `"false"` acts as true',
    bad=[
        Case({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": "false"}, "prescale_gradients"),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "zero_optimization": {"stage": 2},
                "zero_allow_untested_optimizer": "false",
                "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
            },
            "zero_allow_untested_optimizer",
        ),
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"torch_adam": "false"}}},
            "torch_adam",
        ),
    ],
    ok=[
        Case({"train_micro_batch_size_per_gpu": 1, "prescale_gradients": False}, "a JSON bool"),
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"torch_adam": True}}},
            "torch_adam as a bool",
        ),
        Case({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "false"}}, "validated: converted (KB019)"),
    ],
)
def kb041(c: Ctx) -> None:
    found = [(key, c.data.get(key), file, line, key) for key, (file, line) in RAW_BOOL.items()]
    otype, params = _section(c, "optimizer")
    if otype and otype.lower() in ADAM_TYPES:
        found += [(k, params.get(k), f, ln, f"optimizer.params.{k}") for k, (f, ln) in OPT_BOOL.items()]
    for _key, v, file, line, path in found:
        if not _false_string(v):
            continue
        c.add(
            c.prefix + path,
            f"`{path}` = {v!r} is a string: DeepSpeed does not convert it and only tests it for truth "
            f"({_at(file, line)}); a non-empty string is true, so {v!r} acts as true.",
            "write false without quotes",
            f"`{path}` = {v!r} 是字符串：DeepSpeed 不会转换它，只判断真假（{_at(file, line)}）；"
            f"非空字符串一律为真，所以 {v!r} 的效果其实是 true。",
            "去掉引号，写 false",
        )


@rule(
    "KB042",
    "float-batch-size",
    "warning",
    "batch-size-assertion",
    views=("deepspeed",),
    summary="a float in a batch key (`train_batch_size`, `train_micro_batch_size_per_gpu`, "
    "`gradient_accumulation_steps`)",
    effect="accepted: the batch check compares products (8.0 == 8), and the float is kept",
    bad=[
        Case({"train_batch_size": 8.0, "train_micro_batch_size_per_gpu": 1}, "8.0"),
        Case(
            {"train_batch_size": 3, "train_micro_batch_size_per_gpu": 1.5, "gradient_accumulation_steps": 2},
            "fractional micro batch",
        ),
    ],
    ok=[
        Case({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1}, "ints"),
        Case({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}, "ints, derived"),
    ],
)
def kb042(c: Ctx) -> None:
    for key in BATCH:
        v = c.data.get(key)
        if not isinstance(v, float):
            continue
        if v.is_integer():
            tail = f"it is kept as the float {v!r}"
            tail_zh = f"值会一直是浮点数 {v!r}"
            fix, fix_zh = f"write {int(v)}", f"写成整数 {int(v)}"
        else:
            tail = f"no batch holds {v!r} samples"
            tail_zh = f"可是一个 batch 不可能装 {v!r} 个样本"
            fix, fix_zh = "write a whole number", "写成整数"
        c.add(
            c.prefix + key,
            f"`{key}` = {v!r} is not an integer: DeepSpeed does not validate batch keys; its check only compares "
            f"train_batch_size with the product ({_at(DS_CONFIG, 602)}), so it accepts {v!r} without a word, "
            f"and {tail}.",
            fix,
            f"`{key}` = {v!r} 不是整数：DeepSpeed 不校验 batch 相关的 key，它的检查只比较 train_batch_size 和乘积"
            f"是否相等（{_at(DS_CONFIG, 602)}），所以会一声不吭地接受 {v!r}，{tail_zh}。",
            fix_zh,
        )


@rule(
    "KB043",
    "optimizer-scheduler-param-type",
    "error",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed",),
    summary="a string (or float step count) in Adam / AdamW or warmup scheduler params (`lr`, `betas`, `eps`, "
    "`weight_decay`, `warmup_num_steps`, `warmup_max_lr`, `total_num_steps`, ...)",
    effect="passed unconverted to the constructor: TypeError / ValueError at deepspeed.initialize",
    bad=[
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"lr": "1e-4"}}},
            "quoted lr",
        ),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "optimizer": {"type": "Adam", "params": {"lr": 1e-4, "betas": ["0.9", "0.999"]}},
            },
            "quoted betas",
        ),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 100.0}},
            },
            "float warmup_num_steps",
        ),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "1000", "warmup_num_steps": 10}},
            },
            "quoted total_num_steps",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  train_micro_batch_size_per_gpu: auto\n  scheduler:\n    type: WarmupLR\n"
            "    params: {warmup_min_lr: '0'}\n",
            "warmup_min_lr: the HF Trainer fills it but never compares it",
        ),
    ],
    ok=[
        Case(
            {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "eps": 1e-8}}},
            "numbers",
        ),
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 1000, "warmup_num_steps": 10}},
            },
            "int step counts",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  train_micro_batch_size_per_gpu: auto\n  optimizer:\n    type: AdamW\n"
            "    params: {lr: auto}\n  scheduler:\n    type: WarmupLR\n    params: {warmup_num_steps: auto}\n",
            '"auto" the HF Trainer fills (KB007 otherwise)',
        ),
    ],
    validity=True,
)
def kb043(c: Ctx) -> None:
    otype, params = _section(c, "optimizer")
    if otype and otype.lower() in ADAM_TYPES:
        for k, (file, line) in ADAM_NUMBERS.items():
            v, path = params.get(k), f"optimizer.params.{k}"
            if v is None or not _string_param(v) or _hf_checks(c, path):
                continue
            c.add(
                c.prefix + path,
                f"`{path}` = {v!r} holds a string: DeepSpeed passes optimizer params to the optimizer unconverted, "
                f"and torch's Adam / AdamW compare it with 0.0, which raises TypeError at deepspeed.initialize "
                f"({_at(file, line)}).",
                "write the number without quotes",
                f"`{path}` = {v!r} 里是字符串：DeepSpeed 把 optimizer 的 params 原样传给 optimizer，"
                f"torch 的 Adam / AdamW 会拿它和 0.0 比较，`deepspeed.initialize` 时就报 TypeError（{_at(file, line)}）。",
                "去掉引号，直接写数字",
            )
    stype, sparams = _section(c, "scheduler")
    for k, (exc, file, line) in SCHED_NUMBERS.get(stype or "", {}).items():
        v, path = sparams.get(k), f"scheduler.params.{k}"
        if v is None or v == "auto" or _hf_checks(c, path):
            continue
        if k == "warmup_num_steps":
            if isinstance(v, int) and not isinstance(v, bool):
                continue
            what = "is not an int: DeepSpeed checks isinstance(warmup_num_steps, int)"
            what_zh = "不是 int：DeepSpeed 会检查 isinstance(warmup_num_steps, int)"
        elif isinstance(v, str):
            what = "is a string: DeepSpeed passes it to the scheduler unconverted and computes with it"
            what_zh = "是字符串：DeepSpeed 把它原样传给 scheduler，直接拿它做运算"
        else:
            continue
        c.add(
            c.prefix + path,
            f"`{path}` = {v!r} {what}; {stype} raises {exc} at deepspeed.initialize ({_at(file, line)}).",
            "write an int" if k == "warmup_num_steps" else "write the number without quotes",
            f"`{path}` = {v!r} {what_zh}；{stype} 在 `deepspeed.initialize` 时就报 {exc}（{_at(file, line)}）。",
            "写成整数" if k == "warmup_num_steps" else "去掉引号，直接写数字",
        )


def _auto_params(c: Ctx) -> list[tuple[str, str | None]]:
    """(config path, section type) of every "auto" in optimizer / scheduler params."""
    out = []
    for sec in ("optimizer", "scheduler"):
        t, params = _section(c, sec)
        out += [(f"{sec}.params.{k}", t) for k, v in params.items() if v == "auto"]
    return out


@rule(
    "KB045",
    "auto-param-never-filled",
    "error",
    "auto-values-outside-trainer",
    views=("deepspeed",),
    summary='`"auto"` in optimizer / scheduler params that nothing fills (`warmup_type`, `momentum`, ...)',
    effect='accelerate (also under the HF Trainer) raises ValueError "not found in kwargs"; plain DeepSpeed '
    'passes "auto" on',
    bad=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "zero_optimization": {"stage": 2},
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "auto"}},
            },
            "auto warmup_type",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  zero_optimization: {stage: 2}\n  optimizer:\n    type: SGD\n"
            "    params: {lr: auto, momentum: auto}\n",
            "auto momentum under the HF Trainer",
        ),
    ],
    ok=[
        Case(
            {
                "train_micro_batch_size_per_gpu": 1,
                "zero_optimization": {"stage": 2},
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linear"}},
            },
            "a value",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  zero_optimization: {stage: 2}\n  optimizer:\n    type: AdamW\n"
            "    params: {lr: auto, weight_decay: auto}\n",
            "keys the HF Trainer fills",
        ),
    ],
    validity=True,
)
def kb045(c: Ctx) -> None:
    for path, _t in _auto_params(c):
        if c.reg.auto_fill.get(path):
            continue
        c.add(
            c.prefix + path,
            f'Nothing fills "auto" for `{path}` (not transformers, not accelerate): accelerate, which the HF Trainer '
            f"also goes through, raises ValueError (`{path}` not found in kwargs) when it prepares the model "
            f'({_at(*ACC_AUTO)}); plain DeepSpeed passes the string "auto" to the constructor.',
            "write the value",
            f'没有任何库会替 `{path}` 填 "auto"（transformers 和 accelerate 都不会）：accelerate（HF Trainer 也经过它）'
            f"在 prepare 模型时会报 ValueError（`{path}` not found in kwargs，{_at(*ACC_AUTO)}）；"
            f'直接用 DeepSpeed 的话，字符串 "auto" 会原样传给构造函数。',
            "写一个具体值",
        )


def _leaf(data: dict[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


@rule(
    "KB046",
    "string-vs-training-args",
    "error",
    "auto-values-outside-trainer",
    views=("deepspeed",),
    summary="a string (not `auto`) where the HF Trainer compares the DeepSpeed value with TrainingArguments "
    '(batch sizes, `gradient_clipping`, `optimizer.params.lr`, `bf16.enabled`: `"true"`, ...)',
    effect="a string never equals the TrainingArguments number or bool: ValueError (mismatch) at Trainer.train",
    bad=[
        Case("output_dir: out\nper_device_train_batch_size: 8\ndeepspeed:\n  train_micro_batch_size_per_gpu: '8'\n"),
        Case("output_dir: out\ndeepspeed:\n  bf16: {enabled: 'false'}\n", "quoted bool"),
        Case(
            "output_dir: out\nlearning_rate: 5.0e-5\ndeepspeed:\n  optimizer:\n    type: AdamW\n"
            "    params: {lr: '5e-5'}\n",
            "quoted lr",
        ),
    ],
    ok=[
        Case("output_dir: out\nper_device_train_batch_size: 8\ndeepspeed:\n  train_micro_batch_size_per_gpu: 8\n"),
        Case("output_dir: out\ndeepspeed:\n  bf16: {enabled: auto}\n", "auto"),
        Case({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "true"}}, "plain DeepSpeed converts it"),
        Case(
            "output_dir: out\nauto_find_batch_size: true\ndeepspeed:\n  train_micro_batch_size_per_gpu: '8'\n",
            "auto_find_batch_size: not compared (DeepSpeed's TypeError: KB040)",
        ),
    ],
    validity=True,
)
def kb046(c: Ctx) -> None:
    for path, line in HF_MATCHED.items():
        v = _leaf(c.data, path)
        if not _hf_checks(c, path) or v is None or v == "auto" or not _string_param(v):
            continue
        c.add(
            c.prefix + path,
            f"`{path}` = {v!r} holds a string: the HF Trainer compares it with the TrainingArguments value "
            f"({_at(HF_DS, line)}), a string never equals a number or a bool, so Trainer.train raises ValueError "
            f"(config values that mismatch TrainingArguments, {_at(HF_DS, HF_RAISE_LINE)}) even when they look the same.",
            'write "auto" (the Trainer fills it) or the value without quotes',
            f"`{path}` = {v!r} 里是字符串：HF Trainer 会把它和 TrainingArguments 的值比较（{_at(HF_DS, line)}），"
            f"字符串永远不等于数字或 bool，所以即使看起来一样，Trainer.train 也会报 ValueError"
            f"（mismatch TrainingArguments，{_at(HF_DS, HF_RAISE_LINE)}）。",
            '写 "auto"（让 Trainer 来填），或者去掉引号写具体值',
        )


# ---------------------------------------------------------------- KB047: an explicit ds value the Trainer compares


def _walk_path(d: dict[str, Any], path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _as_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if quoted_number(v):
        return float(v)
    return None


def _ta_value(c: Ctx, field: str) -> tuple[Any, str]:
    """(value, where it comes from) of a TrainingArguments field for this file: written in it, else its default at
    the release judged (the registry's record)."""
    if field in c.cfg.data:
        return c.cfg.data[field], "set"
    rec = c.reg.get(f"transformers:TrainingArguments.{field}")
    if rec is None or rec.get("default") in (None, "null"):
        return None, "unknown"
    import json

    try:
        return json.loads(rec["default"]), "default"
    except ValueError:
        return None, "unknown"


@rule(
    "KB047",
    "hf-trainer-value-mismatch",
    "error",
    "auto-values-outside-trainer",
    views=("deepspeed",),
    summary="a DeepSpeed value the HF Trainer compares with TrainingArguments, written explicitly and different "
    "from the TrainingArguments value (or its default)",
    effect='the Trainer raises ValueError "Please correct the following DeepSpeed config values that mismatch '
    'TrainingArguments values" (transformers integrations/deepspeed.py fill_match / trainer_config_finalize)',
    bad=[
        Case(
            "output_dir: out\nper_device_train_batch_size: 2\ndeepspeed:\n  train_micro_batch_size_per_gpu: 16\n",
            "micro batch 16 in the ds config, 2 in TrainingArguments",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  gradient_accumulation_steps: 8\n",
            "accumulation 8 in the ds config, TrainingArguments' default 1",
        ),
    ],
    ok=[
        Case(
            "output_dir: out\nper_device_train_batch_size: 16\ndeepspeed:\n  train_micro_batch_size_per_gpu: 16\n",
            "the same value",
        ),
        Case(
            "output_dir: out\nper_device_train_batch_size: 2\ndeepspeed:\n  train_micro_batch_size_per_gpu: auto\n",
            "auto",
        ),
        Case(
            "output_dir: out\nauto_find_batch_size: true\ndeepspeed:\n  train_micro_batch_size_per_gpu: 16\n",
            "auto_find_batch_size: the Trainer fills it without comparing",
        ),
    ],
    validity=True,
)
def kb047(c: Ctx) -> None:
    if not c.hf:
        return  # only a file the HF Trainer reads (TrainingArguments with its deepspeed config)
    for path, recs in sorted(c.reg.mappings.items()):
        for m in recs:
            if m.get("front_end") != "training_args" or m.get("transform") is not None:
                continue  # a value computed from several fields (betas, train_batch_size, precision) is not compared 1:1
            cond = m.get("must_match")
            if cond is not True and not (
                cond == "not auto_find_batch_size" and not c.cfg.data.get("auto_find_batch_size")
            ):
                continue
            ds_value = _walk_path(c.data, path)
            if ds_value is None or ds_value == "auto" or isinstance(ds_value, (dict, list)):
                continue
            ta, origin = _ta_value(c, m["front_name"])
            a, b = _as_number(ds_value), _as_number(ta)
            if a is None or b is None or abs(a - b) <= 1e-12 * max(1.0, abs(b)):
                continue
            src = f"{m['source_file']}:{m['source_line']}"
            said = "sets" if origin == "set" else "leaves at its default"
            said_zh = "设成了" if origin == "set" else "用的是默认值"
            c.add(
                c.prefix + path,
                f"`{path}` is {ds_value} in the DeepSpeed config but TrainingArguments {said} `{m['front_name']}` = {ta}: "
                f"the HF Trainer compares the two ({src}) and raises ValueError (Please correct the following "
                "DeepSpeed config values that mismatch TrainingArguments values).",
                f'set `{path}` to "auto" (the Trainer then copies `{m["front_name"]}`), or make the two equal',
                f"DeepSpeed 配置里 `{path}` 是 {ds_value}，但 TrainingArguments {said_zh} `{m['front_name']}` = {ta}："
                f"HF Trainer 会比较两者（{src}），不一致就报 ValueError（Please correct the following DeepSpeed config "
                "values that mismatch TrainingArguments values）。",
                f'把 `{path}` 写成 "auto"（Trainer 会用 `{m["front_name"]}` 的值填入），或让两者一致',
            )
