"""Ranking: every change to an entry's score after retrieval, in one ordered list, then the decision.

Retrieval (kb.ask.retrieve) measures the evidence for each candidate entry: dense similarity (calibrated per
language), lexical coverage and BM25, a matching error signature, the names the question uses. Here that evidence
becomes a score, and the score is adjusted, in this order (``ADJUSTMENTS``; docs/retrieval.md has a row for each,
with what hit@1 / hit@3 and the off-topic declines do without it, from ``bench/ranking.py --ablate``):

    score = W_DENSE * dense' + W_COVER * coverage + W_BM25 * bm25_rel                  (evidence)
          + signature + named parameter + name in title + config finding + conditions + phase not run
          then x no-anchor, x off-task, x other-tool, x thin (not for a matching signature)

The registry's own answers (kb.ask.facts) are scored on the same scale from these constants and ``LIFECYCLE``
(below), and a name only a front end's arguments have anchors a question only when it names that front end
(``anchors``); both are here so that every word list and factor of the ranking stays in this one module.

Then, once and last, on those calibrated scores (``select``): the gate (``ANSWER_THRESHOLD``: below it, no
confident answer), the version mismatch (an entry whose ``applies_to`` excludes the user's versions is ordered as
if its score were x ``VERSION_DEMOTE``, is marked, and keeps its calibrated score: it never turns an answer into
"no confident answer"), entries explaining an error in the user's config first, and the relative keep (results
far below the best are noise, not alternatives).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kb.ask.text import word_tokens

if TYPE_CHECKING:
    from kb.ask.question import Question
    from kb.ask.retrieve import Hit
    from kb.ask.text import Word
    from kb.doctor.configs import SetupFacts

# evidence: the calibrated mix (docs/retrieval.md, "How the gate was set")
W_DENSE, W_COVER, W_BM25 = 0.45, 0.35, 0.20
SIGNATURE_BONUS = 0.25  # a pasted error matches one of the entry's signature regexes
PARAM_BONUS = 0.12  # the question names a parameter the entry is about
TITLE_NAME_BONUS = 0.08  # ... and more when the entry is about that name (it is in the title)
FINDING_BOOST = {"error": 0.20, "warning": 0.10, "info": 0.0}  # kb lint found this in the user's config
CONDITION_BOOST, CONDITION_PENALTY = 0.06, 0.15  # the user's facts satisfy / contradict the entry's conditions
# the conditions that are one setting of the whole run, each value excluding the others (a run is fp16 or bf16, ZeRO-2
# or ZeRO-3); not the method (a QLoRA run is a LoRA run) nor the phase (a save happens "later" in training)
EXCLUSIVE = ("precision", "zero_stage", "offload_optimizer", "offload_param")
NO_ANCHOR_FACTOR = 0.8  # the question names nothing of the field (no anchor term, no registry name)
OFF_TASK_FACTOR = 0.8  # the question is about serving or installing and says nothing of training
OTHER_TOOL_FACTOR = 0.8  # the question names a tool kb knows nothing of, and nothing of the stack kb covers
# Too little to go on: fewer distinct tokens than any question the gate was calibrated on (the entries' own queries
# and the held-out set have 4 or more, docs/retrieval.md), and nothing that places it in kb's field. "please check my
# log" matches every word of some entry (coverage 1.0 over two generic words), which is no evidence.
THIN_TOKENS, THIN_FACTOR = 4, 0.8

ANSWER_THRESHOLD = 0.44  # the gate: below it, "no confident answer"
# results far below the best match are noise, not alternatives: on the entries' own tests a right
# answer ranked 2nd-3rd scores >= 0.78x the top, a near miss <= 0.70x (docs/retrieval.md)
RELATIVE_KEEP = 0.75
VERSION_DEMOTE = 0.8  # an entry whose applies_to excludes the user's versions is ordered as if its score were x0.8


# Terms (after kb.ask.text.tokenize) that place a question in kb's field. A question with none of them and no
# registry name is probably about something else (NO_ANCHOR_FACTOR).
DOMAIN_ANCHORS = word_tokens(
    "deepspeed zero zero0 zero1 zero2 zero3 offload accelerate transformers transformer huggingface trainer "
    "peft lora qlora adapter from_pretrained nccl fp16 bf16 checkpoint oom finetune fine-tune sft pretrain "
    "torchrun ds_config llama mistral mixtral qwen moe optimizer adam gradient_checkpointing gradient "
    "nvme pin_memory partition shard fsdp bitsandbytes quantize overflow loss_scale "
    "微调 训练 显存 全参 多卡 单卡 爆显存 续训 断点续训"
)
# What kb is not about, although the words are near: serving or deploying a model, installing a GPU driver. Concept
# words only: no product names, nothing written from one test question (issue 20 removed "ollama"). A question that
# says one of these and nothing of training nor of a library kb covers (TRAINING_ANCHORS) is discounted
# (OFF_TASK_FACTOR): "vllm serving llama 70b runs out of memory" is not a training OOM, while "flash-attn install
# fails: cuda driver version mismatch" names flash-attn and is kb's.
OFF_TASK = word_tokens(
    "serve serving server deploy deployment driver installer endpoint 部署 推理服务 驱动 安装程序 上线"
)
# The stack kb covers: the registry's packages, the libraries its entries cover besides them (kernels, quantization,
# front ends), TRL's trainers, and the settings only that stack has. A question naming one of these is kb's, whatever
# else it names.
KB_STACK = word_tokens(
    "deepspeed transformers accelerate peft torch pytorch huggingface zero zero0 zero1 zero2 zero3 offload fsdp "
    "ds_config ds_report flash flash_attn bitsandbytes liger apex trl llamafactory axolotl swift "
    "sft dpo ppo grpo rloo kto orpo rlhf"
)
TRAINING_ANCHORS = KB_STACK | word_tokens(
    "train training trainer finetune fine-tune finetuning pretrain pretraining lora qlora "
    "backward optimizer adam gradient loss epoch checkpoint nccl torchrun 微调 训练 续训 全参 预训练 反向"
)
# "Another tool": a word of the question that is a name (no English word: wordfreq's English list, from sources
# outside kb, does not have it) and that kb has never seen (no entry's text, no registry name, not a compound of
# kb's words: "AsyncGRPOTrainer" is async + grpo + trainer). "sglang", "kohya_ss", "comfyui" are such names;
# "mellanox" and "megatron" are English words, "deepspeed" is kb's. No word of this rule was written from a question.
NAME_MIN_LETTERS = 4  # shorter runs of letters are acronyms and units (tp, gpu, 16g)


# How Python's and the packages' own errors and warnings speak of a name's lifecycle (TypeError for an unknown
# keyword, HfArgumentParser's unused keys, pydantic's forbidden extras, deprecation warnings), and the plain words for
# it in both languages. Written from those messages, not from any question kb is tested on.
LIFECYCLE = re.compile(
    r"unexpected keyword argument|got an unexpected|not used by the HfArgumentParser|Extra inputs are not permitted|"
    r"cannot import name|remaining_argv|unrecognized arguments|\breplaced\b|\bdropped\b|"
    r"has no attribute|no longer (?:supported|exists?|available)|\b(?:is|was|are|were|been) (?:deprecated|removed|renamed)\b|"
    r"\bdeprecat\w*|\brenamed?\b|\bremoved\b|\bwhich version\b|\bsince (?:which|what) version\b|"
    r"弃用|废弃|过时|改名|重命名|更名|移除|被删|删掉了|去掉了|去哪了|没有这个参数|不存在|不认|不支持.{0,6}参数|哪个版本|从哪.{0,4}版本",
    re.IGNORECASE,
)


def package_named(package: str, text: str) -> bool:
    """Does ``text`` name ``package``, by its name or a spelling users write (kb.registry.versions.ALIASES: "swift"
    for ms-swift, "llama-factory" for llamafactory)?"""
    from kb.registry.versions import ALIASES

    low = text.lower()
    names = {package, package.replace("-", ""), *(a for a, p in ALIASES.items() if p == package and len(a) > 2)}
    return any(re.search(rf"(?<![a-z0-9]){re.escape(n)}(?![a-z0-9])", low) for n in names)


def anchors(name: str, text: str, view: Any) -> bool:
    """Does a name the registry knows place the question in kb's field? A name of the libraries kb samples does; a
    name only a front end's arguments have (``tensor_parallel_size`` is also vLLM's, ``device`` everyone's) only when
    the question names that front end too."""
    leaf = name.strip().lstrip("-").rsplit(".", 1)[-1]
    recs = view.by_name.get(leaf, [])
    if not recs or any(not r.get("from_timeline") for r in recs):
        return True
    return any(package_named(r["package"], text) for r in recs)


@dataclass
class Context:
    """What the adjustments read besides a candidate's evidence: the question and what the engine found."""

    question: Question
    entries: dict[str, dict[str, Any]]  # the index's entries (conditions, applies_to)
    config_facts: SetupFacts | None = None
    findings: dict[str, list[str]] = field(default_factory=dict)  # entry -> severities of the kb lint findings on it
    named: bool = False  # the question names a registry name (kb.registry.factcheck resolved it)
    units: list[dict[str, Any]] = field(default_factory=list)  # the index's units (for the "why" of a result)
    known: Callable[[str], bool] | None = None  # is this token one kb has (an entry's word, a registry name)?
    typo: Callable[[str], bool] | None = None  # is this word one edit from a word of kb's (a typo, not a name)?
    field_word: Callable[[str], bool] | None = None  # a ds_config section or top-level key? (only ``thin`` reads it)
    _anchored: bool | None = None
    _off_task: bool | None = None
    _other_tools: list[str] | None = None

    @property
    def anchored(self) -> bool:
        if self._anchored is None:
            q = self.question
            self._anchored = (
                self.named
                or any(t in DOMAIN_ANCHORS for t in q.tokens)
                or any(a in q.text for a in DOMAIN_ANCHORS if not a.isascii())
            )
        return self._anchored

    @property
    def off_task(self) -> bool:
        if self._off_task is None:
            q = self.question
            low = q.text.lower()
            off = any(t in OFF_TASK for t in q.tokens) or any(w in q.text for w in OFF_TASK if not w.isascii())
            training = any(t in TRAINING_ANCHORS for t in q.tokens) or any(
                w in low for w in TRAINING_ANCHORS if not w.isascii()
            )
            self._off_task = off and not training
        return self._off_task

    @property
    def thin(self) -> bool:
        """Fewer than THIN_TOKENS distinct tokens and nothing of the field (no anchor, no name, no ds_config section or
        key: "nebula enabled true" is short but says what it is about), no log, no config."""
        q = self.question
        if self.anchored or q.is_log or q.config is not None or len(set(q.tokens)) >= THIN_TOKENS:
            return False
        return not (self.field_word is not None and any(self.field_word(t) for t in q.tokens))

    @property
    def other_tools(self) -> list[str]:
        """The names of tools kb knows nothing of that the question uses, when it names nothing of kb's stack (a
        library, a ZeRO setting, a registry name); else []. Not for a log (its host names and paths are not what
        the user asks about) nor with a config (a config kb reads is of kb's stack)."""
        if self._other_tools is None:
            q = self.question
            stack = self.named or q.is_log or q.config is not None or any(t in KB_STACK for t in q.tokens)
            self._other_tools = [] if stack or self.known is None else foreign_names(q.words, self.known, self.typo)
        return self._other_tools


