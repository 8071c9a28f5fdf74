"""``kb mem``: will it fit? The arithmetic of GPU and host memory for DeepSpeed / LoRA training.

Every term is documented in docs/memory.md with its source:

- model states: DeepSpeed's own estimators, reproduced exactly
  (``estimate_zero2_model_states_mem_needs`` / ``estimate_zero3_model_states_mem_needs``,
  deepspeed 0.19.8 runtime/zero/stage_1_and_2.py:4017 and runtime/zero/stage3.py:4016);
- activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", eq. 1: s*b*h*(34 + 5*a*s/h) bytes per layer without recomputation (16-bit activations,
  no tensor or sequence parallelism); with SDPA / flash attention the a*s^2 score matrices are not
  stored (34*s*b*h); with activation checkpointing each layer keeps its 16-bit input (2*s*b*h) and
  one layer is recomputed at a time; plus the logits (16-bit, the fp32 upcast of the loss and its
  gradient);
- ZeRO buffers from the config defaults (bucket and prefetch sizes, in elements), read from the
  parameter registry (``registry_default``), never typed here;
- a stated allocator / CUDA-context overhead for the fit verdict.

Parameter counts of presets are computed from the published shapes (tests check them against
transformers models built on the meta device).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb.registry import Registry

GiB = 2**30
DEFAULT_GPU_MEM_GIB = 80.0  # the card kb assumes when the user does not say (A100/H100 80 GB)
PROCESS_BASELINE_GIB = 3.0  # host RSS of a CUDA + PyTorch + DeepSpeed process before model states (measured 2-3.5 GiB)
CONTEXT_GIB = 1.0  # CUDA context + cuBLAS/NCCL workspaces, outside torch's allocator (stated, not derived)
FRAGMENTATION = 0.10  # reserved over allocated, for the verdict (stated)


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer in the Llama family (Llama, Mistral, Mixtral, Qwen2)."""

    name: str
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    tie_embeddings: bool = False
    qkv_bias: bool = False
    experts: int = 1  # MoE: experts per layer (Mixtral 8)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def hf_config_fields(self) -> dict[str, int | bool]:
        """The Hugging Face config.json fields of this shape (the inverse of ``shape_from_hf_config``)."""
        out: dict[str, int | bool] = dict(
            vocab_size=self.vocab,
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            tie_word_embeddings=self.tie_embeddings,
        )
        if self.experts > 1:
            out["num_local_experts"] = self.experts
        return out

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        h, kv = self.hidden, self.kv_dim
        attn = h * h + 2 * h * kv + h * h + ((h + 2 * kv) if self.qkv_bias else 0)
        mlp = 3 * h * self.intermediate * self.experts + (h * self.experts if self.experts > 1 else 0)
        return attn + mlp + 2 * h  # two RMSNorm weights

    def params(self) -> int:
        emb = self.vocab * self.hidden
        return emb + (0 if self.tie_embeddings else emb) + self.layers * self.layer_params() + self.hidden

    def largest_layer(self) -> int:
        """Parameters of the largest single module (DeepSpeed's model_to_params: parameters(recurse=False)).

        transformers 5 keeps all experts of a MoE layer as one module with 3-D weights."""
        h = self.hidden
        mlp = 3 * h * self.intermediate * self.experts if self.experts > 1 else h * self.intermediate
        return max(self.vocab * h, mlp, h * h)


PRESETS: dict[str, ModelShape] = {
    s.name: s
    for s in [
        ModelShape("llama2-7b", 32000, 4096, 11008, 32, 32, 32),
        ModelShape("llama2-13b", 32000, 5120, 13824, 40, 40, 40),
        ModelShape("llama2-70b", 32000, 8192, 28672, 80, 64, 8),
        ModelShape("llama3-8b", 128256, 4096, 14336, 32, 32, 8),
        ModelShape("llama3-70b", 128256, 8192, 28672, 80, 64, 8),
        ModelShape("mistral-7b", 32000, 4096, 14336, 32, 32, 8),
        ModelShape("mixtral-8x7b", 32000, 4096, 14336, 32, 32, 8, experts=8),
        ModelShape("qwen2.5-7b", 152064, 3584, 18944, 28, 28, 4, qkv_bias=True),
        ModelShape("qwen2.5-14b", 152064, 5120, 13824, 48, 40, 8, qkv_bias=True),
        ModelShape("qwen2.5-72b", 152064, 8192, 29568, 80, 64, 8, qkv_bias=True),
    ]
}


