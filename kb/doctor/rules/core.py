"""The core lint rules (KB001-KB029): DeepSpeed keys against the registry (unknown, misplaced, deprecated,
removed, invalid values, "auto"), offload and precision blocks, batch arithmetic, memory fit, and the
accelerate / TrainingArguments / launch views of the same concerns.

Each rule registers itself with ``kb.doctor.engine.rule`` when this module is imported (``kb.doctor.lint``
imports every rule module); ``tests/test_lint_oracle.py`` proves every validity rule (DeepSpeed or
accelerate raises) against DeepSpeed's own config classes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kb.doctor.configs import _int
from kb.doctor.engine import (
    ACC_AUTO,
    ADAM_NUMBERS,
    ADAM_TYPES,
    SCHED_NUMBERS,
    SECTION_SWITCH,
    Case,
    Ctx,
    KeyVisit,
    cite,
    fillers,
    refused_from,
    rule,
    successor,
    ticks,
    truthy,
)
from kb.memory.estimate import GiB, model_states
from kb.registry.store import Record, Registry

ORACLE = "tests/test_lint_oracle.py"  # proves this module's validity rules (kb.doctor.engine.Rule.oracle)
ENTRY_FOR_NAME = {"nvme_path": "nvme-offload-setup", "zero_force_ds_cpu_optimizer": "zero-force-ds-cpu-optimizer"}
BATCH_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
# ZeRO-1/2 keep one gradient bucket of reduce_bucket_size elements, two with overlap_comm
# (deepspeed 0.19.8 runtime/zero/stage_1_and_2.py:3256-3280); warn when that doubles past 1 GB
BUCKET_WARN_BYTES = 1 << 30
HOMES_SHOWN = 3  # a misplaced key's homes shown (nearest first); `kb registry lookup` lists the rest


def _other(v: KeyVisit, reg: Registry) -> tuple[str, str]:
    """' It is a method (...), not a DeepSpeed config key.' when the unknown key names something else."""
    r = v.lookup.record
    if v.status == "absent" and r:  # real in other releases: the view is the user's release (Registry.at)
        rel = f"{r['package']} {r['since']}" if r["absent"] == "added" else f"{r['package']} {r['until']}"
        refused = refused_from(reg, r) if r["absent"] == "added" else None
        if refused:  # recorded only from the release that refuses it: older releases had it, not "not yet"
            return (
                f" {r['package']} {refused} refuses it as a removed feature; the registry has no record of it in "
                "your release.",
                f"{r['package']} {refused} 把它当作已移除的功能直接拒绝；registry 里没有它在你这个版本里的记录。",
            )
        if r["absent"] == "added":
            return (
                f" It first appears in {rel}; your release does not have it.",
                f"它从 {rel} 才有；你用的版本里没有。",
            )
        return (
            f" It was removed after {rel}; your release does not have it.",
            f"它在 {rel} 之后被移除；你用的版本里没有。",
        )
    if v.status == "not-a-config-key" and r:
        return (
            f" It is a {r['kind']} ({r['id']}), not a DeepSpeed config key.",
            f"它是一个 {r['kind']}（{r['id']}），不是 DeepSpeed 的 config key。",
        )
    return "", ""


def _unknown(v: KeyVisit) -> bool:
    """Unknown where it is written, and not a misplaced key we can say the home of (that is KB002)."""
    return v.rec is None and not (v.status == "misplaced" and v.where)


def _ds(obj: dict[str, Any]) -> dict[str, Any]:
    """A DeepSpeed JSON case (kept as a dict; Case.config dumps it when used)."""
    return obj


def _gone(v: KeyVisit) -> Record | None:
    """The record of a key only older releases have (removed after ``until``), as the view shows it."""
    r = v.lookup.record
    return r if v.status == "absent" and r and r.get("absent") == "removed" else None


def instead(c: Ctx, rec: Record) -> tuple[str, str] | None:
    """'write `new` instead: why' for a name the view's release lacks, when the registry shows what replaced it
    (``kb.doctor.engine.successor``), in both languages; None when it shows nothing."""
    s = successor(c.reg, rec)
    if s is None:
        return None
    new, old, pkg = s.rec["path"], rec["name"], rec["package"]
    file = s.rec.get("source_file") or "its source"
    if s.how == "renamed":
        why, why_zh = "the registry records the rename", "registry 记录了这次改名"
    elif s.how == "new":
        why = (
            f"in {pkg} {s.since} (the first release the registry built without `{old}`) it stands where `{old}` "
            f"stood in {file}, with the same type and default (kb infers this from the registry: no release "
            "states the rename)"
        )
        why_zh = (
            f"在 {pkg} {s.since}（registry 构建过的、第一个没有 `{old}` 的版本）里，它在 {file} 里正好占了 `{old}` "
            "原来的位置，类型和默认值也一样"
            "（这是 kb 从 registry 推断的，没有哪个版本明确写过这次改名）"
        )
    else:
        why = (
            f"by {pkg} {s.since} (the first release the registry built without `{old}`) its type and default had "
            f"become those of `{old}` (kb infers this from the registry: no release states it)"
        )
        why_zh = (
            f"到 {pkg} {s.since}（registry 构建过的、第一个没有 `{old}` 的版本）时，它的类型和默认值已经变成了 `{old}` 原来的"
            "（这是 kb 从 registry 推断的，没有哪个版本明确写过）"
        )
    doc = (s.rec.get("doc") or "").strip()
    if doc:
        why += f'; its doc says: "{doc}"'
        why_zh += f'；它的文档写的是："{doc}"'
    return f"write `{new}` instead: {why}", f"改写成 `{new}`：{why_zh}"


# ---------------------------------------------------------------- the rules, in code order


@rule(
    "KB001",
    "unknown-key",
    "error",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed", "accelerate"),
    summary="unknown key inside a validated section (`zero_optimization`, `offload_*`, `bf16`, `fp16`, ...) "
    "or an unknown accelerate top-level key",
    effect='ValidationError "Extra inputs are not permitted" / accelerate ValueError',
    bad=[
        Case(_ds({"zero_optimization": {"stage": 3, "zero_force_opt_offload": True}}), "invented ZeRO key"),
        Case(_ds({"bf16": {"enabled": True, "check_overflow": True}}), "unknown key in bf16"),
        Case("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nzero_stage: 3\n", "accelerate"),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 3, "overlap_comm": True}}), "a real ZeRO key"),
        Case(_ds({"zero_force_opt_offload": True}), "unknown at the top level is KB005"),
        Case(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n",
            "accelerate key in its place",
        ),
    ],
    validity=True,
)
def kb001(c: Ctx) -> None:
    if c.view == "accelerate":
        for key in c.data:
            if c.reg.get(f"accelerate:yaml.{key}") is None:
                near = [f"`{n}`" for n in c.reg.suggest(f"yaml.{key}")]
                c.add(
                    str(key),
                    f"`{key}` is not an accelerate config key: accelerate raises ValueError (unknown keys) "
                    "when it loads this file.",
                    f"did you mean {', '.join(near)}?" if near else "delete it",
                    f"`{key}` 不是 accelerate 配置文件里的 key：accelerate 加载这个文件时会直接报 ValueError"
                    "（unknown keys）。",
                    f"是不是想写 {'、'.join(near)}？" if near else "删掉它",
                )
        return
    for v in c.keys:
        if _unknown(v) and v.strict:
            other, other_zh = _other(v, c.reg)
            gone = _gone(v)
            hint, hint_zh = (gone and instead(c, gone)) or c.near(v.path)
            c.add(
                v.shown,
                f"`{v.key}` does not exist under `{v.parent}`: DeepSpeed raises ValidationError "
                f"(Extra inputs are not permitted).{other}",
                hint,
                f"`{v.parent}` 下没有 `{v.key}` 这个参数：DeepSpeed 会直接报 ValidationError"
                f"（Extra inputs are not permitted）。{other_zh}",
                hint_zh,
                ENTRY_FOR_NAME.get(v.key),
            )


@rule(
    "KB002",
    "misplaced-key",
    "error",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed",),
    summary="misplaced key: real, but elsewhere (the 3 nearest homes, nearest path first); only where the registry "
    "knows every key of the section it is in (else KB022)",
    effect="ValidationError inside a validated section; never read at the top level",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 3, "nvme_path": "/nvme"}}), "nvme_path under zero_optimization"),
        Case(_ds({"stage3_max_live_parameters": 1000, "zero_optimization": {"stage": 3}}), "ZeRO key at top level"),
        Case(_ds({"zero_optimization": {"stage": 3, "enabled": True}}), "a key with many homes: the 3 nearest shown"),
    ],
    ok=[
        Case(
            _ds({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}}}),
            "nvme_path inside its offload block",
        ),
        Case(_ds({"zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1000}}), "ZeRO key in place"),
        Case(
            _ds({"data_efficiency": {"enabled": True, "data_routing": {"enabled": True}}}),
            "a section whose keys the registry does not list (KB022)",
        ),
    ],
    validity=True,
)
def kb002(c: Ctx) -> None:
    for v in c.keys:
        if v.rec is not None or v.status != "misplaced" or not v.where or not v.proven:
            continue  # unproven (a section the registry did not probe, or a name DeepSpeed's code reads): KB022
        if v.strict:
            effect = "DeepSpeed raises ValidationError (Extra inputs are not permitted)"
            effect_zh = "DeepSpeed 会直接报 ValidationError（Extra inputs are not permitted）"
        else:
            effect = "DeepSpeed never reads it there, so it does nothing"
            effect_zh = "DeepSpeed 根本不会在这里读它，写了等于没写"
        homes, more = v.where[:HOMES_SHOWN], len(v.where) - HOMES_SHOWN
        rest = f" (and {more} more places: `kb registry lookup {v.key}` lists them)" if more > 0 else ""
        rest_zh = f"（另外还有 {more} 处：`kb registry lookup {v.key}` 会全部列出）" if more > 0 else ""
        here = f"under `{v.parent}`" if v.parent else "at the top level"
        if len(homes) == 1:
            fix, fix_zh = f"move it to `{homes[0]}`", f"挪到 `{homes[0]}`"
        else:
            fix = f"move it to the one you meant: {' or '.join(f'`{h}`' for h in homes)}"
            fix_zh = f"挪到你想设置的那一处：{' 或 '.join(f'`{h}`' for h in homes)}"
        c.add(
            v.shown,
            f"`{v.key}` is not valid {here}: {effect}. It belongs at {ticks(homes)}{rest}.",
            fix,
            f"`{v.key}` 不能放在{f' `{v.parent}` 下' if v.parent else '顶层'}：{effect_zh}。"
            f"它应该放在 {ticks(homes, '、')}{rest_zh}。",
            fix_zh,
            ENTRY_FOR_NAME.get(v.key),
        )


@rule(
    "KB003",
    "deprecated-key",
    "warning",
    "deprecated-cpu-offload-keys",
    views=("deepspeed", "training_args", "launch"),
    summary="deprecated key or TrainingArguments field (says whether the alias is a no-op)",
    effect="warning only; mapped to the replacement, or nothing at all",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 2, "cpu_offload": True}}), "deprecated alias, mapped"),
        Case(
            _ds({"zero_optimization": {"stage": 3, "cpu_offload_use_pin_memory": True}}),
            "deprecated no-op",
        ),
        Case("output_dir: out\nper_device_train_batch_size: 1\ngradient_checkpointing: true\n", "TrainingArguments"),
        Case("deepspeed train.py --deepspeed ds.json --gradient_checkpointing", "script flag"),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}), "the replacement"),
        Case("output_dir: out\nper_device_train_batch_size: 1\nactivation_checkpointing: true\n", "current field"),
        Case("deepspeed train.py --deepspeed ds.json --activation_checkpointing", "current script flag"),
    ],
)
def kb003(c: Ctx) -> None:
    if c.view == "deepspeed":
        for v in c.keys:
            if v.status != "deprecated" or v.rec is None:
                continue
            repl = v.rec.get("replacement")
            alts = [f"`{r.strip()}`" for r in repl.split(" or ")] if repl else []
            if v.rec.get("noop"):
                msg = f"`{v.path}` is deprecated and does nothing: DeepSpeed only logs a warning."
                msg_zh = f"`{v.path}` 已经 deprecated，而且不起任何作用：DeepSpeed 只会打一条 warning。"
                fix = "delete it: it does nothing, so nothing changes" + (
                    f" (the setting it stood for is in {' or '.join(alts)})" if alts else ""
                )
                fix_zh = "删掉它：它本来就不起作用，删了也没有任何变化" + (
                    f"（它原本对应的设置在 {' 或 '.join(alts)} 里）" if alts else ""
                )
            elif repl:
                msg = f"`{v.path}` is deprecated; DeepSpeed maps it to `{repl}` with a warning."
                msg_zh = f"`{v.path}` 已经 deprecated：DeepSpeed 会打一条 warning，然后把它映射到 `{repl}`。"
                fix, fix_zh = f"use {' or '.join(alts)}", f"改用 {' 或 '.join(alts)}"
            else:  # deprecated, still read, and the registry names no replacement: deleting would change the run
                msg = f"`{v.path}` is deprecated: DeepSpeed still reads it and logs a warning."
                msg_zh = f"`{v.path}` 已经 deprecated：DeepSpeed 仍然会读它，并打一条 warning。"
                fix = "keep it until DeepSpeed's warning names what replaces it (it still takes effect)"
                fix_zh = "先留着（它仍然生效），等 DeepSpeed 的 warning 说明用什么替代再改"
            c.add(v.shown, msg, fix, msg_zh, fix_zh)
        return
    items = c.data["script_args"] if c.view == "launch" else c.data
    for key in items:
        rec = c.reg.get(f"transformers:TrainingArguments.{key}")
        if rec is None or not rec.get("deprecated") or rec["status"] in ("removed", "absent"):
            continue  # LLaMA-Factory-style files mix model/data arguments of their own; removed fields are KB035
        ver, doc = rec["version"], rec["doc"] or ""
        if c.view == "launch":
            path, msg = f"script_args.{key}", f"`--{key}` is deprecated in transformers {ver}."
            msg_zh = f"`--{key}` 在 transformers {ver} 里已经 deprecated。"
        else:
            path, msg = str(key), f"`{key}` is deprecated in transformers {ver}: {doc}".strip()
            msg_zh = f"`{key}` 在 transformers {ver} 里已经 deprecated" + (f"（文档原文：{doc}）。" if doc else "。")
        c.add(
            path,
            msg,
            None,
            msg_zh,
            None,
            "hf-activation-checkpointing-vs-ds-section" if "checkpointing" in key else None,
        )


@rule(
    "KB004",
    "removed-key",
    "error",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed",),
    summary="key DeepSpeed refuses as a removed feature (`amp`, `sparse_attention`, ...: its removed-feature list, "
    "status `removed` in the registry), with what its message says to do instead and the last release that accepts "
    "it; a key only older releases read is not this (KB005 / KB001 say so, with its successor)",
    effect="DeepSpeedConfigError",
    bad=[
        Case(_ds({"amp": {"enabled": True}}), "amp"),
        Case(_ds({"sparse_attention": {"mode": "fixed"}}), "sparse_attention"),
    ],
    ok=[
        Case(_ds({"bf16": {"enabled": True}}), "the precision that replaces amp"),
        Case(_ds({"zero_optimization": {"stage": 2}}), "an active section"),
        Case(_ds({"aio": {"thread_count": 2}}), "read by older releases only, never refused: KB005"),
    ],
    validity=True,
)
def kb004(c: Ctx) -> None:
    for v in c.keys:
        if v.status != "removed" or v.rec is None:
            continue  # a name only older releases have is not this ("absent": KB001 / KB005)
        rec = v.rec
        doc = (rec["doc"] or "").strip()
        said = f': "{doc}"' if doc else ""
        at = f"{rec['source_file']}:{rec['source_line']}"
        advice = _advice(doc)
        last = next((h["version"] for h in reversed(c.reg.history(rec["id"])) if h["status"] != "removed"), None)
        pin = f"; deepspeed {last} is the last recorded release that still accepts it" if last else ""
        pin_zh = f"；最后一个还接受它的已记录版本是 deepspeed {last}" if last else ""
        if advice:
            fix = f"delete it and do what DeepSpeed's message says: {advice.rstrip('.')}{pin}"
            fix_zh = f"删掉它，按 DeepSpeed 报错信息里说的做：{advice.rstrip('.')}{pin_zh}"
        else:
            fix = f"delete it: DeepSpeed {rec['version']} has the feature no more and names no replacement{pin}"
            fix_zh = f"删掉它：DeepSpeed {rec['version']} 已经没有这个功能，也没有给出替代{pin_zh}"
        c.add(
            v.shown,
            f"`{v.path}` was removed: DeepSpeed {rec['version']} raises DeepSpeedConfigError for it ({at}){said}",
            fix,
            f"`{v.path}` 已经被移除：DeepSpeed {rec['version']} 遇到它会直接报 DeepSpeedConfigError（{at}）"
            + (f'："{doc}"' if doc else "。"),
            fix_zh,
        )


def _advice(doc: str) -> str:
    """The sentences of a removal message that say what to do instead ("Use ...", "Set ...", "Remove ...")."""
    said = [x.strip() for x in re.split(r"(?<=\.)\s+", doc) if re.match(r"(Use|Set|Remove|Switch|Pass) ", x.strip())]
    return " ".join(said)


@rule(
    "KB005",
    "silently-ignored",
    "warning",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed", "accelerate", "launch"),
    summary="silently ignored: unknown top-level key, typo in an unvalidated top-level section "
    "(`activation_checkpointing`, `aio`, ...), a key only older releases read (`aio.thread_count`: with the key "
    "that took its place), a key accelerate does not read, `zero3_init_flag` below stage 3, "
    "`CUDA_VISIBLE_DEVICES` with `--include`; only where the registry can prove DeepSpeed does not read it (KB022)",
    effect="accepted, does nothing",
    bad=[
        Case(_ds({"zero_force_opt_offload": True, "zero_optimization": {"stage": 3}}), "invented top-level key"),
        Case(_ds({"activation_checkpointing": {"partitioned_activations": True}}), "typo, unvalidated section"),
        Case(_ds({"zero_optimization": {"stage": 3}, "aio": {"thread_count": 2}}), "read by 0.14.4 only"),
        Case("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero_stag: 2\n", "accelerate typo"),
        Case(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n  zero3_init_flag: true\n",
            "zero3_init_flag at stage 2",
        ),
        Case("CUDA_VISIBLE_DEVICES=2,3 deepspeed --include localhost:2,3 train.py", "env with --include"),
    ],
    ok=[
        Case(_ds({"zero_force_ds_cpu_optimizer": True, "zero_optimization": {"stage": 3}}), "real top-level key"),
        Case(_ds({"activation_checkpointing": {"partition_activations": True}}), "correct spelling"),
        Case(_ds({"aio": {"intra_op_parallelism": 2}}), "the key that took thread_count's place"),
        Case(_ds({"sequence_parallel_size": 2}), "DeepSpeed's code reads the name: KB022, not ignored"),
        Case(_ds({"data_efficiency": {"data_routing": {"enabled": True}}}), "a section never probed: KB022"),
        Case(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero3_init_flag: true\n",
            "zero3_init_flag at stage 3",
        ),
        Case("deepspeed --include localhost:2,3 train.py", "--include alone"),
        Case("CUDA_VISIBLE_DEVICES=2,3 deepspeed train.py", "CUDA_VISIBLE_DEVICES alone"),
    ],
)
def kb005(c: Ctx) -> None:
    if c.view == "deepspeed":
        ver = c.reg.versions.get("deepspeed", "?")
        for v in c.keys:
            if not _unknown(v) or v.strict or not v.proven:
                continue  # unproven: KB022 says so instead
            other, other_zh = _other(v, c.reg)
            hint, hint_zh = c.near(v.path)
            if hint == "delete it":
                hint, hint_zh = (
                    "delete it: DeepSpeed does not read it, so nothing changes",
                    "删掉它：DeepSpeed 不读它，删了也没有任何变化",
                )
            gone = _gone(v)
            if gone is not None:
                until = gone["until"]
                where = "unknown top-level keys are ignored" if not v.parent else f"`{v.parent}` is not validated"
                where_zh = "顶层的未知 key 会被忽略" if not v.parent else f"`{v.parent}` 不做校验"
                msg = (
                    f"`{v.path}` is not read by DeepSpeed {ver}: DeepSpeed read it up to {until} (the last recorded "
                    f"release that has it), and {where}, so nothing warns: the setting does nothing."
                )
                msg_zh = (
                    f"DeepSpeed {ver} 不会读 `{v.path}`：DeepSpeed 只读到 {until}（最后一个有它的已记录版本），"
                    f"而且{where_zh}，所以不会有任何提示：这一项等于没写。"
                )
                hint, hint_zh = instead(c, gone) or (
                    f"delete it: DeepSpeed {ver} does not read it, so nothing changes (deepspeed {until} still does)",
                    f"删掉它：DeepSpeed {ver} 不读它，删了也没有任何变化（deepspeed {until} 还会读）",
                )
            elif v.parent == "":
                msg = (
                    f"`{v.key}` is not a DeepSpeed config key: at the top level DeepSpeed silently ignores unknown "
                    f"keys, so this setting does nothing.{other}"
                )
                msg_zh = (
                    f"`{v.key}` 不是 DeepSpeed 的 config key：顶层的未知 key DeepSpeed 不报错、直接忽略，"
                    f"所以这一项等于没写。{other_zh}"
                )
            else:
                msg = (
                    f"`{v.key}` is not read by DeepSpeed under `{v.parent}` (this section is not validated, so the "
                    f"typo is silently ignored).{other}"
                )
                msg_zh = (
                    f"DeepSpeed 在 `{v.parent}` 下不会读 `{v.key}`（这个 section 不做校验，拼错了也不报错，"
                    f"直接被忽略）。{other_zh}"
                )
            c.add(v.shown, msg, hint, msg_zh, hint_zh, ENTRY_FOR_NAME.get(v.key))
    elif c.view == "accelerate":
        ds = c.data.get("deepspeed_config")
        if not isinstance(ds, dict):
            return
        for key in ds:
            if c.reg.get(f"accelerate:yaml/deepspeed_config.{key}") is None and not _ds_key(c.reg, key):
                c.add(
                    f"deepspeed_config.{key}",
                    f"`{key}` is not a key accelerate reads under `deepspeed_config`; it is ignored.",
                    "see `accelerate config` for the valid keys",
                    f"accelerate 不会读 `deepspeed_config` 下的 `{key}`，写了会被忽略。",
                    "用 `accelerate config` 看有哪些合法的 key",
                )
        flag = ds.get("zero3_init_flag")
        if flag is True and _int(ds.get("zero_stage")) not in (3, None):
            c.add(
                "deepspeed_config.zero3_init_flag",
                "zero3_init_flag only applies to ZeRO stage 3; accelerate turns it off with a warning at other stages.",
                "remove it (accelerate turns it off below stage 3 anyway, so nothing changes) or use zero_stage 3",
                "`zero3_init_flag` 只对 ZeRO stage 3 有效；其他 stage 下 accelerate 会打一条 warning，然后把它关掉。",
                "删掉它（stage 3 以下 accelerate 本来就会把它关掉，删了没有任何变化），或者改成 `zero_stage: 3`",
                "accelerate-zero3-init-flag",
            )
    elif (
        c.data["launcher"] == "deepspeed"
        and "CUDA_VISIBLE_DEVICES" in c.data["env"]
        and ({"include", "exclude", "num_gpus"} & set(c.data["launcher_args"]))
    ):
        c.add(
            "env.CUDA_VISIBLE_DEVICES",
            "the deepspeed launcher ignores CUDA_VISIBLE_DEVICES when --include/--exclude/--num_gpus is given "
            "and sets it per worker itself.",
            "select GPUs with --include localhost:0,1 only",
            "传了 `--include`/`--exclude`/`--num_gpus` 时，deepspeed launcher 会忽略 `CUDA_VISIBLE_DEVICES`，"
            "自己给每个 worker 重新设置。",
            "只用 `--include localhost:0,1` 来选卡",
            "deepspeed-launcher-include-gpus",
        )


def _ds_key(reg: Registry, key: Any) -> bool:
    """A DeepSpeed config key (anywhere): written in accelerate's `deepspeed_config` it is KB015, not KB005."""
    return reg.get(f"deepspeed:{key}") is not None or reg.resolve(str(key), package="deepspeed").status != "unknown"


