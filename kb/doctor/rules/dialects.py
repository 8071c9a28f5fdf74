"""Rules on a front end's own file (KB090-KB093): LLaMA-Factory YAML, TRL recipe, axolotl config, ms-swift arguments,
and the front end's command line (KB093: a ``trl`` / ``swift`` subcommand its release does not have).

Each key is judged by the front end's own argument classes at the release the lint runs at (the user's, or the one
kb.doctor.dialect assumed), read from the registry (kb/registry/timeline.py: every minor release of the front end),
never from a list here. What happens to a key the parser does not know was read in each front end's source:

* LLaMA-Factory: ``hparams/parser.py`` ``_parse_args`` calls ``HfArgumentParser.parse_dict(args,
  allow_extra_keys=False)`` unless the environment sets ``ALLOW_EXTRA_ARGS`` (llamafactory 0.9.5, parser.py:102-114,
  261): transformers' ``parse_dict`` raises ValueError for keys no dataclass has.
* ms-swift: ``pipelines/base.py`` ``_parse_args`` raises ``ValueError(f'remaining_argv: ...')`` for arguments
  HfArgumentParser left over, unless ``ignore_args_error`` is set (ms-swift 4.6.0, base.py:31-41).
* TRL: the scripts read ``--config`` with ``parse_args_and_config(fail_with_unknown_args=False)`` (trl 1.16.0,
  scripts/sft.py, dpo.py, grpo.py ...), so a key no config class has is dropped without a word.
* axolotl: ``AxolotlInputConfig`` is a pydantic model with pydantic's default ``extra="ignore"``
  (utils/schemas/config.py:214, ``model_config = {"populate_by_name": True}``), so an unknown key is dropped too;
  plugins (``plugins:``) add arguments of their own, so with plugins listed an unknown key is only a note.
"""

from __future__ import annotations

from kb.doctor.dialect import FRONT_PACKAGES, LABELS, TA_BASED, front_records, known_anywhere, namespace
from kb.doctor.engine import Case, Ctx, rule

ORACLE = "tests/test_dialects.py"
REJECTS = ("llamafactory", "swift")  # the parser raises for a key it does not know
IGNORES = ("trl", "axolotl")  # the key is dropped silently
# trl subcommands whose arguments are not trl's config classes: ``trl vllm-serve`` parses its own ScriptArguments
# (trl/scripts/vllm_serve.py, a second class of that name the timeline does not read: docs/registry.md), ``trl env``
# and ``trl skills`` take none of them
UNRECORDED_TRL = ("vllm-serve", "env", "skills")


def _release(c: Ctx) -> tuple[str, str]:
    pkg = FRONT_PACKAGES[c.view]
    return pkg, c.reg.versions.get(pkg, "?")


def _near(c: Ctx, key: str) -> list[str]:
    """Did-you-mean from the front end's own arguments (and TrainingArguments for those that extend it)."""
    from rapidfuzz import fuzz, process

    names = set(namespace(c.reg, c.view))
    if c.view in TA_BASED:
        names |= namespace(c.reg, "training_args")
    hits = process.extract(key, sorted(names), scorer=fuzz.ratio, limit=3, score_cutoff=75)
    return [h[0] for h in hits]


