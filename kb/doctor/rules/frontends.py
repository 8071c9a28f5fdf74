"""Front ends linted by their own parsers (KB030-KB039): launch lines, TrainingArguments files, duplicate keys.

* Launch lines (``deepspeed``, ``accelerate launch``, ``torchrun``, ``python -m torch.distributed.run`` /
  ``.launch``) are read the way the launcher's argparse parser reads them, rebuilt from the registry's
  ``cli_flag`` records (every option string, ``nargs``, ``type``, ``choices``, ``allow_abbrev``; see
  ``indexer.registry_build._argparse_records``). The matching follows CPython 3.11's argparse
  (``_parse_optional`` / ``_get_option_tuples``): an exact option string, ``--flag=value``, or (when the
  parser allows abbreviations) a unique prefix of a long option; several matches are "ambiguous option".
  argparse classifies every token before it parses, so an ambiguous prefix fails even after the script;
  anything else after the script is the script's. ``tests/test_lint_frontends.py`` runs the real parsers
  on the same lines and compares verdicts.
* TrainingArguments / LLaMA-Factory files: fields checked against the registry view the lint runs with
  (``ctx.reg``: the default view or ``reg.at(versions)``); a front end's file shows this view only the keys that
  are TrainingArguments fields (kb.doctor.dialect.ta_keys): its own are judged by KB090-KB092.
* Duplicate keys: ``ParsedConfig.duplicates`` (kb/doctor/configs.py) lists every repeated key with its line.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass, field
from typing import Any

from kb.doctor.engine import Case, Ctx, rule, successor
from kb.registry.store import Record

# ---------------------------------------------------------------- launch lines: argparse, from the registry

# the CLI a launch line's argv goes to (ParsedConfig.data["command"]) -> the package whose records hold it
CLI_PACKAGE = {
    "deepspeed": "deepspeed",
    "accelerate launch": "accelerate",
    "torchrun": "torch",
    "torch.distributed.launch": "torch",
}
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's _negative_number_matcher
_CONVERT = {"int": int, "float": float}  # argparse type= callables whose failure we can reproduce exactly

ORACLE = "tests/test_lint_frontends.py"  # proves this module's validity rules (kb.doctor.engine.Rule.oracle)


@dataclass
class Problem:
    """One thing the launcher's parser would say about a line (code: KB030 unknown, KB031 ambiguous,
    KB032 bad value / missing script, KB033 accepted abbreviation)."""

    code: str
    token: str
    flag: str | None = None  # the option string it resolved to (canonical record name)
    detail: str = ""  # invalid choice / invalid int value / expected one argument / ...
    matches: list[str] = field(default_factory=list)  # ambiguous: the option strings it could match
    value: str | None = None


@dataclass
class Outcome:
    problems: list[Problem]
    script: int | None  # index in argv of the training script (None: none found)
    values: dict[str, list[str]]  # canonical flag -> the values argparse gives it (last use wins)
    detailed: bool  # the records carry nargs / allow_abbrev (a registry built by the current builder)
    script_args: list[str] = field(default_factory=list)  # what the script receives

    @property
    def rejected(self) -> bool:
        """The parser exits with status 2 (argparse error)."""
        return any(p.code in ("KB030", "KB031", "KB032") for p in self.problems)


class Cli:
    """One launcher's argparse parser, rebuilt from its registry records."""

    def __init__(self, command: str, records: list[Record], removed: list[Record] = ()):
        self.command = command
        self.records = records
        self.options: dict[str, Record] = {}
        for r in records:
            for o in [r["name"], *r["aliases"]]:
                self.options.setdefault(o, r)
        self.removed = {o: r for r in removed for o in [r["name"], *r["aliases"]]}
        self.detailed = bool(records) and all("nargs" in r for r in records)
        self.allow_abbrev = all(r.get("allow_abbrev", True) is not False for r in records)

    # argparse's _parse_optional: None (a positional), or ("known", rec, option, explicit, exact),
    # ("unknown",), ("ambiguous", [options])
    def classify(self, tok: str) -> tuple | None:
        if not tok or tok[0] != "-":
            return None
        if tok in self.options:
            return ("known", self.options[tok], tok, None, True)
        if len(tok) == 1:
            return None
        if "=" in tok:
            opt, explicit = tok.split("=", 1)
            if opt in self.options:
                return ("known", self.options[opt], opt, explicit, True)
        tuples = self._tuples(tok)
        if len(tuples) > 1:
            return ("ambiguous", [o for o, _ in tuples])
        if len(tuples) == 1:
            opt, explicit = tuples[0]
            return ("known", self.options[opt], opt, explicit, False)
        if _NEGATIVE_NUMBER.match(tok) or " " in tok:
            return None  # none of these parsers has negative-number-like options
        return ("unknown",)

    def _tuples(self, tok: str) -> list[tuple[str, str | None]]:
        """argparse's _get_option_tuples (CPython 3.11)."""
        out: list[tuple[str, str | None]] = []
        if tok[1] == "-":
            if self.allow_abbrev:
                prefix, _, explicit = tok.partition("=")
                out = [(o, explicit if "=" in tok else None) for o in self.options if o.startswith(prefix)]
        else:
            short, short_explicit = tok[:2], tok[2:]
            for o in self.options:
                if o == short:
                    out.append((o, short_explicit))
                elif o.startswith(tok):
                    out.append((o, None))
        return out

    def parse(self, argv: list[str], script_hint: str | None = None) -> Outcome:
        """What the parser makes of argv: its problems, where the script is, each flag's values."""
        problems: list[Problem] = []
        kinds: list[Any] = []
        dashdash = False
        for tok in argv:  # argparse classifies every token first (up to "--"), the script's too
            if dashdash:
                kinds.append(None)
            elif tok == "--":
                dashdash = True
                kinds.append("--")
            else:
                k = self.classify(tok)
                kinds.append(k)
                if k is not None and k[0] == "ambiguous":
                    problems.append(Problem("KB031", tok, matches=k[1]))
        values: dict[str, list[str]] = {}
        if not self.detailed:  # records without nargs: judge the flag names before the script only
            end = argv.index(script_hint) if script_hint in argv else len(argv)
            for i, tok in enumerate(argv[:end]):
                k = kinds[i]
                if k is None or k == "--" or k[0] == "ambiguous":
                    continue
                if k[0] == "unknown":
                    problems.append(Problem("KB030", tok.split("=", 1)[0]))
                elif not k[4]:
                    problems.append(Problem("KB033", tok, k[1]["name"]))
            return Outcome(problems, end if end < len(argv) else None, values, False)
        i, n, script = 0, len(argv), None
        while i < n:
            k = kinds[i]
            if k == "--":
                i += 1
                continue
            if k is None:
                script = i
                break
            tok = argv[i]
            i += 1
            if k[0] == "ambiguous":
                continue
            if k[0] == "unknown":
                problems.append(Problem("KB030", tok.split("=", 1)[0]))
                continue
            _, rec, opt, explicit, exact = k
            if not exact:
                problems.append(Problem("KB033", tok, rec["name"]))
            nargs = rec.get("nargs")
            free = 0  # values available: the positionals that follow
            while i + free < n and kinds[i + free] is None:
                free += 1
            if explicit is not None:
                if nargs == 0:
                    problems.append(Problem("KB032", tok, rec["name"], "ignored explicit argument", value=explicit))
                    continue
                got = [explicit]
            elif nargs == 0:
                got = []
            elif nargs is None or isinstance(nargs, int):
                need = 1 if nargs is None else nargs
                if free < need:
                    what = "expected one argument" if need == 1 else f"expected {need} arguments"
                    problems.append(Problem("KB032", tok, rec["name"], what))
                    continue
                got, i = argv[i : i + need], i + need
            elif nargs == "?":
                got, i = argv[i : i + min(1, free)], i + min(1, free)
            elif nargs in ("*", "+"):
                if nargs == "+" and free == 0:
                    problems.append(Problem("KB032", tok, rec["name"], "expected at least one argument"))
                    continue
                got, i = argv[i : i + free], i + free
            else:  # REMAINDER ("...") or PARSER: everything after
                got, i = argv[i:], n
            values[rec["name"]] = got
            for v in got:
                if _SHELL_EXPANDED.search(v):
                    continue  # the shell puts the value there when it runs the line: the file does not hold it
                bad = _bad_value(rec, v)
                if bad:
                    problems.append(Problem("KB032", tok, rec["name"], bad, value=v))
        if script is None:
            problems.append(Problem("KB032", "", None, "the training script is missing"))
            return Outcome(problems, None, values, True)
        rest = script + 1
        if rest < n and kinds[rest] == "--":  # the first "--" right after it: the script positional's (-*A-*)
            rest += 1  # takes it (a later "--" is an ordinary argument)
        return Outcome(problems, script, values, True, argv[rest:])