@dataclass(frozen=True)
class Adjustment:
    """One named change to a candidate's score. ``op`` "add" adds what ``fn`` returns, "scale" multiplies by it;
    ``fn`` returns None (or 0 / 1) when it does not apply and may add why-notes to the hit."""

    name: str
    op: str  # add | scale
    constant: str  # the constant(s), as docs/retrieval.md shows them
    summary: str
    fn: Callable[[Hit, Context], float | None]


def _evidence(h: Hit, ctx: Context) -> float:
    return W_DENSE * h.dense_cal + W_COVER * h.coverage + W_BM25 * h.bm25


def _signature(h: Hit, ctx: Context) -> float | None:
    return SIGNATURE_BONUS if h.signature else None


def _named(h: Hit, ctx: Context) -> float | None:
    return PARAM_BONUS if h.params else None


def _title_named(h: Hit, ctx: Context) -> float | None:
    return TITLE_NAME_BONUS if h.title_named else None


def _finding(h: Hit, ctx: Context) -> float | None:
    if h.entry_id not in ctx.findings:
        return None
    h.notes.append(("why.finding", {}))
    return max(FINDING_BOOST[sev] for sev in ctx.findings[h.entry_id])


def _conditions(h: Hit, ctx: Context) -> float | None:
    """Facts of the user's setup against the entry's conditions: the config's, and what the question states
    ("zero3", "fp16", "lora", "on the first step") where the config says nothing."""
    cond = ctx.entries[h.entry_id].get("conditions")
    if not cond:
        return None
    have_cfg = ctx.config_facts.as_dict() if ctx.config_facts is not None else {}
    delta = 0.0
    for key, have in {**ctx.question.stated.facts.as_dict(), **have_cfg}.items():  # config wins
        if key == "evaluates":
            continue  # a fact about the run's phases (_phase_not_run), not an entry condition
        want = cond.get(key)
        if not want:
            continue
        if have in want:
            delta += CONDITION_BOOST
            h.notes.append(("why.cond_match", {"key": key, "have": have}))
        else:
            delta -= CONDITION_PENALTY
            h.notes.append(("why.cond_mismatch", {"key": key, "have": have, "want": "/".join(map(str, want))}))
    return delta or None


