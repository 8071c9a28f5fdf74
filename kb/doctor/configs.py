"""Parsing what users paste as a config, keeping line numbers.

Formats: DeepSpeed config (JSON, or HJSON as DeepSpeed itself accepts), accelerate config YAML,
Hugging Face TrainingArguments as JSON/YAML (LLaMA-Factory style), and a launch command line
(``deepspeed ...``, ``accelerate launch ...``, ``torchrun ...``, ``python -m torch.distributed.run``).
``parse_config`` detects the format; ``ParsedConfig.line(path)`` gives the line of a dotted key path.
``facts_from_config`` extracts what retrieval conditions use (ZeRO stage, offload devices, precision).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

MAX_CONFIG_BYTES = 1_000_000
MAX_NESTING = 64  # real configs nest 4-5 deep; deeper is not a config (and would exhaust the recursion limit)
LAUNCHERS = ("deepspeed", "accelerate", "torchrun", "python", "python3")
# front ends' own command lines: ``swift sft --model ...`` and ``trl sft --model_name_or_path ...`` take their
# arguments as flags of HfArgumentParser-style dataclasses, so they are linted like that front end's file
FRONT_CLIS = {"swift": "swift", "trl": "trl"}


@dataclass
class SetupFacts:
    """What the ranking may use about the user's setup: stage, offload devices, precision, fine-tuning method.

    From the attached config (``facts_from_config``) and from what the question itself states
    (``kb.ask.question.stated_facts``); ranking takes the config's where both say something (kb.ask.rank)."""

    zero_stage: int | None = None
    offload_optimizer: str | None = None
    offload_param: str | None = None
    precision: str | None = None
    method: str | None = None  # full | lora | qlora
    when: str | None = None  # start | later | eval | save: the phase the failure happens in (stated by the question)
    evaluates: bool | None = None  # does the run evaluate (a TrainingArguments / LLaMA-Factory file says)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


class ConfigError(ValueError):
    """Unparseable config; the message names the source and line."""


@dataclass
class ParsedConfig:
    kind: str  # deepspeed | accelerate | training_args | launch | unknown
    data: dict[str, Any]
    source: str
    fmt: str = "json"  # json | hjson | yaml | cmdline | python (a pasted dict literal)
    lines: dict[str, int] = field(default_factory=dict)  # dotted key path -> 1-based line
    # every repeated key: (dotted path, line of the repeat); json/yaml keep the last value silently
    duplicates: list[tuple[str, int | None]] = field(default_factory=list)
    # the front end a key: value file is written for (kb.doctor.dialect.detect, from the registry's argument
    # classes): llamafactory | axolotl | trl | swift; None: bare TrainingArguments, or not decided yet
    dialect: str | None = None
    command: str | None = None  # a front end's command line: "swift sft", "trl dpo"
    env: dict[str, str] = field(default_factory=dict)  # a front end's command line: its VAR=value prefix

    def line(self, path: str) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path.rpartition(".")[0]
        return None


