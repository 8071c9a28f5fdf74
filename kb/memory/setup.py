"""The ``kb mem`` options, declared once: name, type, default, bounds or choices, label and help in English and
Chinese. Every surface builds its form from ``OPTIONS`` (the CLI its click options, the bots their slash-command
and ``key=value`` forms) and every value goes through ``Option.parse``, so the bounds are the same everywhere.

``validate(values)`` checks a mapping of option name -> value (text from a chat form, or typed values from the
CLI) and fills the defaults; ``build_setup`` turns it into ``kb.memory.estimate.Setup``; ``report`` runs the
estimate and returns the contract's ``MemReport`` with the setup echoed back in the report's language.
A bad value raises ``SetupError`` (a ``ValueError``): ``.text(lang)`` says which option, what it accepts and
what it got. Importing this module loads no registry and no estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kb.memory.card import DEFAULT_GPU_MEM_GIB  # re-exported: the card kb assumes

if TYPE_CHECKING:
    from kb.contract import MemReport, SetupValue
    from kb.memory.estimate import Setup

Kind = Literal["model", "count", "int", "float", "choice", "bool"]

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")


class SetupError(ValueError):
    """A bad ``kb mem`` option value: ``option`` names it; ``en`` / ``zh`` say what it accepts and what it got."""

    def __init__(self, option: str, en: str, zh: str):
        super().__init__(f"{option}: {en}" if option else en)
        self.option, self.en, self.zh = option, en, zh

    def text(self, lang: str = "en") -> str:
        reason = self.zh if lang == "zh" else self.en
        if not self.option:
            return reason
        return f"{self.option}：{reason}" if lang == "zh" else f"{self.option}: {reason}"


@dataclass(frozen=True)
class Option:
    """One ``kb mem`` option. ``name`` is the key of chat forms and of ``validate``; the CLI flag is ``--`` plus
    the name with dashes. ``field`` is the ``Setup`` field it sets (``model`` sets the shape or the count)."""

    name: str
    kind: Kind
    default: Any
    label_en: str
    label_zh: str
    help_en: str
    help_zh: str
    field: str = ""  # the Setup field; "" for model / params (resolved together)
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # other keys chat users type (mb, ckpt)
    invert: bool = False  # the Setup field is the negation (eager_attention -> flash_attention)
    negatable: bool = False  # the CLI also has --no-<flag>
    chat: bool = True  # offered in chat forms (params is CLI only: a chat model may be a size already)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def label(self, lang: str = "en") -> str:
        return self.label_zh if lang == "zh" else self.label_en

    def help(self, lang: str = "en") -> str:
        return self.help_zh if lang == "zh" else self.help_en

    def accepts(self, lang: str = "en") -> str:
        """What the option accepts, in words: "an integer from 1 to 100000", "one of bf16, fp16, fp32"."""
        zh = lang == "zh"
        if self.kind == "int":
            return (
                f"{_n(self.min)} 到 {_n(self.max)} 之间的整数"
                if zh
                else f"an integer from {_n(self.min)} to {_n(self.max)}"
            )
        if self.kind == "float":
            return (
                f"{_n(self.min)} 到 {_n(self.max)} 之间的数"
                if zh
                else f"a number from {_n(self.min)} to {_n(self.max)}"
            )
        if self.kind == "choice":
            return ("以下之一：" if zh else "one of ") + ", ".join(self.choices)
        if self.kind == "bool":
            return "true 或 false" if zh else "true or false"
        if self.kind == "count":
            return "参数量，例如 7b、350m、6.74e9" if zh else "a parameter count like 7b, 350m or 6.74e9"
        return "预置模型名或参数量，例如 7b" if zh else "a preset or a size like 7b"

    def parse(self, value: Any) -> Any:
        """The typed value of ``value`` (text from a chat form, or a value the CLI already typed), within bounds.
        None stays None (not given). Raises SetupError."""
        if value is None:
            return None
        if self.kind in ("int", "float"):
            n = self._number(value)
            if not self.min <= n <= self.max:  # type: ignore[operator]
                raise self._bad(value)
            return n
        if self.kind == "choice":
            if value not in self.choices:
                raise self._bad(value)
            return value
        if self.kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in TRUE or text in FALSE:
                return text in TRUE
            raise self._bad(value)
        text = str(value).strip()
        if not text:
            raise self._bad(value)
        if self.kind == "count":
            from kb.memory.estimate import parse_params

            try:
                n = parse_params(text)
            except ValueError:
                raise self._bad(value) from None
            if n < 1:
                raise self._bad(value)
            return text
        return text  # model: resolved by build_setup (presets, sizes, and on the CLI a config.json)

    def _number(self, value: Any) -> float:
        if isinstance(value, bool):
            raise self._bad(value)
        try:
            n = int(str(value).strip()) if self.kind == "int" else float(str(value).strip())
        except ValueError:
            raise self._bad(value) from None
        if self.kind == "float" and not math.isfinite(n):
            raise self._bad(value)
        return n

    def _bad(self, value: Any) -> SetupError:
        return SetupError(
            self.name, f"must be {self.accepts('en')}, got {value!r}", f"必须是{self.accepts('zh')}，收到的是 {value!r}"
        )

    def field_spec(self, lang: str = "en") -> dict[str, Any]:
        """What a chat form needs to draw this option (JSON-ready): name, kind, label, help, default, bounds."""
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "label": self.label(lang),
            "help": self.help(lang),
            "default": self.default,
            "required": self.name == "model",
            "aliases": list(self.aliases),
        }
        if self.kind in ("int", "float"):
            out["min"], out["max"] = self.min, self.max
        if self.kind == "choice":
            out["choices"] = list(self.choices)
        if self.kind == "model":
            from kb.memory.estimate import PRESETS

            out["suggestions"] = list(PRESETS)  # presets; a size like 7b is accepted too
        return out


def _n(x: float | None) -> str:
    return f"{x:g}" if isinstance(x, float) and not x.is_integer() else f"{int(x or 0)}"


# The bounds: the ones the Slack form already had (wide enough for any real job, small enough to refuse typos).
OPTIONS: tuple[Option, ...] = (
    Option(
        "model",
        "model",
        None,
        "model",
        "模型",
        "Preset (llama2-7b, qwen2.5-72b, ...), a config.json, or a size like 7b.",
        "预置模型（llama2-7b、qwen2.5-72b……）、config.json 路径，或参数量，例如 7b。",
    ),
    Option(
        "params",
        "count",
        None,
        "parameters",
        "参数量",
        "Parameter count instead of --model, e.g. 6.74e9.",
        "用参数量代替 --model，例如 6.74e9。",
        field="params",
        chat=False,
    ),
    Option(
        "gpus", "int", 1, "GPUs per node", "每节点 GPU 数", "GPUs per node.", "每个节点的 GPU 数。", "gpus", 1, 100_000
    ),
    Option("nodes", "int", 1, "nodes", "节点数", "Nodes.", "节点数。", "nodes", 1, 100_000),
    Option(
        "gpu_mem",
        "float",
        DEFAULT_GPU_MEM_GIB,
        "GPU memory, GiB",
        "显存（GiB）",
        "GPU memory, GiB (80: an A100/H100 80 GB).",
        "每张卡的显存，GiB（80：A100/H100 80 GB）。",
        "gpu_mem_gib",
        1.0,
        100_000.0,
    ),
    Option(
        "cpu_mem",
        "float",
        None,
        "host RAM per node, GiB",
        "每节点主机内存（GiB）",
        "Host RAM per node, GiB (checks offload).",
        "每个节点的主机内存，GiB（用来检查 offload）。",
        "cpu_mem_gib",
        1.0,
        1_000_000.0,
    ),
    Option("stage", "int", 3, "ZeRO stage", "ZeRO stage", "ZeRO stage.", "ZeRO stage。", "stage", 0, 3),
    Option(
        "offload",
        "choice",
        "none",
        "offload",
        "offload",
        "What is offloaded to CPU.",
        "offload 到 CPU 的部分。",
        "offload",
        choices=("none", "optimizer", "optimizer+param"),
    ),
    Option(
        "precision",
        "choice",
        "bf16",
        "precision",
        "精度",
        "Training precision.",
        "训练精度。",
        "precision",
        choices=("bf16", "fp16", "fp32"),
    ),
    Option("seq", "int", 2048, "sequence length", "序列长度", "Sequence length.", "序列长度。", "seq", 1, 10_000_000),
    Option(
        "micro_batch",
        "int",
        1,
        "micro-batch",
        "micro-batch",
        "Micro-batch per GPU.",
        "每张卡的 micro-batch。",
        "micro_batch",
        1,
        100_000,
        aliases=("mb",),
    ),
    Option(
        "activation_checkpointing",
        "bool",
        False,
        "activation checkpointing",
        "激活检查点",
        "Activation (gradient) checkpointing on.",
        "开启激活检查点（gradient checkpointing）。",
        "activation_checkpointing",
        aliases=("ckpt",),
        negatable=True,
    ),
    Option(
        "eager_attention",
        "bool",
        False,
        "eager attention",
        "eager attention",
        "Attention scores are materialised (no SDPA / flash).",
        "注意力分数会被完整存下（没有用 SDPA / flash）。",
        "flash_attention",
        invert=True,
    ),
    Option(
        "lora_rank",
        "int",
        None,
        "LoRA rank",
        "LoRA rank",
        "LoRA on all linear layers with this rank.",
        "在所有线性层上用这个 rank 的 LoRA。",
        "lora_rank",
        1,
        100_000,
    ),
    Option(
        "qlora",
        "bool",
        False,
        "QLoRA",
        "QLoRA",
        "4-bit (NF4) base with LoRA adapters.",
        "4 位（NF4）基座加 LoRA 适配器。",
        "qlora",
    ),
    Option(
        "optimizer",
        "choice",
        "torch",
        "optimizer",
        "优化器",
        "torch: torch.optim.AdamW (HF Trainer's adamw_torch; its step needs a temporary); fused: DeepSpeed's "
        "FusedAdam (a ds_config optimizer section) or CPU Adam.",
        "torch：torch.optim.AdamW（HF Trainer 的 adamw_torch；它的 step 需要一块临时显存）；fused：DeepSpeed 的 "
        "FusedAdam（ds_config 里写了 optimizer 段）或 CPU Adam。",
        "optimizer",
        choices=("torch", "fused"),
    ),
    Option(
        "expandable_segments",
        "bool",
        False,
        "expandable_segments",
        "expandable_segments",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set.",
        "设置了 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True。",
        "expandable_segments",
    ),
)
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}
KEYS: dict[str, Option] = {**BY_NAME, **{a: o for o in OPTIONS for a in o.aliases}}  # every key a user may type


def option(key: str) -> Option:
    """The option a key names (its name, an alias, or the CLI spelling with dashes). Raises SetupError."""
    o = KEYS.get(key.strip().lower().lstrip("-").replace("-", "_"))
    if o is None:
        known = ", ".join(KEYS)
        raise SetupError("", f"unknown option {key!r} (known: {known})", f"未知选项 {key!r}（可用：{known}）")
    return o


def form_fields(lang: str = "en", chat: bool = True) -> list[dict[str, Any]]:
    """The options a form offers (``chat``: the chat forms' subset), each as ``Option.field_spec``."""
    return [o.field_spec(lang) for o in OPTIONS if o.chat or not chat]


def validate(values: Mapping[str, Any]) -> dict[str, Any]:
    """Every option's typed value (the defaults filled in) from ``values`` (option name or alias -> value;
    None: not given). Raises SetupError on an unknown key, a value out of bounds, or no model at all."""
    out = {o.name: o.default for o in OPTIONS}
    for key, value in values.items():
        o = option(key)
        if value is not None:
            out[o.name] = o.parse(value)
    if not out["model"] and not out["params"]:
        raise SetupError(
            "model",
            "give a model (a preset such as llama2-7b, a config.json or a size like 7b) or a parameter count (params)",
            "请给出模型（预置模型如 llama2-7b、config.json，或参数量如 7b），或参数量（params）",
        )
    return out


def parse_pairs(tokens: Iterable[str]) -> dict[str, str]:
    """``key=value`` tokens (a chat command's text) -> {option name: text}; the first token without ``=`` is the
    model. Raises SetupError on an unknown key or a token that is neither."""
    out: dict[str, str] = {}
    for tok in tokens:
        key, eq, value = tok.partition("=")
        if not eq:
            if "model" in out:
                raise SetupError("", f"{tok!r}: expected key=value", f"{tok!r}：应写成 key=value")
            out["model"] = tok
            continue
        out[option(key).name] = value
    return out


def looks_like_path(model: str) -> bool:
    """A model that names a file (``kb.memory.estimate.resolve_model`` would read it): refused from chat input."""
    m = model.strip()
    return "/" in m or "\\" in m or m.startswith(("~", ".")) or m.lower().endswith(".json")


def build_setup(values: Mapping[str, Any], allow_files: bool = False) -> Setup:
    """``kb.memory.estimate.Setup`` from ``validate``'d values. ``allow_files``: the model may be a config.json
    (the CLI); chat input may not name files on the bot's host. Raises SetupError."""
    from kb.memory.estimate import PRESETS, Setup, parse_params, resolve_model

    model = values.get("model")
    if model:
        presets = ", ".join(PRESETS)
        if not allow_files:
            if looks_like_path(model):
                raise SetupError(
                    "model", f"{model!r}: use a preset or a size like 7b", f"{model!r}：请用预置模型名或参数量，例如 7b"
                )
            if model.strip().lower() not in PRESETS:
                try:
                    parse_params(model)
                except ValueError:
                    raise SetupError(
                        "model",
                        f"unknown model {model!r}: use a preset ({presets}) or a size like 7b",
                        f"未知模型 {model!r}：请用预置模型（{presets}）或参数量，例如 7b",
                    ) from None
        try:
            m = resolve_model(model)
        except ValueError as e:
            raise SetupError("", str(e), str(e)) from None
    else:
        m = parse_params(values["params"])
    shape, count = (None, m) if isinstance(m, int) else (m, None)
    kw = {
        o.field: (not values[o.name] if o.invert else values[o.name])
        for o in OPTIONS
        if o.field and o.field != "params"
    }
    return Setup(shape=shape, params=count, **kw)


def _text(o: Option, value: Any, lang: str) -> str:
    zh = lang == "zh"
    if value is None:
        return "-"
    if o.kind == "bool":
        return ("开" if value else "关") if zh else ("on" if value else "off")
    if o.kind == "float":
        return f"{value:g}"
    return str(value)


def echo(values: Mapping[str, Any], lang: str = "en", given: Iterable[str] = ()) -> list[SetupValue]:
    """The setup as the report shows it: every option with its label in ``lang``, its value and whether the
    user gave it (``given``: option names)."""
    from kb.contract import SetupValue

    got = {option(k).name for k in given}
    return [
        SetupValue(o.name, o.label(lang), values.get(o.name), _text(o, values.get(o.name), lang), o.name in got)
        for o in OPTIONS
    ]


def report(
    values: Mapping[str, Any], lang: str = "en", allow_files: bool = False, given: Iterable[str] | None = None
) -> MemReport:
    """``kb mem`` in one call: validate ``values``, estimate (with the cheapest changes), report in ``lang``.
    ``given`` (default: the keys of ``values`` whose value is not None) marks what the user set.
    Raises SetupError on bad options, ValueError when the estimate cannot be made (LoRA without a shape)."""
    from kb.memory.estimate import estimate_with_changes
    from kb.memory.report import mem_report

    typed = validate(values)
    s = build_setup(typed, allow_files=allow_files)
    e = estimate_with_changes(s)
    return mem_report(
        e, echo(typed, lang, given if given is not None else [k for k, v in values.items() if v is not None]), lang
    )


def setup_for_question(stated: Any, cfg: Any, lang: str = "en") -> tuple[Setup, list[str]] | None:
    """The Setup of ``kb ask --config``: the model the question names (a preset, or a size such as "7b"), the GPUs it
    states (else one, said in the assumptions), and what the config says (stage, offload, precision, micro-batch,
    optimizer). ``stated``: ``kb.ask.question.Stated``; ``cfg``: ``kb.doctor.configs.ParsedConfig``. None when
    the question names no model. The assumptions come in ``lang``."""
    from kb.doctor.configs import facts_from_config, micro_batch, optimizer_kind
    from kb.i18n import t
    from kb.memory.estimate import PRESETS, Setup

    if stated.model is None and stated.params is None:
        return None
    shape = PRESETS.get(stated.model) if stated.model else None
    f = facts_from_config(cfg)
    assumptions: list[str] = []
    gpus = stated.gpus
    if gpus is None:
        gpus = 1
        assumptions.append(t(lang, "mem.assume_one_gpu"))
    offload = {("cpu", "cpu"): "optimizer+param", ("nvme", "nvme"): "optimizer+param"}.get(
        (f.offload_optimizer, f.offload_param), "optimizer" if f.offload_optimizer in ("cpu", "nvme") else "none"
    )
    s = Setup(
        shape=shape,
        params=None if shape else int(stated.params or 0),
        gpus=gpus,
        stage=f.zero_stage or 0,
        offload=offload,
        precision=f.precision or "bf16",
        micro_batch=micro_batch(cfg) or 1,
        gpu_mem_gib=DEFAULT_GPU_MEM_GIB,
        optimizer=optimizer_kind(cfg),
    )
    assumptions.append(t(lang, "mem.assume_setup", seq=s.seq, gpu_mem=s.gpu_mem_gib))
    if shape is None:
        assumptions.append(t(lang, "mem.assume_count_only"))
    return s, assumptions