def _problems(c: Ctx) -> list[tuple[str, str, str, str, str]]:
    """(key, message, suggestion, message_zh, suggestion_zh) for every key the front end's release does not have."""
    pkg, rel = _release(c)
    label, label_zh = LABELS[c.view]
    out = []
    for key in (str(k) for k in c.data):
        if key == "deepspeed" or key.startswith("_"):
            continue
        recs = front_records(c.reg, c.view, key)
        live = [r for r in recs if r["status"] not in ("absent", "removed")]
        if live:
            continue
        if not recs and known_anywhere(c.reg, c.view, key):
            continue  # a TrainingArguments field: the training_args view judges it at the transformers release
        if recs:
            r = recs[0]
            if r.get("absent") == "added" or (r["status"] == "absent" and r.get("absent") == "added"):
                msg = f"`{key}` is an argument of {pkg} from {r.get('since')} on; {pkg} {rel} does not have it"
                msg_zh = f"`{key}` 是 {pkg} 从 {r.get('since')} 起才有的参数，{pkg} {rel} 里没有"
                sug, sug_zh = f"upgrade {pkg} to {r.get('since')} or newer", f"把 {pkg} 升级到 {r.get('since')} 或更新"
            else:
                gone = r.get("removed_in") or "a later release"
                msg = f"`{key}` was an argument of {pkg} until {r.get('until')} and is gone in {gone}; {pkg} {rel} does not have it"
                msg_zh = f"`{key}` 是 {pkg} {r.get('until')} 及以前的参数，{gone} 起已移除，{pkg} {rel} 里没有"
                repl = c.reg.get(r["renamed_to"]) if r.get("renamed_to") else None
                if repl is not None:
                    sug, sug_zh = f"write `{repl['name']}`", f"改写成 `{repl['name']}`"
                else:
                    sug = f"find what replaced it in {pkg} {rel} before leaving it out (`kb registry lookup {key}`)"
                    sug_zh = f"先确认 {pkg} {rel} 里用什么替代它（`kb registry lookup {key}`），再去掉"
        else:
            msg = f"`{key}` is not an argument of {pkg} {rel}" + (
                " nor a TrainingArguments field" if c.view in TA_BASED else ""
            )
            msg_zh = f"`{key}` 不是 {pkg} {rel} 的参数" + (
                "，也不是 TrainingArguments 的字段" if c.view in TA_BASED else ""
            )
            near = _near(c, key)
            if near:
                names = ", ".join(f"`{n}`" for n in near)
                sug, sug_zh = f"did you mean {names}?", f"是不是想写 {'、'.join(f'`{n}`' for n in near)}？"
            else:
                sug = f"check the {label} reference of {pkg} {rel}"
                sug_zh = f"查一下 {pkg} {rel} 的{label_zh}参数说明"
        out.append((key, msg, sug, msg_zh, sug_zh))
    return out


@rule(
    "KB090",
    "front-end-rejects-key",
    "error",
    None,
    views=REJECTS,
    summary="a key LLaMA-Factory / ms-swift does not have at the judged release (unknown, added later, or removed)",
    validity=True,
    effect="the front end's argument parser raises ValueError before training starts (LLaMA-Factory: HfArgumentParser "
    "parse_dict with allow_extra_keys=False unless ALLOW_EXTRA_ARGS is set; ms-swift: remaining_argv unless "
    "ignore_args_error)",
    bad=[
        Case(
            "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: llama3\ndataset: d\nlora_rnk: 8\n",
            "a misspelt LLaMA-Factory argument",
        )
    ],
    ok=[
        Case(
            "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: llama3\ndataset: d\nlora_rank: 8\n"
            "learning_rate: 1.0e-4\n",
            "its own arguments and TrainingArguments fields",
        )
    ],
)
def kb090(c: Ctx) -> None:
    pkg, _ = _release(c)
    for key, msg, sug, msg_zh, sug_zh in _problems(c):
        tail = (
            ": HfArgumentParser raises ValueError (Some keys are not used by the HfArgumentParser) unless "
            "ALLOW_EXTRA_ARGS is set."
            if c.view == "llamafactory"
            else ": ms-swift raises ValueError (remaining_argv) unless ignore_args_error is set."
        )
        tail_zh = (
            "：HfArgumentParser 会报 ValueError（Some keys are not used by the HfArgumentParser），除非设置了 ALLOW_EXTRA_ARGS。"
            if c.view == "llamafactory"
            else "：ms-swift 会报 ValueError（remaining_argv），除非设置了 ignore_args_error。"
        )
        c.add(key, msg + tail, sug, msg_zh + tail_zh, sug_zh)