def _phase_not_run(h: Hit, ctx: Context) -> float | None:
    """The entry fails only in a phase the user's run never goes through (its config never evaluates)."""
    cond = ctx.entries[h.entry_id].get("conditions") or {}
    when = cond.get("when")
    if ctx.config_facts is None or ctx.config_facts.evaluates is not False or not when:
        return None
    if set(when) <= {"eval"}:
        h.notes.append(("why.cond_mismatch", {"key": "evaluation", "have": "off", "want": "eval"}))
        return -CONDITION_PENALTY
    return None


def _no_anchor(h: Hit, ctx: Context) -> float | None:
    return None if h.signature or ctx.anchored else NO_ANCHOR_FACTOR


def _off_task_discount(h: Hit, ctx: Context) -> float | None:
    return None if h.signature or not ctx.off_task else OFF_TASK_FACTOR


def _other_tool_discount(h: Hit, ctx: Context) -> float | None:
    return None if h.signature or not ctx.other_tools else OTHER_TOOL_FACTOR


def _thin_discount(h: Hit, ctx: Context) -> float | None:
    return None if h.signature or not ctx.thin else THIN_FACTOR


def _compound(run: str, known: Callable[[str], bool]) -> bool:
    """Is ``run`` (lower case) kb's words end to end, each of 3 letters or more?"""
    ok = [True] + [False] * len(run)
    for end in range(3, len(run) + 1):
        ok[end] = any(ok[start] and known(run[start:end]) for start in range(0, end - 2))
    return ok[-1]