def parse_config(text: str, source: str = "<config>") -> ParsedConfig:
    """Detect the format and parse; raise ConfigError naming source and line on failure."""
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: config is larger than {MAX_CONFIG_BYTES // 1000} kB; paste only the config")
    stripped = text.strip()
    if not stripped:
        raise ConfigError(f"{source}: config is empty")
    script = _shell_command(stripped)
    if script is not None:
        cfg = _parse_command(script, source, text)
        after = _after_command(text, script)
        if after and cfg.kind == "launch":
            cfg.data["after"] = after
            cfg.lines.update({"after": after[0][0] - 1})  # the line that lacks its backslash
        return cfg
    depth, at = _max_nesting(stripped)
    if depth > MAX_NESTING:
        raise ConfigError(
            f"{source}:{at}: config nests {depth} levels deep (the limit is {MAX_NESTING}); this is not a config"
        )
    fmt = "json"
    repeated: list[str] = []  # keys an object of the JSON / HJSON text holds twice
    if _ELISION.search(stripped):  # "[...]" / "..." lines a user put where they cut the paste: not config
        stripped = _ELISION.sub("", stripped).strip()
        text = _ELISION.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    pasted = _python_dict(stripped)  # a Python dict literal, or its inside (True / False / None, trailing commas)
    if pasted is not None:
        data, fmt = pasted, "python"
    elif stripped[0] in "{[":
        try:
            data = json.loads(stripped, object_pairs_hook=_pairs_hook(repeated))
        except json.JSONDecodeError as e:
            repeated.clear()
            data = _hjson(stripped, repeated)
            if data is None:
                raise ConfigError(f"{source}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
            fmt = "hjson"
    else:
        import yaml

        fmt = "yaml"
        try:
            _refuse_alias_bombs(stripped, source)
        except yaml.YAMLError:
            pass  # reported with its line by safe_load below
        try:
            data = yaml.safe_load(stripped)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark
            raise ConfigError(f"{source}:{mark.line + 1 if mark else '?'}: invalid YAML: {e.problem}") from None
        except (yaml.YAMLError, ValueError, RecursionError) as e:
            raise ConfigError(f"{source}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    lines = _line_map(text) if fmt not in ("hjson", "python") else _line_map_by_search(text, data)
    dups = _duplicate_paths(text) if repeated or fmt == "yaml" else []
    if repeated and not dups:  # HJSON that YAML cannot read: the names, at the line of their first use
        dups = [(k, lines.get(k)) for k in dict.fromkeys(repeated)]
    return ParsedConfig(_kind(data), data, source, fmt, lines, dups)


# a line that is only an elision mark ("[...]", "...", "…", "# ...") where the user cut their paste
_ELISION = re.compile(r"(?m)^[ \t]*(?:\[\s*(?:\.\.\.|…)\s*\]|\.\.\.|…|#\s*\.\.\.)[ \t]*$\n?")
_PY_WORDS = re.compile(r"\b(True|False|None)\b")


def _python_dict(text: str) -> dict[str, Any] | None:
    """A pasted Python dict literal (``ds_config = {...}``, or only the inside of one), read with
    ``ast.literal_eval`` (never executed); None when the text is not one, or is plain JSON (JSON reads it)."""
    import ast

    body = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*\s*=\s*", "", text)
    if not (_PY_WORDS.search(body) or re.search(r",\s*[}\]]", body) or body != text):
        return None  # nothing Python-only about it: JSON / YAML read it (and keep their own messages)
    for cand in (body, "{" + body.rstrip().rstrip(",") + "}"):
        try:
            v = ast.literal_eval(cand)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(v, dict) and all(isinstance(k, str) for k in v):
            return v
    return None


def _pairs_hook(repeated: list[str]):
    """object_pairs_hook that builds the same dict json does (the last value wins) and notes repeated keys."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        d = dict(pairs)
        if len(d) != len(pairs):
            seen: set[str] = set()
            repeated.extend(k for k, _ in pairs if k in seen or seen.add(k))
        return d

    return hook


def _duplicate_paths(text: str) -> list[tuple[str, int]]:
    """(dotted path, line) of every key a mapping repeats (its second and later occurrences)."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError, RecursionError):
        return []
    out: list[tuple[str, int]] = []

    def walk(n: Any, prefix: str, depth: int) -> None:
        if depth > 50 or not isinstance(n, yaml.MappingNode):
            return
        seen: set[str] = set()
        for k, v in n.value:
            if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                if k.value in seen:
                    out.append((f"{prefix}{k.value}", k.start_mark.line + 1))
                seen.add(k.value)
                walk(v, f"{prefix}{k.value}.", depth + 1)

    walk(node, "", 0)
    return sorted(out, key=lambda t: t[1])


MAX_VALUES = 100_000  # a config has hundreds of values; YAML aliases can make a 1 kB text stand for billions


def _refuse_alias_bombs(text: str, source: str) -> None:
    """Count the values a YAML text expands to (aliases included) without expanding it."""
    if "*" not in text:
        return
    import yaml

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    sizes: dict[int, int] = {}

    def size(n) -> int:
        if id(n) in sizes:
            return sizes[id(n)]
        sizes[id(n)] = 1  # cycles count once
        if isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(v) for v in n.value)
        else:
            total = 1
        sizes[id(n)] = min(total, MAX_VALUES + 1)
        return sizes[id(n)]

    if node is not None and size(node) > MAX_VALUES:
        raise ConfigError(f"{source}: YAML aliases expand to more than {MAX_VALUES:,} values; this is not a config")


def _max_nesting(text: str) -> tuple[int, int]:
    """Deepest bracket or indentation nesting outside strings, and the line where it is reached.

    Counts JSON/flow brackets and YAML block indentation levels (by distinct indent widths), without
    parsing, so that a hostile input is refused before any recursive parser sees it."""
    depth = best = 0
    line = best_line = 1
    quote: str | None = None
    esc = False
    for ch in text:
        if ch == "\n":
            line += 1
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote or ch == "\n":
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
            if depth > best:
                best, best_line = depth, line
        elif ch in "}]":
            depth = max(0, depth - 1)
    indents: list[int] = []
    for n, raw in enumerate(text.splitlines(), 1):
        body = raw.lstrip(" ")
        if not body or body.startswith("#"):
            continue
        w = len(raw) - len(body)
        while indents and indents[-1] >= w:
            indents.pop()
        indents.append(w)
        if len(indents) > best:
            best, best_line = len(indents), n
    return best, best_line


def _hjson(text: str, repeated: list[str] | None = None) -> Any:
    """DeepSpeed also reads HJSON (comments, trailing commas, unquoted keys)."""
    try:
        import hjson
    except ImportError:
        return None
    try:
        hook = _pairs_hook(repeated if repeated is not None else [])
        return json.loads(json.dumps(hjson.loads(text, object_pairs_hook=hook)))  # OrderedDicts -> plain dicts
    except Exception:  # noqa: BLE001 - any hjson failure means "not HJSON either"
        return None


def _line_map(text: str) -> dict[str, int]:
    """Dotted key path -> line, from the YAML node tree (JSON is YAML enough for positions)."""
    import yaml

    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError, RecursionError):
        return {}
    out: dict[str, int] = {}

    def walk(n: Any, prefix: str, depth: int) -> None:
        if depth > 50 or not isinstance(n, yaml.MappingNode):
            return
        for k, v in n.value:
            if isinstance(k, yaml.ScalarNode):
                path = f"{prefix}{k.value}"
                out.setdefault(path, k.start_mark.line + 1)
                walk(v, path + ".", depth + 1)

    walk(node, "", 0)
    return out


def _line_map_by_search(text: str, data: dict) -> dict[str, int]:
    """Best effort for HJSON and pasted Python dicts: the first line, after the parent's line, that names the key."""
    out: dict[str, int] = {}
    lines = text.splitlines()

    def walk(d: dict, prefix: str, start: int) -> None:
        for k, v in d.items():
            rx = re.compile(rf"(^|[\s{{,])[\"']?{re.escape(str(k))}[\"']?\s*:")
            at = next((i for i in range(start, len(lines)) if rx.search(lines[i])), start)
            out[f"{prefix}{k}"] = at + 1
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.", at)

    walk(data, "", 0)
    return out


TRAINING_ARGS_MARKERS = (
    "per_device_train_batch_size",
    "output_dir",
    "deepspeed",
    "model_name_or_path",
    "do_train",
    "learning_rate",
    "num_train_epochs",
    "gradient_checkpointing",
    "logging_steps",
)


def _kind(d: dict[str, Any]) -> str:
    if "deepspeed_config" in d or "distributed_type" in d or "compute_environment" in d:
        return "accelerate"
    if any(k in d for k in TRAINING_ARGS_MARKERS) and "zero_optimization" not in d:
        return "training_args"
    if "zero_optimization" in d or "train_micro_batch_size_per_gpu" in d or "bf16" in d or "fp16" in d:
        return "deepspeed"
    return "unknown"


# ---------------------------------------------------------------- launch command lines


_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*)\s*$")  # nnodes=2, export MASTER_PORT=29500


