"""Where the front ends reject or drop settings: the ``raise`` / ``assert`` / warning sites on the config paths.

An AST scan (nothing is imported, so it also reads an older release that this torch cannot import) of the
functions that read a config on its way to the run:

- accelerate: the config loader, the launcher and its argument checks, ``DeepSpeedPlugin.__post_init__`` and
  the methods it calls, ``Accelerator.__init__`` / ``_prepare_deepspeed``;
- transformers: ``TrainingArguments.__post_init__``, ``Trainer.__init__``, the DeepSpeed integration;
- deepspeed: ``deepspeed.initialize``, ``DeepSpeedConfig`` and its checks, ``DeepSpeedEngine.__init__`` and
  its ``_configure_*`` / ``_do_*`` methods.

Each ``raise`` / ``assert`` becomes a ``raise_site`` record; each ``warnings.warn`` / ``logger.warning`` (and
each ``logger.info`` that says something is ignored or overridden) a ``warn_site`` record, with the function,
file and line, the exception class or log level, the message template (the literal text, with ``{expr}`` for
what is formatted in) and the names the guarding ``if`` tests read (best effort). ``SITE_CLASSES`` says, per
site id, whether a config or a launch line can trigger it and why (kb/doctor/rules/sites.py turns the ones no
other rule covers into rules). ``site_records(pkg, version)`` is the provider ``kb registry build`` calls.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from indexer.registry_build import _record

# (file under the package, qualname globs, follow): ``follow`` adds the same-class methods the matched functions
# call as ``self.name(...)``, transitively (a plug-in's ``__post_init__`` and its helpers)
TARGETS: dict[str, list[tuple[str, tuple[str, ...], bool]]] = {
    "accelerate": [
        (
            "accelerate/commands/config/config_args.py",
            ("load_config_from_file", "BaseConfig.*", "ClusterConfig.*"),
            False,
        ),
        ("accelerate/commands/launch.py", ("launch_command", "_validate_launch_command"), False),
        ("accelerate/utils/launch.py", ("prepare_deepspeed_cmd_env", "prepare_multi_gpu_env"), False),
        ("accelerate/utils/dataclasses.py", ("DeepSpeedPlugin.__post_init__",), True),
        ("accelerate/accelerator.py", ("Accelerator.__init__", "Accelerator._prepare_deepspeed"), False),
    ],
    "transformers": [
        ("transformers/training_args.py", ("TrainingArguments.__post_init__",), True),
        ("transformers/trainer.py", ("Trainer.__init__",), True),
        (
            "transformers/integrations/deepspeed.py",
            ("HfDeepSpeedConfig.*", "HfTrainerDeepSpeedConfig.*", "deepspeed_init", "deepspeed_optim_sched"),
            False,
        ),
    ],
    "deepspeed": [
        ("deepspeed/__init__.py", ("initialize",), False),
        ("deepspeed/runtime/config.py", ("DeepSpeedConfig.__init__", "DeepSpeedConfig._*"), False),
        (
            "deepspeed/runtime/engine.py",
            (
                "DeepSpeedEngine.__init__",
                "DeepSpeedEngine._configure_*",
                "DeepSpeedEngine._do_*",
                "DeepSpeedEngine._scheduler_from_config",
            ),
            False,
        ),
    ],
}

LOG_LEVELS = {"warning": "warning", "warn": "warning", "warning_once": "warning", "info": "info", "error": "error"}
# a logger.info is a site only when it says a setting is dropped or replaced
IGNORED_WORDS = re.compile(r"ignor|not (be )?used|overrid|overwrit|disabl|will be set|setting .* to|instead", re.I)
NOT_CONFIG_NAMES = {
    "self",
    "None",
    "True",
    "False",
    "isinstance",
    "len",
    "str",
    "int",
    "float",
    "bool",
    "dict",
    "list",
    "tuple",
    "type",
    "getattr",
    "hasattr",
    "os",
    "environ",
    "get",
    "keys",
    "values",
    "items",
    "lower",
    "upper",
    "startswith",
    "endswith",
    "any",
    "all",
    "sum",
    "args",
    "is_deepspeed_available",
}


@dataclass
class Site:
    kind: str  # raise_site | warn_site
    qualname: str
    source_file: str
    source_line: int
    exc: str  # exception class (raise_site) or log level (warn_site)
    message: str  # the template: literal text, {expr} for formatted parts
    reads: list[str]  # names the guarding condition reads

    def slug(self) -> str:
        words = re.findall(r"[a-z0-9_]+", re.sub(r"\{[^}]*\}", " ", self.message).lower())[:6]
        return "-".join(words) or "no-message"


# ---------------------------------------------------------------- the scan


def package_root(pkg: str) -> Path | None:
    """The folder that holds ``pkg`` (site-packages, or a release's isolated folder first on sys.path)."""
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve().parent


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    out: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for n in body:
            if isinstance(n, ast.ClassDef):
                visit(n.body, f"{prefix}{n.name}.")
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(prefix + n.name, n)

    visit(tree.body, "")
    return out


def _self_calls(fn: ast.AST) -> set[str]:
    return {
        n.func.attr
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "self"
    }


def select(funcs: dict[str, ast.AST], patterns: tuple[str, ...], follow: bool) -> list[str]:
    chosen = [q for q in funcs if any(fnmatch.fnmatchcase(q, p) for p in patterns)]
    if follow:
        todo = list(chosen)
        while todo:
            q = todo.pop()
            cls = q.rpartition(".")[0]
            for name in sorted(_self_calls(funcs[q])):
                callee = f"{cls}.{name}"
                if callee in funcs and callee not in chosen:
                    chosen.append(callee)
                    todo.append(callee)
    return sorted(chosen, key=lambda q: funcs[q].lineno)


def template(node: ast.AST | None, assigns: dict[str, ast.AST] | None = None, depth: int = 0) -> str:
    """The literal text of a message expression; ``{expr}`` where a value is formatted in."""
    if node is None or depth > 6:
        return ""
    assigns = assigns or {}
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else repr(node.value)
    if isinstance(node, ast.JoinedStr):
        return joined_text(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left, assigns, depth + 1) + template(node.right, assigns, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return template(node.left, assigns, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return template(node.func.value, assigns, depth + 1)
    if isinstance(node, ast.Call) and node.args:  # SomeError(...) used as a message, or a helper
        return template(node.args[0], assigns, depth + 1)
    if isinstance(node, ast.Name) and node.id in assigns:
        return template(assigns[node.id], assigns, depth + 1)
    return "{" + ast.unparse(node) + "}"


def reads(tests: list[ast.AST]) -> list[str]:
    """Config-like names a condition reads: attributes, string subscripts and ``.get("x")`` keys, plain names."""
    out: list[str] = []
    for t in tests:
        for n in ast.walk(t):
            name = None
            if isinstance(n, ast.Attribute):
                name = n.attr
            elif isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                name = n.slice.value
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "pop"):
                if n.args and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                    name = n.args[0].value
            elif isinstance(n, ast.Compare):
                for c in [n.left, *n.comparators]:
                    if (
                        isinstance(c, ast.Constant)
                        and isinstance(c.value, str)
                        and re.fullmatch(r"[a-z_][a-z0-9_.]*", c.value)
                    ):
                        name = c.value
                        if name not in out and name not in NOT_CONFIG_NAMES:
                            out.append(name)
                name = None
            elif isinstance(n, ast.Name):
                name = n.id
            if name and name not in NOT_CONFIG_NAMES and not name.startswith("__") and name not in out:
                out.append(name)
    return out


def _log_call(call: ast.Call) -> str | None:
    """The level of ``warnings.warn(...)`` / ``logger.warning(...)``, or None."""
    f = call.func
    if not isinstance(f, ast.Attribute):
        return None
    base = ast.unparse(f.value)
    if base == "warnings" and f.attr == "warn":
        return "warning"
    if f.attr in LOG_LEVELS and re.search(r"log", base, re.I):
        return LOG_LEVELS[f.attr]
    return None


def scan_function(fn: ast.AST, qualname: str, relfile: str) -> list[Site]:
    sites: list[Site] = []
    assigns: dict[str, ast.AST] = {}
    for n in ast.walk(fn):  # message variables (msg = f"..."; raise ValueError(msg))
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            if isinstance(n.value, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                assigns.setdefault(n.targets[0].id, n.value)

    def visit(stmts: list[ast.stmt], guards: list[ast.AST]) -> None:
        for s in stmts:
            if isinstance(s, ast.Raise) and s.exc is not None:
                exc = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
                msg = template(s.exc.args[0], assigns) if isinstance(s.exc, ast.Call) and s.exc.args else ""
                sites.append(Site("raise_site", qualname, relfile, s.lineno, ast.unparse(exc), msg, reads(guards)))
            elif isinstance(s, ast.Assert):
                msg = template(s.msg, assigns) if s.msg is not None else ast.unparse(s.test)
                sites.append(
                    Site("raise_site", qualname, relfile, s.lineno, "AssertionError", msg, reads([*guards, s.test]))
                )
            for call in _calls(s):
                level = _log_call(call)
                if level is None or not call.args:
                    continue
                msg = template(call.args[0], assigns)
                if level == "info" and not IGNORED_WORDS.search(msg):
                    continue
                if level == "error":  # logged, then the run goes on: a warning as far as a config is concerned
                    level = "error-log"
                sites.append(Site("warn_site", qualname, relfile, call.lineno, level, msg, reads(guards)))
            if isinstance(s, ast.If):
                visit(s.body, [*guards, s.test])
                visit(s.orelse, [*guards, s.test])
            elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
                visit(s.body, guards + ([s.test] if isinstance(s, ast.While) else [s.iter]))
                visit(s.orelse, guards)
            elif isinstance(s, (ast.With, ast.AsyncWith)):
                visit(s.body, guards)
            elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
                visit(s.body, guards)
                for h in s.handlers:
                    visit(h.body, guards)
                visit(s.orelse, guards)
                visit(s.finalbody, guards)
            elif isinstance(s, ast.Match):
                for c in s.cases:
                    visit(c.body, [*guards, s.subject])

    visit(fn.body, [])
    return sites


def _calls(s: ast.stmt) -> list[ast.Call]:
    """The calls a statement makes itself (not those of the statements it contains)."""
    if isinstance(s, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)):
        return [n for n in ast.walk(s) if isinstance(n, ast.Call)]
    return []


def scan(pkg: str, root: Path | None = None) -> tuple[list[Site], list[str]]:
    """All sites of ``pkg`` on the config paths, in file then line order, and what could not be read."""
    root = root or package_root(pkg)
    sites: list[Site] = []
    skipped: list[str] = []
    if root is None:
        return [], [f"{pkg} not found"]
    for relfile, patterns, follow in TARGETS.get(pkg, []):
        path = root / relfile
        if not path.is_file():
            skipped.append(relfile)
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=relfile)
        funcs = _functions(tree)
        chosen = select(funcs, patterns, follow)
        for p in patterns:
            if "*" not in p and p not in funcs:
                skipped.append(f"{relfile}:{p}")
        for q in chosen:
            sites += scan_function(funcs[q], q, relfile)
    seen: set[tuple[str, int]] = set()
    out = []
    for s in sorted(sites, key=lambda s: (s.source_file, s.source_line, s.kind)):
        if (s.source_file, s.source_line, s.kind) not in seen:  # a helper reached twice
            seen.add((s.source_file, s.source_line, s.kind))
            out.append(s)
    return out, skipped


def site_ids(pkg: str, sites: list[Site]) -> list[str]:
    """Stable ids: function, exception / level and the message's first words (not the line, which moves)."""
    ids, count = [], {}
    for s in sites:
        base = f"{pkg}:site.{s.qualname}.{s.exc.rsplit('.', 1)[-1]}.{s.slug()}"
        count[base] = count.get(base, 0) + 1
        ids.append(base if count[base] == 1 else f"{base}.{count[base]}")
    return ids


# ---------------------------------------------------------------- the classification (read from the sites)

# site id (an fnmatch glob for a group) -> (class, reason). Classes: "rule:KBnnn" (a config / launch line
# triggers it and a rule here says so), "covered:KBnnn" (an existing rule already says it), "config" (a
# config triggers it, no rule: the reason says why), "internal" (objects, environment or state, not a config).
# The first matching entry wins: exact ids first, then globs.
SITE_CLASSES: dict[str, tuple[str, str]] = {
    # ---- the rules of kb/doctor/rules/sites.py
    "deepspeed:site.DeepSpeedConfig._do_error_check.ValueError.sum-is-not-supported-with-zero": (
        "rule:KB050",
        'gradient_allreduce_op "sum" with zero_optimization.stage 3',
    ),
    "*DeepSpeedConfig._do_error_check.AssertionError.*master_weights_and_grads-is-only-supported*": (
        "rule:KB051",
        "fp16/bf16 master weights without ZeRO",
    ),
    "*DeepSpeedConfig._do_error_check.AssertionError.bf16_optimizer_states-*": (
        "rule:KB051",
        "bf16_optimizer_states without ZeRO or without bf16 master weights",
    ),
    "*DeepSpeedEngine._configure_basic_optimizer.ValueError.max_grad_norm-*": (
        "rule:KB052",
        "optimizer.params.max_grad_norm",
    ),
    "*DeepSpeedConfig._do_warning_check.warning.deepspeedconfig-is-not-supported-as-an": (
        "rule:KB052",
        "optimizer.params.max_grad_norm (the warning before the engine's ValueError)",
    ),
    "*DeepSpeedPlugin._deepspeed_config_checks.ValueError.when-using-deepspeed_config_file-*": (
        "rule:KB053",
        "accelerate YAML: deepspeed_config_file next to accelerate's own DeepSpeed settings",
    ),
    "accelerate:site._validate_launch_command.ValueError.you-can-only-use-one-of": (
        "rule:KB054",
        "accelerate launch: more than one launch mode flag",
    ),
    "accelerate:site._validate_launch_command.ValueError.you-need-to-use-at-least": (
        "rule:KB055",
        "accelerate launch --multi_gpu with --num_processes < 2",
    ),
    "*TrainingArguments._validate_args.ValueError.load_best_model_at_end-requires-the-save-and-eval": (
        "rule:KB056",
        "load_best_model_at_end with save and eval strategies that differ",
    ),
    "*TrainingArguments._validate_args.ValueError.load_best_model_at_end-requires-the-saving-steps-to.3": (
        "rule:KB056",
        "load_best_model_at_end, integer save_steps not a multiple of eval_steps",
    ),
    "*TrainingArguments._validate_args.ValueError.load_best_model_at_end-requires-the-saving-steps-to*": (
        "config",
        "the same check with ratio steps (< 1): KB056 checks integer steps only",
    ),
    "*TrainingArguments._validate_args.ValueError.lr_scheduler_type-*-requires-an-eval*": (
        "rule:KB057",
        "a metric-driven lr_scheduler_type with eval_strategy no",
    ),
    "transformers:site.TrainingArguments._validate_args.ValueError.at-most-one-of-fp16-and.2": (
        "rule:KB058",
        "fp16_full_eval and bf16_full_eval both true in TrainingArguments",
    ),
    "transformers:site.TrainingArguments._validate_args.ValueError.at-most-one-of-fp16-and": (
        "covered:KB036",
        "fp16 and bf16 both true in TrainingArguments",
    ),
    "*DeepSpeedConfig._do_warning_check.warning.deepspeedconfig-in-fp*-mode-*": (
        "rule:KB052",
        "optimizer.params.max_grad_norm: the older releases' form of the warning (passed on in fp16, zeroed in fp32)",
    ),
    # ---- already said by a core rule
    "*DeepSpeedConfig._initialize_params.AssertionError.bfloat16-and-fp16-modes-*": ("covered:KB011", "bf16 + fp16"),
    "*DeepSpeedConfig._batch_assertion.AssertionError.check-batch-related-*": ("covered:KB012", "batch arithmetic"),
    "*DeepSpeedConfig._set_batch_related_parameters.*": ("covered:KB012", "no batch size given at all"),
    "*DeepSpeedConfig._do_error_check.AssertionError.deepspeedconfig-is-not-defined*": (
        "covered:KB012",
        "micro batch / accumulation left undefined after the batch derivation",
    ),
    "*DeepSpeedConfig._do_error_check.AssertionError.deepspeedconfig-maximum-supported-zero*": (
        "covered:KB006",
        "stage above 3 (pydantic refuses it first)",
    ),
    "*BaseConfig.from_*_file.ValueError.the-config-file-at-had-unknown": ("covered:KB001", "unknown accelerate key"),
    "*DeepSpeedPlugin.__post_init__.warning.deepspeed-zero3-init-flag-*": ("covered:KB005", "zero3_init_flag below 3"),
    "*DeepSpeedPlugin.fill_match.*": ("covered:KB007", '"auto" that accelerate cannot fill'),
    "*TrainingArguments.__post_init__.warning.is-deprecated-and-will-be-removed": (
        "covered:KB003",
        "gradient_checkpointing* deprecated for activation_checkpointing*",
    ),
    "*TrainingArguments._apply_legacy_fsdp_to_config.warning.passing-fsdp-as-*": (
        "covered:KB003",
        "deprecated fsdp form",
    ),
    "*TrainingArguments._process_fsdp_args.warning.fsdp1-*": ("covered:KB003", "deprecated FSDP1"),
    "*initialize.warning.deepscale_config-is-deprecated*": ("covered:KB003", "deprecated --deepscale_config"),
    # ---- a config can trigger it, no rule here (why)
    "*DeepSpeedConfig._batch_assertion.AssertionError.*": (
        "config",
        "a batch size <= 0: a value bound, the type-check rules' area (KB040-KB049)",
    ),
    "*DeepSpeedConfig._initialize_params.DeepSpeedConfigError.data_types-*": (
        "config",
        "data_types.keep_in_fp32_modules of the wrong type: the type-check rules' area (KB040-KB049)",
    ),
    "*DeepSpeedConfig._do_error_check.ValueError.sum-is-not-supported-with-*": (
        "config",
        'gradient_allreduce_op "sum" with ZenFlow / DeepCompile: rare sections; the stage-3 form is KB050',
    ),
    "*DeepSpeedConfig.__init__.ValueError.expected-a-string-path-*": (
        "config",
        "the config path does not exist: kb lint reads the file itself, it cannot see the run's paths",
    ),
    "*DeepSpeedConfig._do_warning_check.warning.deepspeedconfig-vocabulary-*": (
        "config",
        "vocabulary_size not a multiple of 8: a speed note, rarely set",
    ),
    "*DeepSpeedEngine._scheduler_from_config.*": (
        "config",
        "scheduler.type unknown to DeepSpeed and torch: needs the scheduler class list in the registry (open)",
    ),
    "*DeepSpeedEngine._do_sanity_check.AssertionError.is-not-a-supported-deepspeed-optimize*": (
        "config",
        "optimizer.type unknown: needs the optimizer name list in the registry (open)",
    ),
    "*DeepSpeedEngine._do_sanity_check.AssertionError.deepspeed-optimizer-requires-dynamic-*": (
        "config",
        "Lamb with a static fp16 loss scale: rare (open)",
    ),
    "*DeepSpeedEngine._do_sanity_check.AssertionError.managed_gradient_accumulation-*": (
        "config",
        "managed_gradient_accumulation false with other features: rare, new in 0.19",
    ),
    "*DeepSpeedEngine._configure_zero_optimizer.Exception.the-deprecated-version-of-zero-*": (
        "config",
        "zero_optimization legacy stage 1: the removed-key rule's area (KB004)",
    ),
    "*DeepSpeedEngine._do_optimizer_sanity_check.ValueError.zero_optimization-compute_grad_*": (
        "config",
        "compute_grad_norm false at stage 1 needs the model's dtype, which a config does not say",
    ),
    "*load_config_from_file.FileNotFoundError.*": ("config", "the YAML path does not exist: a path of the run"),
    "*BaseConfig.process_config.ValueError.a-distributed_type-must-*": (
        "config",
        "accelerate YAML without distributed_type: the front-end parsing rules' area (KB030-KB039)",
    ),
    "*.ValueError.unknown-mixed_precision-mode-*": (
        "config",
        "an invalid mixed_precision value: the front-end parsing rules' area (KB030-KB039)",
    ),
    "*.ValueError.unknown-dynamo-backend-*": ("config", "an invalid dynamo backend: front-end parsing (KB030-KB039)"),
    "*.ValueError.module-and-no_python-cannot-be-used*": ("config", "--module with --no_python: rare (open)"),
    "*_validate_launch_command.ValueError.you-cannot-use-use_parallelism_config-*": (
        "config",
        "FSDP2 only: out of kb's scope",
    ),
    "*_validate_launch_command.ValueError.less-than-two-gpu-ids-*": (
        "config",
        "gpu_ids with one id and multi-GPU: open (needs the YAML and the line together)",
    ),
    "*_validate_launch_command.ValueError.you-need-to-manually-pass-in": (
        "config",
        "a YAML without num_processes for a multi-process type: accelerate config always writes it",
    ),
    "*_validate_launch_command.warning.the-following-values-were-not-passed": ("config", "a note: defaults used"),
    "*prepare_multi_gpu_env.ValueError.when-using-fsdp_cpu_ram_efficient_loading-*": (
        "config",
        "FSDP only: out of scope",
    ),
    "*DeepSpeedPlugin.__post_init__.ValueError.please-specify-the-zero-optimization-config": (
        "config",
        "the DeepSpeed JSON given to accelerate has no zero_optimization: kb lint sees that JSON alone (open)",
    ),
    "*DeepSpeedPlugin.__post_init__.*ms-amp*": ("config", "MS-AMP settings: rare"),
    "*HfTrainerDeepSpeedConfig.trainer_config_finalize.ValueError.please-correct-the-follow*": (
        "config",
        "DeepSpeed values that differ from TrainingArguments: the front-end mapping's area (KB030-KB039)",
    ),
    "*deepspeed_init.ValueError.zero-inference-only-*": (
        "config",
        "evaluation / prediction alone with a ZeRO-1/2 config: a config does not say the run only infers",
    ),
    "*Trainer.__init__.ValueError.using-fsdp-xxx-together-with-deepspeed*": (
        "config",
        "fsdp and deepspeed both set in TrainingArguments: raised by Trainer, needs a model to prove (open)",
    ),
    "*Trainer._validate_args.ValueError.args-metric_for_best_model-*": (
        "config",
        'save_strategy "best" without metric_for_best_model: raised by Trainer (open)',
    ),
    "*Trainer._validate_args.ValueError.you-have-set-args-eval_strategy-*": (
        "config",
        "an eval strategy without an eval dataset: the dataset is passed in code",
    ),
    "*Trainer._validate_args.info.max_steps-*": (
        "config",
        "a note: max_steps overrides num_train_epochs, as documented",
    ),
    "*Trainer.create_accelerator_and_postprocess.ValueError.can-t-be-used-with-save_only_mo*": (
        "config",
        "save_only_model + load_best_model_at_end under DeepSpeed: raised after the accelerator exists (open)",
    ),
    "*Trainer.create_accelerator_and_postprocess.ValueError.auto_find_batch_size-*": (
        "config",
        "auto_find_batch_size with ZeRO-3: raised after the accelerator exists (open)",
    ),
    "*Trainer.create_accelerator_and_postprocess.ValueError.the-acceleratorconfig-s-num_ste*": (
        "config",
        "accelerator_config gradient_accumulation_kwargs.num_steps with accumulation > 1: rare",
    ),
    "*Trainer.create_accelerator_and_postprocess.warning.non_blocking-*": ("config", "a speed note"),
    "*Trainer.create_accelerator_and_postprocess.ValueError.*": ("config", "FSDP combinations: out of kb's scope"),
    "*TrainingArguments.__post_init__.ValueError.evaluation-strategy-requires-*": (
        "config",
        "eval_strategy steps with eval_steps and logging_steps 0: rare (open)",
    ),
    "*TrainingArguments.__post_init__.info.using-split_batches-*": (
        "config",
        "a note: split_batches changes the batch",
    ),
    "*TrainingArguments._validate_args.ValueError.*must-be-an-integer*": (
        "config",
        "steps of the wrong type: the type-check rules' area (KB040-KB049)",
    ),
    "*TrainingArguments._validate_args.ValueError.torch_empty_cache_steps-*": ("config", "a value bound (KB040-KB049)"),
    "*TrainingArguments._validate_args.ValueError.got-warmup_steps-*": ("config", "a value bound (KB040-KB049)"),
    "*TrainingArguments._validate_args.ValueError.logging-strategy-requires-*": (
        "config",
        "logging_strategy steps with logging_steps 0: a value bound (KB040-KB049)",
    ),
    "*TrainingArguments._validate_args.ValueError.dataloader_prefetch_factor-*": (
        "config",
        "dataloader_prefetch_factor without workers: not a DeepSpeed concern",
    ),
    "*TrainingArguments._process_fsdp_args.*": ("config", "FSDP settings: out of kb's scope"),
    "*TrainingArguments._apply_legacy_fsdp_to_config.*": ("config", "FSDP settings: out of kb's scope"),
    "*Trainer._validate_args.info.the-train_sampling_strategy-*": ("internal", "depends on the dataset type (code)"),
    "*DeepSpeedConfig.__init__.*lasticity*": (
        "config",
        "the `elasticity` section (refuses or overrides the batch sizes): rare in fine-tuning",
    ),
    "*_validate_launch_command.warning.use_xpu-is-deprecated-and-ignored*": (
        "config",
        "the deprecated `--use_xpu` flag, ignored: the deprecated-key rule's area (KB003)",
    ),
    "*prepare_multi_gpu_env.warning.fsdp_*": ("config", "FSDP settings: out of kb's scope"),
    "*deepspeed_optim_sched.ValueError.adafactor-was-passed-*": (
        "config",
        "--adafactor with an `optimizer` section in the DeepSpeed JSON (transformers 4.x): needs both files (open)",
    ),
    # ---- internal: objects passed in code, the machine, the environment, package versions
    "*.ImportError.*": ("internal", "a package or version missing on the machine"),
    "*Accelerator.__init__.*": ("internal", "arguments of Accelerator(...) in the script, or the machine's devices"),
    "*Accelerator._prepare_deepspeed.*": (
        "internal",
        "what the script passes to prepare() (model, optimizer, dataloaders) next to the config",
    ),
    "*.ConnectionError.*": ("internal", "the port is taken on the machine"),
    "*_validate_launch_command.ValueError.bf16-mixed-precision-requires-*": (
        "internal",
        "the machine has no bf16 device",
    ),
    "*.warning.port-is-already-in-use-*": ("internal", "the port is taken on the machine"),
    "*.RuntimeError.fp8-is-not-available-*": ("internal", "no FP8 backend installed"),
    "*prepare_deepspeed_cmd_env.ValueError.nossh-*": ("internal", "the installed DeepSpeed is too old"),
    "*HfTrainerDeepSpeedConfig.*": ("internal", "the model's config or the call order"),
    "*Trainer.*": ("internal", "the model, datasets, callables or devices the script passes"),
    "*TrainingArguments.*": ("internal", "the machine (GPU, TF32, bf16 support) or code objects"),
    "deepspeed:site.initialize.*": ("internal", "the arguments of deepspeed.initialize (model, args, mpu)"),
    "*DeepSpeedEngine._configure_with_arguments.*": ("internal", "launcher environment (LOCAL_RANK)"),
    "*DeepSpeedEngine._do_args_sanity_check.*": ("internal", "launcher environment (LOCAL_RANK)"),
    "*DeepSpeedEngine._do_sanity_check.ValueError.type-*-is-not-supported-on*": ("internal", "the device's dtypes"),
    "*DeepSpeedEngine._do_sanity_check.*": ("internal", "the client optimizer / scheduler objects"),
    "*DeepSpeedEngine._do_optimizer_sanity_check.*": (
        "internal",
        "the optimizer object and the model's dtype (a client optimizer with ZeRO)",
    ),
    "*DeepSpeedEngine._configure_optimizer.*": ("internal", "a client optimizer with ZeRO-Offload (code)"),
    "*DeepSpeedEngine._configure_basic_optimizer.error-log.*": ("internal", "the mup package missing"),
    "*DeepSpeedEngine._configure_zero_optimizer.*": ("internal", "no optimizer, pipeline modules, or unreachable"),
    "*DeepSpeedEngine.*": ("internal", "mpu, torch version or other objects the script passes"),
}


def classify(site_id: str) -> tuple[str, str]:
    if site_id in SITE_CLASSES:
        return SITE_CLASSES[site_id]
    for pat, v in SITE_CLASSES.items():
        if any(ch in pat for ch in "*?[") and fnmatch.fnmatchcase(site_id, pat):
            return v
    return ("unclassified", "not read yet")


# ---------------------------------------------------------------- the provider


def site_records(pkg: str, version: str) -> list[dict]:
    if pkg not in TARGETS:
        return []
    sites, skipped = scan(pkg)
    if skipped:
        print(f"registry_sites: {pkg} {version}: not found: {', '.join(skipped)}", file=sys.stderr)
    out = []
    for sid, s in zip(site_ids(pkg, sites), sites, strict=True):
        cls, reason = classify(sid)
        out.append(
            _record(
                id=sid,
                kind=s.kind,
                name=sid.split(":", 1)[1],
                path=sid.split(":", 1)[1],
                package=pkg,
                version=version,
                type=s.exc,
                doc=s.message,
                source_file=s.source_file,
                source_line=s.source_line,
                function=s.qualname,
                reads=s.reads,
                trigger=cls,
                trigger_reason=reason,
            )
        )
    return out


# ---------------------------------------------------------------- the figures docs/lint.md quotes

PATHS = {  # file -> the path of the config it is on, for the docs table
    "accelerate/commands/config/config_args.py": "config loader",
    "accelerate/commands/launch.py": "launcher (`launch_command`, `_validate_launch_command`)",
    "accelerate/utils/launch.py": "launch env (`prepare_deepspeed_cmd_env`, `prepare_multi_gpu_env`)",
    "accelerate/utils/dataclasses.py": "`DeepSpeedPlugin.__post_init__` and helpers",
    "accelerate/accelerator.py": "`Accelerator.__init__`, `_prepare_deepspeed`",
    "transformers/training_args.py": "`TrainingArguments.__post_init__` and helpers",
    "transformers/trainer.py": "`Trainer.__init__` and helpers",
    "transformers/integrations/deepspeed.py": "DeepSpeed integration (HF config filling, `deepspeed_init`)",
    "deepspeed/__init__.py": "`deepspeed.initialize`",
    "deepspeed/runtime/config.py": "`DeepSpeedConfig` and its checks",
    "deepspeed/runtime/engine.py": "`DeepSpeedEngine.__init__`, `_configure_*`, `_do_*`",
}


def sites_markdown() -> str:
    """The per-path counts table of docs/lint.md ("What the front ends reject or ignore"), from the scan."""
    rows = [
        "| package | path | raise | warn | config-triggerable | rule here | covered by a rule | no rule (why: see `SITE_CLASSES`) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    tot = [0] * 6
    for pkg in TARGETS:
        sites, _ = scan(pkg)
        ids = site_ids(pkg, sites)
        for relfile, *_ in TARGETS[pkg]:
            here = [(i, s) for i, s in zip(ids, sites, strict=True) if s.source_file == relfile]
            cls = [classify(i)[0].split(":")[0] for i, _ in here]
            n = [
                sum(s.kind == "raise_site" for _, s in here),
                sum(s.kind == "warn_site" for _, s in here),
                sum(c != "internal" for c in cls),
                sum(c == "rule" for c in cls),
                sum(c == "covered" for c in cls),
                sum(c == "config" for c in cls),
            ]
            tot = [a + b for a, b in zip(tot, n, strict=True)]
            rows.append(f"| {pkg} | {PATHS[relfile]} | " + " | ".join(map(str, n)) + " |")
    rows.append("| **all** | | " + " | ".join(f"**{x}**" for x in tot) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(sites_markdown())


def joined_text(node: ast.JoinedStr) -> str:
    """An f-string as the source writes it: its literal parts, and each ``{expression}`` left as written."""
    out = []
    for v in node.values:
        if isinstance(v, ast.Constant):
            out.append(str(v.value))
        elif isinstance(v, ast.FormattedValue):
            out.append("{" + ast.unparse(v.value) + "}")
    return "".join(out)