@rule(
    "KB006",
    "invalid-value",
    "error",
    "unknown-config-keys-silently-ignored",
    views=("deepspeed",),
    summary='invalid type / enum / bound (`"5e8"` for an int, stage 4, device `gpu`, bucket 0)',
    effect="ValidationError",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 2, "reduce_bucket_size": "5e8"}}), "string that is not an int"),
        Case(_ds({"zero_optimization": {"stage": 4}}), "stage out of range"),
        Case(_ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "gpu"}}}), "device gpu"),
        Case(_ds({"zero_optimization": {"stage": 2, "reduce_bucket_size": 0}}), "bucket 0"),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8}}), "5e8 as a number"),
        Case(_ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}), "device cpu"),
        Case(_ds({"zero_optimization": {"stage": "3"}}), "a string DeepSpeed converts (KB019)"),
    ],
    validity=True,
)
def kb006(c: Ctx) -> None:
    for v in c.keys:
        if v.value_check is None or v.value_check[0] is None or v.rec is None:
            continue
        rec, err = v.rec, v.value_check[0]
        choices = f" in {rec['choices']}" if rec.get("choices") else ""
        c.add(
            v.shown,
            f"`{rec['path']}` = {v.value!r}: {err}. DeepSpeed raises ValidationError.",
            f"expected {rec['type']}{choices}",
            f"`{rec['path']}` = {v.value!r}：{_err_zh(err)}。DeepSpeed 会直接报 ValidationError。",
            f"应该是 {rec['type']}" + (f"，取值 {rec['choices']}" if rec.get("choices") else ""),
        )