@rule(
    "KB091",
    "front-end-ignores-key",
    "warning",
    None,
    views=IGNORES,
    summary="a key a TRL recipe / axolotl config does not have at the judged release (unknown, added later, or removed)",
    effect="dropped without a word: TRL's scripts read --config with fail_with_unknown_args=False; axolotl's pydantic "
    "schema ignores extra keys (pydantic's default). The setting does nothing.",
    bad=[
        Case(
            "base_model: m\ndatasets:\n  - path: d\n    type: alpaca\nmicro_batch_size: 2\nsequence_len: 2048\n"
            "micro_batch_sise: 4\n",
            "a misspelt axolotl key",
        )
    ],
    ok=[
        Case(
            "base_model: m\ndatasets:\n  - path: d\n    type: alpaca\nmicro_batch_size: 2\nsequence_len: 2048\n",
            "axolotl's own keys",
        )
    ],
)
def kb091(c: Ctx) -> None:
    if c.view == "trl" and (c.cfg.command or "").split()[1:] and (c.cfg.command or "").split()[1] in UNRECORDED_TRL:
        return  # its arguments are not the config classes kb records: nothing to judge them by
    plugins = c.view == "axolotl" and bool(c.data.get("plugins"))
    for key, msg, sug, msg_zh, sug_zh in _problems(c):
        if plugins and "not an argument" in msg:
            msg += " (a plugin listed under `plugins:` may define it: kb does not read plugins' arguments)"
            msg_zh += "（`plugins:` 里的插件可能定义了它：kb 不读取插件的参数）"
            c.add(key, msg, sug, msg_zh, sug_zh)
            continue
        c.add(
            key,
            msg + ": it is dropped without a word, so the setting does nothing.",
            sug,
            msg_zh + "：会被直接忽略，这项设置不起作用。",
            sug_zh,
        )


@rule(
    "KB092",
    "front-end-deprecated-key",
    "info",
    None,
    views=(*REJECTS, *IGNORES),
    summary="a front-end argument its release marks deprecated",
    effect="still accepted at that release, with a warning; a later release drops it",
    bad=[
        Case(
            "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: llama3\ndataset: d\n"
            "overwrite_output_dir: true\n",
            "LLaMA-Factory 0.9.5 keeps overwrite_output_dir with the help text 'deprecated'",
        )
    ],
    ok=[
        Case(
            "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: llama3\ndataset: d\nlora_rank: 8\n",
            "no deprecated key",
        )
    ],
)
def kb092(c: Ctx) -> None:
    pkg, rel = _release(c)
    tl = c.reg.timelines.get(pkg)
    for key in (str(k) for k in c.data):
        live = [r for r in front_records(c.reg, c.view, key) if r["status"] not in ("absent", "removed")]
        if not live or not live[0].get("deprecated"):
            continue
        said = (tl.deprecated_at(live[0]["id"], rel) if tl is not None else None) or ""
        said = "" if said.strip().lower() == "deprecated" else f": “{said}”"
        c.add(
            key,
            f"{pkg} {rel} marks `{key}` deprecated{said} ({live[0]['source_file']}:{live[0]['source_line']}); "
            "it is still read.",
            "nothing to do now; a later release may drop it",
            f"{pkg} {rel} 把 `{key}` 标为弃用{said.replace(': ', '：')}（{live[0]['source_file']}:{live[0]['source_line']}），目前仍然有效。",
            "现在无需改动；以后的版本可能会去掉它",
        )