def shape_from_hf_config(path: Path) -> ModelShape:
    """A ModelShape from a local Hugging Face config.json (Llama / Mistral / Mixtral / Qwen2 fields)."""
    try:
        c = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read config.json: {e}") from None
    try:
        return ModelShape(
            name=str(c.get("_name_or_path") or Path(path).parent.name or "model"),
            vocab=int(c["vocab_size"]),
            hidden=int(c["hidden_size"]),
            intermediate=int(c["intermediate_size"]),
            layers=int(c["num_hidden_layers"]),
            heads=int(c["num_attention_heads"]),
            kv_heads=int(c.get("num_key_value_heads") or c["num_attention_heads"]),
            tie_embeddings=bool(c.get("tie_word_embeddings", False)),
            qkv_bias=bool(c.get("attention_bias", False)) or c.get("model_type") == "qwen2",
            experts=int(c.get("num_local_experts") or 1),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(
            f"{path}: missing or invalid field {e} (need vocab_size, hidden_size, intermediate_size, "
            "num_hidden_layers, num_attention_heads)"
        ) from None


# ---------------------------------------------------------------- defaults, from the parameter registry


def registry_default(rid: str, registry: Registry | None = None) -> Any:
    """The default a DeepSpeed config key (``zero_optimization.reduce_bucket_size``) or estimator kwarg has,
    as the registry records it (``data/registry/``, generated from the package), parsed from its JSON literal.

    ``registry`` defaults to ``kb.registry.default_registry()``, loaded lazily once (importing kb.memory loads
    nothing)."""
    if registry is None:
        from kb.registry import default_registry

        registry = default_registry()
    rec = registry.get(rid if ":" in rid else f"deepspeed:{rid}")
    if rec is None or rec.get("default") in (None, ""):
        raise KeyError(f"the registry records no default for {rid!r}")
    return json.loads(rec["default"])


ESTIMATORS = {
    2: "runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs",
    3: "runtime.zero.stage3.estimate_zero3_model_states_mem_needs",
}


@cache
def additional_buffer_factor(formula: int) -> float:
    """The estimators' ``additional_buffer_factor`` default (CPU side only), from the registry."""
    return float(registry_default(f"{ESTIMATORS[formula]}.additional_buffer_factor"))


# ---------------------------------------------------------------- DeepSpeed's estimators, exactly


def ds_zero2(total_params: int, gpus_per_node: int, nodes: int, cpu_offload: bool) -> tuple[int, int]:
    """(cpu bytes, gpu bytes) as estimate_zero2_model_states_mem_needs computes them."""
    g = nodes * gpus_per_node
    abf = additional_buffer_factor(2)
    if cpu_offload:
        return int(total_params * max(4 * g, 16) * abf), int(2 * total_params)
    return int(total_params * 4 * gpus_per_node * abf), int(2 * total_params + int(18 * total_params / g))


def ds_zero3(
    total_params: int,
    largest: int,
    gpus_per_node: int,
    nodes: int,
    cpu_offload: bool,
    cpu_offload_params: bool,
    zero_init: bool = True,
) -> tuple[int, int]:
    """(cpu bytes, gpu bytes) as estimate_zero3_model_states_mem_needs computes them."""
    g = nodes * gpus_per_node
    gpus_factor = 1 / nodes
    layer = 4 * largest
    abf = additional_buffer_factor(3)
    if cpu_offload:
        if cpu_offload_params:
            gpu = layer
            cpu = total_params * (18 * gpus_factor if zero_init else max(4 * gpus_per_node, 18 * gpus_factor)) * abf
        else:
            gpu = layer + int(2 * total_params / g)
            cpu = total_params * (16 * gpus_factor if zero_init else max(4 * gpus_per_node, 16 * gpus_factor)) * abf
    else:
        gpu = layer + int(18 * total_params / g)
        cpu = largest * 4 * gpus_per_node * abf if zero_init else total_params * 4 * gpus_per_node * abf
    return int(cpu), int(gpu)


@dataclass(frozen=True)
class ModelStates:
    """Model-state bytes (16-bit weights and grads, fp32 master weights, Adam moments) of one setup.

    DeepSpeed has estimators for ZeRO-2 and ZeRO-3 only; stages 0 and 1 are estimated with the ZeRO-2
    formula (stage 0: on one GPU, as nothing is partitioned). ``basis`` says so in words: ``kb mem`` and
    ``kb lint`` (KB014) both print it."""

    stage: int
    gpu_bytes: int  # per GPU
    cpu_bytes: int  # per node, with the estimator's additional_buffer_factor
    formula: int  # the DeepSpeed estimator used: 2 or 3

    @property
    def function(self) -> str:
        return ESTIMATORS[self.formula].rsplit(".", 1)[-1]

    @property
    def basis(self) -> str:
        if self.stage == self.formula:
            return f"DeepSpeed's ZeRO-{self.stage} estimator {self.function}"
        where = " on one GPU" if self.stage == 0 else ""
        return (
            f"DeepSpeed's ZeRO-2 formula {self.function}{where}; DeepSpeed has estimators for ZeRO-2 and ZeRO-3 "
            f"only, so stage {self.stage} is estimated with the ZeRO-2 one"
        )

    @property
    def basis_zh(self) -> str:
        if self.stage == self.formula:
            return f"按 DeepSpeed 自带的 ZeRO-{self.stage} estimator `{self.function}` 计算"
        where = "、单卡" if self.stage == 0 else ""
        return (
            f"按 ZeRO-2 的公式 `{self.function}`{where}计算：DeepSpeed 只有 ZeRO-2 和 ZeRO-3 的 estimator，"
            f"stage {self.stage} 就用 ZeRO-2 的公式估算"
        )


def model_states(
    params: float, stage: int, offload: str = "none", gpus: int = 1, nodes: int = 1, largest: int = 0
) -> ModelStates:
    """Model states per GPU and per node: what ``estimate`` and lint's fit rule (KB014) both use.

    ``offload`` is none | optimizer | optimizer+param (parameter offload only counts at stage 3, as in
    DeepSpeed); ``largest`` is the largest layer's parameter count (0 when unknown: a lower bound at stage 3).
    Stage 0 keeps every state on every GPU: the ZeRO-2 formula on one GPU, no offload, no host figure."""
    off_opt = offload in ("optimizer", "optimizer+param")
    if stage == 3:
        cpu, gpu = ds_zero3(params, largest, gpus, nodes, off_opt, off_opt and offload == "optimizer+param")
        return ModelStates(3, gpu, cpu, 3)
    if stage in (1, 2):
        cpu, gpu = ds_zero2(params, gpus, nodes, off_opt)
        return ModelStates(stage, gpu, cpu, 2)
    _, gpu = ds_zero2(params, 1, 1, False)
    return ModelStates(0, gpu, 0, 2)


def _elements(n: int) -> str:
    """500000000 -> '5e8' (how bucket sizes are written in configs)."""
    mantissa, exp = f"{n:e}".split("e")
    return f"{float(mantissa):g}e{int(exp)}" if n >= 1000 else str(n)


# ---------------------------------------------------------------- the full estimate


@dataclass
class Setup:
    shape: ModelShape | None = None
    params: int | None = None  # when no shape is known (--params N)
    gpus: int = 1  # per node
    nodes: int = 1
    gpu_mem_gib: float = DEFAULT_GPU_MEM_GIB
    cpu_mem_gib: float | None = None  # per node
    stage: int = 3
    offload: str = "none"  # none | optimizer | optimizer+param
    precision: str = "bf16"  # bf16 | fp16 | fp32
    seq: int = 2048
    micro_batch: int = 1
    activation_checkpointing: bool = False
    flash_attention: bool = True  # SDPA / flash: attention scores are not stored
    lora_rank: int | None = None
    qlora: bool = False

    @property
    def world(self) -> int:
        return self.gpus * self.nodes

    @property
    def total_params(self) -> int:
        if self.shape is not None:
            return self.shape.params()
        if self.params is None:
            raise ValueError("give a model shape or a parameter count")
        return self.params


@dataclass
class Estimate:
    setup: dict[str, Any]
    params: int
    trainable_params: int
    gpu: dict[str, float]  # GiB per GPU, by term
    host: dict[str, float]  # GiB per node, by term
    gpu_total_gib: float  # the sum: estimated peak allocated by PyTorch
    gpu_needed_gib: float  # plus allocator fragmentation and CUDA context: compare to the card
    host_total_gib: float
    deepspeed_estimator: dict[str, float] | None
    fits_gpu: bool
    fits_host: bool | None
    host_verdict: str = "unknown"  # fits | tight | does not fit | unknown
    host_min_gib: float = 0.0
    notes: list[str] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)  # {change, cost, change_zh, cost_zh, gpu_needed_gib, ...}
    notes_zh: list[str] = field(default_factory=list)  # the same notes in Chinese (kb ask answers in the query's language)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _lora_trainable(shape: ModelShape, rank: int) -> int:
    """LoRA on every linear layer of attention and MLP (peft target_modules="all-linear")."""
    h, kv, i = shape.hidden, shape.kv_dim, shape.intermediate
    per_layer = rank * ((h + h) + (h + kv) * 2 + (h + h) + 3 * (h + i) * shape.experts)
    return shape.layers * per_layer