# a value the shell expands before the launcher sees it: `$NAME`, `${NAME}`, `$(cmd)`, `$1`, a backquoted command.
# The line does not hold its value, so argparse's type and choices checks have nothing to judge (shlex keeps the
# `$` of an unquoted or double-quoted expansion in the token; a single-quoted one, which the shell leaves as it is,
# looks the same and is let through too)
_SHELL_EXPANDED = re.compile(r"\$[A-Za-z_{(0-9@*#?!-]|`")


def _bad_value(rec: Record, value: str) -> str | None:
    """argparse's type conversion, then its choices check (the message argparse prints, without the flag)."""
    conv = _CONVERT.get(rec.get("type") or "")
    v: Any = value
    if conv is not None:
        try:
            v = conv(value)
        except ValueError:
            return f"invalid {rec['type']} value: {value!r}"
    choices = rec.get("choices")
    if choices is not None and v not in choices:
        return f"invalid choice: {value!r} (choose from {', '.join(repr(c) for c in choices)})"
    return None


_CLIS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cli_for(reg: Any, command: str | None) -> Cli | None:
    """The launcher's parser as the registry view records it; None when the view has no record of it."""
    pkg = CLI_PACKAGE.get(command or "")
    if pkg is None:
        return None
    cache = _CLIS.setdefault(reg, {})
    if command not in cache:
        prefix = f"{pkg}:cli/{command}/"
        recs = [r for r in reg.records if r["kind"] == "cli_flag" and r["id"].startswith(prefix)]
        live = [r for r in recs if r.get("status") != "removed"]
        cache[command] = Cli(command, live, [r for r in recs if r.get("status") == "removed"]) if live else None
    return cache[command]