def _err_zh(err: str) -> str:
    """check_value's own errors in Chinese; pydantic's (what DeepSpeed prints) quoted as they are."""
    if err.startswith("must be one of "):
        return f"只能是 {err.removeprefix('must be one of ')} 之一"
    if err == "null is not allowed":
        return "不能是 null"
    if err.startswith("must be "):
        return f"必须 {err.removeprefix('must be ')}"
    return f"校验不通过（pydantic：{err}）"


@rule(
    "KB007",
    "auto-value",
    "warning",
    "auto-values-outside-trainer",
    views=("deepspeed",),
    summary='`"auto"` (one finding per file, at the first one): who fills which key (transformers / accelerate, '
    "from the registry's auto_fill and mapping records), what accelerate without the Trainer and plain DeepSpeed "
    "do where that differs; under a TrainingArguments / LLaMA-Factory file only the keys nothing fills",
    effect="plain DeepSpeed: dropped to the default, TypeError for batch sizes and optimizer / scheduler params, "
    'or kept as a string; accelerate raises ValueError for an "auto" it does not fill',
    bad=[
        Case(_ds({"train_micro_batch_size_per_gpu": "auto"}), "auto batch size, plain DeepSpeed"),
        Case(_ds({"bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": 1}), "auto bf16, plain DeepSpeed"),
        Case(
            _ds(
                {
                    "fp16": {"enabled": "auto"},
                    "train_micro_batch_size_per_gpu": "auto",
                    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}},
                }
            ),
            "several: one finding",
        ),
        Case(
            "output_dir: out\ndeepspeed:\n  zero_optimization: {stage: 3, stage3_max_live_parameters: auto}\n",
            "nothing fills it, even under the HF Trainer",
        ),
    ],
    ok=[
        Case(_ds({"train_micro_batch_size_per_gpu": 1}), "a value"),
        Case("output_dir: out\ndeepspeed:\n  bf16: {enabled: auto}\n", "the HF Trainer fills it"),
        Case(
            "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: qwen\noutput_dir: out\n"
            "deepspeed:\n  train_micro_batch_size_per_gpu: auto\n  gradient_accumulation_steps: auto\n"
            "  fp16: {enabled: auto}\n  zero_optimization: {stage: 2, reduce_bucket_size: auto}\n",
            "a LLaMA-Factory file: the Trainer fills them",
        ),
    ],
)
def kb007(c: Ctx) -> None:
    # (the path as written, what plain DeepSpeed does with it); the HF Trainer and accelerate fill the paths
    # they name, spelled so: an alias ("prefetch_bucket_size") is not theirs to fill
    autos: list[tuple[str, tuple[str, str, tuple[str, int] | None]]] = []
    never: list[tuple[str, tuple[str, str, tuple[str, int] | None]]] = []
    for v in c.keys:
        if v.rec is None or v.status == "removed" or v.value != "auto":
            continue
        (autos if fillers(c.reg, v.written) else never).append((v.written, _plain_auto(v.rec)))
    for path, t in _param_autos(c):
        if fillers(c.reg, path):  # the params nothing fills are KB045's (an error: accelerate raises)
            autos.append((path, _plain_param(path, t)))
    if c.hf:
        autos = []  # the HF Trainer fills them (through accelerate for the keys only accelerate fills)
    if not autos and not never:
        return
    paths = [c.prefix + p for p, _ in autos + never]
    first = min(paths, key=lambda p: (c.cfg.line(p) or 1 << 30, paths.index(p)))
    en: list[str] = []
    zh: list[str] = []
    fix: list[str] = []
    fix_zh: list[str] = []
    if autos:
        who, who_zh = _who_fills(c, [p for p, _ in autos])
        plain, plain_zh = _outcomes(autos)
        n = len(autos)
        en.append(
            f'"auto" is not a value DeepSpeed reads: the HF Trainer and accelerate replace it before DeepSpeed sees '
            f"the config ({n} key{'s' if n > 1 else ''} here). {who} With plain deepspeed.initialize: {plain}."
        )
        zh.append(
            f'"auto" 不是 DeepSpeed 会读的值：HF Trainer 和 accelerate 会在 DeepSpeed 读 config 之前把它替换掉'
            f"（这里有 {n} 个）。{who_zh}直接用 `deepspeed.initialize` 的话：{plain_zh}。"
        )
        fix.append("fine under the HF Trainer (and accelerate for the keys it fills); for plain DeepSpeed write values")
        fix_zh.append("用 HF Trainer（以及 accelerate 会填的那些 key）没问题；直接用 DeepSpeed 就写具体值")
    if never:
        names, names_zh = _keys([p for p, _ in never]), _keys([p for p, _ in never], "、")
        plain, plain_zh = _outcomes(never)
        en.append(
            f'Nothing fills "auto" for {names} (not transformers, not accelerate): accelerate, which the HF Trainer '
            f"also goes through, raises ValueError (not found in kwargs, {_at(*ACC_AUTO)}); plain DeepSpeed: {plain}."
        )
        zh.append(
            f'没有任何库会替 {names_zh} 填 "auto"（transformers 和 accelerate 都不会）：accelerate（HF Trainer '
            f"也经过它）会报 ValueError（not found in kwargs，{_at(*ACC_AUTO)}）；直接用 DeepSpeed 的话：{plain_zh}。"
        )
        fix.append(f"write a value for {names}")
        fix_zh.append(f"给 {names_zh} 写具体值")
    c.add(first, " ".join(en), "; ".join(fix), "".join(zh), "；".join(fix_zh))