def layer_activation_bytes(sh: ModelShape, n: int, b: int, flash: bool = True) -> float:
    """Bytes one Llama-family decoder layer keeps for backward (16-bit training, HF implementation).

    Counted per token (s*b), from what autograd saves: each RMSNorm keeps its fp32 upcast (4h) and
    the 16-bit normalised value the weight multiplies (2h); the q/k/v projections' shared input (2h);
    q after RoPE (2h), k and v (4*kv); the attention output and its contiguous copy for o_proj (4h);
    the MLP input (2h); gate, up, SiLU(gate) and their product (4 x 2i). That is 22h + 4kv + 8i
    bytes, the counterpart for this layer type of Korthikanti et al.'s 34h for a GPT layer (same
    method, eq. 1). Eager attention also keeps the scores and softmax (their 5*a*s per token).
    MoE layers run 2 experts per token (top-2), so the MLP term counts twice.
    """
    per_token = 22 * sh.hidden + 4 * sh.kv_dim + 8 * sh.intermediate * max(1, min(sh.experts, 2))
    extra = 0 if flash else 5 * sh.heads * n * n * b
    return float(n * b * per_token + extra)


def activation_bytes(s: Setup) -> tuple[float, float]:
    """(activations kept for backward, logits and loss buffers) in bytes per GPU."""
    sh = s.shape
    if sh is None:
        return 0.0, 0.0
    b, n, h, L = s.micro_batch, s.seq, sh.hidden, sh.layers
    per_layer = layer_activation_bytes(sh, n, b, s.flash_attention)
    if s.activation_checkpointing:
        acts = L * 2 * n * b * h + per_layer  # each layer's input, plus one layer being recomputed
    else:
        acts = L * per_layer
    logits = n * b * sh.vocab * (2 + 4 + 4)  # 16-bit logits, fp32 upcast for the loss, its gradient
    return float(acts), float(logits)