def launch_outcome(c: Ctx) -> tuple[Cli, Outcome] | None:
    cli = cli_for(c.reg, c.data.get("command"))
    if cli is None or "argv" not in c.data:
        return None
    return cli, cli.parse(c.data["argv"], c.data.get("script"))


def launch_problems(c: Ctx, code: str) -> tuple[Cli | None, Outcome | None, list]:
    """The launcher, its parse of the command line, and the parse problems of one rule's ``code`` (none when the
    config is not a launch line kb knows): what every launcher rule starts from."""
    got = launch_outcome(c)
    if got is None:
        return None, None, []
    cli, out = got
    return cli, out, [p for p in out.problems if p.code == code]


def _near_flags(cli: Cli, tok: str, limit: int = 3) -> list[str]:
    """The real option strings nearest to an unknown one: prefixes first, then by similarity."""
    from rapidfuzz import fuzz, process

    norm = tok.lstrip("-").replace("-", "_")
    pref = [o for o in cli.options if o.startswith(tok) and len(tok) > 2]
    hits = process.extract(
        norm, list(cli.options), scorer=fuzz.ratio, limit=12, processor=lambda s: s.lstrip("-").replace("-", "_")
    )
    out: list[str] = []
    seen: set[str] = set()
    dash = "-" in tok.lstrip("-")
    for o in pref + [o for o, score, _ in hits if score >= 60]:
        r = cli.options[o]
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        spellings = [r["name"], *[a for a in r["aliases"] if a.startswith("--")]]
        same_style = [s for s in spellings if ("-" in s.lstrip("-")) == dash]
        out.append(same_style[0] if same_style else r["name"])
        if len(out) == limit:
            break
    return out


def _ticks(names: list[str], sep: str = ", ") -> str:
    return sep.join(f"`{n}`" for n in names)


def _cli_name(c: Ctx) -> str:
    return {"torch.distributed.launch": "python -m torch.distributed.launch"}.get(c.data["command"], c.data["command"])


def _arg_path(c: Ctx, tok: str, after_script: bool = False) -> str:
    if not tok:
        return "script"
    return f"{'script_args' if after_script else 'launcher_args'}.{tok.split('=', 1)[0].lstrip('-')}"