def _looks_like_command(text: str) -> bool:
    text = re.sub(r"\\\s*\n", " ", text)
    first = text.lstrip().split(None, 1)[0] if text.split() else ""
    first = first.rsplit("/", 1)[-1]
    env = re.match(r"^([A-Z_][A-Z0-9_]*=\S*\s+)+", text)
    if env:
        first = text[env.end() :].split(None, 1)[0] if text[env.end() :].split() else ""
    return first in LAUNCHERS or first in FRONT_CLIS


def _shell_command(text: str) -> str | None:
    """The launch command of a pasted command line or shell script, or None when the text is not one.

    A script's comment lines, blank lines and ``name=value`` assignments before the command are skipped (the
    assignments' ``$name`` / ``${name}`` are substituted in the command, as the shell would); the command runs to
    the first line that does not end in a backslash."""
    lines = text.splitlines()
    assigned: dict[str, str] = {}
    i = 0
    while i < len(lines):
        ln = lines[i].strip()
        if not ln or ln.startswith("#") or ln.startswith("#!"):
            i += 1
            continue
        m = _ASSIGN.match(ln)
        if m and not ln.endswith("\\"):
            assigned[m.group(1)] = m.group(2).strip("'\"")
            i += 1
            continue
        break
    rest = lines[i:]
    if not rest or not _looks_like_command("\n".join(rest)):
        return None
    end = 0
    while end < len(rest) and rest[end].rstrip().endswith("\\"):
        end += 1
    cmd = "\n".join(rest[: end + 1])
    for name, value in sorted(assigned.items(), key=lambda kv: -len(kv[0])):
        cmd = re.sub(rf"\$(?:{name}\b|\{{{name}\}})", value, cmd)
    return cmd