def estimate(s: Setup) -> Estimate:
    P = s.total_params
    shape = s.shape
    L = shape.largest_layer() if shape else 0
    notes: list[str] = []
    notes_zh: list[str] = []

    def note(en: str, zh: str) -> None:
        notes.append(en)
        notes_zh.append(zh)

    gpu: dict[str, float] = {}
    host: dict[str, float] = {}
    ds_est = None
    bytes_param = {"bf16": 2, "fp16": 2, "fp32": 4}[s.precision]
    trainable = P
    if s.lora_rank or s.qlora:
        if shape is None:
            raise ValueError("LoRA / QLoRA estimates need a model shape (--model)")
        trainable = _lora_trainable(shape, s.lora_rank or 16)
        if s.qlora:
            emb = shape.vocab * shape.hidden * (1 if shape.tie_embeddings else 2)
            base = (P - emb) * (0.5 + 4 / 64) + emb * 2
            note(
                "QLoRA: NF4 linear weights 0.5 byte/param + an fp32 absmax per 64 weights; embeddings and "
                "lm_head stay 16-bit",
                "QLoRA：线性层权重按 NF4 每个参数 0.5 字节，另外每 64 个权重一个 fp32 absmax；embedding 和 lm_head 仍是 16 位",
            )
        else:
            base = P * bytes_param
        gpu["frozen base weights"] = base / GiB
        gpu["adapter weights + grads + Adam states"] = trainable * 16 / GiB
        if s.stage or s.offload != "none":
            note(
                "ZeRO / offload terms are not applied to the LoRA estimate (the base is frozen)",
                "LoRA 估算不计 ZeRO / offload 项（基座权重是冻结的）",
            )
    else:
        off_opt = s.offload in ("optimizer", "optimizer+param")
        if s.offload == "optimizer+param" and s.stage < 3:
            note(
                "offload_param only works at ZeRO stage 3; ignored (as DeepSpeed ignores it)",
                "offload_param 只在 ZeRO stage 3 起作用；这里忽略（DeepSpeed 也会忽略它）",
            )
        ms = model_states(P, s.stage, s.offload, s.gpus, s.nodes, L)
        cpu_b, gpu_b = ms.cpu_bytes, ms.gpu_bytes
        if s.stage == 3 and not off_opt:
            # the ZeRO-3 formula counts 18 bytes/param (grads, fp32 master, Adam) but not the 16-bit
            # parameter partition itself, which zero.Init keeps on the GPU unless params are offloaded
            gpu["16-bit parameter partition (not in DeepSpeed's ZeRO-3 formula)"] = 2 * P / s.world / GiB
        if s.stage in (1, 2, 3):
            ds_est = {
                "gpu_bytes": gpu_b,
                "cpu_bytes": cpu_b,
                "gpu_gib": gpu_b / GiB,
                "cpu_gib": cpu_b / GiB,
                "function": ms.function,
            }
        if s.stage == 1:
            note(
                f"{ms.basis}; ZeRO-1 also keeps full 16-bit gradients, so this is a lower bound",
                f"{ms.basis_zh}；ZeRO-1 还保留完整的 16 位梯度，所以这是下限",
            )
        elif s.stage == 0:
            note(
                f"stage 0 (plain data parallel, mixed-precision Adam): {gpu_b / P:.0f} bytes/param by {ms.basis}",
                f"stage 0（普通数据并行，混合精度 Adam）：每个参数 {gpu_b / P:.0f} 字节，{ms.basis_zh}",
            )
        if s.precision == "fp32":
            note(
                "fp32 training: DeepSpeed's estimators assume 16-bit weights and so does this estimate; "
                "every 2*P term would double",
                "fp32 训练：DeepSpeed 的估算公式按 16 位权重计算，这里也一样；所有 2*P 的项都会翻倍",
            )
        gpu = {"model states (DeepSpeed estimator)": gpu_b / GiB, **gpu}
        host[f"model states (DeepSpeed estimator, x{additional_buffer_factor(ms.formula):g} buffer)"] = cpu_b / GiB
        # ZeRO buffers at the config defaults (elements x 2 bytes, 16-bit gradients)
        bucket = registry_default("zero_optimization.reduce_bucket_size")
        if s.stage == 3:
            prefetch = registry_default("zero_optimization.stage3_prefetch_bucket_size")
            # contiguous_gradients (default on): one reduce_bucket_size buffer (stage3.py:779-784)
            gpu[f"ZeRO-3 contiguous gradient buffer (reduce_bucket_size {_elements(bucket)})"] = (
                min(bucket, P) * 2 / GiB
            )
            gpu[f"ZeRO-3 prefetch (stage3_prefetch_bucket_size {_elements(prefetch)})"] = min(prefetch, P) * 2 / GiB
        elif s.stage in (1, 2):
            # the reduce bucket (two with overlap_comm, which defaults to off below stage 3)
            gpu[f"ZeRO-1/2 reduce bucket (reduce_bucket_size {_elements(bucket)})"] = min(bucket, P) * 2 / GiB
    acts, logits = activation_bytes(s)
    gpu["activations" + (" (checkpointed)" if s.activation_checkpointing else "")] = acts / GiB
    gpu["logits and loss"] = logits / GiB
    gpu_total = sum(gpu.values())
    gpu_needed = gpu_total * (1 + FRAGMENTATION) + CONTEXT_GIB
    host_total = sum(host.values())
    fits_gpu = gpu_needed <= s.gpu_mem_gib
    abf = additional_buffer_factor(3 if s.stage == 3 else 2)
    host_min = host_total / abf + PROCESS_BASELINE_GIB if host_total else 0.0  # without the 1.5 safety factor
    if s.cpu_mem_gib is None or not host_total:
        fits_host = None if s.cpu_mem_gib is None else True
        host_verdict = "unknown" if s.cpu_mem_gib is None else "fits"
    elif host_total <= s.cpu_mem_gib:
        fits_host, host_verdict = True, "fits"
    elif host_min <= s.cpu_mem_gib:
        fits_host, host_verdict = True, "tight"
        note(
            f"host RAM is tight: {host_min:.0f} GiB without DeepSpeed's 1.5x buffer, {host_total:.0f} GiB "
            "with it; measured runs at this edge both survived and were killed (docs/memory.md)",
            f"主机内存很紧：不算 DeepSpeed 的 1.5 倍余量要 {host_min:.0f} GiB，算上要 {host_total:.0f} GiB；"
            "实测在这个边界上的运行有的活下来了，有的被杀掉（docs/memory.md）",
        )
    else:
        fits_host, host_verdict = False, "does not fit"
    if shape is None:
        note(
            "no model shape: activations, logits and the largest-layer term are left out",
            "没有模型结构：激活值、logits 和最大层那一项都没算",
        )
    est = Estimate(
        setup=_setup_dict(s),
        params=P,
        trainable_params=trainable,
        gpu={k: round(v, 3) for k, v in gpu.items()},
        host={k: round(v, 3) for k, v in host.items()},
        gpu_total_gib=round(gpu_total, 2),
        gpu_needed_gib=round(gpu_needed, 2),
        host_total_gib=round(host_total, 2),
        deepspeed_estimator=ds_est,
        fits_gpu=fits_gpu,
        fits_host=fits_host,
        host_verdict=host_verdict,
        host_min_gib=round(host_min, 2),
        notes=notes,
        notes_zh=notes_zh,
    )
    return est