@rule(
    "KB030",
    "launcher-unknown-flag",
    "error",
    None,
    views=("launch",),
    summary="flag the launcher's argparse parser does not know (`deepspeed`, `accelerate launch`, `torchrun`), "
    "with the nearest real flags; dash and underscore spellings and accepted abbreviations are known",
    effect='the launcher exits with status 2: argparse "unrecognized arguments"',
    bad=[
        Case("deepspeed --num_gpus 2 --master_prot 29501 train.py", "typo in a deepspeed flag"),
        Case("accelerate launch --num_processes 2 --mixed_precisionn bf16 train.py", "typo in an accelerate flag"),
    ],
    ok=[
        Case("deepspeed --num_gpus 2 --master_port 29501 train.py --master_prot 1", "after the script: its own"),
        Case("accelerate launch --num_processes 2 --mixed_precision bf16 train.py", "real flags"),
        Case("deepspeed --num_gpu 2 train.py", "a unique prefix (argparse accepts it)"),
    ],
    validity=True,
)
def kb030(c: Ctx) -> None:
    cli, out, problems = launch_problems(c, "KB030")
    name = _cli_name(c)
    for p in problems:
        gone = cli.removed.get(p.token)
        if gone:
            until = gone.get("until") or "an older release"
            msg = (
                f"`{p.token}` was an option of `{name}` until {until} and is gone in the release linted against: "
                "argparse exits (unrecognized arguments)."
            )
            msg_zh = f"`{p.token}` 是 `{name}` 在 {until} 及以前才有的参数，当前核对的版本里已经没有了：argparse 会直接退出（unrecognized arguments）。"
        else:
            msg = f"`{p.token}` is not an option of `{name}`: argparse exits (unrecognized arguments)."
            msg_zh = f"`{p.token}` 不是 `{name}` 的参数：argparse 会直接退出（unrecognized arguments）。"
        if not cli.allow_abbrev and any(o.startswith(p.token) for o in cli.options):
            msg += f" `{name}` does not accept abbreviations (allow_abbrev=False)."
            msg_zh += f"`{name}` 不接受缩写（allow_abbrev=False）。"
        near = _near_flags(cli, p.token)
        c.add(
            _arg_path(c, p.token),
            msg,
            f"did you mean {_ticks(near)}? (`{name} --help` lists them all)" if near else f"see `{name} --help`",
            msg_zh,
            f"是不是想写 {_ticks(near, '、')}？（`{name} --help` 会列出全部参数）"
            if near
            else f"看一下 `{name} --help`",
            "local-rank-unrecognized-argument" if "local" in p.token else None,
        )


@rule(
    "KB031",
    "launcher-ambiguous-prefix",
    "error",
    None,
    views=("launch",),
    summary="abbreviated flag that is a prefix of several real flags (argparse checks every token, "
    "even after the script)",
    effect='the launcher exits with status 2: argparse "ambiguous option"',
    bad=[
        Case("deepspeed --num 2 train.py", "--num_nodes or --num_gpus?"),
        Case("deepspeed train.py --num 2", "after the script too"),
    ],
    ok=[
        Case("deepspeed --num_gpus 2 train.py", "the full flag"),
        Case("deepspeed --num_g 2 train.py", "a unique prefix"),
    ],
    validity=True,
)
def kb031(c: Ctx) -> None:
    cli, out, problems = launch_problems(c, "KB031")
    name = _cli_name(c)
    for p in problems:
        after = out.script is not None and p.token in c.data["argv"][out.script + 1 :]
        where = (
            " It comes after the script, but argparse classifies every token before it hands the rest to the script."
            if after
            else ""
        )
        where_zh = (
            "它虽然写在脚本后面，但 argparse 在把剩下的参数交给脚本之前会先把每个 token 都检查一遍。" if after else ""
        )
        if len({cli.options[m]["id"] for m in p.matches}) == 1:
            where += " (These are two spellings of one flag; the argparse of Python 3.11, which this check follows, still calls that ambiguous.)"
            where_zh += "（这几个其实是同一个参数的不同写法；本检查依据的 Python 3.11 argparse 仍然判为有歧义。）"
        c.add(
            _arg_path(c, p.token, after),
            f"`{p.token}` is an abbreviation of several `{name}` options ({_ticks(p.matches)}): "
            f"argparse exits (ambiguous option).{where}",
            "write the full flag"
            + (" (or put `--` between the script and its arguments: argparse then leaves them alone)" if after else ""),
            f"`{p.token}` 可以是 `{name}` 的好几个参数的缩写（{_ticks(p.matches, '、')}）：argparse 会直接退出"
            f"（ambiguous option）。{where_zh}",
            "把参数名写全"
            + ("（或者在脚本名和它的参数之间加一个 `--`，argparse 就不会再检查后面的参数）" if after else ""),
        )