def foreign_names(
    words: tuple[Word, ...], known: Callable[[str], bool], typo: Callable[[str], bool] | None = None
) -> list[str]:
    """The question's words (``Question.words``) that name something kb has never seen and English does not have
    (see NAME_MIN_LETTERS), in order. Case does not split a name: "TensorRT" and "tensorrt" are one. Not a word form
    of a known or English word ("ckpts", "precomputed": ``_inflected``), nor a typo of one of kb's words (``typo``:
    "optimzer", "gradeint")."""
    out: list[str] = []
    for w in words:
        if known(w.token):
            continue
        for run, token in w.runs:
            if len(run) < NAME_MIN_LETTERS or known(token) or _compound(run, known):
                continue
            if _english(run) or _inflected(run, known) or (typo is not None and typo(run)):
                continue
            out.append(w.text)
            break
    return out


_INFLECTIONS = ("ing", "ed", "es", "s", "er", "ers")  # English word endings: the stem is tried as itself and with "e"


def _inflected(run: str, known: Callable[[str], bool]) -> bool:
    for suf in _INFLECTIONS:
        stem = run[: -len(suf)]
        if run.endswith(suf) and len(stem) >= 3:
            for base in (stem, stem + "e"):
                if known(base) or _english(base):
                    return True
    return False