def _subcommand_problem(c: Ctx) -> tuple[str, str, str, str] | None:
    """``trl X`` / ``swift X``: X is not a subcommand of the judged release of that front end (the registry's
    ``<package>:cli/<prog>/<X>`` records, read from each release's own CLI: indexer/registry_timeline.py
    ``read_trl_cli`` and ``read_swift_cli``)."""
    cmd = (c.cfg.command or "").split()
    if len(cmd) != 2 or cmd[0] not in ("trl", "swift"):
        return None
    prog, sub = cmd
    pkg, rel = _release(c)
    prefix = f"{pkg}:cli/{prog}/"
    live = [
        r
        for r in c.reg.records
        if r["package"] == pkg and r["id"].startswith(prefix) and r["status"] not in ("absent", "removed")
    ]
    if not live or any(sub in (r["name"].split(" ", 1)[1], *(a.split(" ", 1)[1] for a in r["aliases"])) for r in live):
        return None  # no record of the CLI at this release, or a real subcommand (or its spelling)
    have = sorted(r["name"].split(" ", 1)[1] for r in live)
    r = c.reg.get(prefix + sub)
    listed = ", ".join(f"`{h}`" for h in have)
    if r is not None and r.get("absent") == "added":
        since = r.get("since")
        return (
            f"`{prog} {sub}` is a subcommand of {pkg} from {since} on; {pkg} {rel} has {listed}",
            f"upgrade {pkg} to {since} or newer",
            f"`{prog} {sub}` 是 {pkg} 从 {since} 起才有的子命令；{pkg} {rel} 只有 {listed}",
            f"把 {pkg} 升级到 {since} 或更新",
        )
    if r is not None:
        gone = r.get("removed_in") or "a later release"
        return (
            f"`{prog} {sub}` was a subcommand of {pkg} until {r.get('until')} and is gone in {gone}; {pkg} {rel} has "
            f"{listed}",
            f"use one of {listed}, or pin {pkg} to {r.get('until')}",
            f"`{prog} {sub}` 是 {pkg} {r.get('until')} 及以前的子命令，{gone} 起已移除；{pkg} {rel} 只有 {listed}",
            f"改用 {listed} 之一，或者把 {pkg} 固定在 {r.get('until')}",
        )
    from rapidfuzz import fuzz, process

    near = [h[0] for h in process.extract(sub, have, scorer=fuzz.ratio, limit=1, score_cutoff=70)]
    return (
        f"`{prog} {sub}` is not a subcommand of {pkg} {rel}; it has {listed}",
        f"did you mean `{prog} {near[0]}`?" if near else f"use one of {listed}",
        f"`{prog} {sub}` 不是 {pkg} {rel} 的子命令；它只有 {listed}",
        f"是不是想写 `{prog} {near[0]}`？" if near else f"改用 {listed} 之一",
    )


@rule(
    "KB093",
    "front-end-unknown-subcommand",
    "error",
    None,
    views=("trl", "swift"),
    summary="`trl X` / `swift X` where X is not a subcommand of the judged release (added later, removed, or never one)",
    effect="the command exits before training. Read in each release's CLI: trl 0.12.2 trl/commands/cli.py:31 "
    "(SUPPORTED_COMMANDS; main raises ValueError for any other), 0.13-0.28 trl/cli.py (argparse subparsers: "
    "'invalid choice'), 0.29 and 1.x trl/cli/commands/__init__.py get_commands() (argparse subparsers); ms-swift 3.0-4.6 "
    "swift/cli/main.py ROUTE_MAPPING (cli_main looks the subcommand up in it: KeyError for any other)",
    bad=[
        Case("trl grpp --model_name_or_path m --dataset_name d --output_dir o\n", "a misspelt trl subcommand"),
        Case("swift sfft --model m --dataset d\n", "a misspelt swift subcommand"),
    ],
    ok=[
        Case("trl grpo --model_name_or_path m --dataset_name d --output_dir o\n", "a subcommand of the release"),
        Case("swift merge_lora --ckpt_dir out/checkpoint-100\n", "the underscore spelling swift accepts"),
    ],
)
def kb093(c: Ctx) -> None:
    got = _subcommand_problem(c)
    if got is not None:
        c.add("command", *got)
