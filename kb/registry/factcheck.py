"""``kb factcheck``: every parameter-like name in free text (a chat answer, a forum thread), judged
by the registry.

Verdicts: ``valid``, ``deprecated``, ``misplaced``, ``not-a-config-key`` (an API / kwarg / method / env
var), ``other-version``, ``does-not-exist`` and ``unverified``. A name the registry cannot find is called
``does-not-exist`` only where the registry covers the namespace completely and the text says which
namespace it is in:

* a key of a pasted DeepSpeed config (JSON / YAML, under the root or a known section) or accelerate
  config YAML (top level or ``deepspeed_config``);
* a flag before the script on a ``deepspeed`` / ``accelerate launch`` / ``torchrun`` /
  ``python -m torch.distributed.run`` command line;
* a keyword of a ``TrainingArguments(...)`` or ``LoraConfig(...)`` call;
* a name the prose writes as a key of one of those namespaces (``In ds_config set "x": 5e8``,
  ``set x to true in the zero config``, ``deepspeed 配置里设置 x=...``, ``LoraConfig 里 x 设成 32``, ``the
  deepspeed launcher flag --x``; ``_Prose``), when it is a near-miss of a real name there
  (``NEAR_MISS``): the reason quotes the sentence and the words that named the namespace;
* a name that is a DeepSpeed config key by its form (``zero_*``, ``stage3_*``: prefixes only DeepSpeed
  config keys use; ``zero_optimization.x``: a path under a DeepSpeed section) in a text about DeepSpeed.

A real name written in one of those namespaces where it is not real, but real as a config name of
another one (a TrainingArguments field or an accelerate YAML key written as a ds_config key, a LoraConfig
field passed to TrainingArguments(...), another launcher's flag), is ``misplaced``: the message says where
it is real. Did-you-mean suggestions come only from the namespace the name was written in.

Everywhere else (an environment variable NCCL or CUDA reads, a flag of another tool, prose) an unknown
name is ``unverified``, with the reason. A false accusation is worse than silence. URLs, file names,
"e.g." / "i.e." and version strings are not judged at all.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from kb.ask.text import identifier_spans, is_camel_api, is_not_a_name, looks_like_param, url_spans
from kb.lang import CJK
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
    "ds_path": (
        "as a DeepSpeed config key (a path under a DeepSpeed config section, in a text about DeepSpeed)",
        " DeepSpeed 配置项（按 DeepSpeed 配置段下的路径写法和上下文判断）",
    ),
}
# the namespaces prose can imply (``_Prose``): what a name written there is, en / zh, and its package
PROSE_NAMESPACES = {
    "ds_config": ("a DeepSpeed config key", "DeepSpeed 配置项", "deepspeed"),
    "accelerate_yaml": ("a key of accelerate's config YAML", "accelerate 配置 YAML 的 key", "accelerate"),
    "TrainingArguments": ("a TrainingArguments argument", "TrainingArguments 的参数", "transformers"),
    "LoraConfig": ("a LoraConfig argument", "LoraConfig 的参数", "peft"),
    "cli:deepspeed": ("a flag of the deepspeed launcher", "deepspeed 启动器的参数", "deepspeed"),
    "cli:accelerate launch": ("a flag of accelerate launch", "accelerate launch 的参数", "accelerate"),
    "cli:torchrun": ("a flag of torchrun", "torchrun 的参数", "torch"),
}
# what a real name is where it is real (``_home``), en / zh; a field of any other class is "field:<package>:<Class>"
HOMES = {
    "ds_config": ("a DeepSpeed config key", "DeepSpeed 配置项"),
    "accelerate_yaml": ("a key of accelerate's config YAML", "accelerate 配置 YAML 的 key"),
    "TrainingArguments": ("a TrainingArguments field", "TrainingArguments 的字段"),
    "LoraConfig": ("a LoraConfig field", "LoraConfig 的字段"),
    "cli:deepspeed": ("a flag of the deepspeed launcher", "deepspeed 启动器的参数"),
    "cli:accelerate launch": ("a flag of accelerate launch", "accelerate launch 的参数"),
    "cli:torchrun": ("a flag of torchrun", "torchrun 的参数"),
}
# a mapping record's front end (kb.registry.store: Registry.mappings) -> the namespace its front names are in
FRONT_ENDS = {
    "accelerate_yaml": "accelerate_yaml",
    "training_args": "TrainingArguments",
    "accelerate_launch": "cli:accelerate launch",
}
SUGGEST_MIN = 70  # rapidfuzz ratio (0-100) a did-you-mean needs
# ... and an unknown name read from prose, to be called a near-miss that does not exist: NEAR_MISS, or NEAR_MISS_KEY
# where the prose writes it as a key ("x": v, x = v) in the very clause that names the namespace
NEAR_MISS = 80
NEAR_MISS_KEY = 75
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
    "far": (
        "it is not close to any name there, so kb cannot tell what it is meant to be (it may belong to another "
        "library, or be handed on unchecked, like an optimizer's params)",
        "它和那里的任何名字都不接近，kb 无法判断它本来想写什么（可能属于别的库，或像 optimizer 的 params 那样被原样传下去）",
    ),
    "prose": (
        "it is not written where the registry covers every name (a DeepSpeed config, an accelerate YAML, "
        "TrainingArguments(...), LoraConfig(...), a launcher's flags); it may belong to another library or tool",
        "它不在注册表完整覆盖的位置（DeepSpeed 配置、accelerate YAML、TrainingArguments(...)、LoraConfig(...)、"
        "启动器参数）上，可能属于别的库或工具",
    ),
}
_STRENGTH = {"covered": 3, "unverified": 2, None: 0}
_QUOTES = "\"'`\u201c\u201d\u2018\u2019"


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
    # read from prose (``_Prose``): the sentence, the words that named the namespace, every namespace the
    # sentence names, and how the name was written there (2: as a key, "x": v / x = v, in the clause of those words;
    # 1: set x, x 设成, <cue> x, or a key in their sentence; 0: a "key": in a text about DeepSpeed)
    prose: bool = False
    snippet: str | None = None
    cue: str | None = None
    cued: frozenset[str] = frozenset()
    rank: int = 0

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
    spans: dict[str, list[tuple[int, int]]] = {}  # where in the text each name is written (not as code)
    offset = 0
    for lineno, line in enumerate(text.splitlines(keepends=True) or [text], 1):
        urls = url_spans(line)
        for name, start, end in identifier_spans(line):
            if is_not_a_name(name, line, start, end, urls):
                continue
            if name not in lines:
                order.append(name)
                lines[name] = []
                code_like[name] = True
                spans[name] = []
            if not lines[name] or lines[name][-1] != lineno:  # lines only grow
                lines[name].append(lineno)
            code = _code_use(line, start, end)
            code_like[name] = code_like[name] and code
            if len(spans[name]) < 20 and not _code_use(line, start, end, quoted_ok=True):
                spans[name].append((offset + start, offset + end))  # a quoted name is still prose: set "x" to 2
        offset += len(line)
    prose = _Prose(text, registry)
    out: list[NameVerdict] = []
    for name in order:
        if not looks_like_param(name):
            continue
        where = contexts.get(name)
        if where is None and spans[name]:
            where = prose.where(name, spans[name])  # no pasted config, call or command line holds it
        if spans[name] and (where is None or where.snippet is None):  # what an accusation quotes
            snippet = prose.snippet(*spans[name][0])
            where = Where(snippet=snippet) if where is None else dataclasses.replace(where, snippet=snippet)
        v = judge(name, registry, lang, where=where, about_ds=about_ds and not code_like[name])
        if v is None:
            continue
        v.line = lines[name][0]
        v.lines = lines[name]
        out.append(v)
    return out


def _code_use(line: str, start: int, end: int, quoted_ok: bool = False) -> bool:
    """A path segment (``zero_stage_3/``), a call (``f(``) or an attribute (``.x``): code, not a key; so is a
    quoted string that no colon follows (a string value), unless ``quoted_ok``."""
    before = line[start - 1] if start else " "
    after = line[end] if end < len(line) else " "
    quoted = before in "'\"" and after == before and ":" not in line[end : end + 3]  # a string value, not a key
    return before in "./\\" or after in "/(\\" or (quoted and not quoted_ok)


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


# ---------------------------------------------------------------- reading prose

_Q = re.escape(_QUOTES)
# words that name a namespace; a name written as a key near them is read as a name of that namespace
_CUES: tuple[tuple[str, str | None, re.Pattern[str]], ...] = (
    (
        "accelerate_yaml",
        None,
        re.compile(
            r"\baccelerate(?:'s)?\s*(?:的\s*)?(?:config(?:uration)?(?:\s*(?:ya?ml|file))?|ya?ml|配置(?:文件)?)"
            r"|\bdefault_config\.ya?ml\b",
            re.I,
        ),
    ),
    (
        "TrainingArguments",
        None,
        # (the Chinese 训练参数 means "training parameters" in general, not the class: it names no namespace)
        re.compile(r"(?<![\w.])TrainingArguments\b|\btraining[ _]arg(?:ument)?s\b", re.I),
    ),
    ("LoraConfig", None, re.compile(r"(?<![\w.])LoraConfig\b|\blora[ _]config\b", re.I)),
    ("cli:accelerate launch", None, re.compile(r"\baccelerate\s+launch\b", re.I)),
    ("cli:torchrun", None, re.compile(r"\btorchrun\b|\btorch\.distributed\.(?:run|launch)\b", re.I)),
    (
        "cli:deepspeed",
        None,
        re.compile(
            r"\bdeepspeed\s*(?:的\s*)?(?:launcher|runner|command(?:[ -]line)?|cli\b|启动器|启动命令|启动|命令)", re.I
        ),
    ),
    (
        "ds_config",
        "zero_optimization",
        re.compile(
            r"\bzero[-_ ]?(?:[0-3][ \t]*)?(?:config(?:uration)?|配置|section|部分|段|block)|\bzero_optimization\b", re.I
        ),
    ),
    (
        "ds_config",
        None,
        re.compile(
            r"\bds[_ ]?config\w*|\bdeepspeed[_ ]config(?:uration)?(?!\w)|\bdeepspeed\s*(?:的\s*)?(?:config(?:uration)?|配置|json)"
            r"|\bds\s*(?:的\s*)?配置|--deepspeed[\s=]+\S+\.json"
            r"|(?<![\w.-])(?:[\w./-]*[/_-])?(?:ds|zero\d?|deepspeed)(?:[_-][\w-]*|\d[\w-]*)?\.json\b",
            re.I,
        ),
    ),
)
# a sentence ends at . ! ? ; 。！？；, a blank line, and a line break before what starts a statement (a capital, a
# quote, a bracket, a list item, Chinese); a line that goes on in lower case is the same sentence, wrapped
_SENT_BREAK = re.compile(
    rf"[.!?](?=\s|$)|[。！？；;]|\n[ \t]*\n|\n(?=[ \t]*(?:[-*+>#]\s|\d+[.)]\s|[A-Z{_Q}{{\[(]|[{CJK}]))"
)
_CLAUSE_BREAK = re.compile(r"[,，、]|\n|\s(?:but|though|although|whereas)\s|但是?|然后|不过")
_VALUE_BEFORE = re.compile(rf"(?:=\s*|\w:)[{_Q}]?$")  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:..., x="y"
_KEY_AFTER = re.compile(r"[ \t]*[:：][ \t]*[^\s/]|[ \t]*=(?!=)[ \t]*\S")  # x: v, x = v
_QKEY_AFTER = re.compile(r"\s*[:：]")  # "x": v
_EN_BEFORE = re.compile(
    r"\b(?:set|sets|setting|turn(?:s|ed|ing)?\s+(?:on|off)|switch(?:es|ed|ing)?\s+(?:on|off)|enabl(?:e|es|ed|ing)"
    r"|disabl(?:e|es|ed|ing)|add(?:s|ed|ing)?|put(?:s|ting)?|bump(?:s|ed|ing)?|lower(?:s|ed|ing)?|rais(?:e|es|ed|ing)"
    r"|increas(?:e|es|ed|ing)|decreas(?:e|es|ed|ing)|reduc(?:e|es|ed|ing)|chang(?:e|es|ed|ing)|tun(?:e|es|ed|ing)"
    r"|try|tried|trying|use|uses|used|using|pass(?:es|ed|ing)?|includ(?:e|es|ed|ing)|has|have|had|needs?"
    r"|remov(?:e|es|ed|ing)|drop(?:s|ped|ping)?)\s+(?:(?:the|a|an|your|my|its|our)\s+)?"
    r"(?:(?:key|option|flag|field|argument|parameter|setting|entry)\s+)?$",
    re.I,
)
_ZH_BEFORE = re.compile(
    r"(?:把|将|设置|设定|设|加上|加入|加|添加|写上|写入|写|打开|开启|开|关闭|关掉|用|改|传入|传|填|配上)\s*$"
)
_EN_AFTER = re.compile(r"\s+(?:to|at)\s+\S|\s+(?:should|must)\s+be\b", re.I)
_ZH_AFTER = re.compile(
    r"\s*(?:设成|设为|设置为|设置成|设置|调成|调到|调为|调小|调大|调低|调高|改成|改为|打开|关掉|关闭|开启|填成|写成|为)"
)
# what may stand between a namespace's words and the name they govern: "LoraConfig x", "TrainingArguments 的 x",
# "the deepspeed launcher flag --x", "ds_config 里 "x""
_ADJACENT = re.compile(
    rf"[ \t]*(?:'s|’s)?[ \t]*(?:的|里的?|中的?|里面的?|下的?)?[ \t]*"
    rf"(?:(?:field|argument|arg|option|key|parameter|param|flag|setting|参数|字段|选项|配置项|设置)[ \t]*)?(?:the[ \t]+)?[{_Q}]?"
)
# "x in the zero config", "x under zero_optimization", "x of TrainingArguments": the words after it place it
_PLACED_IN = re.compile(rf"[{_Q}]?[ \t]+(?:in|inside|under|within|of)[ \t]+(?:(?:the|your|my|our|a)[ \t]+)?")
_SCRIPT = re.compile(r"\S+\.py\b")
_OWN_VALUE = re.compile(rf"[{_Q}]?[ \t]*[:=][ \t]*[{_Q}]?")  # deepspeed_config="ds_z2.json": the file is its value
SNIPPET_CHARS = 120


@dataclass
class _Cue:
    start: int
    end: int
    namespace: str
    parent: str | None
    words: str
    negated: bool = False  # "not in ds_config", "instead of the LoraConfig", "不是在 ds_config": places no name


# what makes a namespace's words say where a name is not
_NEGATED = re.compile(
    r"(?:\b(?:not|never|rather\s+than|instead\s+of)\s+(?:(?:in|into|inside|under|to)\s+)?(?:(?:the|your|a|my)\s+)?"
    r"|(?:不是|不在|不要|别|而不是|不用|并非)\s*(?:在|写在|放在|放到|写到|写进|加到)?\s*)$",
    re.I,
)


_FENCED = re.compile(r"```.*?(?:```|\Z)", re.S)
_CALL_OPEN = re.compile(r"([A-Za-z_][\w.]*)\($")
_JUDGED_CALLS = ("TrainingArguments", "LoraConfig")  # the calls _call_contexts reads (the registry covers them)


def _other_call_keyword(text: str, s: int, e: int) -> bool:
    """Is the name at [s, e) a ``name=`` keyword inside the parentheses of a call other than those kb judges?"""
    if not re.match(r"\s*=(?!=)", text[e : e + 4]):
        return False
    depth, i = 0, s - 1
    lo = max(0, s - 2000)
    while i >= lo:
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            if depth == 0:
                m = _CALL_OPEN.search(text, max(0, i - 80), i + 1)
                return bool(m) and m.group(1).rsplit(".", 1)[-1] not in _JUDGED_CALLS
            depth -= 1
        elif ch == "\n" and text[i - 1 : i] == "\n":
            return False  # a blank line: no call spans it
        i -= 1
    return False


class _Prose:
    """Where prose puts a name: the sentences and clauses of one text and the words in it that name a namespace
    (``_CUES``), read on the first question (most texts have no name left to place)."""

    def __init__(self, text: str, registry: Registry):
        self.text = text
        self.registry = registry
        self._read = False

    def _prepare(self) -> None:
        self._read = True
        text = self.text
        accelerate = re.search(r"accelerate", text, re.I) is not None
        cues: list[_Cue] = []
        for namespace, parent, rx in _CUES:
            for m in rx.finditer(text):
                ns, par = namespace, parent
                if m.group(0) == "deepspeed_config" and accelerate:
                    ns, par = "accelerate_yaml", "deepspeed_config"  # accelerate's section of that name
                negated = _NEGATED.search(text, max(0, m.start() - 24), m.start()) is not None
                cues.append(_Cue(m.start(), m.end(), ns, par, m.group(0), negated))
        self.cues = sorted(cues, key=lambda c: c.start)
        self.cue_starts = [c.start for c in self.cues]
        self.ds_words = [_Cue(m.start(), m.end(), "ds_config", None, m.group(0)) for m in _DS_TEXT.finditer(text)]
        # fenced code blocks: their names are read by their structure (a config block, a call), never by prose cues
        self.fences = [(m.start(), m.end()) for m in _FENCED.finditer(text)]
        self.sentences = _breaks(_SENT_BREAK, text)
        self.clauses = _breaks(_CLAUSE_BREAK, text)
        self.sections = _section_pattern(self.registry)

    def where(self, name: str, spans: list[tuple[int, int]]) -> Where | None:
        """The namespace the prose writes the name in (its strongest reading among its occurrences), or None."""
        if not self._read:
            self._prepare()
        best: Where | None = None
        for s, e in spans:
            w = self._at(name, s, e)
            if w is not None and (best is None or w.rank > best.rank):
                best = w
        return best

    def snippet(self, s: int, e: int) -> str:
        """The sentence the name at [s, e) is in (shortened around it)."""
        if not self._read:
            self._prepare()
        return _snippet(self.text, _around(self.sentences, s, e, len(self.text)), s, e)

    def _at(self, name: str, s: int, e: int) -> Where | None:
        text = self.text
        flag = name.startswith("-")
        if not flag and (_ENV_NAME.match(name) or is_camel_api(name)):
            return None  # an environment variable or a class is never a key
        if any(a <= s and e <= b for a, b in self.fences):
            return (
                None  # inside fenced code: its own structure says what it is (kb.registry.factcheck._config_contexts)
            )
        if _other_call_keyword(text, s, e):
            return None  # a keyword of a call kb cannot judge (ParallelismConfig(sp_size=...), Trainer(optimizer_...=))
        sent = _around(self.sentences, s, e, len(text))
        clause = _around(self.clauses, s, e, len(text))
        lo, hi = bisect.bisect_left(self.cue_starts, sent[0]), bisect.bisect_left(self.cue_starts, sent[1])
        cues = [
            c
            for c in self.cues[lo:hi]
            if sent[0] <= c.start
            and c.end <= sent[1]
            and (c.end <= s or (c.start >= e and not _OWN_VALUE.fullmatch(text, e, c.start)))
        ]
        pool = [c for c in cues if c.namespace.startswith("cli:") == flag and not c.negated]
        form = "flag" if flag else _form(text, s, e)
        strong = form in ("quoted", "colon", "assign", "flag")

        def dist(c: _Cue) -> int:
            return c.start - e if c.start >= e else s - c.end

        chosen, rank = None, 0
        adjacent = [c for c in pool if c.end <= s and _ADJACENT.fullmatch(text, c.end, s)]
        adjacent += [c for c in pool if c.start >= e and _PLACED_IN.fullmatch(text, e, c.start)]
        if adjacent:
            chosen, rank = min(adjacent, key=lambda c: (dist(c), c.start)), 2 if strong else 1
        elif form is not None:
            near = [c for c in pool if clause[0] <= c.start and c.end <= clause[1]]
            rank = 2 if strong else 1
            if not near and strong:
                near, rank = pool, 1
            if near:
                chosen = min(near, key=lambda c: (dist(c), c.start))
            elif form in ("quoted", "colon") and not cues:
                # a "key": / key: in a sentence that names no namespace, in a text about a DeepSpeed config (or,
                # quoted, in a text about DeepSpeed; never x=v there: the keywords of any call look like that)
                ds = [c for c in self.cues if c.namespace == "ds_config"] or (self.ds_words if form == "quoted" else [])
                if ds:
                    chosen, rank = min(ds, key=lambda c: (abs(dist(c)), c.start)), 0
        if chosen is None:
            return None
        if flag and chosen.end <= s and _SCRIPT.search(text, chosen.end, s):
            return Where(unverified="script_flag")  # "accelerate launch train.py --x": the script's own flag
        parent = chosen.parent
        if chosen.namespace == "ds_config" and parent is None:
            parent = self._section(clause, s, e)
        return Where(
            chosen.namespace,
            parent,
            prose=True,
            snippet=_snippet(text, sent, s, e),
            cue=chosen.words,
            cued=frozenset(c.namespace for c in cues),
            rank=rank,
        )

    def _section(self, clause: tuple[int, int], s: int, e: int) -> str | None:
        """The DeepSpeed config section the clause names nearest to the name ("under activation_checkpointing")."""
        if self.sections is None:
            return None
        found = [
            (abs(m.start() - s), self.sections[1][m.group(0)])
            for m in self.sections[0].finditer(self.text, clause[0], clause[1])
            if m.end() <= s or m.start() >= e
        ]
        return min(found)[1] if found else None


def _breaks(rx: re.Pattern[str], text: str) -> tuple[list[int], list[int]]:
    starts, ends = [], []
    for m in rx.finditer(text):
        starts.append(m.start())
        ends.append(m.end())
    return starts, ends


def _around(breaks: tuple[list[int], list[int]], s: int, e: int, n: int) -> tuple[int, int]:
    """The span between the breaks around [s, e): its sentence or clause."""
    starts, ends = breaks
    i = bisect.bisect_right(ends, s) - 1
    j = bisect.bisect_left(starts, e)
    return (ends[i] if i >= 0 else 0, starts[j] if j < len(starts) else n)


def _snippet(text: str, span: tuple[int, int], s: int, e: int) -> str:
    a, b = span
    if b - a > SNIPPET_CHARS:
        half = (SNIPPET_CHARS - (e - s)) // 2
        a2, b2 = max(a, s - half), min(b, e + half)
        return ("…" if a2 > a else "") + " ".join(text[a2:b2].split()) + ("…" if b2 < b else "")
    return " ".join(text[a:b].split())


def _form(text: str, s: int, e: int) -> str | None:
    """How the name at [s, e) is written: as a key, "quoted" ("x": v), "colon" (x: v) or "assign" (x = v); "verb"
    (set x, x to v, 把 x 设成); or None."""
    before = text[max(0, s - 60) : s]
    after = text[e : e + 60]
    if _VALUE_BEFORE.search(before):
        return None
    quoted = before[-1:] in _QUOTES and after[:1] in _QUOTES
    after2 = after[1:] if quoted else after
    if quoted and _QKEY_AFTER.match(after2):
        return "quoted"
    if quoted and re.match(r"[ \t]*=(?!=)", after2):
        return "assign"  # "x" = v
    if not quoted and (m := _KEY_AFTER.match(after)):
        return "assign" if "=" in m.group(0) else "colon"
    before2 = before[:-1] if before[-1:] in _QUOTES else before
    if _EN_BEFORE.search(before2) or _ZH_BEFORE.search(before2) or _EN_AFTER.match(after2) or _ZH_AFTER.match(after2):
        return "verb"
    return None


def _section_pattern(registry: Registry) -> tuple[re.Pattern[str], dict[str, str]] | None:
    """A regex of the names of DeepSpeed's config sections, and name -> section path."""
    cache = registry.__dict__.setdefault("_factcheck_cache", {})
    if "sections" not in cache:
        names: dict[str, str] = {}
        for r in registry.records:
            if r["package"] == "deepspeed" and r["kind"] == "config_section" and "_" in r["name"] + r["path"]:
                names.setdefault(r["name"], r["path"])
        for short in ("fp16", "bf16", "aio"):  # sections without an underscore that people name in prose
            if short in registry.by_path:
                names.setdefault(short, short)
        rx = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
        cache["sections"] = (re.compile(rf"(?<![\w.])(?:{rx})(?![\w])"), names) if names else None
    return cache["sections"]


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
    ``zero_*`` / ``stage3_*`` name (or ``zero_optimization.x``) is read as a DeepSpeed config key."""
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
        where = None  # code, not a key of any namespace
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
    moved = _moved(name, lk, where, registry, lang)
    if moved is not None:
        return moved
    verdict = VERDICT[lk.status]
    suggestions = lk.suggestions or [c["id"] for c in lk.candidates[:3] if c is not rec]
    if where is not None and where.namespace in PROSE_NAMESPACES and lk.status == "not-a-config-key":
        # an API or kwarg written as a name of a namespace: the did-you-mean is that namespace's
        suggestions = namespace_suggestions(registry, where.namespace, name, where.parent)
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
        suggestions,
        0,
        _message(name, verdict, lk, registry, lang),
        rec["kind"] if rec else None,
    )


def _moved(name: str, lk: Any, where: Where | None, registry: Registry, lang: str) -> NameVerdict | None:
    """A real name written in a namespace where it is not real, but real as a config name of another one (a
    TrainingArguments field or an accelerate YAML key as a ds_config key, another launcher's flag): misplaced,
    saying where it is real, with the did-you-mean of the namespace it was written in. None otherwise."""
    if where is None or where.namespace not in PROSE_NAMESPACES:
        return None
    ns = where.namespace
    if where.prose and (ns.startswith("cli:") or where.rank < 1):
        # a flag prose names near a launcher may be the script's own, passed on by the launcher; a key in a
        # sentence that names no namespace may be meant for any (only an unknown near-miss is judged there)
        return None
    if "." in name and not name.startswith("-"):
        recs = [r for r in [lk.record, *lk.candidates] if r is not None]
    else:
        recs = list(registry.by_name.get(name, []))
    recs = [r for r in recs if r.get("status") not in ("absent", "removed")]
    if not recs or any(_real_here(r, where) for r in recs):
        return None
    homes = [(r, h) for r in recs if (h := _home(r)) is not None and h != ns]
    if not homes:
        return None  # an API, kwarg, method or env var: not-a-config-key says what it is
    if ns.startswith("cli:") and not all(h.startswith("cli:") for _, h in homes):
        return None  # only another launcher's own flag is called misplaced on a command line
    if any(h in where.cued for _, h in homes):
        return None  # the sentence also names the namespace where it is real
    order = list(HOMES)
    rec, home = min(homes, key=lambda rh: (order.index(rh[1]) if rh[1] in HOMES else len(order), rh[0]["id"]))
    suggestions: list[str] = []
    for r, _ in homes:
        suggestions += [s for s in _mapped(registry, r, ns) if s not in suggestions]
    suggestions += [_label(r) for r in recs if _in_ns(r, ns) and _label(r) not in suggestions]  # optimizer.params.x
    suggestions += [s for s in namespace_suggestions(registry, ns, name, where.parent) if s not in suggestions]
    suggestions = suggestions[:3]
    zh = lang == "zh"
    ns_en, ns_zh, _ = PROSE_NAMESPACES[ns]
    home_en, home_zh = _home_words(home)
    if where.prose:
        at_en, at_zh = f'written as one in: "{where.snippet}"', f"原文按 {ns_zh} 来写：“{where.snippet}”"
    else:
        at_en, at_zh = _written_at(ns)
    if zh:
        tail = f" 作为 {ns_zh}，你可能想写的是：{'、'.join(suggestions)}。" if suggestions else ""
        message = f"`{name}` 不是 {ns_zh}（{at_zh}）：它是 {home_zh}（{rec['id']}）。{tail}".rstrip()
    else:
        tail = f" As {ns_en}, did you mean: {', '.join(suggestions)}?" if suggestions else ""
        message = f"`{name}` is not {ns_en} ({at_en}): it is {home_en} ({rec['id']}).{tail}"
    return NameVerdict(name, "misplaced", rec["id"], suggestions, 0, message, rec["kind"])


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
    prose = where is not None and where.prose
    # prose that names no namespace, or a config kb cannot identify: a zero_* / stage3_* form may still say
    open_ctx = where is None or (namespace is None and where.unverified in (None, "other_config"))
    form = _ds_form_namespace(name, registry) if about_ds else None
    if namespace is not None and not any(_pool(registry, namespace)[3]):
        # a registry built before this namespace was recorded (an older release): nothing to compare with
        where, namespace, prose = Where(unverified="flag" if name.startswith("-") else "prose"), None, False
    if prose and where is not None and namespace is not None:
        suggestions, best = _suggest(registry, namespace, name, where.parent)
        if best >= (NEAR_MISS_KEY if where.rank >= 2 else NEAR_MISS):
            return NameVerdict(
                name,
                "does-not-exist",
                None,
                suggestions,
                0,
                _prose_message(name, namespace, where, suggestions, registry, zh),
                None,
                reason=_prose_reason(namespace, where, zh),
            )
        if not (namespace == "ds_config" and form):
            reason = _prose_reason(namespace, where, zh, far=True)
            if zh:
                message = f"注册表里没有 `{name}`，kb 无法确认它，但也不判定它不存在：{reason}。"
            else:
                message = f"`{name}` is not in kb's registry, so kb cannot confirm it, nor call it false: {reason}."
            return NameVerdict(name, "unverified", None, [], 0, message, None, reason=reason)
        namespace, open_ctx = None, True  # not close to a key, but a DeepSpeed key by its form: judged as that
    if namespace is None and open_ctx and form:
        namespace = form
    if namespace is not None:
        parent = where.parent if where and not prose else None
        if namespace == "ds_path":
            parent = name.rsplit(".", 1)[0]
        suggestions = namespace_suggestions(registry, namespace, name, parent)
        en, zh_where = NAMESPACES[namespace]
        reason = (
            f"注册表收录了{zh_where}的全部名字，其中没有它" if zh else f"read {en}, where the registry lists every name"
        )
        if where is not None and where.snippet:
            reason += f"：“{where.snippet}”" if zh else f': "{where.snippet}"'
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


def _ds_form_namespace(name: str, registry: Registry) -> str | None:
    """The form only DeepSpeed config keys have: "ds_form" (zero_* / stage3_*) or "ds_path" (zero_optimization.x:
    a path under a DeepSpeed config section); None otherwise."""
    if _ds_form(name, registry):
        return "ds_form"
    if "." in name and not name.startswith("-"):
        parent = name.rsplit(".", 1)[0]
        if (
            name.split(".", 1)[0] not in OBJECT_PREFIXES
            and ".params." not in f".{parent}."
            and re.fullmatch(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+", name)
            and any(
                r["package"] == "deepspeed" and r["kind"] == "config_section" for r in registry.by_path.get(parent, [])
            )
        ):
            return "ds_path"
    return None


def _ds_form(name: str, registry: Registry) -> bool:
    """zero_* / stage3_*: a form only DeepSpeed config keys have (checked against the registry)."""
    if not re.fullmatch(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", name):
        return False
    return any(name.startswith(p) and p in _ds_prefixes(registry) for p in DS_KEY_PREFIXES)


def _ds_prefixes(registry: Registry) -> set[str]:
    cache = registry.__dict__.setdefault("_factcheck_cache", {})
    if "prefixes" not in cache:
        ok = set()
        for p in DS_KEY_PREFIXES:
            names = [n for n in registry.by_name if n.startswith(p)]
            ds = [n for n in names if _ds_key(registry, n)]
            if len(ds) >= MIN_PREFIX_KEYS:
                ok.add(p)
        cache["prefixes"] = ok
    return cache["prefixes"]


# ---------------------------------------------------------------- the names of a namespace


def _in_ns(r: Record, namespace: str) -> bool:
    """Is the record a name of the namespace (a DeepSpeed config path, a LoraConfig field, a flag of torchrun, ...)?"""
    if namespace in ("ds_config", "ds_form", "ds_path"):
        return r["package"] == "deepspeed" and r["kind"] in ("config_key", "config_section")
    if namespace == "accelerate_yaml":
        return r["package"] == "accelerate" and r["kind"] == "yaml_key"
    if namespace in ("TrainingArguments", "LoraConfig"):
        return r["kind"] == "field" and r["path"].startswith(namespace + ".")
    if namespace.startswith("cli:"):
        return r["kind"] == "cli_flag" and r["path"].startswith(namespace[4:] + " ")
    return False


def _real_here(r: Record, where: Where) -> bool:
    """Is the record a name of the namespace the name was written in, where it was written? (A key DeepSpeed reads
    only under an optimizer's or scheduler's ``params``, optimizer.params.max_grad_norm, is not a key elsewhere.)"""
    ns = where.namespace or ""
    if not _in_ns(r, ns):
        return False
    if ns == "ds_config" and ".params." in f".{r['path']}.":
        return bool(where.parent) and r["path"].startswith(f"{where.parent}.")
    return True


def _home(r: Record) -> str | None:
    """The namespace a real name is a config name of (a key of HOMES), None for an API, kwarg, method or env var."""
    for ns in PROSE_NAMESPACES:
        if _in_ns(r, ns):
            return ns
    if r["kind"] == "field" and "." in r["path"]:  # accelerate's DeepSpeedPlugin, trl's SFTConfig, LlamaConfig, ...
        return f"field:{r['package']}:{r['path'].rsplit('.', 1)[0]}"
    return None


def _home_words(home: str) -> tuple[str, str]:
    if home in HOMES:
        return HOMES[home]
    _, pkg, cls = home.split(":", 2)
    return f"a field of {pkg}'s {cls}", f"{pkg} {cls} 的字段"


def _label(r: Record) -> str:
    """How a suggestion names a record: a flag by its name, a config key by its path, anything else by its id."""
    return r["name"] if r["kind"] == "cli_flag" else r["path"] if r["kind"] in CONFIG_KINDS else r["id"]


def namespace_names(registry: Registry, namespace: str, parent: str | None = None) -> dict[str, str]:
    """The real names of one covered namespace: name (and aliases) -> label to suggest."""
    out: dict[str, str] = {}
    for r in registry.records:
        if r.get("status") in ("absent", "removed"):
            continue  # not a name of the release being judged: no did-you-mean to it
        ok = _in_ns(r, namespace)
        if ok and parent and namespace == "ds_config":
            ok = r["path"].startswith(parent + ".") or r["path"].rsplit(".", 1)[0].endswith(parent)
        if ok:
            for n in [r["name"], *r["aliases"]]:
                out.setdefault(n, _label(r))
    return out


def _norm(s: str) -> str:
    return s.lstrip("-").replace("-", "_").lower()


def _pool(registry: Registry, namespace: str) -> tuple[list[str], list[str], list[str], list[bool]]:
    """The spellings a did-you-mean compares with in one namespace (names, aliases and, for a nested DeepSpeed
    key, its flattened form: offload_optimizer_pin_memory), with the label and path of each, and whether the
    release judged has it (a name of another release still makes a near-miss, and comes after those of this
    one); in DeepSpeed's, the front ends' names for its keys too (registry.mappings); built once per view."""
    ns = "ds_config" if namespace in ("ds_form", "ds_path") else namespace
    cache = registry.__dict__.setdefault("_factcheck_cache", {})
    key = ("pool", ns)
    if key not in cache:
        keys: list[str] = []
        labels: list[str] = []
        paths: list[str] = []
        live: list[bool] = []
        for r in registry.records:
            if not _in_ns(r, ns):
                continue
            spellings = {r["name"], *r["aliases"]}
            if ns == "ds_config" and "." in r["path"]:
                parts = r["path"].split(".")
                spellings.add(f"{parts[-2]}_{parts[-1]}")
            for sp in sorted(spellings):
                keys.append(_norm(sp))
                labels.append(_label(r))
                paths.append(r["path"])
                live.append(r.get("status") not in ("absent", "removed"))
        if ns == "ds_config":
            # the front ends' names for a DeepSpeed key (accelerate's zero3_save_16bit_model for
            # zero_optimization.stage3_gather_16bit_weights_on_model_save): a misspelling of one means that key
            for path, ms in sorted(registry.mappings.items()):
                if path == "*" or not any(_in_ns(r, ns) for r in registry.by_path.get(path, [])):
                    continue
                for front in sorted(
                    {m["front_name"].lstrip("-").rsplit(".", 1)[-1] for m in ms if m.get("front_name")}
                ):
                    keys.append(_norm(front))
                    labels.append(path)
                    paths.append(path)
                    live.append(True)
        cache[key] = (keys, labels, paths, live)
    return cache[key]


def _variants(name: str, namespace: str) -> set[str]:
    """The spellings of a name its did-you-mean is looked up by: as written, American for British (optimiser),
    zero3_x / zero_3_x / stage_3_x as stage3_x and x (DeepSpeed), lora_x as x (LoraConfig)."""
    base = _norm(name if name.startswith("-") else name.rsplit(".", 1)[-1])
    out = {base, re.sub(r"is(ations?|ers?|es?|ed|ing)(?=_|$)", r"iz\1", base)}
    for v in list(out):
        m = re.match(r"(?:zero_?3|z3|stage_3|zero_stage_?3|ds_?3)_(.+)", v)
        if m and namespace in ("ds_config", "ds_form", "ds_path"):
            out |= {"stage3_" + m.group(1), m.group(1)}
        if namespace == "LoraConfig" and v.startswith("lora_") and len(v) > 5:
            out.add(v[5:])
    return out


def _suggest(
    registry: Registry, namespace: str, name: str, parent: str | None = None, limit: int = 3
) -> tuple[list[str], float]:
    """Did-you-mean among the names of one namespace only (its section first), and the best similarity (0-100)."""
    from rapidfuzz import fuzz, process

    keys, labels, paths, live = _pool(registry, namespace)
    if not keys:
        return [], 0.0
    score: dict[str, float] = {}
    raw = 0.0
    for v in _variants(name, namespace):
        hits = process.extract(v, keys, scorer=fuzz.ratio, limit=None, score_cutoff=SUGGEST_MIN)
        hits += [(keys[i], ABBREVIATED, i) for i in _abbreviations(v, keys)]
        hits += [(keys[i], EXTENDED, i) for i in _extensions(v, keys)]
        for _, sc, i in hits:
            raw = max(raw, sc)
            bonus = 3 if parent and (paths[i].startswith(parent + ".") or f".{parent}." in f".{paths[i]}") else 0
            score[labels[i]] = max(score.get(labels[i], 0.0), sc + bonus - (0 if live[i] else 1))
    ranked = sorted(score, key=lambda lb: (-score[lb], lb))
    return ranked[:limit], raw


ABBREVIATED = 90.0  # the similarity of the same words, one of them shortened (overlap_communication, overlap_comm)


def _abbreviations(name: str, keys: list[str]) -> list[int]:
    """The keys made of the same words as ``name``, some of them shortened in one or the other (comm /
    communication, grads / gradients, optim / optimizer): at least two words, one the same, each shortened word
    at least three letters."""
    parts = name.split("_")
    if len(parts) < 2:
        return []
    out = []
    for i, key in enumerate(keys):
        kp = key.split("_")
        if len(kp) != len(parts) or key == name:
            continue
        same = sum(a == b for a, b in zip(parts, kp, strict=True))
        if same and all(
            a == b or (min(len(a), len(b)) >= 3 and (a.startswith(b) or b.startswith(a)))
            for a, b in zip(parts, kp, strict=True)
        ):
            out.append(i)
    return out


EXTENDED = 82.0  # the similarity of a real name with a word added after it (--include_gpus, --include)


def _extensions(name: str, keys: list[str]) -> list[int]:
    """The keys whose words begin ``name``, which adds a word or more (include_gpus: include, num_gpus_per_node:
    num_gpus); the key at least five letters."""
    if "_" not in name:
        return []
    return [i for i, key in enumerate(keys) if len(key) >= 5 and name.startswith(key + "_")]


def namespace_suggestions(
    registry: Registry, namespace: str, name: str, parent: str | None = None, limit: int = 3
) -> list[str]:
    """Did-you-mean among the names of the namespace the name was written in (its section first); never a name of
    another namespace (a LoraConfig argument gets LoraConfig fields, a launcher flag that launcher's flags)."""
    return _suggest(registry, namespace, name, parent, limit)[0]


def _mapped(registry: Registry, rec: Record, namespace: str) -> list[str]:
    """What the front ends' mappings (kb.registry.store: Registry.mappings) link a real name to in another
    namespace: TrainingArguments.max_grad_norm -> gradient_clipping, deepspeed_config.zero_stage ->
    zero_optimization.stage, zero_optimization.stage -> accelerate's deepspeed_config.zero_stage."""
    cache = registry.__dict__.setdefault("_factcheck_cache", {})
    if "by_front" not in cache:
        by_front: dict[str, list[str]] = {}
        for path, ms in registry.mappings.items():
            for m in ms:
                if m.get("front_id") and path != "*":
                    by_front.setdefault(m["front_id"], []).append(path)
        cache["by_front"] = by_front
    ds_paths = [rec["path"]] if _in_ns(rec, "ds_config") else cache["by_front"].get(rec["id"], [])
    out: list[str] = []
    for path in ds_paths:
        if namespace == "ds_config":
            if path not in out:
                out.append(path)
            continue
        for m in registry.mappings.get(path, []):
            front = registry.get(m["front_id"]) if m.get("front_id") else None
            if FRONT_ENDS.get(m.get("front_end", "")) == namespace and front is not None and _in_ns(front, namespace):
                if _label(front) not in out:
                    out.append(_label(front))
    return out


# ---------------------------------------------------------------- messages


def _written_at(namespace: str) -> tuple[str, str]:
    """Where a structure put the name (en, zh), for a misplaced name's message."""
    if namespace.startswith("cli:"):
        cmd = namespace[4:]
        return f"on the {cmd} command line, before the script", f"写在 {cmd} 命令行里、脚本名之前"
    return {
        "ds_config": ("in a pasted DeepSpeed config", "写在贴出的 DeepSpeed 配置里"),
        "accelerate_yaml": ("in a pasted accelerate config YAML", "写在贴出的 accelerate 配置 YAML 里"),
        "TrainingArguments": ("in a TrainingArguments(...) call", "写在 TrainingArguments(...) 调用里"),
        "LoraConfig": ("in a LoraConfig(...) call", "写在 LoraConfig(...) 调用里"),
    }[namespace]


def _prose_reason(namespace: str, where: Where, zh: bool, far: bool = False) -> str:
    """The context a name was read in from prose: the namespace, the words that named it, the sentence."""
    en, zh_ns, _ = PROSE_NAMESPACES[namespace]
    if zh:
        said = f"在“{where.snippet}”中按 {zh_ns} 来写（依据：“{where.cue}”）"
        if far:
            return f"{said}，但{REASONS['far'][1]}"
        return f"{said}；注册表收录了全部 {zh_ns}，其中没有它"
    said = f'written as {en} ("{where.cue}") in: "{where.snippet}"'
    if far:
        return f"{said}, but {REASONS['far'][0]}"
    return f"{said}; the registry lists every one, and it is not one"


def _prose_message(
    name: str, namespace: str, where: Where, suggestions: list[str], registry: Registry, zh: bool
) -> str:
    en, zh_ns, pkg = PROSE_NAMESPACES[namespace]
    ver = f"{pkg} {registry.versions.get(pkg, '?')}"
    if zh:
        near = f" 你可能想写的是：{'、'.join(suggestions)}。" if suggestions else ""
        return f"`{name}` 不存在：原文把它当作 {zh_ns}，但 {ver} 没有这个名字。{near}".rstrip()
    near = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
    return f"`{name}` does not exist as {en}: the text writes it as one, and {ver} has no such name.{near}"


def _not_exist_message(name: str, namespace: str, suggestions: list[str], registry: Registry, zh: bool) -> str:
    pkg = {"accelerate_yaml": "accelerate", "TrainingArguments": "transformers", "LoraConfig": "peft"}.get(
        namespace,
        "torch" if namespace == "cli:torchrun" else "accelerate" if "accelerate" in namespace else "deepspeed",
    )
    ver = f"{pkg} {registry.versions.get(pkg, '?')}"
    en_where, zh_where = NAMESPACES[namespace]
    if namespace in ("ds_form", "ds_path"):
        how_en = "zero_/stage3_ form" if namespace == "ds_form" else "path under a DeepSpeed config section"
        how_zh = "zero_/stage3_ 的写法" if namespace == "ds_form" else "DeepSpeed 配置段下的路径写法"
        if zh:
            near = f" 你可能想写的是：{'、'.join(suggestions)}。" if suggestions else ""
            return (
                f"`{name}` 不存在：从{how_zh}和上下文看，它是 DeepSpeed 配置项，但 {ver} 没有这个配置项。{near}"
            ).rstrip()
        near = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        return (
            f"`{name}` does not exist: by its {how_en} and the text around it, it is meant as a "
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