def _english(word: str) -> bool:
    import wordfreq  # ~0.3 s to load its English list, once; only a question with a word kb has never seen gets here

    return wordfreq.zipf_frequency(word, "en") > 0


ADJUSTMENTS: tuple[Adjustment, ...] = (
    Adjustment(
        "evidence", "add", f"{W_DENSE} dense' + {W_COVER} coverage + {W_BM25} bm25", "the calibrated mix", _evidence
    ),
    Adjustment("signature", "add", f"+{SIGNATURE_BONUS}", "a pasted error matches an entry's signature", _signature),
    Adjustment("named-parameter", "add", f"+{PARAM_BONUS}", "the question names a parameter of the entry", _named),
    Adjustment("name-in-title", "add", f"+{TITLE_NAME_BONUS}", "... and the entry's title names it", _title_named),
    Adjustment(
        "config-finding", "add", "+0.20 error, +0.10 warning", "kb lint points to the entry from the config", _finding
    ),
    Adjustment(
        "conditions",
        "add",
        f"+{CONDITION_BOOST} match, -{CONDITION_PENALTY} mismatch",
        "the config's / the question's stage, offload, precision, method, phase",
        _conditions,
    ),
    Adjustment(
        "phase-not-run",
        "add",
        f"-{CONDITION_PENALTY}",
        "an eval-only failure, the config never evaluates",
        _phase_not_run,
    ),
    Adjustment("no-anchor", "scale", f"x{NO_ANCHOR_FACTOR}", "the question names nothing of the field", _no_anchor),
    Adjustment(
        "off-task", "scale", f"x{OFF_TASK_FACTOR}", "serving or deploying, nothing of training", _off_task_discount
    ),
    Adjustment(
        "other-tool",
        "scale",
        f"x{OTHER_TOOL_FACTOR}",
        "names a tool kb has never seen, nothing of kb's stack",
        _other_tool_discount,
    ),
    Adjustment("thin", "scale", f"x{THIN_FACTOR}", f"under {THIN_TOKENS} tokens, nothing of the field", _thin_discount),
)
_OFF: frozenset[str] = frozenset()


@contextlib.contextmanager
def disabled(*names: str) -> Iterator[None]:
    """Switch adjustments off (bench/ranking.py --ablate; tests). Not thread-safe: for measuring only."""
    global _OFF
    unknown = set(names) - {a.name for a in ADJUSTMENTS}
    if unknown:
        raise ValueError(f"unknown adjustment(s): {', '.join(sorted(unknown))}")
    before, _OFF = _OFF, _OFF | set(names)
    try:
        yield
    finally:
        _OFF = before


def score(hits: list[Hit], ctx: Context) -> list[Hit]:
    """Every candidate scored through ``ADJUSTMENTS`` in order, best first (ties by id)."""
    for h in hits:
        s = 0.0
        h.steps = []
        for adj in ADJUSTMENTS:
            if adj.name in _OFF:
                continue
            v = adj.fn(h, ctx)
            if v is None:
                continue
            s = s + v if adj.op == "add" else s * v
            h.steps.append((adj.name, adj.op, round(v, 4)))
        h.score = s
    return sorted(hits, key=lambda h: (-h.score, h.entry_id))


@dataclass
class Selection:
    answered: bool
    results: list[Hit]  # what to show, in order (empty when not answered)
    closest: list[Hit]  # when not answered: the best candidates, marked as closest, not answers
    not_applying: set[str] = field(default_factory=set)  # ids whose applies_to excludes the user's versions