def _param_autos(c: Ctx) -> list[tuple[str, str | None]]:
    """(config path, section type) of every "auto" in optimizer / scheduler params (free-form: not in c.keys)."""
    out = []
    for sec in ("optimizer", "scheduler"):
        s = c.data.get(sec)
        params = s.get("params") if isinstance(s, dict) else None
        if isinstance(params, dict):
            t = s.get("type")
            out += [(f"{sec}.params.{k}", t if isinstance(t, str) else None) for k, v in params.items() if v == "auto"]
    return out


def _plain_auto(rec: Record) -> tuple[str, str, tuple[str, int] | None]:
    """What plain DeepSpeed does with "auto" for a config key: (English, Chinese, file:line or None)."""
    if rec.get("validated"):
        default = rec.get("default")
        return f"dropped to the default ({default})", f"丢掉、改用默认值（{default}）", None
    if rec.get("path") in BATCH_KEYS:
        return "TypeError in the batch-size check", "在 batch size 检查里报 TypeError", None
    return (
        'kept as the string "auto", which breaks where the value is used',
        '原样保留字符串 "auto"，用到的地方出错',
        None,
    )


def _plain_param(path: str, t: str | None) -> tuple[str, str, tuple[str, int] | None]:
    """What plain deepspeed.initialize does with "auto" in an optimizer / scheduler param (the string goes to
    the constructor unconverted)."""
    key = path.rsplit(".", 1)[-1]
    if path.startswith("optimizer.") and t and t.lower() in ADAM_TYPES and key in ADAM_NUMBERS:
        return "torch's Adam / AdamW raise TypeError", "torch 的 Adam / AdamW 报 TypeError", ADAM_NUMBERS[key]
    if path.startswith("scheduler.") and key in SCHED_NUMBERS.get(t or "", {}):
        exc, file, line = SCHED_NUMBERS[t][key]
        return f"{t} raises {exc}", f"{t} 报 {exc}", (file, line)
    return "the constructor gets the string", "构造函数拿到的就是这个字符串", None