def _after_command(text: str, command: str) -> list[tuple[int, str]]:
    """(line number, text) of the lines after the command that look like more of its flags: a continuation the shell
    did not see (the line before has no trailing backslash), so they are a command of their own, not arguments."""
    lines = text.splitlines()
    last = command.splitlines()[-1] if command else ""
    try:
        end = next(i for i, ln in enumerate(lines) if ln.rstrip() == last.rstrip())
    except StopIteration:
        return []
    out = []
    for i in range(end + 1, len(lines)):
        ln = lines[i].strip()
        if not ln or ln.startswith("#"):
            continue
        if not ln.startswith("--"):
            break
        out.append((i + 1, ln))
    return out


def _parse_command(text: str, source: str, original: str | None = None) -> ParsedConfig:
    joined = re.sub(r"\\\s*\n", " ", text)
    try:
        argv = shlex.split(joined, comments=True)
    except ValueError as e:
        raise ConfigError(f"{source}: cannot split the command line: {e}") from None
    env: dict[str, str] = {}
    while argv and re.match(r"^[A-Z_][A-Z0-9_]*=", argv[0]):
        k, _, v = argv.pop(0).partition("=")
        env[k] = v
    if not argv:
        raise ConfigError(f"{source}: empty command line")
    prog = argv.pop(0).rsplit("/", 1)[-1]
    if prog in FRONT_CLIS:
        return _front_cli(prog, argv, env, source, original or text)
    launcher = prog
    command = prog if prog in ("deepspeed", "torchrun") else None  # the CLI whose parser reads argv (registry)
    if prog == "accelerate" and argv[:1] == ["launch"]:
        argv.pop(0)
        launcher = command = "accelerate launch"
    elif prog.startswith("python") and argv[:2] in (
        ["-m", "torch.distributed.run"],
        ["-m", "torch.distributed.launch"],
    ):
        command = "torchrun" if argv[1] == "torch.distributed.run" else "torch.distributed.launch"
        argv = argv[2:]
        launcher = "torchrun"
    elif prog.startswith("python"):
        launcher = "python"
    launcher_args, i = _flags(argv, stop_at_script=True)
    script = argv[i] if i < len(argv) else None
    script_args, _ = _flags(argv[i + 1 :], stop_at_script=False)
    data = {
        "launcher": launcher,
        "env": env,
        "launcher_args": launcher_args,
        "script": script,
        "script_args": script_args,
        "command": command,
        "argv": list(argv),  # the launcher's own tokens (after the program), as its argparse parser sees them
    }
    flag_lines: dict[str, int] = {}  # the first line of the command each flag is on (a script spreads them out)
    for n, ln in enumerate((original or text).splitlines(), 1):
        for m in re.finditer(r"(?<!\S)--?([A-Za-z_][\w.-]*)", ln):
            flag_lines.setdefault(m.group(1), n)
    lines = {f"launcher_args.{k}": flag_lines.get(k, 1) for k in launcher_args}
    lines |= {f"script_args.{k}": flag_lines.get(k, 1) for k in script_args}
    return ParsedConfig("launch", data, source, "cmdline", lines)