@rule(
    "KB032",
    "launcher-invalid-value",
    "error",
    None,
    views=("launch",),
    summary="launcher flag value outside its `choices`, not of its type (`--num_gpus two`), missing, "
    "or the training script missing; a value the shell expands (`$WORKER_GPU`, `${N}`) is not judged",
    effect='the launcher exits with status 2: argparse "invalid choice" / "invalid int value" / "expected one '
    'argument"',
    bad=[
        Case("accelerate launch --mixed_precision bf17 train.py", "not one of the choices"),
        Case("deepspeed --num_gpus two train.py", "not an int"),
    ],
    ok=[
        Case("accelerate launch --mixed_precision bf16 train.py", "a choice"),
        Case("deepspeed --num_gpus 2 train.py --num_gpus two", "the script's own flag"),
        Case(
            "accelerate launch --num_processes $WORKER_GPU --machine_rank ${WORKER_IDX} train.py",
            "shell variables: the shell puts the values there",
        ),
    ],
    validity=True,
)
def kb032(c: Ctx) -> None:
    _cli, out, problems = launch_problems(c, "KB032")
    name = _cli_name(c)
    for p in problems:
        if p.flag is None:
            c.add(
                "script",
                "no training script: argparse exits (the following arguments are required). A flag that "
                "takes a value may have taken the script as its value.",
                f"put the script after `{name}`'s own flags",
                "没有训练脚本：argparse 会直接退出（the following arguments are required）。"
                "可能是某个需要取值的参数把脚本名当成了它的值。",
                f"把脚本写在 `{name}` 自己的参数后面",
            )
            continue
        rec = _cli.options[p.flag]
        choices = rec.get("choices")
        hint = (
            f"one of {_ticks([str(x) for x in choices])}"
            if choices
            else f"a value of type {rec['type']}"
            if rec.get("type") in _CONVERT
            else "check the flag"
        )
        hint_zh = (
            f"取值只能是 {_ticks([str(x) for x in choices], '、')} 之一"
            if choices
            else f"需要一个 {rec['type']} 类型的值"
            if rec.get("type") in _CONVERT
            else "检查一下这个参数"
        )
        c.add(
            _arg_path(c, p.token),
            f"`{p.flag}`: {p.detail}: argparse exits.",
            hint,
            f"`{p.flag}` 的值不对（argparse 的原话：{p.detail}），argparse 会直接退出。",
            hint_zh,
        )


@rule(
    "KB033",
    "launcher-abbreviated-flag",
    "info",
    None,
    views=("launch",),
    summary="abbreviated launcher flag that argparse accepts as the one flag it starts (`deepspeed --num_gpu`)",
    effect="accepted; it breaks as soon as a release adds a flag with the same start",
    bad=[Case("deepspeed --num_gpu 2 train.py", "--num_gpus")],
    ok=[Case("deepspeed --num_gpus 2 train.py", "the full flag")],
)
def kb033(c: Ctx) -> None:
    for p in launch_problems(c, "KB033")[2]:
        c.add(
            _arg_path(c, p.token),
            f"`{p.token.split('=', 1)[0]}` is accepted as `{p.flag}` (argparse takes a unique prefix of a long "
            "option).",
            f"write `{p.flag}`",
            f"`{p.token.split('=', 1)[0]}` 会被当成 `{p.flag}`（argparse 接受长参数名的唯一前缀）。",
            f"写全成 `{p.flag}`",
        )


# ---------------------------------------------------------------- TrainingArguments / LLaMA-Factory files

TA_PREFIXES = ("transformers:TrainingArguments.", "transformers:Seq2SeqTrainingArguments.")
NEAR_CUTOFF = 80  # rapidfuzz ratio: `learning_rat` -> `learning_rate` 96, `evaluation_strategy` -> `eval_strategy` 81


def _ta_record(reg: Any, key: str) -> Record | None:
    for prefix in TA_PREFIXES:
        rec = reg.get(prefix + key)
        if rec is not None:
            return rec
    return None


_TA_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ta_fields(reg: Any) -> list[str]:
    """The field names of (Seq2Seq)TrainingArguments in this registry view (removed ones left out)."""
    if reg not in _TA_NAMES:
        _TA_NAMES[reg] = sorted(
            {
                r["name"]
                for r in reg.records
                if r["id"].startswith(TA_PREFIXES) and r.get("status") != "removed" and r["kind"] == "field"
            }
        )
    return _TA_NAMES[reg]


def _near_fields(reg: Any, key: str) -> list[str]:
    from rapidfuzz import fuzz, process

    hits = process.extract(key, _ta_fields(reg), scorer=fuzz.ratio, limit=3, score_cutoff=NEAR_CUTOFF)
    return [h[0] for h in hits]


def _tf_version(c: Ctx) -> str:
    return c.reg.versions.get("transformers", "?")