def _at(file: str, line: int) -> str:
    return f"{file}:{line}"


def _outcomes(items: list[tuple[str, tuple[str, str, tuple[str, int] | None]]]) -> tuple[str, str]:
    """'<outcome> (<file:lines>) for `a`, `b`; ...': the keys grouped by what happens to them."""
    groups: dict[tuple[str, str], tuple[list[str], dict[str, list[int]]]] = {}
    for path, (en, zh, at) in items:
        keys, cites = groups.setdefault((en, zh), ([], {}))
        keys.append(path)
        if at:
            cites.setdefault(at[0], []).append(at[1])

    def cited(cites: dict[str, list[int]]) -> str:
        return ", ".join(f"{f}:{', '.join(str(n) for n in sorted(set(ls)))}" for f, ls in cites.items())

    en_out, zh_out = [], []
    for (en, zh), (keys, cites) in groups.items():
        at = cited(cites)
        en_out.append(f"{_keys(keys)}: {en}" + (f" ({at})" if at else ""))
        zh_out.append(f"{_keys(keys, '、')}：{zh}" + (f"（{at}）" if at else ""))
    return "; ".join(en_out), "；".join(zh_out)


def _keys(paths: list[str], sep: str = ", ") -> str:
    """Config paths in backticks, the leaves of one section together: `optimizer.params.{lr, eps}`."""
    by: dict[str, list[str]] = {}
    for p in paths:
        head, _, leaf = p.rpartition(".")
        by.setdefault(head, []).append(leaf)
    out = []
    for head, leaves in by.items():
        if not head:
            out += [f"`{x}`" for x in leaves]
        elif len(leaves) == 1:
            out.append(f"`{head}.{leaves[0]}`")
        else:
            out.append(f"`{head}.{{{', '.join(leaves)}}}`")
    return sep.join(out)


def _who_fills(c: Ctx, paths: list[str]) -> tuple[str, str]:
    """Which package fills which key (the registry's auto_fill and mapping records), and what accelerate without
    the Trainer does with the keys only transformers fills."""
    by: dict[tuple[str, ...], list[str]] = {}
    froms: dict[str, list[str]] = {}
    for p in paths:
        f = fillers(c.reg, p)
        by.setdefault(tuple(f), []).append(p)
        for pkg, setting in f.items():
            if setting and setting != p.rsplit(".", 1)[-1]:
                froms.setdefault(f"{pkg}:{setting}", []).append(p)
    en, zh = [], []
    for pkgs, keys in sorted(by.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        names, names_zh = _keys(keys), _keys(keys, "、")
        if set(pkgs) == {"transformers", "accelerate"}:
            en.append(f"transformers and accelerate fill {names}.")
            zh.append(f"transformers 和 accelerate 都会填 {names_zh}。")
        elif pkgs == ("transformers",):
            en.append(
                f"Only transformers (the HF Trainer) fills {names}: accelerate without the Trainer raises ValueError "
                f"for them (not found in kwargs, {_at(*ACC_AUTO)})."
            )
            zh.append(
                f"只有 transformers（HF Trainer）会填 {names_zh}：不经过 Trainer、直接用 accelerate 的话会报 "
                f"ValueError（not found in kwargs，{_at(*ACC_AUTO)}）。"
            )
        else:
            en.append(f"{' and '.join(pkgs)} fill{'s' if len(pkgs) == 1 else ''} {names}.")
            zh.append(f"{' 和 '.join(pkgs)} 会填 {names_zh}。")
    for key, keys in froms.items():
        pkg, setting = key.split(":", 1)
        en.append(f"({pkg} takes {_keys(keys)} from its `{setting}`.)")
        zh.append(f"（{pkg} 用它的 `{setting}` 来填 {_keys(keys, '、')}。）")
    return " ".join(en), "".join(zh)


@rule(
    "KB008",
    "offload-without-device",
    "warning",
    "offload-block-without-device",
    views=("deepspeed",),
    summary="offload block without `device`",
    effect="device `none`: no offload",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"pin_memory": True}}}), "optimizer"),
        Case(_ds({"zero_optimization": {"stage": 3, "offload_param": {}}}), "empty param block"),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}})),
        Case(_ds({"zero_optimization": {"stage": 3, "offload_param": {"device": "none"}}}), "explicit none"),
    ],
)
def kb008(c: Ctx) -> None:
    for blk, b, _dev in c.offload():
        if "device" not in b:
            path = f"zero_optimization.{blk}"
            default = c.default(f"{path}.device")
            c.add(
                c.prefix + path,
                f'`{path}` has no "device": the code default is "{default}", so nothing is offloaded '
                "(the docs say cpu).",
                'add "device": "cpu"',
                f'`{path}` 没写 "device"：代码里的默认值是 "{default}"，所以什么都不会 offload（文档里写的是 cpu）。',
                '加上 "device": "cpu"',
            )


@rule(
    "KB009",
    "nvme-without-path",
    "error",
    "nvme-offload-setup",
    views=("deepspeed",),
    summary="`device: nvme` without `nvme_path` at ZeRO stage 3 (below it NVMe is not used: KB010, KB020)",
    effect="crash at initialization",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}}), "optimizer"),
        Case(_ds({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}), "params"),
    ],
    ok=[
        Case(
            _ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}}),
            "with nvme_path",
        ),
        Case(_ds({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}}), "stage 2: KB020"),
    ],
    validity=True,
)
def kb009(c: Ctx) -> None:
    if c.stage != 3:
        return  # ZeRO-1/2 never read nvme_path (stage_1_and_2.py treats any device as CPU); offload_param: KB010
    for blk, b, dev in c.offload():
        if dev == "nvme" and not b.get("nvme_path"):
            path = f"zero_optimization.{blk}"
            c.add(
                c.prefix + path + ".device",
                f'`{path}.device` is "nvme" but no `nvme_path` is set: DeepSpeed crashes at initialization '
                "(os.path.join on None, or an assertion under zero.Init).",
                f'add "nvme_path": "/local_nvme" inside `{blk}`',
                f'`{path}.device` 设成了 "nvme"，但没有设 `nvme_path`：DeepSpeed 初始化时就会崩'
                "（对 None 做 os.path.join，或者 zero.Init 里的 assertion）。",
                f'在 `{blk}` 里加上 "nvme_path": "/local_nvme"',
            )


@rule(
    "KB010",
    "offload-param-below-stage3",
    "warning",
    "offload-param-ignored-below-stage3",
    views=("deepspeed",),
    summary="`offload_param` below stage 3",
    effect="accepted and ignored",
    bad=[Case(_ds({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}), "stage 2")],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}), "stage 3"),
        Case(_ds({"zero_optimization": {"stage": 2, "offload_param": {"device": "none"}}}), "device none"),
    ],
)
def kb010(c: Ctx) -> None:
    for blk, _b, dev in c.offload():
        if blk == "offload_param" and dev in ("cpu", "nvme") and c.stage < 3:
            c.add(
                c.prefix + "zero_optimization.offload_param",
                f"`offload_param` is only used by ZeRO-3; at stage {c.stage} it is silently ignored "
                "(parameters stay on the GPU).",
                "use stage 3, or offload only the optimizer",
                f"`offload_param` 只有 ZeRO-3 才会用；stage {c.stage} 下它会被悄悄忽略（参数还是留在 GPU 上）。",
                "改用 stage 3，或者只 offload optimizer",
            )


@rule(
    "KB011",
    "bf16-and-fp16",
    "error",
    "bf16-and-fp16-both-enabled",
    views=("deepspeed",),
    summary="bf16 and fp16 both enabled",
    effect="AssertionError",
    bad=[Case(_ds({"bf16": {"enabled": True}, "fp16": {"enabled": True}}), "both on")],
    ok=[
        Case(_ds({"bf16": {"enabled": True}, "fp16": {"enabled": False}}), "fp16 off"),
        Case(_ds({"bf16": {"enabled": True}}), "bf16 only"),
    ],
    validity=True,
)
def kb011(c: Ctx) -> None:
    bf, fp = c.data.get("bf16") or c.data.get("bfloat16"), c.data.get("fp16")
    if isinstance(bf, dict) and isinstance(fp, dict) and bf.get("enabled") is True and fp.get("enabled") is True:
        c.add(
            c.prefix + "fp16.enabled",
            "bf16 and fp16 are both enabled: DeepSpeed raises AssertionError "
            "(bfloat16 and fp16 modes cannot be simultaneously enabled).",
            "keep one (bf16 on Ampere or newer)",
            "bf16 和 fp16 同时开了：DeepSpeed 会直接报 AssertionError"
            "（bfloat16 and fp16 modes cannot be simultaneously enabled）。",
            "只留一个（Ampere 及更新的卡用 bf16）",
        )


