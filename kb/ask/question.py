"""The question, read once: everything the engine and its ranking use about what the user wrote.

``read_question`` is the one function that reads a question's text and its attachment. Every consumer (the
engine, retrieval, ranking, lint and memory through the engine) reads the ``Question`` it returns; no module
re-detects the language, re-extracts names or re-reads the stated facts.

What the question states is parsed from the user's own words (``prose``): lines of a pasted error or log are the
library's text, not the user's setup ("Partial offloading only supported for ZeRO Stage 3" does not say the user
runs ZeRO-3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from kb.ask.logs import MAX_PROSE_CHARS, LogTriage, triage_text, wants_triage
from kb.ask.text import (
    Word,
    identifier_spans,
    latin_words,
    looks_like_log,
    looks_like_param,
    normalize_traceback,
    tokenize,
)
from kb.doctor.configs import ParsedConfig, SetupFacts, facts_from_config, parse_config
from kb.lang import detect_lang, pick_lang

MAX_QUERY_CHARS = 20_000


class QueryError(ValueError):
    """Bad input to ``ask`` (empty query, bad option): the message says what to change."""


@dataclass(frozen=True)
class Name:
    """A parameter-like name as written in the question (kb.ask.text.identifier_spans), and where."""

    text: str
    start: int
    end: int
    in_log: bool  # on a line of a pasted error or log (the library's name, not the user's)
    param_like: bool  # could be a parameter, key, flag or API name (kb.ask.text.looks_like_param)


@dataclass(frozen=True)
class Stated:
    """What the question itself says about the setup."""

    facts: SetupFacts = field(default_factory=SetupFacts)  # stage, precision, method, when: compared with conditions
    model: str | None = None  # a kb.memory preset named in the text ("llama2-7b", "qwen2.5-72b")
    params: float | None = None  # a model size stated ("7b", "70B"), in parameters
    gpus: int | None = None  # GPUs stated ("8 gpus", "4卡", "single gpu", "单卡")

    @property
    def single_gpu(self) -> int | None:
        """1 when the question says it runs on one GPU: the only world size lint may assume."""
        return 1 if self.gpus == 1 else None


@dataclass(frozen=True)
class Attachment:
    """What came with the question: a config (parsed) or a pasted version report (read for versions only)."""

    text: str
    name: str
    config: ParsedConfig | None  # None: a pip freeze / ds_report / env report, not a config

    @property
    def versions_only(self) -> bool:
        return self.config is None


@dataclass(frozen=True)
class Question:
    text: str  # stripped, at most MAX_QUERY_CHARS
    lang: str  # the answer's language ("en" | "zh")
    text_lang: str  # the language the text is written in (the embedder's calibration is per language)
    truncated: bool
    is_log: bool  # a pasted traceback or log
    error_lines: tuple[str, ...]  # lines of a pasted error or log
    prose: str  # the user's own words: the text without those lines
    tokens: tuple[str, ...]  # lexical tokens (kb.ask.text.tokenize)
    words: tuple[Word, ...]  # its Latin words as written (kb.ask.text.latin_words): is one a name kb never saw?
    names: tuple[Name, ...]  # every parameter-like name, in order of appearance
    param_names: tuple[str, ...]  # those that look like a parameter, each once, in order of first appearance
    name_set: frozenset[str]  # every name, lower-cased (a myth about a name the question uses is marked)
    stated: Stated
    versions: dict[str, tuple[str, str]]  # package -> (version, source): flag > attachment > prose
    front_end: str | None  # the front end to write fixes for (kb.doctor.frontends); None: all
    attachment: Attachment | None = None
    normalized: str = ""  # the text with what differs between two reports of one error stripped (signatures)
    config_facts: SetupFacts | None = None  # what the attached config says (stage, offload, precision, method, ...)
    log: LogTriage | None = None  # a whole log, read from its error blocks (kb.ask.logs): ``text`` is what it used

    @property
    def config(self) -> ParsedConfig | None:
        return self.attachment.config if self.attachment is not None else None


def read_question(
    text: str,
    config_text: str | None = None,
    config_name: str = "<config>",
    lang: str = "auto",
    versions: dict[str, str] | None = None,
    front_end: str | None = None,
    log: LogTriage | None = None,
) -> Question:
    """Read a question and its attachment. Raises QueryError (empty text, unknown language) and
    kb.doctor.configs.ConfigError (an attachment that is neither a config nor a version report).

    A whole log (pasted: more than kb.ask.logs.TRIAGE_MIN_LINES lines, or any text longer than MAX_QUERY_CHARS
    that is a log; or ``log``, read by the caller from a file or stdin with kb.ask.logs.read_log) is read from its
    error blocks: the question's text becomes the user's own words and those blocks, never the lines a healthy
    run prints. Its text is empty when the log has neither (the engine then says it found no error)."""
    if log is None and (not isinstance(text, str) or not text.strip()):
        raise QueryError("empty query: describe the symptom or paste the error")
    if config_text is not None and not isinstance(config_text, str):
        raise QueryError("config must be the text of a config file")
    text = (text or "").strip()
    if log is None and wants_triage(text, looks_like_log(text)):
        log = triage_text(text)
    elif log is not None and text:  # the user's words given with a log read from a file or stdin
        log = replace(log, prose="\n".join(p for p in (text[:MAX_PROSE_CHARS], log.prose) if p))
    if log is not None:
        text = log.query_text()
    truncated = len(text) > MAX_QUERY_CHARS
    if truncated:
        text = text[:MAX_QUERY_CHARS]
    # the user's own words and the lines of a pasted error or log (local work first, then the readers it calls)
    log_lines, prose, in_log, pos = [], [], [], 0
    for ln in text.splitlines(keepends=True):
        if _LOG_LINE.search(ln):
            log_lines.append(ln.rstrip("\r\n"))
            in_log.append((pos, pos + len(ln)))
        else:
            prose.append(ln.rstrip("\r\n"))
        pos += len(ln)
    if log is not None:
        prose = [log.prose]
    stated = stated_from_text(text, "\n".join(prose))
    try:
        lang = pick_lang(text or "-", lang)
    except ValueError as e:
        raise QueryError(str(e)) from None
    text_lang = detect_lang(text)
    spans = identifier_spans(text)
    tokens = tuple(tokenize(text))
    is_log = looks_like_log(text) or log is not None
    names = tuple(Name(s, a, b, any(lo <= a < hi for lo, hi in in_log), looks_like_param(s)) for s, a, b in spans)
    normalized = normalize_traceback(text)
    attachment = _attachment(config_text, config_name) if config_text is not None else None
    cfg = attachment.config if attachment is not None else None
    config_facts = facts_from_config(cfg) if cfg is not None else None
    if front_end == "all":
        front_end = None
    elif not front_end:
        from kb.doctor.frontends import detect_front_end

        front_end = detect_front_end(cfg.kind if cfg is not None else None, text, cfg.data if cfg is not None else None)
    from kb.registry.releases import user_versions

    return Question(
        text=text,
        lang=lang,
        text_lang=text_lang,
        truncated=truncated,
        is_log=is_log,
        error_lines=tuple(log_lines),
        prose="\n".join(prose),
        tokens=tokens,
        words=latin_words(text),
        names=names,
        param_names=tuple(dict.fromkeys(n.text for n in names if n.param_like)),
        name_set=frozenset(n.text.lower() for n in names),
        stated=stated,
        versions=user_versions(text, config_text, versions),
        front_end=front_end,
        normalized=normalized,
        config_facts=config_facts,
        attachment=attachment,
        log=log,
    )


def _attachment(config_text: str, config_name: str) -> Attachment:
    if is_version_report(config_text):
        return Attachment(config_text, config_name, None)
    return Attachment(config_text, config_name, parse_config(config_text, config_name))  # ConfigError propagates


def is_version_report(text: str) -> bool:
    """A pasted ``pip freeze`` / ``pip list`` / ``ds_report`` / env report rather than a config (kb.registry.versions)."""
    from kb.doctor.configs import ConfigError
    from kb.registry.versions import versions_from_text

    found = versions_from_text(text, origin="attachment")
    if not any(p.source != "query" for p in found.pins.values()):
        return False
    try:
        parse_config(text, "<attachment>")
    except ConfigError:
        return True
    return False


# ---------------------------------------------------------------- what the question states

# a line of a pasted error or log: what it says is the library's text, not the user's setup
_LOG_LINE = re.compile(
    r"Error\b|error for|Exception|Traceback|Assertion|Warning|WARNING|INFO|^\s+File |^\s*\[|^\s{2,}\S|\w+\.py\b"
)
_Q_STAGE = re.compile(
    r"(?<![A-Za-z0-9])(?:zero|z)[\s_-]?(?:stage[\s_-]?)?([0-3])(?![0-9])|(?<![A-Za-z0-9])stage[\s_-]?([0-3])(?![0-9])",
    re.I,
)
_Q_FP16 = re.compile(r"(?<![A-Za-z0-9])(?:fp16|float16)(?![A-Za-z0-9])", re.I)
_Q_BF16 = re.compile(r"(?<![A-Za-z0-9])(?:bf16|bfloat16)(?![A-Za-z0-9])", re.I)
_Q_QLORA = re.compile(
    r"(?<![A-Za-z0-9])(?:qlora|4[\s-]?bit|nf4|load_in_4bit|quantization_bit)(?![A-Za-z0-9])|4\s*位量化", re.I
)
_Q_LORA = re.compile(r"(?<![A-Za-z0-9])lora(?![A-Za-z0-9])", re.I)
_Q_FULL = re.compile(r"full[\s-]?(?:parameter[\s-]?)?fine[\s-]?tun|全参|全量", re.I)
# when the failure happens: at the start (the first step), later (after many steps, growing), in evaluation, at a save
_Q_WHEN = {
    "start": re.compile(
        r"(?<![A-Za-z])(?:(?:on|at|in) (?:the )?(?:very )?first (?:training )?(?:step|iteration|batch)|before (?:the )?first "
        r"step|step 0\b)|第一步|第一个\s*(?:step|batch|iteration)|一开始就|刚开始就",
        re.I,
    ),
    "later": re.compile(
        r"(?<![A-Za-z])(?:after (?:\d+|a few|several|many) (?:steps|iterations|hours|epochs)|(?:grows?|increases?|creeps? up)"
        r" (?:every|each|per) (?:step|iteration)|gradually)|跑了(?:几|\d+)|越来越|逐渐|慢慢涨",
        re.I,
    ),
    "eval": re.compile(r"(?<![A-Za-z])(?:eval|evaluation|evaluate|evaluating)(?![A-Za-z])|评估|验证集", re.I),
    "save": re.compile(
        r"(?<![A-Za-z])(?:sav(?:e|es|ed|ing)(?: the)? (?:checkpoint|model)|save_steps)|保存|存\s*checkpoint", re.I
    ),
}
_PRESET_SIZE = re.compile(r"\d[bm]")  # kb.memory.estimate.PRESETS names all have one (a test checks)
_SIZE = re.compile(r"(?<![A-Za-z0-9_.])(\d+(?:\.\d+)?)\s*[bB](?![A-Za-z0-9_])")
_ONE_GPU = re.compile(
    r"(?<![A-Za-z0-9])(single|one|1)[\s-]*(gpu|card|a100|h100|h800|a800)(?![A-Za-z0-9])|单卡|一张卡|单张", re.I
)
_N_GPUS = re.compile(
    r"(\d+)\s*[x×]?\s*(?:gpus?|cards?|[ah]100s?|h800s?|a800s?)(?![A-Za-z0-9])|(\d+)\s*(?:张卡|块卡|卡)", re.I
)


def stated_from_text(text: str, prose: str | None = None) -> Stated:
    """What a question states: the facts ranking compares with entry conditions (``stated_facts``) and the model,
    size and GPU count that lint and memory use (read from the whole text, as a model name in a log still names
    the model)."""
    flat = text.lower().replace("-", "")
    model = None
    if _PRESET_SIZE.search(flat):  # every preset name ends in its size ("llama2-7b"): most questions name none
        from kb.memory.estimate import PRESETS

        model = next((name for name in PRESETS if name.replace("-", "") in flat), None)
    m = _SIZE.search(text)
    params = float(m.group(1)) * 1e9 if m else None
    gpus = None
    if _ONE_GPU.search(text):
        gpus = 1
    elif g := _N_GPUS.search(text):
        n = int(g.group(1) or g.group(2))
        gpus = n if 0 < n <= 4096 else None
    return Stated(stated_facts(text, prose), model, params, gpus)


def stated_facts(text: str, prose: str | None = None) -> SetupFacts:
    """The setup a question states when it states one value only: "zero3", "stage 2"; "fp16" or "bf16"; "qlora" /
    "4bit", "lora", "full fine-tune" / "全参"; when it fails: on the first step, after many steps, in evaluation,
    while saving. Two values of a fact named (a comparison) leave it unknown; lines of a pasted error or log are not
    read."""
    f = SetupFacts()
    if prose is None:
        prose = "\n".join(ln for ln in text.splitlines() if not _LOG_LINE.search(ln))
    stages = {int(a or b) for a, b in _Q_STAGE.findall(prose)}
    if len(stages) == 1:
        f.zero_stage = stages.pop()
    fp16, bf16 = bool(_Q_FP16.search(prose)), bool(_Q_BF16.search(prose))
    if fp16 != bf16:
        f.precision = "fp16" if fp16 else "bf16"
    if _Q_QLORA.search(prose):
        f.method = "qlora"
    elif _Q_LORA.search(prose):
        f.method = "lora"
    elif _Q_FULL.search(prose):
        f.method = "full"
    whens = [w for w, rx in _Q_WHEN.items() if rx.search(prose)]
    if len(whens) == 1:
        f.when = whens[0]
    return f