@rule(
    "KB034",
    "training-args-unknown-field",
    "error",
    None,
    views=("training_args",),
    summary="TrainingArguments key that is not a field but close to one (`learning_rat`); a front end's own file "
    "(LLaMA-Factory, TRL, ms-swift) is judged by its own arguments (KB090 / KB091)",
    effect='HfArgumentParser raises ValueError "Some keys are not used" (LLaMA-Factory: "Some specified arguments '
    'are not used"); `TrainingArguments(**kw)` raises TypeError',
    bad=[
        Case("output_dir: out\nlearning_rat: 1.0e-5\nper_device_train_batch_size: 1\n", "typo"),
    ],
    ok=[
        Case("output_dir: out\nlearning_rate: 1.0e-5\nper_device_train_batch_size: 1\n", "real fields"),
        Case(
            "model_name_or_path: m\nstage: sft\nfinetuning_type: lora\ntemplate: qwen\nlora_target: all\n"
            "cutoff_len: 2048\noutput_dir: out\nnum_train_epochs: 3\n",
            "LLaMA-Factory keys",
        ),
    ],
    validity=True,
)
def kb034(c: Ctx) -> None:
    for key in c.data:
        key = str(key)
        if _ta_record(c.reg, key) is not None:
            continue
        near = _near_fields(c.reg, key)
        if not near:
            continue  # a key of the script's own dataclasses (HF example scripts have them too)
        ver = _tf_version(c)
        msg = (
            f"`{key}` is not a TrainingArguments field in transformers {ver}: HfArgumentParser raises ValueError "
            "(Some keys are not used by the HfArgumentParser); TrainingArguments(**...) raises TypeError."
        )
        msg_zh = (
            f"`{key}` 不是 transformers {ver} 里 TrainingArguments 的字段：HfArgumentParser 会直接报 ValueError"
            "（Some keys are not used by the HfArgumentParser），直接传给 TrainingArguments(**...) 会报 TypeError。"
        )
        c.add(str(key), msg, f"did you mean {_ticks(near)}?", msg_zh, f"是不是想写 {_ticks(near, '、')}？")


@rule(
    "KB035",
    "training-args-removed-field",
    "error",
    None,
    views=("training_args",),
    summary="TrainingArguments field that the linted transformers release no longer has (`evaluation_strategy`), "
    "with its replacement",
    effect='HfArgumentParser raises ValueError "Some keys are not used"; `TrainingArguments(**kw)` raises TypeError',
    bad=[
        Case(
            "output_dir: out\nevaluation_strategy: steps\n",
            "removed field (needs the multi-release registry; test_lint_frontends builds one)",
        )
    ],
    ok=[Case("output_dir: out\neval_strategy: steps\n", "its replacement")],
    validity=True,
)
def kb035(c: Ctx) -> None:
    for key in c.data:
        rec = _ta_record(c.reg, str(key))
        if rec is None or rec.get("status") != "removed":
            continue  # (a front end's file shows this view only its TrainingArguments keys: kb.doctor.dialect.ta_keys)
        until = rec.get("until") or "an older release"
        repl = _replacement(c.reg, rec)
        inferred = _inferred(c, rec)
        if repl and inferred and f"`{repl}" in inferred[0]:
            fix, fix_zh = inferred  # the same field, with its value carried over and its doc as the release has it
        elif repl:
            value = c.data.get(key)
            carried = isinstance(value, (int, float)) and not isinstance(value, bool)
            written = f"`{repl}: {value}`" if carried else f"`{repl}`"
            fix = f"write {written} instead (the replacement transformers' own deprecation names)"
            fix_zh = f"改写成 {written}（transformers 自己的弃用提示给出的替代写法）"
        else:
            fix, fix_zh = inferred or (
                f"delete it: transformers {_tf_version(c)} has no such setting and the registry shows nothing in "
                f"its place, so whatever it did (in {until}) is gone",
                f"删掉它：transformers {_tf_version(c)} 没有这个设置，registry 里也看不到替代它的字段，"
                f"它（在 {until} 里）的作用就没有了",
            )
        c.add(
            str(key),
            f"`{key}` was a TrainingArguments field until transformers {until}; transformers {_tf_version(c)} has "
            "no such field: HfArgumentParser raises ValueError (Some keys are not used by the HfArgumentParser).",
            fix,
            f"`{key}` 是 transformers {until} 及以前才有的 TrainingArguments 字段，transformers {_tf_version(c)} "
            "里已经没有了：HfArgumentParser 会直接报 ValueError（Some keys are not used by the HfArgumentParser）。",
            fix_zh,
        )