@rule(
    "KB012",
    "batch-arithmetic",
    "error",
    "batch-size-assertion",
    views=("deepspeed",),
    summary="`train_batch_size` != micro x accumulation x world size (accumulation derived as DeepSpeed does "
    "when it is not given)",
    effect="AssertionError",
    bad=[
        Case(
            _ds({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8}),
            "16 != 1 x 8 x 1",
            world_size=1,
        ),
        Case(
            _ds({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}),
            "no world size makes 10 a multiple of 4",
        ),
        Case(_ds({"train_batch_size": 6, "train_micro_batch_size_per_gpu": 4}), "derived accumulation", world_size=1),
    ],
    ok=[
        Case(
            _ds({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8}),
            "16 = 1 x 8 x 2",
            world_size=2,
        ),
        Case(_ds({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1}), "DeepSpeed derives 8", world_size=1),
        Case(
            _ds({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8}),
            "world size unknown, 2 would do",
        ),
    ],
    validity=True,
)
def kb012(c: Ctx) -> None:
    tbs, mbs, gas = (c.data.get(k) for k in BATCH_KEYS)
    ints = [x for x in (tbs, mbs, gas) if x is not None]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in ints) or tbs is None or mbs is None:
        return  # "auto" and other non-integers: KB007 / DeepSpeed's own TypeError, not arithmetic
    if tbs <= 0 or mbs <= 0 or (gas is not None and gas <= 0):
        return
    ws = c.world_size
    fix, fix_zh = (
        "set it to the product, or drop it: DeepSpeed then derives it as micro x accumulation x world size "
        '(or "auto" with HF)',
        '改成三者的乘积，或者删掉它：DeepSpeed 会自己算成 micro x accumulation x world size（用 HF 就写 "auto"）',
    )
    if ws and gas is not None:
        if tbs != mbs * gas * ws:
            c.add(
                c.prefix + "train_batch_size",
                f"train_batch_size {tbs} != micro {mbs} x accumulation {gas} x world size {ws} = "
                f"{mbs * gas * ws}: DeepSpeed raises AssertionError (Check batch related parameters).",
                fix,
                f"train_batch_size {tbs} != micro {mbs} x accumulation {gas} x world size {ws} = {mbs * gas * ws}："
                "DeepSpeed 会直接报 AssertionError（Check batch related parameters）。",
                fix_zh,
            )
    elif ws:
        derived = tbs // mbs // ws  # runtime/config.py _set_batch_related_parameters
        if tbs != mbs * derived * ws:
            c.add(
                c.prefix + "train_batch_size",
                f"train_batch_size {tbs} is not a multiple of micro {mbs} x world size {ws}: DeepSpeed derives "
                f"gradient_accumulation_steps = {tbs} // {mbs} // {ws} = {derived} and raises AssertionError "
                "in its batch check.",
                fix,
                f"train_batch_size {tbs} 不是 micro {mbs} x world size {ws} 的整数倍：DeepSpeed 会推出 "
                f"gradient_accumulation_steps = {tbs} // {mbs} // {ws} = {derived}，然后在 batch 检查里报 AssertionError。",
                fix_zh,
            )
    elif tbs % (mbs * (gas or 1)):
        of = f"micro {mbs} x accumulation {gas}" if gas is not None else f"micro {mbs}"
        c.add(
            c.prefix + "train_batch_size",
            f"train_batch_size {tbs} is not a multiple of {of}: no world size makes DeepSpeed's batch check pass.",
            "fix the three numbers",
            f"train_batch_size {tbs} 不是 {of} 的整数倍：不管用几张卡，DeepSpeed 的 batch 检查都过不了。",
            "把这三个数改对",
        )


@rule(
    "KB013",
    "large-buckets-overlap-comm",
    "warning",
    "zero-bucket-sizes-overlap-comm",
    views=("deepspeed",),
    summary="`overlap_comm` at stage 1/2 with large buckets (GiB figure; the default `reduce_bucket_size` from the "
    "registry when it is not set)",
    effect="two reduce buckets on the GPU",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 5e8}}), "5e8"),
        Case(_ds({"zero_optimization": {"stage": 2, "overlap_comm": True}}), "the default bucket"),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 2e8}}), "2e8"),
        Case(_ds({"zero_optimization": {"stage": 2, "overlap_comm": False, "reduce_bucket_size": 5e8}}), "no overlap"),
        Case(_ds({"zero_optimization": {"stage": 3, "overlap_comm": True, "reduce_bucket_size": 5e8}}), "stage 3"),
    ],
)
def kb013(c: Ctx) -> None:
    if c.stage not in (1, 2) or not truthy(c.zero.get("overlap_comm")):
        return
    bucket = c.zero.get("reduce_bucket_size", c.default("zero_optimization.reduce_bucket_size"))
    if not isinstance(bucket, (int, float)) or isinstance(bucket, bool):
        return
    nbytes = 2 * int(bucket) * 2
    if nbytes >= BUCKET_WARN_BYTES:
        c.add(
            c.prefix + "zero_optimization.overlap_comm",
            f"with overlap_comm at stage {c.stage}, ZeRO keeps two gradient buckets of "
            f"reduce_bucket_size={int(bucket):,} elements: {nbytes / GiB:.1f} GiB of GPU memory in 16-bit.",
            'reduce_bucket_size 2e8 (or HF "auto"), or overlap_comm false',
            f"stage {c.stage} 开了 overlap_comm 时，ZeRO 会同时保留两个 reduce_bucket_size={int(bucket):,} 个元素的"
            f"梯度 bucket：16-bit 下要占 {nbytes / GiB:.1f} GiB 显存。",
            'reduce_bucket_size 改成 2e8（或者 HF 的 "auto"），或者把 overlap_comm 关掉',
        )


@rule(
    "KB014",
    "cannot-fit-single-gpu",
    "error",
    "zero3-single-gpu-no-offload",
    views=("deepspeed",),
    summary="one GPU, no optimizer offload, model states cannot fit (`--model`, `--world-size 1`; kb.memory.estimate's "
    "`model_states`, the figure `kb mem` uses)",
    effect="CUDA OOM at the first step",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 3}}), "7B, ZeRO-3, one GPU", world_size=1, model_params=7e9),
        Case(_ds({"bf16": {"enabled": True}}), "7B, stage 0, one GPU", world_size=1, model_params=7e9),
    ],
    ok=[
        Case(
            _ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}),
            "optimizer offloaded",
            world_size=1,
            model_params=7e9,
        ),
        Case(_ds({"zero_optimization": {"stage": 3}}), "8 GPUs: not certain", world_size=8, model_params=7e9),
        Case(_ds({"zero_optimization": {"stage": 3}}), "1.3B fits", world_size=1, model_params=1.3e9),
    ],
)
def kb014(c: Ctx) -> None:
    if not c.model_params or c.world_size != 1 or c.stage not in (0, 1, 2, 3):
        return  # only a single GPU is certain to hold everything; the caller must say so (bad stage: KB006)
    if any(blk == "offload_optimizer" and dev != "none" for blk, _b, dev in c.offload()):
        return
    p = c.model_params
    ms = model_states(p, c.stage)  # largest layer unknown: a lower bound
    need, per = ms.gpu_bytes / GiB, ms.gpu_bytes / p
    if need > c.gpu_mem_gib:
        c.add(
            c.prefix + "zero_optimization",
            f"{p / 1e9:.1f}B parameters with Adam at ZeRO stage {c.stage} on one GPU need at least {need:.0f} GiB "
            f"for model states alone ({per:.0f} bytes/param by {ms.basis}), more than {c.gpu_mem_gib:g} GiB. "
            "With one GPU, ZeRO has nothing to partition across.",
            "offload the optimizer (and params at stage 3), or use LoRA",
            f"{p / 1e9:.1f}B 参数、Adam、ZeRO stage {c.stage}、单卡：光 model states 至少就要 {need:.0f} GiB"
            f"（每参数 {per:.0f} 字节，{ms.basis_zh}），超过了 {c.gpu_mem_gib:g} GiB。单卡时 ZeRO 没有别的卡可以切分。",
            "把 optimizer offload 出去（stage 3 还可以 offload 参数），或者改用 LoRA",
        )


