"""Text handling shared by the indexer and the query path: tokenizing, language, tracebacks.

The lexical tokenizer keeps parameter names whole (``stage3_prefetch_bucket_size``,
``zero_optimization.offload_param``) and also emits their parts, folds spelling variants of the
same concept (``zero3`` / ``ZeRO-3`` / ``stage 3`` / ``z3``), splits Chinese into character bigrams
(no dictionary load, so the CLI starts fast) and adds English glossary terms for Chinese words, so a
Chinese query also matches the English side of an entry.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

from kb.lang import CJK

_CJK_RUN = re.compile(f"[{CJK}]+")

# variant spellings -> one canonical token (applied to lower-cased text before tokenizing)
_VARIANTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bzero[\s_-]*(?:stage[\s_-]*)?([0-3])\b|\bz([0-3])\b|\bzero([0-3])\b"), r" zero\1\2\3 "),
    (re.compile(r"\bstage[\s_-]*([0-3])\b"), r" zero\1 "),
    (re.compile(r"\bds\b"), " deepspeed "),
    (re.compile(r"\bhf\b"), " huggingface "),
    (re.compile(r"\bgpus?\b"), " gpu "),
    (re.compile(r"\b(?:out[\s_-]*of[\s_-]*memory|cuda\s*oom)\b"), " oom "),
    (re.compile(r"\bbfloat16\b"), " bf16 "),
    (re.compile(r"\bfloat16\b|\bhalf\b"), " fp16 "),
    (re.compile(r"\bckpt\b"), " checkpoint "),
    (re.compile(r"\bnvme\b"), " nvme "),
    (re.compile(r"\bq[\s-]?lora\b"), " qlora "),
    (re.compile(r"\bgrad(?:ient)?[\s_-]*(?:checkpointing|ckpt)\b"), " gradient_checkpointing "),
    (re.compile(r"\bbs\b"), " batch_size "),
    (re.compile(r"\bfine[\s-]*tun\w*|\bfinetun\w*"), " finetune "),
]

# Chinese terms -> English tokens they mean in this field (added, not replacing)
GLOSSARY: dict[str, str] = {
    "爆显存": "oom gpu memory",
    "显存": "gpu memory",
    "内存": "cpu ram memory host",
    "溢出": "overflow",
    "卡住": "hang stuck",
    "卡死": "hang stuck",
    "不动": "hang stuck",
    "超时": "timeout",
    "保存": "save checkpoint",
    "存": "save",
    "加载": "load",
    "载入": "load",
    "权重": "weights",
    "精度": "precision",
    "混合精度": "mixed precision",
    "半精度": "fp16",
    "梯度": "gradient",
    "多卡": "multi gpu",
    "单卡": "single gpu one",
    "多机": "multi node",
    "量化": "quantize quantization",
    "优化器": "optimizer",
    "报错": "error",
    "错误": "error",
    "慢": "slow",
    "速度": "speed slow",
    "编译": "build compile",
    "断点续训": "resume checkpoint",
    "续训": "resume",
    "恢复": "resume",
    "全参": "full fine-tune",
    "全量": "full fine-tune",
    "微调": "fine-tune finetune",
    "训练": "train training",
    "第一步": "first step",
    "步": "step",
    "切分": "partition shard",
    "分片": "partition shard",
    "碎片": "fragmentation",
    "激活": "activation",
    "重计算": "checkpointing recompute",
    "序列长度": "sequence length",
    "长度": "length",
    "参数": "parameter param",
    "配置": "config",
    "模型": "model",
    "卸载": "offload",
    "合并": "merge",
    "推理": "inference generate",
    "生成": "generate",
    "通信": "communication",
    "启动": "launch",
    "指定": "select choose",
    "专家": "expert moe",
    "词表": "vocab embedding resize",
    "扩充": "resize",
    "损失": "loss",
    "不支持": "not supported unsupported",
    "版本": "version",
    "不匹配": "mismatch",
    "数据": "data dataset",
    "预处理": "preprocess tokenize",
    "主进程": "main process rank 0",
    "为什么": "why",
    "没用": "no effect",
    "没效果": "no effect",
    "不降": "no effect",
    "变大": "higher increase",
}
_GLOSS_RE = re.compile("|".join(sorted(map(re.escape, GLOSSARY), key=len, reverse=True)))

STOP_EN = frozenset(
    "a an and are as at be been but by can do does did for from had has have how i if in into is it its "
    "me my no not of on or our so that the their them then there these they this to too was we were what "
    "when where which while who why will with you your just any some get got still even also after before "
    "same like using use used run running ran much many need needs per because should would could does doing "
    "make makes take want know really actually thing things help about there here way whats please anyone".split()
)
# single characters and bigrams that carry no topic (question words, particles); bigrams are what the
# CJK tokenizer emits, so the list is of bigrams
STOP_ZH = frozenset(
    "的 了 是 在 我 你 吗 呢 吧 啊 就 都 也 和 与 或 一个 这个 那个 怎么 什么 还是 没有 请问 为什 么 如何 "
    "可以 是不 不是 一下 有没 能不 不能 这样 那样 然后 但是 就是 好像 感觉 直接 已经 现在 大家 求助 各位 "
    "有人 是否 会不 不会 应该 需要 我们 他们 之后 之前 时候 的时 候就 一直 还有 这么 那么".split()
)

_IDENT = re.compile(r"--?[A-Za-z][\w-]*|[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*")
_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?[a-zA-Z]*")


def normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = _CJK_RUN.sub(lambda m: f" {m.group(0)} ", text)  # "zero-3第一步" -> word boundaries work
    for rx, rep in _VARIANTS:
        text = rx.sub(rep, text)
    return text


def _stem(tok: str) -> str:
    if len(tok) > 4 and tok.endswith("ies"):
        return tok[:-3] + "y"
    if len(tok) > 3 and tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        return tok[:-1]
    return tok


def tokenize(text: str) -> list[str]:
    """Lexical tokens: identifiers whole and in parts, folded variants, CJK bigrams, glossary terms."""
    norm = normalize(text)
    toks: list[str] = []
    # Chinese: glossary expansion on the original run, then character bigrams (unigram if alone)
    for run in _CJK_RUN.findall(norm):
        for m in _GLOSS_RE.findall(run):
            toks.extend(_stem(w) for w in GLOSSARY[m].split() if w not in STOP_EN)
        if len(run) == 1:
            if run not in STOP_ZH:
                toks.append(run)
        else:
            toks.extend(b for b in (run[i : i + 2] for i in range(len(run) - 1)) if b not in STOP_ZH)
    rest = _CJK_RUN.sub(" ", norm)
    for m in _IDENT.finditer(rest):
        tok = m.group(0).lstrip("-")
        if "." in tok or "_" in tok.strip("_"):
            toks.append(tok)
            for part in re.split(r"[._]+", tok):
                if len(part) > 1 and part not in STOP_EN:
                    toks.append(_stem(part))
        elif len(tok) > 1 and tok not in STOP_EN:
            toks.append(_stem(tok))
    for m in _NUM.finditer(rest):
        s = m.group(0)
        if s.endswith(("b", "g", "gb")) or s in ("0", "1", "2", "3"):
            toks.append(s)  # model sizes and memory amounts are informative ("7b", "80g")
    return toks


@dataclass(frozen=True)
class Word:
    """A Latin word of the question as written (lower case), its token, and its runs of letters with their tokens
    (digits, "_", "-", "." split runs: "kohya_ss" is "kohya" and "ss"): what kb.ask.rank asks of a word it may not know."""

    text: str
    token: str
    runs: tuple[tuple[str, str], ...]  # (run, its token)


_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]*")


_PATHLIKE = re.compile(r"\S*[/\\]\S*")  # a URL or a file path: its parts are names of places, not of tools


def latin_words(text: str) -> tuple[Word, ...]:
    """Each Latin word of ``text`` once, in order; not the parts of a URL or a path."""
    out = []
    for w in dict.fromkeys(m.group().lower().rstrip(".-+") for m in _LATIN_WORD.finditer(_PATHLIKE.sub(" ", text))):
        runs = tuple((r, (tokenize(r)[:1] or [r])[0]) for r in re.findall(r"[a-z]+", w))
        out.append(Word(w, (tokenize(w)[:1] or [w])[0], runs))
    return tuple(out)


def word_tokens(words: str) -> frozenset[str]:
    """A word list as the whole-word token ``tokenize`` makes of each word (it stems and folds:
    "bitsandbytes" -> "bitsandbyte", "fine-tune" -> "finetune"; "pin_memory" stays whole, its parts are not added),
    so every listed word can match a question's tokens; Chinese words stay as written (matched in the text)."""
    return frozenset((tokenize(w)[:1] or [w])[0] if w.isascii() else w for w in words.split())