def _front_cli(prog: str, argv: list[str], env: dict[str, str], source: str, text: str) -> ParsedConfig:
    """``swift sft --model M ...`` / ``trl sft ...``: the subcommand's flags as a mapping of argument -> value (a
    flag given several values keeps them as a list), linted as that front end's file (``dialect``)."""
    sub = argv.pop(0) if argv and not argv[0].startswith("-") else None
    data: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("--"):
            i += 1
            continue
        key, eq, val = a[2:].partition("=")
        vals = [val] if eq else []
        j = i + 1
        while not eq and j < len(argv) and not argv[j].startswith("--"):
            vals.append(argv[j])
            j += 1
        data[key] = True if not vals else vals[0] if len(vals) == 1 else vals
        i = j if not eq else i + 1
    lines = {}
    for n, ln in enumerate(text.splitlines(), 1):
        for m in re.finditer(r"(?<!\S)--([A-Za-z_][\w-]*)", ln):
            lines.setdefault(m.group(1), n)
    cfg = ParsedConfig("training_args", data, source, "cmdline", lines)
    cfg.dialect = FRONT_CLIS[prog]
    cfg.command = f"{prog} {sub}" if sub else prog
    cfg.env = env
    return cfg


def _flags(argv: list[str], stop_at_script: bool) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if not a.startswith("-"):
            if stop_at_script:
                return out, i
            i += 1
            continue
        key, eq, val = a.lstrip("-").partition("=")
        if eq:
            out[key] = val
        elif (
            i + 1 < len(argv)
            and not argv[i + 1].startswith("-")
            and not (stop_at_script and argv[i + 1].endswith(".py"))
        ):
            out[key] = argv[i + 1]
            i += 1
        else:
            out[key] = True
        i += 1
    return out, i


# ---------------------------------------------------------------- facts for retrieval


def deepspeed_setting(cfg: ParsedConfig) -> Any:
    """The raw value a TrainingArguments-style file gives its ``deepspeed`` argument (a path, a preset name such as
    ms-swift's ``zero2``, an inline mapping), or None."""
    return cfg.data.get("deepspeed") if cfg.kind != "deepspeed" else None


def with_deepspeed(args: dict[str, Any], ds: dict[str, Any]) -> dict[str, Any]:
    """TrainingArguments-style ``args`` with their ``deepspeed`` file replaced by its contents (``kb lint --with``)."""
    return {**args, "deepspeed": ds}


def deepspeed_block(cfg: ParsedConfig) -> tuple[dict[str, Any] | None, str]:
    """The DeepSpeed JSON a config carries, and where it sits (a dotted prefix for messages).

    A DeepSpeed file is its own block; a TrainingArguments / LLaMA-Factory file may nest it under
    ``deepspeed:``; accelerate YAML and launch lines carry none (accelerate's ``deepspeed_config`` is a
    different dialect; see ``facts_from_config``). Every reader of "the DeepSpeed part" calls this."""
    d = cfg.data
    if cfg.kind in ("deepspeed", "unknown") and not cfg.dialect:
        return d, ""
    if (cfg.kind == "training_args" or cfg.dialect) and isinstance(d.get("deepspeed"), dict):
        return d["deepspeed"], "deepspeed."
    return None, ""


_DS_FILE_STAGE = re.compile(r"(?:^|[/_.-])z(?:ero)?[_-]?([0-3])(?=[_.-]|$)", re.I)