@rule(
    "KB015",
    "deepspeed-key-in-accelerate-yaml",
    "warning",
    "unknown-config-keys-silently-ignored",
    views=("accelerate",),
    summary="DeepSpeed JSON key inside accelerate's `deepspeed_config`",
    effect="not passed to DeepSpeed",
    bad=[
        Case(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  stage3_max_live_parameters: 1000\n",
            "a ZeRO JSON key",
        ),
        Case(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero_force_ds_cpu_optimizer: false\n",
            "a top-level JSON key",
        ),
    ],
    ok=[
        Case(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n  zero3_init_flag: true\n",
            "an accelerate key",
        ),
        Case(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n",
            "the JSON given as a file",
        ),
    ],
)
def kb015(c: Ctx) -> None:
    ds = c.data.get("deepspeed_config")
    if not isinstance(ds, dict):
        return
    for key in ds:
        if c.reg.get(f"accelerate:yaml/deepspeed_config.{key}") is None and _ds_key(c.reg, key):
            c.add(
                f"deepspeed_config.{key}",
                f"`{key}` is a DeepSpeed JSON key; accelerate does not pass it from the YAML to DeepSpeed, "
                "so it is ignored.",
                "put it in a DeepSpeed JSON and point `deepspeed_config_file` at it",
                f"`{key}` 是 DeepSpeed JSON 里的 key；accelerate 不会把 YAML 里的它传给 DeepSpeed，写了会被忽略。",
                "把它写进 DeepSpeed 的 JSON，再用 `deepspeed_config_file` 指向那个文件",
            )


@rule(
    "KB016",
    "ds-activation-checkpointing-with-hf",
    "warning",
    "hf-activation-checkpointing-vs-ds-section",
    views=("deepspeed",),
    summary="DeepSpeed `activation_checkpointing` section with HF models",
    effect="configures deepspeed.checkpointing only",
    bad=[Case(_ds({"activation_checkpointing": {"partition_activations": True}}), "the section")],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 3}}), "no section"),
        Case("output_dir: out\nactivation_checkpointing: true\ndeepspeed:\n  zero_optimization: {stage: 3}\n"),
    ],
)
def kb016(c: Ctx) -> None:
    if "activation_checkpointing" in c.data:
        c.add(
            c.prefix + "activation_checkpointing",
            "the `activation_checkpointing` section only configures deepspeed.checkpointing (Megatron-style code); "
            "Hugging Face models never call it, so it saves nothing there.",
            "use TrainingArguments `activation_checkpointing` / `model.activation_checkpointing_enable()` "
            "(formerly `gradient_checkpointing`)",
            "`activation_checkpointing` 这个 section 只配置 deepspeed.checkpointing（Megatron 风格的代码）；"
            "Hugging Face 模型根本不会调用它，所以在 HF 模型上一点显存都省不了。",
            "用 TrainingArguments 的 `activation_checkpointing` / `model.activation_checkpointing_enable()`"
            "（以前叫 `gradient_checkpointing`）",
        )


@rule(
    "KB017",
    "partial-offload-below-stage3",
    "error",
    "offload-param-ignored-below-stage3",
    views=("deepspeed",),
    summary="`offload_optimizer.ratio` < 1 below stage 3",
    effect="ValidationError",
    bad=[
        Case(_ds({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}), "stage 3"),
        Case(_ds({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 1.0}}}), "ratio 1"),
    ],
    validity=True,
)
def kb017(c: Ctx) -> None:
    for blk, b, _dev in c.offload():
        ratio = b.get("ratio")
        if blk != "offload_optimizer" or not isinstance(ratio, (int, float)) or isinstance(ratio, bool):
            continue
        if ratio < 1 and c.stage < 3:
            c.add(
                c.prefix + "zero_optimization.offload_optimizer.ratio",
                f"partial offload (ratio {ratio}) needs ZeRO-3: DeepSpeed raises ValidationError "
                "(Partial offloading only supported for ZeRO Stage 3).",
                "set ratio 1.0 or use stage 3",
                f"部分 offload（ratio {ratio}）只有 ZeRO-3 支持：DeepSpeed 会直接报 ValidationError"
                "（Partial offloading only supported for ZeRO Stage 3）。",
                "ratio 设成 1.0，或者改用 stage 3",
            )


@rule(
    "KB018",
    "deprecated-and-replacement-together",
    "error",
    "deprecated-cpu-offload-keys",
    views=("deepspeed",),
    summary="deprecated key and its replacement together (`cpu_offload` + `offload_optimizer`)",
    effect="AssertionError",
    bad=[
        Case(
            _ds({"zero_optimization": {"stage": 2, "cpu_offload": True, "offload_optimizer": {"device": "cpu"}}}),
            "cpu_offload + offload_optimizer",
        )
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 2, "cpu_offload": True}}), "deprecated alone (KB003)"),
        Case(
            _ds(
                {
                    "zero_optimization": {
                        "stage": 3,
                        "cpu_offload_use_pin_memory": True,
                        "offload_optimizer": {"device": "cpu"},
                    }
                }
            ),
            "a no-op beside the block it names",
        ),
    ],
    validity=True,
)
def kb018(c: Ctx) -> None:
    for v in c.keys:
        if v.status != "deprecated" or v.rec is None:
            continue
        repl = v.rec.get("replacement")
        if repl and not v.rec.get("noop") and repl in v.siblings:
            c.add(
                v.shown,
                f"`{v.path}` and its replacement `{repl}` are both set: DeepSpeed raises AssertionError "
                "(Cannot provide deprecated parameter and replacing parameter together).",
                f"delete `{v.rec['name']}` and keep `{repl}`, which replaces it (its settings are the ones used)",
                f"`{v.path}` 和替代它的 `{repl}` 同时设置了：DeepSpeed 会直接报 AssertionError"
                "（Cannot provide deprecated parameter and replacing parameter together）。",
                f"删掉 `{v.rec['name']}`，保留替代它的 `{repl}`（以后用的就是它的设置）",
            )


@rule(
    "KB019",
    "coerced-value",
    "info",
    None,
    views=("deepspeed",),
    summary='value accepted after conversion (`"3"` -> 3), or an alias spelling',
    effect="accepted",
    bad=[
        Case(_ds({"zero_optimization": {"stage": "3"}}), "a string stage"),
        Case(_ds({"zero_optimization": {"stage": 3, "prefetch_bucket_size": 1000}}), "an alias"),
    ],
    ok=[
        Case(_ds({"zero_optimization": {"stage": 3}}), "an int"),
        Case(_ds({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 1000}}), "the canonical name"),
    ],
)
def kb019(c: Ctx) -> None:
    for v in c.keys:
        if v.rec is None:
            continue
        if v.status == "alias":
            leaf = v.rec["path"].rsplit(".", 1)[-1]
            c.add(
                v.shown,
                f"`{v.path}` is accepted as an alias of `{v.rec['path']}`.",
                f"write `{leaf}`",
                f"`{v.path}` 会被当作 `{v.rec['path']}` 的别名接受。",
                f"改写成 `{leaf}`",
            )
        if v.value_check is not None and v.value_check[0] is None:
            coerced = v.value_check[1]
            if coerced is not None and coerced != v.value:
                c.add(
                    v.shown,
                    f"`{v.rec['path']}` = {v.value!r} is accepted and converted to {coerced!r}.",
                    f"write {json_literal(coerced)}",
                    f"`{v.rec['path']}` = {v.value!r} 能通过校验，会被转换成 {coerced!r}。",
                    f"直接写 {json_literal(coerced)}",
                )


@rule(
    "KB020",
    "nvme-below-stage3",
    "warning",
    "nvme-offload-setup",
    views=("deepspeed",),
    summary="NVMe optimizer offload at stage 1/2",
    effect="behaves as CPU offload",
    bad=[
        Case(
            _ds({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}}),
            "stage 2",
        )
    ],
    ok=[
        Case(
            _ds({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}}),
            "stage 3",
        ),
        Case(_ds({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}), "cpu at stage 2"),
    ],
)
def kb020(c: Ctx) -> None:
    for blk, _b, dev in c.offload():
        if blk == "offload_optimizer" and dev == "nvme" and c.stage in (1, 2):
            c.add(
                c.prefix + "zero_optimization.offload_optimizer.device",
                f'at stage {c.stage}, "nvme" optimizer offload behaves as CPU offload (ZeRO-1/2 have no NVMe path).',
                "use stage 3 for NVMe offload",
                f'stage {c.stage} 下 "nvme" 的 optimizer offload 实际上就是 CPU offload（ZeRO-1/2 没有 NVMe 这条路径）。',
                "要 offload 到 NVMe 请用 stage 3",
            )


