"""``kb factcheck``: every parameter-like name in free text (a chat answer, a forum thread), judged
by the registry.

Verdicts: ``valid``, ``deprecated``, ``misplaced``, ``not-a-config-key`` (an API / kwarg / method / env
var), ``does-not-exist`` and ``unverified``. A name the registry cannot find is called
``does-not-exist`` only where the registry covers the namespace completely and the text says which
namespace it is in:

* a key of a pasted DeepSpeed config (JSON / YAML, under the root or a known section) or accelerate
  config YAML (top level or ``deepspeed_config``);
* a flag before the script on a ``deepspeed`` / ``accelerate launch`` / ``torchrun`` /
  ``python -m torch.distributed.run`` command line;
* a keyword of a ``TrainingArguments(...)`` or ``LoraConfig(...)`` call;
* a name that is a DeepSpeed config key by its form (``zero_*``, ``stage3_*``: prefixes only DeepSpeed
  config keys use) in a text about DeepSpeed.

Everywhere else (an environment variable NCCL or CUDA reads, a flag of another tool, prose) an unknown
name is ``unverified``, with the reason. A false accusation is worse than silence. URLs, file names,
"e.g." / "i.e." and version strings are not judged at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kb.ask.text import identifier_spans, is_camel_api, is_not_a_name, looks_like_param, url_spans
from kb.registry.store import CONFIG_KINDS, Record, Registry

MAX_TEXT_CHARS = 200_000
MAX_CALLS = 500  # TrainingArguments(...) / LoraConfig(...) calls read per text
MAX_BLOCK_CHARS = 50_000  # a pasted config is a few kB; a bigger "block" is not one (and YAML parsing is slow)
MAX_BLOCKS = 200
# other-version: real in another recorded release, not in the one judged (kb.contract.Verdict has it too)
VERDICTS = ("valid", "deprecated", "misplaced", "not-a-config-key", "other-version", "does-not-exist", "unverified")
# a dotted name starting with one of these is code on an object (model.to, torch.bfloat16); when the
# registry does not know it, it is outside what kb can judge, so it is left out rather than condemned
OBJECT_PREFIXES = {
    "model",
    "self",
    "trainer",
    "accelerator",
    "engine",
    "torch",
    "np",
    "os",
    "sys",
    "args",
    "training_args",
    "tokenizer",
    "nn",
    "F",
    "optimizer",
    "scheduler",
    "config",
    "ds_config",
    "peft_model",
}
VERDICT = {
    "exact": "valid",
    "alias": "valid",
    "deprecated": "deprecated",
    "removed": "deprecated",
    "absent": "other-version",  # real in other recorded releases, not in the one being judged
    "misplaced": "misplaced",
    "not-a-config-key": "not-a-config-key",
    "unknown": "does-not-exist",
}
# name prefixes of DeepSpeed config keys (and of accelerate's mirror of them); checked against the
# registry when used: a prefix counts only while at least MIN_PREFIX_KEYS DeepSpeed config keys have it
DS_KEY_PREFIXES = ("zero_", "stage3_")
MIN_PREFIX_KEYS = 3
_DS_TEXT = re.compile(
    r"deepspeed|ds_config|zero_optimization|\bZeRO\b|\bzero[-_ ]?(?:stage[-_ ]?)?[0-3]\b|\bstage3_|\bz[0-3]\b", re.I
)
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_LAUNCH = re.compile(
    r"(?:^|(?<=[\s`$;&|(]))(?:[A-Z_][A-Z0-9_]*=\S*\s+)*"
    r"(deepspeed|accelerate\s+launch|torchrun|python3?\s+-m\s+torch\.distributed\.(?:run|launch))(?=\s+-)"
)
_CALL = re.compile(r"(?<![\w.])(TrainingArguments|LoraConfig)\s*\(")
_KWARG = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*=(?!=)")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})[^\n]*\n(.*?)^\s*\1\s*$", re.S | re.M)
_YAML_KEY = re.compile(r"^(\s*)([A-Za-z_][\w-]*)\s*:(?:\s|$)")

# where an unknown name was read (a fully covered namespace), en / zh
NAMESPACES = {
    "ds_config": ("in a DeepSpeed config", " DeepSpeed 配置"),
    "accelerate_yaml": ("in an accelerate config YAML", " accelerate 配置 YAML "),
    "TrainingArguments": ("as a TrainingArguments(...) argument", " TrainingArguments(...) 参数"),
    "LoraConfig": ("as a LoraConfig(...) argument", " LoraConfig(...) 参数"),
    "cli:deepspeed": ("as a flag of the deepspeed launcher", " deepspeed 启动器参数"),
    "cli:accelerate launch": ("as a flag of accelerate launch", " accelerate launch 参数"),
    "cli:torchrun": ("as a flag of torchrun", " torchrun 参数"),
    "ds_form": (
        "as a DeepSpeed config key (its zero_/stage3_ form, in a text about DeepSpeed)",
        " DeepSpeed 配置项（按 zero_/stage3_ 的写法和上下文判断）",
    ),
}
# why an unknown name is only unverified, en / zh
REASONS = {
    "env": (
        "it is an environment variable; the registry records the ones the Python code of deepspeed, "
        "transformers, accelerate, peft and torch reads, not those read by native code (NCCL, CUDA, the C++ "
        "side of torch) or by other tools",
        "这是环境变量。注册表只收录 deepspeed、transformers、accelerate、peft 和 torch 的 Python 代码读取的环境变量，"
        "NCCL、CUDA、torch 的 C++ 部分以及其他工具读取的不在其中",
    ),
    "script_flag": (
        "a flag after the script name goes to the script itself, whose arguments kb cannot see",
        "写在脚本名后面的参数是交给脚本自己解析的，kb 看不到脚本定义了哪些参数",
    ),
    "flag": (
        "it is a flag of a command the registry does not cover completely",
        "这是某个命令的参数，而注册表并没有完整收录这个命令",
    ),
    "passthrough": (
        'DeepSpeed hands the keys under an optimizer or scheduler "params" to that optimizer or scheduler '
        "without checking them",
        'optimizer 或 scheduler 的 "params" 下的 key 会被 DeepSpeed 原样交给对应的优化器或调度器，DeepSpeed 自己不校验',
    ),
    "section": (
        "it sits under a config section kb does not know, so kb cannot tell which names belong there",
        "它所在的配置段 kb 不认识，因此无法判断这一段里该有哪些名字",
    ),
    "other_config": (
        "the config it is in is neither a DeepSpeed config nor an accelerate YAML (a LLaMA-Factory or other "
        "tool's file has keys of its own)",
        "它所在的配置既不是 DeepSpeed 配置，也不是 accelerate YAML（LLaMA-Factory 等工具的配置文件有自己的 key）",
    ),
    "prose": (
        "it is not written where the registry covers every name (a DeepSpeed config, an accelerate YAML, "
        "TrainingArguments(...), LoraConfig(...), a launcher's flags); it may belong to another library or tool",
        "它不在注册表完整覆盖的位置（DeepSpeed 配置、accelerate YAML、TrainingArguments(...)、LoraConfig(...)、"
        "启动器参数）上，可能属于别的库或工具",
    ),
}
_STRENGTH = {"covered": 3, "unverified": 2, None: 0}


@dataclass
class NameVerdict:
    name: str
    verdict: str  # one of VERDICTS
    registry_id: str | None
    suggestions: list[str]
    line: int
    message: str
    kind: str | None = None  # registry kind of the record (config_key, kwarg, method, ...)
    lines: list[int] = field(default_factory=list)
    reason: str | None = None  # does-not-exist: where it was judged; unverified: why kb cannot say

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Where:
    """The context a name was read in: a covered namespace, or why an unknown name is only unverified."""

    namespace: str | None = None  # a key of NAMESPACES
    parent: str | None = None  # the config section a key sits under (ds_config), "" for the root
    unverified: str | None = None  # a key of REASONS

    @property
    def strength(self) -> int:
        return _STRENGTH["covered" if self.namespace else "unverified" if self.unverified else None]


# ---------------------------------------------------------------- reading the text


def check_names(text: str, registry: Registry, lang: str = "en") -> list[NameVerdict]:
    """One verdict per distinct name, in order of first appearance, with the lines it appears on."""
    text = text[:MAX_TEXT_CHARS]
    contexts = _contexts(text, registry)
    about_ds = bool(_DS_TEXT.search(text))
    order: list[str] = []
    lines: dict[str, list[int]] = {}
    code_like: dict[str, bool] = {}  # every occurrence is a path, a call or an attribute
    for lineno, line in enumerate(text.splitlines(keepends=True) or [text], 1):
        urls = url_spans(line)
        for name, start, end in identifier_spans(line):
            if is_not_a_name(name, line, start, end, urls):
                continue
            if name not in lines:
                order.append(name)
                lines[name] = []
                code_like[name] = True
            if not lines[name] or lines[name][-1] != lineno:  # lines only grow
                lines[name].append(lineno)
            code_like[name] = code_like[name] and _code_use(line, start, end)
    out: list[NameVerdict] = []
    for name in order:
        if not looks_like_param(name):
            continue
        where = contexts.get(name)
        v = judge(name, registry, lang, where=where, about_ds=about_ds and not code_like[name])
        if v is None:
            continue
        v.line = lines[name][0]
        v.lines = lines[name]
        out.append(v)
    return out


def _code_use(line: str, start: int, end: int) -> bool:
    """A path segment (``zero_stage_3/``), a call (``f(``) or an attribute (``.x``): code, not a key."""
    before = line[start - 1] if start else " "
    after = line[end] if end < len(line) else " "
    quoted = before in "'\"" and after == before and ":" not in line[end : end + 3]  # a string value, not a key
    return before in "./\\" or after in "/(\\" or quoted


def _contexts(text: str, registry: Registry) -> dict[str, Where]:
    """name -> the strongest context it was read in (a covered namespace beats an unverified one)."""
    found: dict[str, Where] = {}

    def put(name: str, where: Where) -> None:
        if name not in found or where.strength > found[name].strength:
            found[name] = where

    for name, where in _config_contexts(text, registry):
        put(name, where)
    for name, where in _launcher_contexts(text):
        put(name, where)
    for name, where in _call_contexts(text):
        put(name, where)
    return found


def _config_blocks(text: str) -> list[str]:
    """Pasted configs: fenced blocks, balanced {...} JSON objects, runs of YAML ``key: value`` lines."""
    blocks = [m.group(2) for m in _FENCE.finditer(text)]
    # balanced {...} in one pass: every matched pair, then the outermost ones; a JSON string cannot hold a
    # raw newline, so a stray quote in prose stops at the end of its line
    stack: list[int] = []
    pairs: list[tuple[int, int]] = []
    in_str = False
    i = 0
    while i < len(text):
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"' or c == "\n":
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs.append((stack.pop(), i))
        i += 1
    last_end = -1
    for a, b in sorted(pairs, key=lambda p: (p[0], -p[1])):
        if a > last_end:
            if '"' in text[a : b + 1]:
                blocks.append(text[a : b + 1])
            last_end = b
    run: list[str] = []
    for line in [*text.splitlines(), ""]:
        if _YAML_KEY.match(line) or (run and line.startswith((" ", "\t")) and line.strip()):
            run.append(line)
            continue
        if sum(1 for ln in run if _YAML_KEY.match(ln)) >= 2:
            blocks.append("\n".join(run))
        run = []
    return blocks


def _config_contexts(text: str, registry: Registry) -> list[tuple[str, Where]]:
    from kb.doctor.configs import ConfigError, parse_config

    out: list[tuple[str, Where]] = []
    for block in [b for b in _config_blocks(text) if len(b) <= MAX_BLOCK_CHARS][:MAX_BLOCKS]:
        if not block.strip() or block.lstrip()[:1] not in "{" and not _YAML_KEY.match(block.lstrip("\n")):
            continue
        try:
            cfg = parse_config(block)
        except (ConfigError, RecursionError, ValueError, TypeError):
            try:
                data = json.loads(block)
            except (ValueError, RecursionError):
                continue
            if not isinstance(data, dict):
                continue
            kind = "deepspeed" if _looks_ds(data, registry) else "unknown"
        else:
            if cfg.kind == "launch":
                continue
            data, kind = cfg.data, cfg.kind
            if kind == "unknown" and _looks_ds(data, registry):
                kind = "deepspeed"
        out += _walk(data, "", kind, registry)
    return out


def _looks_ds(data: dict, registry: Registry) -> bool:
    """A fragment ({"zero_optimization": ...}, {"stage": 3, "overlap_comm": true}) of a DeepSpeed config."""
    ds = [k for k in data if isinstance(k, str) and _ds_key(registry, k)]
    return bool(ds) and len(ds) * 2 >= len(data)


def _ds_key(registry: Registry, name: str) -> bool:
    return any(r["package"] == "deepspeed" and r["kind"] in CONFIG_KINDS for r in registry.by_name.get(name, []))


def _walk(data: Any, parent: str, kind: str, registry: Registry, depth: int = 0) -> list[tuple[str, Where]]:
    if not isinstance(data, dict) or depth > 16:
        return []
    out: list[tuple[str, Where]] = []
    for k, v in data.items():
        if not isinstance(k, str):
            continue
        where = _key_where(k, parent, kind, registry)
        out.append((k, where))
        path = f"{parent}.{k}" if parent else k
        if isinstance(v, dict):
            out += _walk(v, path, kind, registry, depth + 1)
        elif isinstance(v, list):
            for item in v[:50]:
                out += _walk(item, path, kind, registry, depth + 1)
    return out


def _key_where(key: str, parent: str, kind: str, registry: Registry) -> Where:
    if kind == "deepspeed":
        leaf = parent.rsplit(".", 1)[-1]
        if leaf == "params" or ".params." in f".{parent}.":
            return Where(unverified="passthrough")
        if parent and not _ds_section(registry, parent):
            return Where(unverified="section")
        return Where("ds_config", parent)
    if kind == "accelerate":
        if parent in ("", "deepspeed_config"):
            return Where("accelerate_yaml", parent)
        return Where(unverified="section")
    return Where(unverified="other_config")


def _ds_section(registry: Registry, path: str) -> bool:
    """A DeepSpeed config section kb knows (exactly, or by its last key: a pasted fragment)."""
    recs = registry.by_path.get(path) or registry.by_name.get(path.rsplit(".", 1)[-1], [])
    return any(r["package"] == "deepspeed" and r["kind"] == "config_section" for r in recs)


def _logical_lines(text: str) -> list[str]:
    return re.sub(r"\\[ \t]*\r?\n", " ", text).splitlines()


def _launcher_contexts(text: str) -> list[tuple[str, Where]]:
    out: list[tuple[str, Where]] = []
    for line in _logical_lines(text):
        for m in _LAUNCH.finditer(line):
            launcher = re.sub(r"\s+", " ", m.group(1))
            command = "torchrun" if launcher.startswith("python") else launcher
            tokens = re.split(r"[\s`]+", line[m.end() :].strip())
            in_script, prev_flag = False, False
            for tok in tokens:
                if not tok:
                    continue
                if tok in ("&&", "||", ";", "|"):
                    break
                if tok.startswith("-") and len(tok) > 1:
                    flag = tok.split("=", 1)[0]
                    if in_script:
                        out.append((flag, Where(unverified="script_flag")))
                    else:
                        out.append((flag, Where(f"cli:{command}")))
                    prev_flag = "=" not in tok and flag != "-m"
                    if flag == "-m":
                        in_script = True  # the module to run comes next; what follows is its own
                    continue
                if prev_flag and not tok.endswith(".py"):
                    prev_flag = False  # the flag's value
                    continue
                in_script, prev_flag = True, False
    return out


_BRACKETS = re.compile(r"[()\[\]{}]")


def _call_contexts(text: str) -> list[tuple[str, Where]]:
    out: list[tuple[str, Where]] = []
    for n, m in enumerate(_CALL.finditer(text)):
        if n == MAX_CALLS:
            break
        window = text[m.end() : m.end() + 5_000]
        # keywords at the call's own level only (not those of a nested call or a list)
        depth, seg_start, segments = 1, 0, []
        for b in _BRACKETS.finditer(window):
            if b.group(0) in "([{":
                if depth == 1:
                    segments.append(window[seg_start : b.start()])
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    segments.append(window[seg_start : b.start()])
                    break
                if depth == 1:
                    seg_start = b.end()
        else:
            segments.append(window[seg_start:])
        for seg in segments:
            for k in _KWARG.finditer(seg):
                out.append((k.group(1), Where(m.group(1))))
    return out


# ---------------------------------------------------------------- judging one name


def judge(
    name: str,
    registry: Registry,
    lang: str = "en",
    where: Where | None = None,
    about_ds: bool = True,
) -> NameVerdict | None:
    """The registry's verdict on one name, or None when the name is outside what kb can judge.

    ``where`` is the context the name was read in (see ``check_names``); without one, a name is judged
    as prose. ``about_ds``: the surrounding text is about DeepSpeed (true for kb's own queries), so a
    ``zero_*`` / ``stage3_*`` name is read as a DeepSpeed config key."""
    camel = is_camel_api(name)
    first = name.split(".", 1)[0]
    if "." in name and first in OBJECT_PREFIXES:
        # code on an object: judge the attribute among APIs only ("model.half", "torch.cuda.memory_summary")
        lk = registry.resolve(name.split(".", 1)[1])
        if (
            lk.status not in ("not-a-config-key", "exact")
            or not lk.record
            or lk.record["kind"] in ("config_key", "config_section", "yaml_key")
        ):
            lk = registry.resolve(name.rsplit(".", 1)[1])
            if lk.record is None or lk.record["kind"] in ("config_key", "config_section", "yaml_key"):
                return None  # not an API kb knows: outside what it can judge
        lk.status = "not-a-config-key"
    else:
        lk = registry.resolve(name)
    if lk.status == "unknown" and camel:
        return None
    if lk.status == "unknown" and "." in name and first not in OBJECT_PREFIXES:
        # "deepspeed.zero.Init" and friends: try without the package prefix
        for pkg in registry.versions:
            if first == pkg:
                inner = registry.resolve(name.split(".", 1)[1])
                if inner.status != "unknown":
                    lk = inner
                break
    if where is not None and where.namespace in ("TrainingArguments", "LoraConfig"):
        own = next((r for r in registry.by_name.get(name, []) if r["path"] == f"{where.namespace}.{name}"), None)
        if own is not None:  # a field of the very class being called: a real argument there
            lk = registry._status(name, own)
    if lk.status == "unknown" and "." not in name:
        # a script named without its .py ("run zero_to_fp32 on the checkpoint")
        script = [r for r in registry.by_name.get(name + ".py", []) if r["kind"] == "script"]
        if script:
            lk = registry._status(name, script[0])
    if where is not None and where.unverified == "passthrough" and lk.status == "not-a-config-key":
        if lk.record and lk.record["kind"] == "kwarg":  # scheduler.params.warmup_num_steps: WarmupLR's keyword
            lk.status = "exact"
    rec = lk.record
    if lk.status == "unknown":
        return _judge_unknown(name, registry, lang, where, about_ds)
    verdict = VERDICT[lk.status]
    if rec is not None and lk.status == "not-a-config-key" and (rec.get("deprecated") or rec.get("noop")):
        verdict = "deprecated"
    if rec is not None and rec.get("status") in ("removed", "absent") and _other_release(rec, registry):
        verdict = "other-version"
    if rec is not None and rec.get("unrecorded_in"):
        return _unrecorded(name, rec, lang)
    return NameVerdict(
        name,
        verdict,
        rec["id"] if rec else None,
        lk.suggestions or [c["id"] for c in lk.candidates[:3] if c is not rec],
        0,
        _message(name, verdict, lk, registry, lang),
        rec["kind"] if rec else None,
    )


def _unrecorded(name: str, rec: Record, lang: str) -> NameVerdict:
    """A key recorded from a later release, under a section the judged release did not validate
    (kb.registry.store: ``unrecorded_in``): neither confirmed nor called absent there."""
    pkg, rel, since = rec["package"], rec["unrecorded_in"], rec["releases"][0]
    if lang == "zh":
        reason = (
            f"注册表从 {pkg} {since} 起才记录它；{rel} 的这一段配置没有校验模型，kb 只见过 DeepSpeed 实际读取的 key"
        )
        message = f"`{name}`（{rec['id']}）在 {pkg} {rel} 中无法确认：{reason}。"
    else:
        reason = (
            f"the registry records it from {pkg} {since} on; in {rel} its section has no validating model, and kb "
            "saw only the keys DeepSpeed read there"
        )
        message = f"`{name}` ({rec['id']}) cannot be confirmed for {pkg} {rel}: {reason}."
    return NameVerdict(name, "unverified", rec["id"], [], 0, message, rec["kind"], reason=reason)


def _other_release(rec: Record, registry: Registry) -> bool:
    """The record is shown from another recorded release than the one judged (format-2 registry)."""
    if rec.get("status") == "absent":
        return True
    until = rec.get("until")
    return until is not None and until != registry.versions.get(rec["package"])


def _judge_unknown(name: str, registry: Registry, lang: str, where: Where | None, about_ds: bool) -> NameVerdict:
    zh = lang == "zh"
    namespace = where.namespace if where else None
    open_ctx = where is None or where.unverified == "other_config"  # prose, or a config kb cannot identify
    if namespace is None and open_ctx and about_ds and _ds_form(name, registry):
        namespace = "ds_form"
    if namespace is not None and not namespace_names(registry, namespace):
        # a registry built before this namespace was recorded (an older release): nothing to compare with
        where, namespace = Where(unverified="flag" if name.startswith("-") else "prose"), None
    if namespace is not None:
        suggestions = namespace_suggestions(registry, namespace, name, where.parent if where else None)
        en, zh_where = NAMESPACES[namespace]
        reason = (
            f"注册表收录了{zh_where}的全部名字，其中没有它" if zh else f"read {en}, where the registry lists every name"
        )
        return NameVerdict(
            name,
            "does-not-exist",
            None,
            suggestions,
            0,
            _not_exist_message(name, namespace, suggestions, registry, zh),
            None,
            reason=reason,
        )
    code = (where.unverified if where else None) or ("env" if _ENV_NAME.match(name) else None)
    if code is None:
        code = "flag" if name.startswith("-") else "prose"
    reason = REASONS[code][1 if zh else 0]
    if zh:
        message = f"注册表里没有 `{name}`，kb 无法确认它，但也不判定它不存在：{reason}。"
    else:
        message = f"`{name}` is not in kb's registry, so kb cannot confirm it, nor call it false: {reason}."
    return NameVerdict(name, "unverified", None, [], 0, message, None, reason=reason)


def _ds_form(name: str, registry: Registry) -> bool:
    """zero_* / stage3_*: a form only DeepSpeed config keys have (checked against the registry)."""
    if not re.fullmatch(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", name):
        return False
    return any(name.startswith(p) and p in _ds_prefixes(registry) for p in DS_KEY_PREFIXES)


_PREFIX_CACHE: dict[int, set[str]] = {}


def _ds_prefixes(registry: Registry) -> set[str]:
    key = id(registry)
    if key not in _PREFIX_CACHE:
        ok = set()
        for p in DS_KEY_PREFIXES:
            names = [n for n in registry.by_name if n.startswith(p)]
            ds = [n for n in names if _ds_key(registry, n)]
            if len(ds) >= MIN_PREFIX_KEYS:
                ok.add(p)
        _PREFIX_CACHE[key] = ok
    return _PREFIX_CACHE[key]


def namespace_names(registry: Registry, namespace: str, parent: str | None = None) -> dict[str, str]:
    """The real names of one covered namespace: name (and aliases) -> label to suggest."""
    out: dict[str, str] = {}
    for r in registry.records:
        if r.get("status") in ("absent", "removed"):
            continue  # not a name of the release being judged: no did-you-mean to it
        ok = False
        if namespace in ("ds_config", "ds_form"):
            ok = r["package"] == "deepspeed" and r["kind"] in ("config_key", "config_section")
            if ok and parent and namespace == "ds_config":
                ok = r["path"].startswith(parent + ".") or r["path"].rsplit(".", 1)[0].endswith(parent)
        elif namespace == "accelerate_yaml":
            ok = r["package"] == "accelerate" and r["kind"] == "yaml_key"
        elif namespace in ("TrainingArguments", "LoraConfig"):
            ok = r["kind"] == "field" and r["path"].startswith(namespace + ".")
        elif namespace.startswith("cli:"):
            ok = r["kind"] == "cli_flag" and r["path"].startswith(namespace[4:] + " ")
        if ok:
            label = r["name"] if r["kind"] == "cli_flag" else r["path"] if r["kind"] in CONFIG_KINDS else r["id"]
            for n in [r["name"], *r["aliases"]]:
                out.setdefault(n, label)
    return out


def namespace_suggestions(
    registry: Registry, namespace: str, name: str, parent: str | None = None, limit: int = 3
) -> list[str]:
    """Did-you-mean among the names of the namespace the name was written in (its section first)."""
    from rapidfuzz import fuzz, process

    def norm(s: str) -> str:
        return s.lstrip("-").replace("-", "_").lower()

    out: list[str] = []
    pools = [namespace_names(registry, namespace, parent)] if parent else []
    pools.append(namespace_names(registry, namespace))
    for pool in pools:
        if not pool:
            continue
        keys = list(pool)
        hits = process.extract(norm(name), keys, scorer=fuzz.ratio, processor=norm, limit=limit * 3)
        for n, score, _ in hits:
            if score >= 70 and pool[n] not in out:
                out.append(pool[n])
        if len(out) >= limit:
            break
    if not out:
        out = registry.suggest(name, limit=limit, config_only=namespace in ("ds_config", "ds_form"))
    return out[:limit]


def _not_exist_message(name: str, namespace: str, suggestions: list[str], registry: Registry, zh: bool) -> str:
    pkg = {"accelerate_yaml": "accelerate", "TrainingArguments": "transformers", "LoraConfig": "peft"}.get(
        namespace,
        "torch" if namespace == "cli:torchrun" else "accelerate" if "accelerate" in namespace else "deepspeed",
    )
    ver = f"{pkg} {registry.versions.get(pkg, '?')}"
    en_where, zh_where = NAMESPACES[namespace]
    if namespace == "ds_form":
        if zh:
            near = f" 你可能想写的是：{'、'.join(suggestions)}。" if suggestions else ""
            return (
                f"`{name}` 不存在：从 zero_/stage3_ 的写法和上下文看，它是 DeepSpeed 配置项，"
                f"但 {ver} 没有这个配置项。{near}"
            ).rstrip()
        near = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        return (
            f"`{name}` does not exist: by its zero_/stage3_ form and the text around it, it is meant as a "
            f"DeepSpeed config key, and {ver} has no such key.{near}"
        )
    if zh:
        near = f" 你可能想写的是：{'、'.join(suggestions)}。" if suggestions else ""
        return f"`{name}` 不存在：{ver} 的{zh_where}里没有这个名字。{near}".rstrip()
    near = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
    return f"`{name}` does not exist {en_where}: {ver} has no such name.{near}"


def _message(name: str, verdict: str, lk, registry: Registry, lang: str = "en") -> str:
    rec = lk.record
    zh = lang == "zh"
    if verdict == "valid":
        if zh:
            return f"`{name}` 是真实存在的：{rec['id']}（{rec['kind']}，默认值 {rec['default']}）。"
        return f"`{name}` is real: {rec['id']} ({rec['kind']}, default {rec['default']})."
    if verdict == "other-version":
        since, until = rec.get("since") or (rec.get("releases") or ["?"])[0], rec.get("until") or "?"
        pkg = rec["package"]
        if rec.get("absent") == "added":
            if zh:
                return f"`{name}` 是 {pkg} {since} 起才有的（{rec['id']}），你的版本里还没有。"
            return f"`{name}` exists only from {pkg} {since} on ({rec['id']}), not in your release."
        if zh:
            return f"`{name}` 已被移除：{pkg} 到 {until} 为止还有它（{rec['id']}），之后的版本没有了。"
        return f"`{name}` was removed: {pkg} had it up to {until} ({rec['id']}), later releases do not."
    if verdict == "deprecated":
        if rec.get("noop"):
            tail = " 仍然接受，但不起任何作用。" if zh else " It is accepted and does nothing."
        elif rec.get("replacement"):
            tail = f" 请改用 {rec['replacement']}。" if zh else f" Use {rec['replacement']}."
        else:
            tail = ""
        return (
            f"`{name}` 已弃用（{rec['id']}）。{tail.strip()}" if zh else f"`{name}` is deprecated ({rec['id']}).{tail}"
        )
    if verdict == "misplaced":
        where = ", ".join(c["path"] for c in lk.candidates[:3])
        return (
            f"`{name}` 不能写在这里；它的正确位置是：{where}。"
            if zh
            else f"`{name}` is not valid there; it lives at: {where}."
        )
    if zh:
        return f"`{name}` 不是配置项：它是 {rec['kind']}（{rec['id']}）。"
    return f"`{name}` is not a config key: it is a {rec['kind']} ({rec['id']})."