def _inferred(c: Ctx, rec: Record) -> tuple[str, str] | None:
    """'write `new: value` instead' when the registry shows the field that took a removed one's place
    (kb.doctor.engine.successor: inferred, with the new field's doc as the release has it)."""
    s = successor(c.reg, rec)
    if s is None:
        return None
    new, old = s.rec["name"], rec["name"]
    value = c.data.get(old)
    written = f"`{new}: {value}`" if isinstance(value, (int, float)) and not isinstance(value, bool) else f"`{new}`"
    how = (
        f"it is new in transformers {s.since} (the first release the registry built without `{old}`), in the place "
        f"of `{old}`, with the same type and default"
        if s.how == "new"
        else f"by transformers {s.since} (the first release the registry built without `{old}`) its type and "
        f"default had become those of `{old}`"
    )
    how_zh = (
        f"它是 transformers {s.since}（registry 构建过的、第一个没有 `{old}` 的版本）新加的，正好在 `{old}` 原来的位置，"
        "类型和默认值也一样"
        if s.how == "new"
        else f"到 transformers {s.since}（registry 构建过的、第一个没有 `{old}` 的版本）时，它的类型和默认值已经变成了 "
        f"`{old}` 原来的"
    )
    doc = (s.rec.get("doc") or "").strip()
    said, said_zh = (f'; its doc: "{doc}"', f'；它的文档："{doc}"') if doc else ("", "")
    return (
        f"write {written} instead (deleting it would drop what it did): {how} (inferred by kb from the registry){said}",
        f"改写成 {written}（直接删掉的话它原来的作用就没了）：{how_zh}（kb 从 registry 推断）{said_zh}",
    )


def _replacement(reg: Any, rec: Record) -> str | None:
    target = rec.get("renamed_to")
    if target:
        new = reg.get(target)
        return new["name"] if new else target.rsplit(".", 1)[-1]
    repl = rec.get("replacement")
    return repl.rsplit(".", 1)[-1] if isinstance(repl, str) and repl else None


# transformers 5.24.0 transformers/training_args.py:1784-1785, TrainingArguments.__post_init__ (the test
# test_lint_frontends.py::test_fp16_bf16_raise_site reads that line from the installed package)
FP16_BF16_SITE = ("transformers/training_args.py", 1784)


@rule(
    "KB036",
    "training-args-fp16-and-bf16",
    "error",
    "bf16-and-fp16-both-enabled",
    views=("training_args",),
    summary="TrainingArguments `fp16` and `bf16` both true",
    effect='ValueError "At most one of fp16 and bf16 can be True, but not both" (transformers/training_args.py:1784 '
    "in 5.24.0; on a machine without bf16 support the bf16 check just before it raises first)",
    bad=[Case("output_dir: out\nfp16: true\nbf16: true\n", "both")],
    ok=[
        Case("output_dir: out\nfp16: false\nbf16: true\n", "bf16 only"),
        Case(
            "output_dir: out\nbf16: true\ndeepspeed:\n  fp16: {enabled: true}\n", "fp16 in the DeepSpeed part (KB011)"
        ),
    ],
    validity=True,
)
def kb036(c: Ctx) -> None:
    fp, bf = c.data.get("fp16"), c.data.get("bf16")
    if isinstance(fp, dict) or isinstance(bf, dict) or not (fp and bf):
        return  # __post_init__ tests `self.fp16 and self.bf16`: Python truth, as parse_dict passes values as they are
    c.add(
        "bf16",
        "`fp16` and `bf16` are both true: TrainingArguments raises ValueError (At most one of fp16 and bf16 can be "
        "True, but not both).",
        "keep one (bf16 on Ampere or newer)",
        "`fp16` 和 `bf16` 都设成了 true：TrainingArguments 会直接报 ValueError"
        "（At most one of fp16 and bf16 can be True, but not both）。",
        "只留一个（Ampere 及更新的卡用 bf16）",
    )


# ---------------------------------------------------------------- duplicate keys