# ---------------------------------------------------------------- pasted tracebacks / logs

_TB_SUBS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\[rank\d+\]:?\s*"), ""),
    (re.compile(r'File "[^"]+", line \d+, in \S+'), "File"),
    (re.compile(r"(?:/[\w.\-+@]+)+/?"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s*(?:[KMGT]i?B)\b"), "<size>"),
    (re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])"), "<n>"),
    (re.compile(r"[ \t]+"), " "),
]


def normalize_traceback(text: str) -> str:
    """Strip what differs between two reports of the same error: ranks, paths, hex, numbers."""
    for rx, rep in _TB_SUBS:
        text = rx.sub(rep, text)
    return text.strip()


def looks_like_log(text: str) -> bool:
    return bool(
        re.search(r"Traceback \(most recent call last\)|\w+(?:Error|Exception):|^\[\d{4}-\d\d-\d\d", text, re.M)
    )


_IDENTS = re.compile(
    r"--[a-z][\w-]*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z]\w*_\w+|[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+|\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b",
    re.ASCII,  # \w must not swallow the Chinese text around a name
)


_CAMEL_API = re.compile(r"^[A-Z][a-z]+[A-Z]")


def looks_like_param(name: str) -> bool:
    """Could this identifier be a parameter, key, flag or API name (not an English word)?

    snake_case, dotted paths and --flags always; CamelCase (``TrainingArguments``) too, but callers
    keep a CamelCase name only when the registry knows it."""
    return "_" in name or "." in name or name.startswith("--") or bool(_CAMEL_API.match(name))