def _setup_dict(s: Setup) -> dict[str, Any]:
    d = asdict(s)
    d["shape"] = s.shape.name if s.shape else None
    return d


# cheapest first: what each change costs in speed or method
# cheapest first: what each change costs in speed or method; (label, change, cost, label in Chinese, cost in Chinese)
CHANGES: list[tuple[str, dict[str, Any], str, str, str]] = [
    (
        "turn on activation checkpointing",
        {"activation_checkpointing": True},
        "~30% more compute (recomputes the forward)",
        "开启激活检查点",
        "计算量多约 30%（反向时重算前向）",
    ),
    (
        "halve the micro-batch (raise gradient accumulation)",
        {"micro_batch": "half"},
        "same effective batch, smaller steps",
        "micro-batch 减半（加大梯度累积）",
        "有效 batch 不变，每步更小",
    ),
    (
        "offload the optimizer to CPU",
        {"offload": "optimizer"},
        "needs host RAM; slower steps (CPU Adam, PCIe)",
        "把优化器 offload 到 CPU",
        "需要主机内存；每步更慢（CPU Adam、PCIe）",
    ),
    (
        "ZeRO-3 with optimizer and parameter offload",
        {"stage": 3, "offload": "optimizer+param"},
        "slowest: parameters cross PCIe every step",
        "ZeRO-3 并 offload 优化器和参数",
        "最慢：每一步参数都要经过 PCIe",
    ),
    ("double the GPUs", {"gpus": "double"}, "more hardware", "GPU 数量翻倍", "需要更多硬件"),
    (
        "LoRA (rank 16) instead of a full fine-tune",
        {"lora_rank": 16},
        "a different method: only adapters train",
        "用 LoRA（rank 16）代替全参微调",
        "换了方法：只训练适配器",
    ),
    (
        "QLoRA (4-bit base, rank 16)",
        {"qlora": True, "lora_rank": 16},
        "a different method, slower matmuls",
        "QLoRA（4 位基座，rank 16）",
        "换了方法，矩阵乘更慢",
    ),
]