@rule(
    "KB037",
    "deepspeed-json-duplicate-key",
    "error",
    None,
    views=("deepspeed",),
    summary="a key written twice in one object of a DeepSpeed JSON / HJSON file",
    effect='DeepSpeed refuses the file: ValueError "Duplicate keys in DeepSpeed config" (its loader\'s '
    "object_pairs_hook); read by the HF Trainer / accelerate (json.load) the last value wins silently",
    bad=[
        Case(
            '{\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": {"stage": 2},\n'
            '  "zero_optimization": {"stage": 3}\n}\n',
            "two zero_optimization blocks",
        ),
        Case('{\n  "zero_optimization": {\n    "stage": 3,\n    "stage": 2\n  }\n}\n', "nested"),
    ],
    ok=[
        Case('{\n  "zero_optimization": {"stage": 3},\n  "bf16": {"enabled": true}\n}\n', "each key once"),
        Case('{\n  "fp16": {"enabled": true},\n  "bf16": {"enabled": false}\n}\n', "same inner key in two objects"),
    ],
    validity=True,
)
def kb037(c: Ctx) -> None:
    if c.prefix or c.cfg.fmt not in ("json", "hjson"):
        return  # a `deepspeed:` mapping inside another file reaches DeepSpeed as a dict (KB038)
    for path, line in c.cfg.duplicates:
        first = c.cfg.lines.get(path)
        at = f" (first on line {first})" if first and first != line else ""
        at_zh = f"（第一次出现在第 {first} 行）" if first and first != line else ""
        c.add(
            path,
            f"`{path}` is written twice{at}: DeepSpeed refuses the file when it reads it (ValueError: Duplicate "
            "keys in DeepSpeed config); the HF Trainer and accelerate read it with json.load and keep the last "
            "value without a word.",
            "keep one of them",
            f"`{path}` 写了两次{at_zh}：DeepSpeed 读这个文件时会直接报 ValueError（Duplicate keys in DeepSpeed "
            "config）；HF Trainer 和 accelerate 用 json.load 读，会悄悄只保留最后一个值。",
            "只保留一个",
            line=line,
        )


@rule(
    "KB038",
    "duplicate-key-last-wins",
    "warning",
    None,
    views=("training_args", "accelerate"),
    summary="a key written twice in a TrainingArguments / LLaMA-Factory / accelerate file (YAML or JSON)",
    effect="the YAML / JSON loader keeps the last value silently",
    bad=[Case("output_dir: out\nlearning_rate: 1.0e-5\nlearning_rate: 2.0e-5\n", "twice")],
    ok=[Case("output_dir: out\nlearning_rate: 1.0e-5\n", "once")],
)
def kb038(c: Ctx) -> None:
    for path, line in c.cfg.duplicates:
        first = c.cfg.lines.get(path)
        c.add(
            path,
            f"`{path}` is written twice"
            + (f" (first on line {first})" if first and first != line else "")
            + ": the loader keeps the last value and drops the first without a word.",
            "keep one of them",
            f"`{path}` 写了两次"
            + (f"（第一次出现在第 {first} 行）" if first and first != line else "")
            + "：加载时只保留最后一个值，前面那个会被悄悄丢掉。",
            "只保留一个",
            line=line,
        )


@rule(
    "KB039",
    "broken-line-continuation",
    "error",
    None,
    views=("launch",),
    summary="a launch command whose next lines are more flags, after a line without its trailing backslash",
    effect="the shell ends the command at that line: the flags below never reach the script (and the shell then tries "
    "to run the first of them as a command of its own, `--x: command not found`)",
    bad=[
        Case(
            "deepspeed train.py \\\n  --deepspeed ds.json \\\n  --learning_rate 1e-5\n  --bf16 \\\n  --num_train_epochs 1\n",
            "the line before --bf16 has no backslash",
        )
    ],
    ok=[
        Case(
            "deepspeed train.py \\\n  --deepspeed ds.json \\\n  --learning_rate 1e-5 \\\n  --bf16\n",
            "every line continued",
        ),
        Case("deepspeed train.py --deepspeed ds.json\n\necho done\n", "a second command that is not flags"),
    ],
    validity=True,
)
def kb039(c: Ctx) -> None:
    after = c.data.get("after") or []
    if not after:
        return
    flags = [ln.split()[0] for _, ln in after]
    first_line = after[0][0]
    # the flag on the line that lacks its backslash (the command's last), else the break itself
    cut = [
        f"{part}.{k}"
        for part in ("launcher_args", "script_args")
        for k in c.data.get(part) or {}
        if c.cfg.lines.get(f"{part}.{k}") == first_line - 1
    ]
    path = cut[-1] if cut else "after"
    shown = ", ".join(f"`{f}`" for f in flags[:6]) + (" ..." if len(flags) > 6 else "")
    c.add(
        path,
        f"line {first_line - 1} has no trailing backslash, so the shell ends the command there: {shown} on the "
        "lines below never reach the script, and the shell runs the first of them as a command of its own.",
        f"end line {first_line - 1} with ` \\`",
        f"第 {first_line - 1} 行末尾少了反斜杠，shell 在这里就结束了命令：下面几行的 {shown} 都不会传给脚本，"
        "shell 还会把其中第一个当成单独的命令去执行。",
        f"在第 {first_line - 1} 行末尾加上 ` \\`",
    )