def select(
    ranked: list[Hit],
    k: int,
    pinned: list[str],
    applies: Callable[[str], bool | None],
    n_closest: int = 3,
) -> Selection:
    """The decision, once and last, on the calibrated scores: the gate, the order (contradicted conditions last, the
    version demotion), pinning, the keep.

    ``pinned``: entries explaining error-level findings in the user's config, in finding order (a fact, not a
    guess: they are answers whatever their score). ``applies(entry_id)``: False when the entry's applies_to
    excludes the user's versions."""
    not_applying = {h.entry_id for h in ranked if applies(h.entry_id) is False}
    # an entry for another setting of the run than the user's (EXCLUSIVE: "fp16" against an entry for bf16 runs,
    # ZeRO-2 against one for ZeRO-3) comes after every entry that is not, whatever its score (the embedder hardly
    # tells "fp16" from "bf16"); it keeps its score and its note. Not when the question names a parameter the
    # entry is about or pastes its error: then the setting is the answer ("does zero_quantized_gradients do anything
    # with stage 2?": it is a ZeRO-3 option)
    contradicted = {
        h.entry_id
        for h in ranked
        if not (h.params or h.signature)
        and any(key == "why.cond_mismatch" and f.get("key") in EXCLUSIVE for key, f in h.notes)
    }
    ordered = sorted(
        ranked,
        key=lambda h: (
            h.entry_id in contradicted,
            -(h.score * VERSION_DEMOTE if h.entry_id in not_applying else h.score),
            h.entry_id,
        ),
    )
    answered = bool(ranked) and (ranked[0].score >= ANSWER_THRESHOLD or bool(pinned))
    if not answered:
        return Selection(False, [], ordered[:n_closest], not_applying)
    first = [h for eid in pinned for h in ordered if h.entry_id == eid][:k]
    rest = [h for h in ordered if h.entry_id not in pinned]
    keep = list(first)
    # the keep is relative to the best entry for the user's setting, when one passes the gate (an entry for another
    # setting neither sets the bar nor hides the others)
    own = [h for h in rest if h.entry_id not in contradicted]
    best_own = max((h.score for h in own), default=0.0)
    best = best_own if best_own >= ANSWER_THRESHOLD else max((h.score for h in rest), default=0.0)
    if best >= ANSWER_THRESHOLD:
        keep += [h for h in rest if h.score >= best * RELATIVE_KEEP][: max(0, k - len(keep))]
    return Selection(True, keep, [], not_applying)


def steps(h: Hit) -> list[Any]:
    """How a hit's score was made, as the contract's RankSteps (``Result.rank``)."""
    from kb.contract import RankStep

    return [RankStep(name, op, value) for name, op, value in h.steps]  # type: ignore[arg-type]


def why(h: Hit, ctx: Context, lang: str) -> str:
    """One line saying what matched, and what the adjustments found (the config, the stated facts)."""
    from kb.i18n import t

    parts: list[str] = []
    if h.signature:
        parts.append(t(lang, "why.signature", pattern=h.signature[:60]))
    if h.params:
        parts.append(t(lang, "why.names", names=", ".join(dict.fromkeys(h.params))))
    if h.dense_unit is not None:
        u = ctx.units[h.dense_unit]
        unit = t(lang, f"unit.{u['kind']}")
        parts.append(t(lang, "why.dense", unit=unit, text=_clip(u["text"]), cos=f"{h.dense:.2f}"))
    if h.bm25_unit is not None and h.bm25_unit != h.dense_unit:
        u = ctx.units[h.bm25_unit]
        parts.append(t(lang, "why.words", unit=t(lang, f"unit.{u['kind']}"), text=_clip(u["text"])))
    if h.matched_terms:
        parts.append(t(lang, "why.terms", terms=" ".join(h.matched_terms[:8])))
    parts.extend(t(lang, key, **fields) for key, fields in h.notes)
    return ("；" if lang == "zh" else "; ").join(parts)


def _clip(s: str, n: int = 70) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"