def suggest_changes(s: Setup, limit: int = 4) -> list[dict[str, Any]]:
    """The cheapest single changes (then pairs with checkpointing) after which GPU and host both fit."""
    out: list[dict[str, Any]] = []
    tried: list[tuple[str, Setup, str, str, str]] = []
    for label, change, cost, label_zh, cost_zh in CHANGES:
        ns = _apply(s, change)
        if ns is not None:
            tried.append((label, ns, cost, label_zh, cost_zh))
    if not s.activation_checkpointing:
        for label, change, cost, label_zh, cost_zh in CHANGES[1:]:
            ns = _apply(replace(s, activation_checkpointing=True), change)
            if ns is not None:
                tried.append((f"activation checkpointing + {label}", ns, cost, f"激活检查点 + {label_zh}", cost_zh))
    for label, ns, cost, label_zh, cost_zh in tried:
        e = estimate(ns)
        if e.fits_gpu and e.fits_host is not False:
            out.append(
                {
                    "change": label,
                    "cost": cost,
                    "change_zh": label_zh,
                    "cost_zh": cost_zh,
                    "gpu_needed_gib": e.gpu_needed_gib,
                    "host_total_gib": e.host_total_gib,
                }
            )
        if len(out) >= limit:
            break
    return out


def _apply(s: Setup, change: dict[str, Any]) -> Setup | None:
    kw: dict[str, Any] = {}
    for k, v in change.items():
        if v == "half":
            if s.micro_batch <= 1:
                return None
            v = max(1, s.micro_batch // 2)
        if v == "double":
            v = s.gpus * 2
        if getattr(s, k) == v:
            return None
        kw[k] = v
    if "lora_rank" in kw and s.shape is None:
        return None
    return replace(s, **kw)


def estimate_with_changes(s: Setup) -> Estimate:
    e = estimate(s)
    if not e.fits_gpu or e.fits_host is False:
        e.changes = suggest_changes(s)
    return e


def parse_params(text: str) -> int:
    """'7b', '6.74e9', '350m' -> a parameter count."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbt]?)\s*", str(text).lower())
    if not m:
        raise ValueError(f"{text!r} is not a size like 7b, 350m or 6.74e9")
    return int(float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}[m.group(2)])


def resolve_model(text: str) -> ModelShape | int:
    """A preset name, a path to config.json (or its folder), or a size."""
    key = text.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    p = Path(text)
    if p.is_dir():
        p = p / "config.json"
    if p.suffix == ".json" or p.exists():
        return shape_from_hf_config(p)
    try:
        return parse_params(text)
    except ValueError:
        near = ", ".join(PRESETS)
        raise ValueError(
            f"unknown model {text!r}: use a preset ({near}), a config.json path or a size like 7b"
        ) from None