def _training_args_facts(args: dict[str, Any], f: SetupFacts) -> None:
    """TrainingArguments / LLaMA-Factory YAML: precision flags, the method (finetuning_type, quantization_bit),
    and, when ``deepspeed`` is a file path, the stage and offload its name states (LLaMA-Factory ships
    ds_z0..ds_z3_config.json and ds_z2/ds_z3_offload_config.json)."""
    if f.precision is None:
        f.precision = "bf16" if args.get("bf16") is True else "fp16" if args.get("fp16") is True else None
    ft = str(args.get("finetuning_type") or "").lower()
    if args.get("quantization_bit") in (4, 8, "4", "8") and ft in ("", "lora"):
        f.method = "qlora"
    elif ft == "lora":
        f.method = "lora"
    elif ft in ("full", "freeze"):
        f.method = "full"
    strategy = str(args.get("eval_strategy") or args.get("evaluation_strategy") or "no").lower()
    f.evaluates = bool(
        args.get("do_eval") is True
        or strategy in ("steps", "epoch")
        or (isinstance(args.get("val_size"), (int, float)) and args["val_size"] > 0)
        or args.get("eval_dataset")
    )
    ds = args.get("deepspeed")
    if isinstance(ds, str) and f.zero_stage is None:
        name = ds.replace("\\", "/").rsplit("/", 1)[-1]
        m = _DS_FILE_STAGE.search(name)
        if m:
            f.zero_stage = int(m.group(1))
            if "offload" in name.lower():
                f.offload_optimizer = f.offload_optimizer or "cpu"


def facts_from_config(cfg: ParsedConfig) -> SetupFacts:
    """ZeRO stage, offload devices, precision and method, from whichever front end the config is written for."""
    f = SetupFacts()
    if cfg.kind == "accelerate":
        ds = cfg.data.get("deepspeed_config") or {}
        if isinstance(ds, dict):
            f.zero_stage = _int(ds.get("zero_stage"))
            f.offload_optimizer = _dev(ds.get("offload_optimizer_device"))
            f.offload_param = _dev(ds.get("offload_param_device"))
        mp = cfg.data.get("mixed_precision")
        f.precision = mp if mp in ("bf16", "fp16") else ("fp32" if mp == "no" else None)
        return f
    d, _ = deepspeed_block(cfg)
    if d is None:
        if cfg.kind == "training_args":
            _training_args_facts(cfg.data, f)
        return f
    z = d.get("zero_optimization")
    if isinstance(z, dict):
        f.zero_stage = _int(z.get("stage", 0))
        for key in ("offload_optimizer", "offload_param"):
            blk = z.get(key)
            setattr(f, key, _dev(blk.get("device", "none")) if isinstance(blk, dict) else "none")
    bf = d.get("bf16") or d.get("bfloat16") or {}
    fp = d.get("fp16") or {}
    if isinstance(bf, dict) and bf.get("enabled") is True:
        f.precision = "bf16"
    elif isinstance(fp, dict) and fp.get("enabled") is True:
        f.precision = "fp16"
    elif cfg.kind == "training_args":
        pass  # the TrainingArguments flags, below
    elif not (isinstance(bf, dict) and bf.get("enabled") == "auto") and not (
        isinstance(fp, dict) and fp.get("enabled") == "auto"
    ):
        f.precision = "fp32"
    if cfg.kind == "training_args":
        _training_args_facts(cfg.data, f)
    return f


def micro_batch(cfg: ParsedConfig) -> int | None:
    """The micro-batch per GPU the config states (DeepSpeed key, or the TrainingArguments field)."""
    d, _ = deepspeed_block(cfg)
    mb = d.get("train_micro_batch_size_per_gpu") if d else None
    if cfg.kind == "training_args" and not (isinstance(mb, int) and not isinstance(mb, bool)):
        mb = cfg.data.get("per_device_train_batch_size")
    return mb if isinstance(mb, int) and not isinstance(mb, bool) and mb > 0 else None


def optimizer_kind(cfg: ParsedConfig) -> str:
    """The optimizer kb.memory.estimate counts for this config: "fused" when the DeepSpeed config builds its own Adam
    (an ``optimizer`` section of type Adam / AdamW without ``torch_adam``: FusedAdam, or CPU Adam with offload),
    else "torch" (HF Trainer's default ``adamw_torch``: torch.optim.AdamW, whose foreach step needs a temporary)."""
    d, _ = deepspeed_block(cfg)
    opt = d.get("optimizer") if d else None
    if isinstance(opt, dict) and str(opt.get("type", "")).lower() in ("adam", "adamw"):
        params = opt.get("params") if isinstance(opt.get("params"), dict) else {}
        return "torch" if params.get("torch_adam") is True else "fused"
    return "torch"


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def _dev(v: Any) -> str | None:
    return v if v in ("none", "cpu", "nvme") else None
