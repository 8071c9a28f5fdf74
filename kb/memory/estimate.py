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

from kb.memory.card import DEFAULT_GPU_MEM_GIB  # re-exported: the card kb assumes

if TYPE_CHECKING:
    from kb.registry.store import Registry

GiB = 2**30

PROCESS_BASELINE_GIB = 2.0  # host RSS of a CUDA + torch + DeepSpeed training process without offload (measured 1.8-2.2)
CONTEXT_GIB = 1.0  # CUDA context + cuBLAS/NCCL workspaces, outside torch's allocator (stated, not derived)


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

    ``registry`` defaults to ``kb.registry.store.default_registry()``, loaded lazily once (importing kb.memory.estimate loads
    nothing)."""
    if registry is None:
        from kb.registry.store import default_registry

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
        return self._bases()[0]

    @property
    def basis_zh(self) -> str:
        return self._bases()[1]

    def _bases(self) -> tuple[str, str]:
        """Which DeepSpeed estimator the figure comes from, in English and in Chinese."""
        fn, stage = self.function, self.stage
        if stage == self.formula:
            return (
                f"DeepSpeed's ZeRO-{stage} estimator {fn}",
                f"按 DeepSpeed 自带的 ZeRO-{stage} estimator `{fn}` 计算",
            )
        where, where_zh = (" on one GPU", "、单卡") if stage == 0 else ("", "")
        return (
            f"DeepSpeed's ZeRO-2 formula {fn}{where}; DeepSpeed has estimators for ZeRO-2 and ZeRO-3 "
            f"only, so stage {stage} is estimated with the ZeRO-2 one",
            f"按 ZeRO-2 的公式 `{fn}`{where_zh}计算：DeepSpeed 只有 ZeRO-2 和 ZeRO-3 的 estimator，"
            f"stage {stage} 就用 ZeRO-2 的公式估算",
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
    optimizer: str = "torch"  # torch (torch.optim.AdamW, foreach) | fused (DeepSpeed's FusedAdam / CPU Adam)
    expandable_segments: bool = False  # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True

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

    @property
    def lora(self) -> bool:
        return bool(self.lora_rank or self.qlora)


@dataclass
class Term:
    """One tensor family in GPU or host memory: its bytes, the formula in bytes per parameter (or per token) with
    the numbers filled in, where the formula comes from, and the phases in which it is alive."""

    key: str  # stable id (answers and tests use it)
    label: str
    label_zh: str
    gib: float
    formula: str
    source: str
    phases: tuple[str, ...]  # "rest" = from initialize on; else the transient phases it belongs to

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "gib": round(self.gib, 3), "phases": list(self.phases)}


# The phases a training step goes through, in order; "rest" terms are alive in all phases after "initialize".
PHASES = ("build", "initialize", "forward/backward", "optimizer step")
PHASE_ZH = {
    "build": "建模",
    "initialize": "deepspeed.initialize",
    "forward/backward": "前向/反向",
    "optimizer step": "优化器 step",
}


@dataclass
class Estimate:
    setup: dict[str, Any]
    params: int
    trainable_params: int
    gpu: dict[str, float]  # GiB per GPU, by term, in the peak phase
    host: dict[str, float]  # GiB per node, by term
    gpu_total_gib: float  # the peak over phases: estimated peak allocated by PyTorch
    gpu_needed_gib: float  # plus the CUDA context: compared to the card for fits / does not fit
    host_total_gib: float
    deepspeed_estimator: dict[str, float] | None
    fits_gpu: bool
    fits_host: bool | None
    host_verdict: str = "unknown"  # fits | tight | does not fit | unknown
    gpu_verdict: str = "fits"  # fits | tight (fits by allocation, not with the allocator's reserve) | does not fit
    peak_phase: str = ""
    reserved_gib: float = 0.0  # expected peak reserved: peak allocated x the measured reserved/allocated ratio
    phases: list[dict[str, Any]] = field(default_factory=list)  # [{phase, phase_zh, gib, terms}]
    terms: list[dict[str, Any]] = field(default_factory=list)  # every GPU term (Term.to_dict), for --explain
    host_terms: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(
        default_factory=list
    )  # {change, cost, change_zh, cost_zh, gpu_needed_gib, ...}
    notes_zh: list[str] = field(
        default_factory=list
    )  # the same notes in Chinese (kb ask answers in the query's language)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _lora_trainable(shape: ModelShape, rank: int) -> int:
    """LoRA on every linear layer of attention and MLP (peft target_modules="all-linear")."""
    h, kv, i = shape.hidden, shape.kv_dim, shape.intermediate
    per_layer = rank * ((h + h) + (h + kv) * 2 + (h + h) + 3 * (h + i) * shape.experts)
    return shape.layers * per_layer


EAGER_SCORE_BYTES = 6  # per attention score kept by eager attention: fp32 softmax output + its 16-bit copy


def layer_activation_bytes(sh: ModelShape, n: int, b: int, flash: bool = True) -> float:
    """Bytes one Llama-family decoder layer keeps for backward (16-bit training, HF implementation).

    Counted per token (s*b), from what autograd saves: each RMSNorm keeps its fp32 upcast (4h) and
    the 16-bit normalised value the weight multiplies (2h); the q/k/v projections' shared input (2h);
    q after RoPE (2h), k and v (4*kv); the attention output and its contiguous copy for o_proj (4h);
    the MLP input (2h); gate, up, SiLU(gate) and their product (4 x 2i). That is 22h + 4kv + 8i
    bytes, the counterpart for this layer type of Korthikanti et al.'s 34h for a GPT layer (same
    method, eq. 1). Eager attention also keeps the fp32 softmax output and its 16-bit copy: 6*a*s per token
    (Korthikanti's GPT layer has 5*a*s; measured 5.99 (MHA) and 6.37 (GQA, at 512 tokens) on transformers 5.24, bench/saved_activations.py).
    MoE layers run 2 experts per token (top-2), so the MLP term counts twice.
    """
    per_token = 22 * sh.hidden + 4 * sh.kv_dim + 8 * sh.intermediate * max(1, min(sh.experts, 2))
    extra = 0 if flash else EAGER_SCORE_BYTES * sh.heads * n * n * b
    return float(n * b * per_token + extra)


# peft keeps LoRA adapters in fp32 (get_peft_model's autocast_adapter_dtype=True) and casts each adapted layer's
# input to the adapter dtype for lora_A, which saves that fp32 copy for backward. Measured with
# saved_tensors_hooks on transformers 5.24 / peft 0.21.2 (bench/saved_activations.py): 2.96 bytes per token per
# (6h + i) per layer more than with bf16 adapters; on the H200 (run d, TinyLlama, micro-batch 4): 3.19.
LORA_FP32_INPUT_BYTES = 3
# The loss's share of the peak, per token and vocabulary entry: the 16-bit logits (2), their fp32 upcast kept by
# log_softmax (4), its fp32 gradient (4) and the 16-bit gradient into lm_head (2); transformers' ForCausalLMLoss
# upcasts the logits (loss/loss_utils.py). Measured 11.4-12.9 bytes on runs d.
LOGIT_BYTES = 12
# Reserved over allocated at the peak: median of runs a-d without expandable_segments (range 1.04-1.56), and
# the larger of the two runs with it (1.03, 1.10). Over the card by reservation but not by allocation = tight.
RESERVED_RATIO = 1.25
EXPANDABLE_RATIO = 1.10


def activation_bytes(s: Setup) -> tuple[float, float]:
    """(activations kept for backward, logits and loss at their peak) in bytes per GPU."""
    sh = s.shape
    if sh is None:
        return 0.0, 0.0
    b, n, h, L = s.micro_batch, s.seq, sh.hidden, sh.layers
    per_layer = layer_activation_bytes(sh, n, b, s.flash_attention)
    if s.lora:
        per_layer += LORA_FP32_INPUT_BYTES * n * b * (6 * h + sh.intermediate * sh.experts)
    if s.activation_checkpointing:
        acts = L * 2 * n * b * h + per_layer  # each layer's input, plus one layer being recomputed
    else:
        acts = L * per_layer
    logits = n * b * sh.vocab * LOGIT_BYTES
    return float(acts), float(logits)


def param_order(shape: ModelShape) -> list[int]:
    """Parameter sizes in model.parameters() order for the HF Llama family (embeddings, per layer q, k, v, o,
    gate, up, down, the two norms, then the final norm and an untied lm_head): what ZeRO-3's sub-groups walk."""
    h, kv, i = shape.hidden, shape.kv_dim, shape.intermediate
    layer: list[int] = [h * h, kv * h, kv * h] if not shape.qkv_bias else [h * h, h, kv * h, kv, kv * h, kv]
    layer += [h * h]
    if shape.experts > 1:
        layer += [shape.experts * h, 3 * shape.experts * h * i]  # router, then the experts' 3-D weights
    else:
        layer += [h * i, h * i, h * i]
    layer += [h, h]
    out = [shape.vocab * h] + layer * shape.layers + [h]
    if not shape.tie_embeddings:
        out.append(shape.vocab * h)
    return out


def sub_groups(sizes: list[int], sub_group_size: int, world: int) -> list[int]:
    """ZeRO-3's optimizer sub-groups in elements per rank, as stage3.py _create_fp16_sub_groups builds them:
    parameters in order, each rank's partition (ceil(numel / world)), a group closes once it reaches
    sub_group_size (so a group can exceed it by up to one parameter)."""
    parts = [-(-n // world) for n in sizes]
    if sub_group_size >= sum(parts):
        return [sum(parts)]
    out, cur = [], 0
    for p in parts:
        cur += p
        if cur >= sub_group_size:
            out.append(cur)
            cur = 0
    if cur:
        out.append(cur)
    return out


def pinned(nbytes: float) -> float:
    """What a pinned host buffer really takes: torch's caching host allocator rounds every request up to the next
    power of two (ATen/core/CachingHostAllocator.h, c10::llvm::PowerOf2Ceil)."""
    n = int(nbytes)
    return float(1 << (n - 1).bit_length()) if n > 0 else 0.0


DS = "deepspeed 0.19.8 runtime/zero/"
SRC = {
    "zero3_param": DS + "partition_parameters.py (zero.Init keeps each parameter's 16-bit partition, ds_tensor)",
    "zero3_grad_buffer": DS + "stage3.py:789-795 (grad_partitions_flat_buffer; gradient_accumulation_dtype is the "
    "model dtype unless grad_accum_dtype is set, runtime/engine.py:1806)",
    "zero3_master": DS + "stage3.py:1168-1172 (_create_fp32_partitions: an fp32 copy of each sub-group)",
    "zero3_ipg": DS + "stage3.py:779-784 (one reduce_bucket_size buffer with contiguous_gradients, the default)",
    "zero3_fp32_grad": DS + "stage3.py:2683-2693 (_prepare_fp32_grad_for_sub_group: the sub-group's 16-bit "
    "gradients flattened, then converted to fp32) and stage3.py:1210-1233 (sub-groups)",
    "zero3_gather": DS + "stage3.py:4027 (the estimator's own 4 x largest layer: gathered 16-bit weights and their "
    "full 16-bit gradient before reduce-scatter) + stage3_prefetch_bucket_size",
    "zero2_params": DS + "stage_1_and_2.py (every rank keeps the full 16-bit model; the flat bit16 groups)",
    "zero2_master": DS + "stage_1_and_2.py:560-561 (an fp32 clone of the rank's partition)",
    "zero2_fp32_grad": DS + "stage_1_and_2.py:3109-3118 (the partition's 16-bit gradients flattened, then "
    "converted to fp32 in step)",
    "zero2_gpu_offload_buf": DS + "stage_1_and_2.py:659-661 (temp_grad_buffer_for_gpu_offload, largest parameter)",
    "adam": "torch.optim.AdamW / DeepSpeed FusedAdam and CPU Adam: exp_avg and exp_avg_sq in fp32, created at "
    "the first step",
    "torch_adam_tmp": "torch/optim/adamw.py (_multi_tensor_adamw: torch._foreach_sqrt(exp_avg_sqs) makes an fp32 "
    "temporary the size of the group); FusedAdam updates in place",
    "host_zero2": DS + "stage_1_and_2.py:560-573 (pinned fp32 master and 16-bit buffer), :656-658 (pinned "
    "temp gradient buffer), :937-941 (pinned fp32 gradient)",
    "host_zero3": DS + "stage3.py:789-795 (pinned 16-bit gradient buffer), :1157-1160 (fp32 master on CPU), "
    ":1338-1342 (a pinned fp32 gradient per sub-group)",
    "host_param": DS + "stage3.py:906 (param offload: each sub-group's 16-bit parameters pinned on CPU)",
    "pinned": "ATen/core/CachingHostAllocator.h (pinned blocks rounded up to a power of two)",
    "acts": "Korthikanti et al. 2022 eq. 1 method, for the HF Llama layer (kb.memory.estimate.layer_activation_bytes); "
    "checked with saved_tensors_hooks (bench/saved_activations.py)",
    "lora_acts": "peft get_peft_model(autocast_adapter_dtype=True) + LoraLayer._cast_input_dtype; measured "
    "(bench/saved_activations.py, run d)",
    "logits": "transformers loss/loss_utils.py ForCausalLMLoss (logits.float()); measured 11.4-12.9 bytes on run d",
    "logits_held": "the training loop's outputs (model(...).logits) stay referenced until the step, as in "
    "DeepSpeed's own training loop and bench/gpu_memory.py; HF Trainer's compute_loss drops them",
    "qlora": "bitsandbytes Params4bit: 2 NF4 weights per byte, one 8-bit absmax per 64 weights with double "
    "quantization (+ fp32 absmax per 256 blocks); embeddings, norms and lm_head stay 16-bit",
    "qlora_build": "peft prepare_model_for_kbit_training casts every non-4-bit parameter to fp32 "
    "(peft/utils/other.py); deepspeed.initialize casts them back to 16-bit (measured: run d)",
    "baseline": "measured: host RSS of a CUDA + torch + DeepSpeed training process without offload, 1.8-2.2 GiB "
    "(runs a-d)",
}


def _src(keys: str) -> str:
    """'a; b' -> the SRC texts of a and b joined (a key not in SRC is kept as written)."""
    return "; ".join(SRC.get(k, k) for k in keys.split("; "))


class _Acc:
    """Collects GPU and host terms as they are derived."""

    def __init__(self) -> None:
        self.gpu: list[Term] = []
        self.host: list[Term] = []

    def g(self, key, label, label_zh, nbytes, formula, source, phases=("rest",)) -> None:
        if nbytes > 0:
            self.gpu.append(Term(key, label, label_zh, nbytes / GiB, formula, _src(source), phases))

    def h(self, key, label, label_zh, nbytes, formula, source) -> None:
        if nbytes > 0:
            self.host.append(Term(key, label, label_zh, nbytes / GiB, formula, _src(source), ("rest",)))


def _b(x: float) -> str:
    """Bytes per parameter, as written in formulas."""
    return f"{x:g}"


def _zero3_bucket(a: _Acc) -> None:
    """ZeRO-3's gradient bucket: reduce_bucket_size elements whatever the model size (stage3.py:779-784)."""
    bucket = registry_default("zero_optimization.reduce_bucket_size")
    a.g(
        "ipg_bucket",
        f"ZeRO-3 gradient bucket (reduce_bucket_size {_elements(bucket)})",
        f"ZeRO-3 梯度桶（reduce_bucket_size {_elements(bucket)}）",
        2 * bucket,
        f"2 x {bucket:,}",
        "zero3_ipg",
    )


def _gpu_terms(s: Setup, a: _Acc, P: int, T: int) -> None:
    """Everything on one GPU, by phase. P: parameters, T: trainable ones (P for a full fine-tune)."""
    W, sh = s.world, s.shape
    w = f" / {W} GPUs" if W > 1 else ""
    off_opt = s.offload in ("optimizer", "optimizer+param")
    off_par = s.offload == "optimizer+param" and s.stage == 3
    torch_adam = s.optimizer == "torch" and not off_opt
    L = sh.largest_layer() if sh else 0
    F = P - T  # frozen (LoRA base)
    # the model's own weights
    if s.qlora and sh is not None:
        emb = sh.vocab * sh.hidden * (1 if sh.tie_embeddings else 2)
        small = emb + (2 * sh.layers + 1) * sh.hidden
        lin = P - small
        qbytes = lin * (0.5 + 1 / 64 + 4 / (64 * 256))
        div = W if s.stage == 3 else 1
        a.g(
            "base_4bit",
            "frozen base, 4-bit NF4 with its quantization state" + (" (partitioned)" if div > 1 else ""),
            "冻结的 4 位 NF4 基座及量化状态" + ("（已分片）" if div > 1 else ""),
            qbytes / div,
            f"{lin:,} linear weights x (0.5 + 1/64 + 4/16384) bytes{w if div > 1 else ''}",
            "qlora",
        )
        a.g(
            "base_16bit",
            "embeddings, norms (16-bit, frozen)",
            "embedding、norm（16 位，冻结）",
            2 * small / div,
            f"2 x {small:,}{w if div > 1 else ''}",
            "qlora",
        )
        a.g(
            "qlora_fp32_cast",
            "non-4-bit parameters upcast to fp32 before deepspeed.initialize",
            "deepspeed.initialize 之前非 4 位参数被转成 fp32",
            2 * small,
            f"(4 - 2) x {small:,}",
            "qlora_build",
            ("build",),
        )
    elif s.lora:
        div = W if s.stage == 3 else 1
        a.g(
            "base_16bit",
            "frozen base weights (16-bit)" + (" (partitioned)" if div > 1 else ""),
            "冻结的基座权重（16 位）" + ("（已分片）" if div > 1 else ""),
            2 * F / div,
            f"2 x {F:,}{w if div > 1 else ''}",
            "zero3_param" if s.stage == 3 else "zero2_params",
        )
    if s.lora:
        a.g(
            "adapters",
            "LoRA adapters: weights, grads, fp32 master, Adam states",
            "LoRA 适配器：权重、梯度、fp32 主权重、Adam 状态",
            16 * T / (W if s.stage >= 1 else 1),
            f"(2 + 2 + 4 + 8) x {T:,} trainable{w}",
            "adam",
        )
        if s.stage == 3:
            _zero3_bucket(a)
        fp32 = 4 * T / max(W, 1)
        a.g(
            "step_fp32_grad",
            "fp32 gradient of the adapters in step()",
            "step() 中适配器的 fp32 梯度",
            fp32 + (fp32 if s.optimizer == "torch" else 0),
            f"(4{' + 4' if s.optimizer == 'torch' else ''}) x {T:,}{w}",
            "zero3_fp32_grad" if s.stage == 3 else "zero2_fp32_grad",
            ("optimizer step",),
        )
    elif s.stage == 3:
        a.g(
            "params16",
            "16-bit parameters (partitioned)" if not off_par else "",
            "16 位参数（已分片）",
            0 if off_par else 2 * P / W,
            f"2 x {P:,}{w}",
            "zero3_param",
        )
        _zero3_bucket(a)
        if not off_opt:
            a.g(
                "grads16",
                "16-bit gradient partitions",
                "16 位梯度分片",
                2 * P / W,
                f"2 x {P:,}{w}",
                "zero3_grad_buffer",
            )
            a.g("master32", "fp32 master weights", "fp32 主权重", 4 * P / W, f"4 x {P:,}{w}", "zero3_master")
            a.g(
                "adam",
                "Adam states (exp_avg, exp_avg_sq)",
                "Adam 状态（exp_avg、exp_avg_sq）",
                8 * P / W,
                f"8 x {P:,}{w}",
                "adam",
                ("forward/backward", "optimizer step"),
            )
            sgs = registry_default("zero_optimization.sub_group_size")
            groups = sub_groups(param_order(sh), sgs, W) if sh else [min(sgs, -(-P // W))]
            g = max(groups)
            k = 4 if torch_adam else 0
            a.g(
                "step_fp32_grad",
                f"step(): fp32 gradient of the largest sub-group (sub_group_size {_elements(sgs)})"
                + (" + torch AdamW's temporary" if k else ""),
                f"step()：最大子组的 fp32 梯度（sub_group_size {_elements(sgs)}）"
                + ("+ torch AdamW 的临时张量" if k else ""),
                max(6 * g, (4 + k) * g),
                f"max(2 + 4, 4 + {k}) x {g:,} elements ({len(groups)} sub-groups)",
                "zero3_fp32_grad" + ("; torch_adam_tmp" if k else ""),
                ("optimizer step",),
            )
    else:  # stages 0-2
        full = s.stage == 0
        Wd = 1 if full else W
        wd = "" if full else w
        a.g(
            "params16",
            "16-bit parameters (full copy on every GPU)",
            "16 位参数（每张卡一份完整副本）",
            2 * P,
            f"2 x {P:,}",
            "zero2_params",
        )
        if off_opt:
            largest = max(param_order(sh)) if sh else 0
            a.g(
                "offload_grad_buf",
                "16-bit gradient buffer for the CPU copy (largest parameter)",
                "拷到 CPU 前的 16 位梯度缓冲（最大的参数）",
                2 * largest,
                f"2 x {largest:,}",
                "zero2_gpu_offload_buf",
            )
        else:
            a.g(
                "master32",
                "fp32 master weights" + (" (partitioned)" if Wd > 1 else ""),
                "fp32 主权重",
                4 * P / Wd,
                f"4 x {P:,}{wd}",
                "zero2_master",
            )
            a.g(
                "adam",
                "Adam states (exp_avg, exp_avg_sq)",
                "Adam 状态（exp_avg、exp_avg_sq）",
                8 * P / Wd,
                f"8 x {P:,}{wd}",
                "adam",
                ("forward/backward", "optimizer step"),
            )
            k = 4 if torch_adam else 0
            gr = 2 * P if s.stage < 2 else 2 * P / W
            a.g(
                "step_fp32_grad",
                "step(): 16-bit gradients + their flat fp32 copy" + (" + torch AdamW's temporary" if k else ""),
                "step()：16 位梯度 + 展平后的 fp32 副本" + ("+ torch AdamW 的临时张量" if k else ""),
                gr + max(6 * P / Wd, (4 + k) * P / Wd),
                f"2 x {P:,}{'' if s.stage < 2 else w} + max(2 + 4, 4 + {k}) x {P:,}{wd}",
                "zero2_fp32_grad" + ("; torch_adam_tmp" if k else ""),
                ("optimizer step",),
            )
    # forward and backward
    acts, logits = activation_bytes(s)
    if sh is not None:
        per = "22h + 4kv + 8i" + (f" + {LORA_FP32_INPUT_BYTES}(6h + i)" if s.lora else "")
        if s.activation_checkpointing:
            f_acts = (
                f"{sh.layers} layers x 2h x {s.seq * s.micro_batch:,} tokens + one layer recomputed ({per} per token)"
            )
        else:
            f_acts = f"{sh.layers} layers x ({per}) bytes x {s.seq * s.micro_batch:,} tokens"
        a.g(
            "activations",
            "activations" + (" (checkpointed)" if s.activation_checkpointing else ""),
            "激活值" + ("（已开启检查点）" if s.activation_checkpointing else ""),
            acts,
            f_acts,
            "acts" + ("; lora_acts" if s.lora else ""),
            ("forward/backward",),
        )
        a.g(
            "logits",
            "logits and loss",
            "logits 和 loss",
            logits,
            f"{LOGIT_BYTES} x {s.seq * s.micro_batch:,} tokens x {sh.vocab:,} vocab",
            "logits",
            ("forward/backward",),
        )
        a.g(
            "logits_held",
            "16-bit logits still referenced by the loop's outputs",
            "训练循环仍持有的 16 位 logits",
            2 * s.seq * s.micro_batch * sh.vocab,
            f"2 x {s.seq * s.micro_batch:,} x {sh.vocab:,}",
            "logits_held",
            ("optimizer step",),
        )
    if s.stage == 3:
        prefetch = registry_default("zero_optimization.stage3_prefetch_bucket_size")
        gl = (2 if s.lora else 4) * L
        a.g(
            "gathered",
            f"ZeRO-3 gathered weights: largest layer + prefetch (stage3_prefetch_bucket_size {_elements(prefetch)})",
            f"ZeRO-3 聚合的权重：最大层 + 预取（stage3_prefetch_bucket_size {_elements(prefetch)}）",
            gl + 2 * min(prefetch, P),
            f"{2 if s.lora else 4} x {L:,} + 2 x {min(prefetch, P):,}",
            "zero3_gather",
            ("forward/backward",),
        )


def _host_terms(s: Setup, a: _Acc, P: int, T: int) -> None:
    """Host RAM per node: the offloaded optimizer (and parameters), pinned buffers rounded as torch allocates them."""
    W, sh, gpn = s.world, s.shape, s.gpus
    n = f" x {gpn} GPUs" if gpn > 1 else ""
    a.h(
        "process",
        "process baseline (CUDA, torch, DeepSpeed)",
        "进程基线（CUDA、torch、DeepSpeed）",
        PROCESS_BASELINE_GIB * GiB * gpn,
        f"{PROCESS_BASELINE_GIB:g} GiB{n}",
        "baseline",
    )
    if s.offload == "none" or s.lora:
        return
    part = -(-T // W)
    if s.stage == 3:
        sgs = registry_default("zero_optimization.sub_group_size")
        groups = (
            sub_groups(param_order(sh), sgs, W) if sh else [sgs] * (part // sgs) + ([part % sgs] if part % sgs else [])
        )
        a.h("master32", "fp32 master weights", "fp32 主权重", 4 * part * gpn, f"4 x {part:,}{n}", "host_zero3")
        a.h("adam", "CPU Adam states", "CPU Adam 状态", 8 * part * gpn, f"8 x {part:,}{n}", "adam")
        a.h(
            "fp32_grads",
            f"pinned fp32 gradients, one per sub-group ({len(groups)})",
            f"锁页的 fp32 梯度（每个子组一份，共 {len(groups)} 个）",
            sum(pinned(4 * g) for g in groups) * gpn,
            f"sum of pow2ceil(4 x sub-group){n}",
            "host_zero3; pinned",
        )
        a.h(
            "grads16",
            "pinned 16-bit gradient buffer",
            "锁页的 16 位梯度缓冲",
            pinned(2 * part) * gpn,
            f"pow2ceil(2 x {part:,}){n}",
            "host_zero3; pinned",
        )
        if s.offload == "optimizer+param":
            a.h(
                "params16",
                "pinned 16-bit parameters (param offload)",
                "锁页的 16 位参数（参数 offload）",
                sum(pinned(2 * g) for g in groups) * gpn,
                f"sum of pow2ceil(2 x sub-group){n}",
                "host_param; pinned",
            )
    else:
        largest = max(param_order(sh)) if sh else 0
        a.h(
            "master32",
            "pinned fp32 master weights",
            "锁页的 fp32 主权重",
            pinned(4 * part) * gpn,
            f"pow2ceil(4 x {part:,}){n}",
            "host_zero2; pinned",
        )
        a.h(
            "buf16",
            "pinned 16-bit parameter buffer",
            "锁页的 16 位参数缓冲",
            pinned(2 * part) * gpn,
            f"pow2ceil(2 x {part:,}){n}",
            "host_zero2; pinned",
        )
        a.h(
            "fp32_grads",
            "pinned fp32 gradients",
            "锁页的 fp32 梯度",
            pinned(4 * part) * gpn,
            f"pow2ceil(4 x {part:,}){n}",
            "host_zero2; pinned",
        )
        a.h("adam", "CPU Adam states", "CPU Adam 状态", 8 * part * gpn, f"8 x {part:,}{n}", "adam")
        a.h(
            "grad_tmp",
            "pinned gradient staging buffer (largest parameter)",
            "锁页的梯度中转缓冲（最大的参数）",
            pinned(2 * largest) * gpn,
            f"pow2ceil(2 x {largest:,}){n}",
            "host_zero2; pinned",
        )


def _phase_totals(terms: list[Term]) -> list[dict[str, Any]]:
    out = []
    for ph in PHASES:
        if ph == "build":
            alive = [t for t in terms if "build" in t.phases or (t.phases == ("rest",) and t.key in BUILT)]
        elif ph == "initialize":
            alive = [t for t in terms if t.phases == ("rest",)]
        else:
            alive = [t for t in terms if t.phases == ("rest",) or ph in t.phases]
        out.append(
            {
                "phase": ph,
                "phase_zh": PHASE_ZH[ph],
                "gib": round(sum(t.gib for t in alive), 3),
                "terms": [t.key for t in alive],
            }
        )
    return out


BUILT = {"params16", "base_4bit", "base_16bit"}  # what exists before deepspeed.initialize


def estimate(s: Setup) -> Estimate:
    P = s.total_params
    shape = s.shape
    notes: list[str] = []
    notes_zh: list[str] = []

    def note(en: str, zh: str) -> None:
        notes.append(en)
        notes_zh.append(zh)

    if s.lora and shape is None:
        raise ValueError("LoRA / QLoRA estimates need a model shape (--model)")
    T = _lora_trainable(shape, s.lora_rank or 16) if s.lora and shape else P
    if s.offload == "optimizer+param" and s.stage < 3:
        note(
            "offload_param only works at ZeRO stage 3; ignored (as DeepSpeed ignores it)",
            "offload_param 只在 ZeRO stage 3 起作用；这里忽略（DeepSpeed 也会忽略它）",
        )
    if s.lora and s.offload != "none":
        note(
            "optimizer offload is not counted for LoRA: the adapters' states are a few hundred MiB",
            "LoRA 不计优化器 offload：适配器的状态只有几百 MiB",
        )
    if s.precision == "fp32":
        note(
            "fp32 training: every 16-bit term above (2 bytes) would be 4 bytes; the estimate assumes 16-bit weights",
            "fp32 训练：上面所有 16 位（2 字节）的项都会变成 4 字节；这里按 16 位权重估算",
        )
    if s.stage in (0, 1) and not s.lora:
        note(
            f"ZeRO stage {s.stage}: no GPU run of this stage was measured; the terms follow the ZeRO-2 code with "
            f"{'nothing' if s.stage == 0 else 'only the optimizer states'} partitioned",
            f"ZeRO stage {s.stage}：这个 stage 没有 GPU 实测；各项按 ZeRO-2 的代码计算，"
            f"{'什么都不分片' if s.stage == 0 else '只分片优化器状态'}",
        )
    a = _Acc()
    _gpu_terms(s, a, P, T)
    _host_terms(s, a, P, T)
    phases = _phase_totals(a.gpu)
    peak = max(phases, key=lambda p: p["gib"])
    gpu_total = peak["gib"]
    gpu_needed = gpu_total + CONTEXT_GIB
    ratio = EXPANDABLE_RATIO if s.expandable_segments else RESERVED_RATIO
    reserved = gpu_total * ratio
    if gpu_needed > s.gpu_mem_gib:
        gpu_verdict = "does not fit"
    elif reserved + CONTEXT_GIB > s.gpu_mem_gib:
        gpu_verdict = "tight"
        note(
            f"fits by allocation ({gpu_total:.1f} GiB) but not with the caching allocator's usual reserve "
            f"(x{ratio:g}: {reserved:.1f} GiB reserved): expect allocator retries (cache flushes, slower steps) "
            "or a fragmentation OOM",
            f"按实际分配（{gpu_total:.1f} GiB）放得下，但算上缓存分配器通常的预留（x{ratio:g}：约 {reserved:.1f} GiB）"
            "就放不下：会出现分配重试（清缓存、变慢），甚至因碎片 OOM",
        )
    else:
        gpu_verdict = "fits"
    # DeepSpeed's own estimator: a reference line, not a base to add to
    ds_est = None
    if s.stage in (1, 2, 3) and not s.lora:
        ms = model_states(P, s.stage, s.offload, s.gpus, s.nodes, shape.largest_layer() if shape else 0)
        ds_est = {
            "gpu_bytes": ms.gpu_bytes,
            "cpu_bytes": ms.cpu_bytes,
            "gpu_gib": ms.gpu_bytes / GiB,
            "cpu_gib": ms.cpu_bytes / GiB,
            "function": ms.function,
        }
        states = sum(t.gib for t in a.gpu if t.phases == ("rest",) or "optimizer step" in t.phases and t.key == "adam")
        note(
            f"DeepSpeed's estimator ({ms.function}) says {ms.gpu_bytes / GiB:.2f} GiB of model states per GPU; kb "
            f"counts {states:.2f} GiB held from the first step on and takes the peak over phases "
            f"({peak['phase']}) instead of adding everything",
            f"DeepSpeed 的估算公式（{ms.function}）给出每卡 {ms.gpu_bytes / GiB:.2f} GiB 模型状态；kb 统计从第一步起"
            f"常驻的 {states:.2f} GiB，并取各阶段的峰值（{PHASE_ZH[peak['phase']]}），而不是把所有项相加",
        )
    host_total = sum(t.gib for t in a.host)
    if s.cpu_mem_gib is None or not host_total:
        fits_host = None if s.cpu_mem_gib is None else True
        host_verdict = "unknown" if s.cpu_mem_gib is None else "fits"
    elif host_total * 1.1 <= s.cpu_mem_gib:
        fits_host, host_verdict = True, "fits"
    elif host_total <= s.cpu_mem_gib:
        fits_host, host_verdict = True, "tight"
        note(
            f"host RAM is tight: {host_total:.0f} GiB of {s.cpu_mem_gib:g}; measured runs within 10% of the machine's "
            "RAM survived (docs/memory.md), but anything else on the node can get the process killed",
            f"主机内存很紧：{s.cpu_mem_gib:g} GiB 里要用 {host_total:.0f} GiB；实测在 10% 以内的运行活了下来（docs/memory.md），"
            "但节点上再有别的进程就可能被杀",
        )
    else:
        fits_host, host_verdict = False, "does not fit"
    if shape is None:
        note(
            "no model shape: activations, logits and the largest-layer term are left out",
            "没有模型结构：激活值、logits 和最大层那一项都没算",
        )
    by_key = {t.key: t for t in a.gpu}
    return Estimate(
        setup=_setup_dict(s),
        params=P,
        trainable_params=T,
        gpu={by_key[k].label: round(by_key[k].gib, 3) for k in peak["terms"]},
        host={t.label: round(t.gib, 3) for t in a.host},
        gpu_total_gib=round(gpu_total, 2),
        gpu_needed_gib=round(gpu_needed, 2),
        host_total_gib=round(host_total, 2),
        deepspeed_estimator=ds_est,
        fits_gpu=gpu_verdict != "does not fit",
        fits_host=fits_host,
        host_verdict=host_verdict,
        gpu_verdict=gpu_verdict,
        peak_phase=peak["phase"],
        reserved_gib=round(reserved, 2),
        phases=phases,
        terms=[t.to_dict() for t in a.gpu],
        host_terms=[t.to_dict() for t in a.host],
        notes=notes,
        notes_zh=notes_zh,
    )


def _setup_dict(s: Setup) -> dict[str, Any]:
    d = asdict(s)
    d["shape"] = s.shape.name if s.shape else None
    return d


# cheapest first: what each change costs in speed or method
# cheapest first: what each change costs in speed or method; (label, change, cost, label in Chinese, cost in Chinese)
CHANGES: list[tuple[str, dict[str, Any], str, str, str]] = [
    (
        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        {"expandable_segments": True},
        "free: the same tensors, less reserved (measured 43.5 -> 36.6 GiB and 71.0 -> 63.3 GiB reserved, docs/memory.md)",
        "设置 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
        "不花代价：张量不变，预留更少（实测预留 43.5 -> 36.6 GiB、71.0 -> 63.3 GiB，见 docs/memory.md）",
    ),
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
        for label, change, cost, label_zh, cost_zh in CHANGES:
            if set(change) & {"activation_checkpointing", "expandable_segments"}:
                continue
            ns = _apply(replace(s, activation_checkpointing=True), change)
            if ns is not None:
                tried.append((f"activation checkpointing + {label}", ns, cost, f"激活检查点 + {label_zh}", cost_zh))
    base = estimate(s).gpu_verdict
    for label, ns, cost, label_zh, cost_zh in tried:
        e = estimate(ns)
        good = e.gpu_verdict == "fits" or (e.gpu_verdict == "tight" and base == "does not fit")
        if good and e.fits_host is not False:
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
    if e.gpu_verdict != "fits" or e.fits_host is False:
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