def json_literal(v: Any) -> str:
    return json.dumps(v)


@rule(
    "KB022",
    "unverified-key",
    "info",
    None,
    views=("deepspeed",),
    summary="a key the registry has no record of where it cannot prove DeepSpeed ignores it: under a section the "
    "builder's trace never probed and no timeline covers (below the first level of an unvalidated section, e.g. "
    "`data_efficiency.data_routing`), a name a DeepSpeed raise / warn site reads (e.g. `sequence_parallel_size`, "
    "read at config.py:468 behind torch.distributed), a key of a section DeepSpeedConfig hands on whole after reading "
    "its `enabled` switch (`progressive_layer_drop.theta` in 0.19.4), or a removed feature the registry records only "
    "from the release that refuses it (`quantize_training` before 0.19.8); said instead of KB002 / KB005",
    effect="unknown to kb: not reported as ignored or misplaced",
    bad=[
        # the registry of the sampled builds (no timeline): what kb knows of a release no timeline covers
        Case(
            _ds({"sequence_parallel_size": 2, "zero_optimization": {"stage": 2}}),
            "a name an engine site reads (engine.py:2176); DeepSpeedConfig reads it at config.py:468",
            sampled=True,
        ),
        Case(
            _ds({"data_efficiency": {"enabled": True, "data_routing": {"enabled": True}}}),
            "a key of a section the trace never probed",
            sampled=True,
        ),
        Case(
            _ds({"progressive_layer_drop": {"enabled": True, "theta": 0.5, "gamma": 0.001}}),
            "a section handed on whole: 0.19.4 get_pld_params copies it, the engine reads theta / gamma "
            "(runtime/engine.py:972, :975)",
            versions={"deepspeed": "0.19.4"},
        ),
        Case(
            _ds({"quantize_training": {"enabled": True, "quantize_groups": 8}}),
            "refused by 0.19.8 as a removed feature; 0.19.4 reads it behind a condition (runtime/config.py:525)",
            versions={"deepspeed": "0.19.4"},
        ),
    ],
    ok=[
        Case(_ds({"zero_force_opt_offload": True}), "no trace of the name anywhere: KB005"),
        Case(_ds({"data_efficiency": {"enabled": True, "seed": 1234}}), "keys the registry has"),
        Case(_ds({"activation_checkpointing": {"partitioned_activations": True}}), "a probed section: KB005"),
        Case(
            _ds({"progressive_layer_drop": {"enabled": True}}),
            "the switch DeepSpeedConfig reads itself",
            versions={"deepspeed": "0.19.4"},
        ),
        Case(_ds({"flops_profiler": {"enabeld": True}}), "a section read key by key: KB005"),
    ],
)
def kb022(c: Ctx) -> None:
    sections: dict[tuple[str, str], list[KeyVisit]] = {}
    ver = c.reg.versions.get("deepspeed", "?")
    for v in c.keys:
        if v.rec is not None or v.proven or v.strict:
            continue
        if v.unproven == "refused":
            gone = v.lookup.record or {}
            since = refused_from(c.reg, gone) if gone else None
            doc = (gone.get("doc") or "").strip()
            said = f': "{doc}"' if doc else ""
            tl = _timeline_has(c, gone.get("id", ""))
            seen = (
                f"; the timeline (a static read of the released files) does record it in deepspeed {ver}" if tl else ""
            )
            seen_zh = f"；不过 timeline（对发布文件的静态读取）确实记录了 deepspeed {ver} 里有它" if tl else ""
            c.add(
                v.shown,
                f"kb cannot tell whether DeepSpeed {ver} reads `{v.path}`: DeepSpeed {since} refuses it as a removed "
                f"feature ({cite(gone)}){said}, so releases before {since} had the feature, but the registry "
                f"records it only from {since} on: its trace of DeepSpeedConfig in {ver} did not see it read (a "
                f"trace does not take every branch){seen}. It is not reported as ignored.",
                f"check what deepspeed {ver} does with `{v.path}`, or pin the release the config was written for",
                f"kb 判断不了 DeepSpeed {ver} 会不会读 `{v.path}`：DeepSpeed {since} 把它当作已移除的功能直接拒绝"
                f"（{cite(gone)}）" + (f'："{doc}"' if doc else "") + f"，说明 {since} 之前的版本有这个功能；"
                f"但 registry 只从 {since} 起才记录它：追踪 {ver} 的 DeepSpeedConfig 时没看到它被读"
                f"（追踪走不到每个分支）{seen_zh}。所以这里不说它会被忽略。",
                f"去看一下 deepspeed {ver} 怎么处理 `{v.path}`，或者锁定这份配置当初针对的版本",
            )
        elif v.unproven == "site":
            sites = "; ".join(f"{s['function']}, {cite(s)}" if s.get("function") else cite(s) for s in v.evidence[:3])
            c.add(
                v.shown,
                f"kb cannot tell whether DeepSpeed {ver} reads `{v.path}`: the "
                "registry does not list it among the keys DeepSpeedConfig read when the registry traced it (one "
                "process, without torch.distributed), but DeepSpeed's code reads a name spelled "
                f"`{v.key}` ({sites}). It is not reported as ignored.",
                None,
                f"kb 判断不了 DeepSpeed {ver} 会不会读 `{v.path}`：registry 追踪 "
                "DeepSpeedConfig（单进程、没有 torch.distributed）时没看到它被读，但 DeepSpeed 的代码里读了一个同名的 "
                f"`{v.key}`（{sites}）。所以这里不说它会被忽略。",
                None,
            )
        else:
            sections.setdefault((v.parent, v.unproven), []).append(v)
    for (parent, why), vs in sections.items():
        names, names_zh = ticks([v.key for v in vs]), ticks([v.key for v in vs], "、")
        if why == "handed-on":
            sec = c.reg.get(f"deepspeed:{parent}")
            at = f" ({cite(sec)})" if sec else ""
            c.add(
                vs[0].shown,
                f"kb cannot check {names} under `{parent}` for deepspeed {ver}: DeepSpeedConfig looks up only "
                f"`{parent}.{SECTION_SWITCH}` itself{at} and hands the rest of the section on whole to the feature's "
                "code (it copies the section and pops the switch), which reads the other keys; the registry records "
                "only the keys DeepSpeedConfig looks up, so kb cannot say whether DeepSpeed reads or ignores them.",
                None,
                f"kb 没法检查 deepspeed {ver} 里 `{parent}` 下的 {names_zh}：DeepSpeedConfig 自己只读 "
                f"`{parent}.{SECTION_SWITCH}`{at}，然后把整个 section（复制一份、去掉开关）原样交给这个功能的代码，"
                "其余的 key 由那里去读；registry 只记录 DeepSpeedConfig 自己读的 key，所以 kb 说不准 DeepSpeed "
                "会读还是会忽略它们。",
                None,
            )
            continue
        c.add(
            vs[0].shown,
            f"kb cannot check {names} under `{parent}` for deepspeed {ver}: DeepSpeed reads that section with plain "
            "dict lookups (no pydantic model), the registry's trace of DeepSpeedConfig probes such sections only one "
            "level below the top, and no timeline covers this release, so kb cannot say whether DeepSpeed reads or "
            "ignores them.",
            None,
            f"kb 没法检查 deepspeed {ver} 里 `{parent}` 下的 {names_zh}：DeepSpeed 读这个 "
            "section 用的是普通的 dict 取值（没有 pydantic 模型），registry 追踪 DeepSpeedConfig 时只探查这类 section "
            "顶层下一级的 key，也没有覆盖这个版本的 timeline，所以 kb 说不准 DeepSpeed 会读还是会忽略它们。",
            None,
        )


def _timeline_has(c: Ctx, rid: str) -> bool:
    """Does the package's timeline record ``rid`` in the view's release?"""
    pkg = rid.split(":", 1)[0]
    tl = (getattr(c.reg, "timelines", None) or {}).get(pkg)
    rel = c.reg.versions.get(pkg)
    return bool(tl is not None and rel is not None and rid and tl.present(rid, rel))