def is_camel_api(name: str) -> bool:
    return bool(_CAMEL_API.match(name)) and "_" not in name and "." not in name


def identifiers(text: str) -> list[str]:
    """Parameter-like names in free text: snake_case, dotted paths, --flags, CamelCase APIs, ENV_VARS."""
    out: list[str] = []
    for s, _, _ in identifier_spans(text):
        if s not in out:
            out.append(s)
    return out


def identifier_spans(text: str) -> list[tuple[str, int, int]]:
    """Every occurrence of a parameter-like name (as ``identifiers`` finds them) with its start and end."""
    out: list[tuple[str, int, int]] = []
    for m in _IDENTS.finditer(text):
        raw = m.group(0)
        s = raw.strip(".")
        if not s or s.startswith(("http", "www")):
            continue
        start = m.start() + (len(raw) - len(raw.lstrip(".")))
        out.append((s, start, start + len(s)))
    return out


# what is not a name to judge: a file name (train.py, ds_config.json), a host name (pytorch.org), an
# abbreviation (e.g., i.e.), anything inside a URL
FILE_EXTS = frozenset(
    "py pyc pyi ipynb json jsonl yaml yml toml cfg ini txt md rst log sh bash zsh bat ps1 pt pth bin ckpt "
    "safetensors gguf onnx pkl pickle npy npz h5 hdf5 csv tsv parquet arrow cpp cc cxx c h hpp cu cuh o so "
    "dll dylib lib exe a whl tar gz tgz zip bz2 xz bak tmp lock html htm css js ts png jpg jpeg svg pdf".split()
)
TLDS = frozenset("org com net io ai dev cn edu gov co uk de jp me info app".split())
ABBREVIATIONS = frozenset("e.g i.e etc vs cf a.k.a w.r.t".split())
_URL = re.compile(r"(?:https?|ftp|file)://\S+|www\.\S+", re.I)


def url_spans(line: str) -> list[tuple[int, int]]:
    """Where the URLs of a line are (for ``is_not_a_name``)."""
    if "://" not in line and "www." not in line.lower():
        return []
    return [(u.start(), u.end()) for u in _URL.finditer(line)]


def is_not_a_name(
    name: str, line: str = "", start: int = 0, end: int = 0, urls: list[tuple[int, int]] | None = None
) -> bool:
    """A token ``identifiers`` found that is not a parameter name at all (file, host, abbreviation, URL).

    ``urls``: ``url_spans(line)``, when the caller asks about many names of one line."""
    low = name.lower()
    if low in ABBREVIATIONS or low.rstrip(".") in ABBREVIATIONS:
        return True
    if "." in name and not name.startswith("-"):
        last = low.rsplit(".", 1)[-1]
        if last in FILE_EXTS:
            return True
        if last in TLDS and name == low:
            return True
    if line:
        spans = url_spans(line) if urls is None else urls
        k = bisect.bisect_right(spans, (start, len(line) + 1)) - 1  # the last URL starting at or before it
        if k >= 0 and spans[k][0] <= start and end <= spans[k][1]:
            return True
    return False
