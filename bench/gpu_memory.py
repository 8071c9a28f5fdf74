"""Measure peak GPU memory of DeepSpeed ZeRO training on a real GPU, to check `kb mem` against.

    python bench/gpu_memory.py --matrix small,7b-oom --out results.jsonl [--cap-gib 80]
    python bench/gpu_memory.py --matrix issue13a --out run-d.jsonl      # then issue13b (issue 13)
    python bench/gpu_memory.py --one '{"model": "tiny", ...}' --device cpu      # smoke test, no GPU
    python bench/gpu_memory.py --list issue13                             # the matrix and time estimates

Each configuration runs in its own process (an OOM or a host kill cannot spoil the next): a
Llama-shaped model with random weights (no download) is built the way the HF integration builds it
(under zero.Init for ZeRO-3), optionally wrapped with LoRA (peft) or quantized to 4-bit NF4 for QLoRA
(bitsandbytes), wrapped by deepspeed.initialize, and trained for a few steps on random tokens. The
process caps usable GPU memory with torch.cuda.set_per_process_memory_fraction to emulate an 80 GiB
card.

Recorded per configuration (one JSON line):
- ``peaks[phase]``: peak allocated / reserved GPU memory since the start, after each phase (as in runs a-c);
- ``phases[phase]``: what is held at that moment (``memory_allocated``/``memory_reserved``), the peak within
  that phase alone (the peak counter is reset after each phase), fragmentation counters from
  ``torch.cuda.memory_stats()``, host RSS now and its peak within the phase, and ``families``: GPU bytes
  of parameters, gradients, fp32 master weights and optimizer states found on the model and the
  optimizer, in bytes per model parameter (``other`` = allocated minus those: activations, buffers,
  communication buckets); the families are found by walking tensors, so they are approximate;
- the shape (``shape``, with ``tie_word_embeddings``), versions, trainable / frozen parameter counts.

Configuration keys: model, stage (2|3), offload (none|optimizer|optimizer+param), ckpt, seq,
micro_batch, steps, torch_adam, lora, lora_r, lora_targets, qlora, qlora_zero3, alloc_conf, cap_gib,
device, world (processes on this host, one per GPU: torchrun starts them and each rank's record is kept under
``ranks``; issue 15).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kb.memory.estimate import PRESETS, ModelShape  # noqa: E402 - one home for published shapes

SHAPES = {
    # name: (vocab, hidden, intermediate, layers, heads, kv_heads) -- the bench's own shapes (runs a-c)
    "llama2-7b": (32000, 4096, 11008, 32, 32, 32),
    "tinyllama-1.1b": (32000, 2048, 5632, 22, 32, 4),
    "tiny": (1000, 64, 128, 2, 4, 4),
}

_TINYLLAMA = ModelShape("tinyllama-1.1b", *SHAPES["tinyllama-1.1b"])
# Synthetic variants: NOT published models; published shapes with one field changed, or a made-up 3B class.
SYNTHETIC = {
    s.name: s
    for s in [
        replace(_TINYLLAMA, name="synthetic-tinyllama-tied", tie_embeddings=True),
        replace(_TINYLLAMA, name="synthetic-tinyllama-v128k", vocab=128256),
        replace(_TINYLLAMA, name="synthetic-tinyllama-v152k-tied", vocab=152064, tie_embeddings=True),
        ModelShape("synthetic-3b", 128256, 3072, 8192, 28, 24, 8, tie_embeddings=True),
        ModelShape("synthetic-3b-untied", 128256, 3072, 8192, 28, 24, 8),
    ]
}


def model_shape(name: str) -> ModelShape:
    """The shape for a config's ``model``: the bench's own, a synthetic variant, or a kb.memory.estimate preset."""
    if name in SHAPES:
        return ModelShape(name, *SHAPES[name])
    if name in SYNTHETIC:
        return SYNTHETIC[name]
    if name in PRESETS:
        return PRESETS[name]
    raise ValueError(f"unknown model {name!r}: use one of {', '.join([*SHAPES, *SYNTHETIC, *PRESETS])}")


LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CONFIG_KEYS = {
    "model", "stage", "offload", "ckpt", "seq", "micro_batch", "steps", "torch_adam", "lora", "lora_r",
    "lora_targets", "qlora", "qlora_zero3", "alloc_conf", "cap_gib", "device", "est_s", "world",
}  # fmt: skip
ES = "expandable_segments:True"

MATRICES = {
    "small": [  # torch.optim.AdamW (torch_adam) where nothing is offloaded: no op build needed
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=2048, torch_adam=True),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=True, seq=2048, torch_adam=True),
        dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=False, seq=2048, torch_adam=True),
        dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=True, seq=2048, torch_adam=True),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=4096, torch_adam=True),
        dict(model="tinyllama-1.1b", stage=3, offload="optimizer", ckpt=False, seq=2048),
        dict(model="tinyllama-1.1b", stage=2, offload="optimizer", ckpt=False, seq=2048),
    ],
    "small-fused": [  # ZeRO-3 then ZeRO-2, each without and with checkpointing
        dict(model="tinyllama-1.1b", stage=stage, offload="none", ckpt=ckpt, seq=2048)
        for stage in (3, 2)
        for ckpt in (False, True)
    ],
    "7b-oom": [
        dict(model="llama2-7b", stage=3, offload="none", ckpt=True, seq=2048, torch_adam=True),
        dict(model="llama2-7b", stage=2, offload="none", ckpt=True, seq=2048, torch_adam=True),
    ],
    "7b-offload": [
        dict(model="llama2-7b", stage=3, offload="optimizer", ckpt=True, seq=2048),
        dict(model="llama2-7b", stage=3, offload="optimizer", ckpt=False, seq=2048),
        dict(model="llama2-7b", stage=2, offload="optimizer", ckpt=True, seq=2048),
        dict(model="llama2-7b", stage=3, offload="optimizer+param", ckpt=True, seq=2048),
    ],
    # Issue 13. est_s: expected wall seconds on the H200 (process start + build + initialize + 3 steps),
    # from runs a-c (tinyllama ~20-30 s, 7B under zero.Init ~35 s to OOM, 7B offload ~120-160 s).
    # QLoRA builds the bf16 model on CPU first: TinyLlama took 36 s there (smoke-gpu run), so 3B ~100 s.
    # torch_adam wherever nothing is offloaded (FusedAdam's JIT build trips on TORCH_CUDA_ARCH_LIST=9.0a).
    "issue13a": [
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=8192, torch_adam=True, est_s=35),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=True, seq=16384, torch_adam=True, est_s=40),
        dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=True, seq=4096, micro_batch=4, torch_adam=True,
             est_s=30),
        dict(model="synthetic-tinyllama-v128k", stage=2, offload="none", ckpt=True, seq=4096, micro_batch=2,
             torch_adam=True, est_s=30),
        dict(model="synthetic-tinyllama-v152k-tied", stage=3, offload="none", ckpt=True, seq=4096,
             torch_adam=True, est_s=35),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=4096, micro_batch=2,
             torch_adam=True, est_s=30),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=4096, micro_batch=2,
             torch_adam=True, alloc_conf=ES, est_s=30),
        dict(model="synthetic-3b", stage=3, offload="none", ckpt=True, seq=4096, torch_adam=True, est_s=50),
        dict(model="synthetic-3b", stage=3, offload="none", ckpt=False, seq=4096, torch_adam=True, est_s=50),
        dict(model="tinyllama-1.1b", stage=2, offload="optimizer", ckpt=True, seq=8192, est_s=60),
        dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=True, seq=4096, lora=True, torch_adam=True,
             est_s=25),
        dict(model="synthetic-tinyllama-tied", stage=2, offload="none", ckpt=False, seq=2048, micro_batch=2,
             torch_adam=True, est_s=25),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=2048, micro_batch=4, lora=True,
             torch_adam=True, est_s=25),
    ],
    "issue13b": [
        dict(model="llama3-8b", stage=3, offload="none", ckpt=True, seq=2048, torch_adam=True, est_s=45),  # OOM
        dict(model="synthetic-3b", stage=3, offload="optimizer", ckpt=True, seq=4096, est_s=75),
        dict(model="synthetic-3b-untied", stage=2, offload="optimizer", ckpt=True, seq=8192, est_s=65),
        dict(model="qwen2.5-7b", stage=3, offload="none", ckpt=True, seq=4096, lora=True, torch_adam=True,
             est_s=90),
        dict(model="synthetic-3b", stage=2, offload="none", ckpt=True, seq=4096, qlora=True, torch_adam=True,
             est_s=120),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=True, seq=4096, qlora=True, qlora_zero3=True,
             torch_adam=True, est_s=55),
        dict(model="synthetic-3b", stage=3, offload="none", ckpt=True, seq=4096, torch_adam=True, alloc_conf=ES,
             est_s=50),
    ],
}  # fmt: skip
MATRICES["issue13"] = MATRICES["issue13a"] + MATRICES["issue13b"]
# Run e: held out from the per-phase accounting of kb.memory.estimate, which was written against runs a-d. Shapes,
# methods and settings none of runs a-d has: Mistral-7B (GQA, 14k intermediate) with LoRA at ZeRO-2 and ZeRO-3,
# FusedAdam at ZeRO-3 with a long sequence, ZeRO-2 3B close to the 80 GiB cap, offload of an untied 3B without
# checkpointing, the 152k tied vocabulary at ZeRO-2 without checkpointing, a second QLoRA ZeRO-3 shape.
MATRICES["issue13e"] = [
    dict(model="mistral-7b", stage=2, offload="none", ckpt=True, seq=2048, micro_batch=2, lora=True,
         torch_adam=True, est_s=60),
    dict(model="mistral-7b", stage=3, offload="none", ckpt=False, seq=1024, lora=True, torch_adam=True, est_s=70),
    dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=True, seq=8192, micro_batch=2, est_s=80),
    dict(model="synthetic-3b", stage=2, offload="none", ckpt=True, seq=2048, micro_batch=2, torch_adam=True,
         est_s=45),
    dict(model="synthetic-3b-untied", stage=3, offload="optimizer", ckpt=False, seq=2048, micro_batch=2,
         est_s=80),
    dict(model="synthetic-tinyllama-v152k-tied", stage=2, offload="none", ckpt=False, seq=4096,
         torch_adam=True, est_s=30),
    dict(model="synthetic-3b", stage=3, offload="none", ckpt=True, seq=8192, torch_adam=True, alloc_conf=ES,
         est_s=50),
    dict(model="synthetic-tinyllama-v128k", stage=3, offload="none", ckpt=True, seq=4096, qlora=True,
         qlora_zero3=True, torch_adam=True, est_s=60),
]  # fmt: skip
# Issue 15: world size 2 and 4 on one host (torchrun, one process per GPU); needs nvidia-h200-x2 / -x4. The shapes
# 3B-8B, ZeRO-2 and ZeRO-3, with and without optimizer offload, so that kb mem --gpus N is checked where ZeRO
# partitions. Not run yet: only single-GPU machines were lent (see docs/memory.md).
MATRICES["issue15"] = [
    dict(model="synthetic-3b", stage=3, offload="none", ckpt=True, seq=4096, torch_adam=True, world=2, est_s=70),
    dict(model="synthetic-3b", stage=2, offload="none", ckpt=True, seq=4096, torch_adam=True, world=2, est_s=60),
    dict(model="llama3-8b", stage=3, offload="none", ckpt=True, seq=2048, torch_adam=True, world=2, est_s=90),
    dict(model="llama3-8b", stage=3, offload="none", ckpt=True, seq=4096, torch_adam=True, world=4, est_s=100),
    dict(model="llama2-7b", stage=2, offload="none", ckpt=True, seq=2048, torch_adam=True, world=4, est_s=90),
    dict(model="llama2-7b", stage=3, offload="optimizer", ckpt=True, seq=2048, world=2, est_s=150),
    dict(model="mistral-7b", stage=2, offload="optimizer", ckpt=True, seq=2048, world=4, est_s=150),
    dict(model="qwen2.5-7b", stage=3, offload="none", ckpt=False, seq=2048, torch_adam=True, world=4, est_s=100),
]  # fmt: skip
# Every code path on CPU with two processes (gloo), the tiny shape: the multi-process plumbing without a GPU
MATRICES["smoke-cpu-ranks"] = [
    dict(model="tiny", stage=3, offload="none", ckpt=True, seq=128, torch_adam=True, world=2, device="cpu"),
    dict(model="tiny", stage=2, offload="none", ckpt=False, seq=128, torch_adam=True, world=2, device="cpu"),
]  # fmt: skip
# Every code path on a GPU in about a minute, on the tiny shape and TinyLlama: run it first on a fresh image.
MATRICES["smoke-gpu"] = [
    dict(model="tiny", stage=2, offload="none", ckpt=False, seq=256, torch_adam=True),
    dict(model="tiny", stage=3, offload="none", ckpt=True, seq=256, micro_batch=2, torch_adam=True, alloc_conf=ES),
    dict(model="tiny", stage=3, offload="none", ckpt=True, seq=256, lora=True, torch_adam=True),
    dict(model="tiny", stage=2, offload="none", ckpt=True, seq=256, qlora=True, torch_adam=True),
    dict(model="tiny", stage=3, offload="none", ckpt=True, seq=256, qlora=True, qlora_zero3=True, torch_adam=True),
    dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=True, seq=1024, qlora=True, torch_adam=True),
]  # fmt: skip


def check_config(c: dict) -> None:
    """Reject a configuration that cannot mean anything (raises ValueError with the reason)."""
    unknown = sorted(set(c) - CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown configuration keys {unknown}; known: {sorted(CONFIG_KEYS)}")
    if not isinstance(c.get("world", 1), int) or c.get("world", 1) < 1:
        raise ValueError(f"world must be a positive integer (processes, one per GPU), not {c.get('world')!r}")
    for k in ("model", "stage", "seq"):
        if k not in c:
            raise ValueError(f"configuration needs {k!r}")
    model_shape(c["model"])
    if c["stage"] not in (2, 3):
        raise ValueError(f"stage must be 2 or 3, not {c['stage']!r}")
    if c.get("offload", "none") not in ("none", "optimizer", "optimizer+param"):
        raise ValueError(f"offload must be none, optimizer or optimizer+param, not {c.get('offload')!r}")
    if c.get("qlora") and c.get("device", "cuda") != "cuda":
        raise ValueError(
            "qlora=True needs a CUDA GPU: bitsandbytes quantizes to 4-bit NF4 only when the weights move to cuda; "
            "there is no CPU path to measure"
        )
    if c.get("qlora") and c["stage"] == 3 and not c.get("qlora_zero3"):
        raise ValueError("QLoRA with ZeRO-3 needs qlora_zero3=True (4-bit weights stored as bf16 so ZeRO-3 can shard)")
    if c.get("qlora_zero3") and not (c.get("qlora") and c["stage"] == 3):
        raise ValueError("qlora_zero3=True goes with qlora=True and stage 3")


def ds_config(c: dict) -> dict:
    z: dict = {"stage": c["stage"]}
    if c.get("offload", "none") in ("optimizer", "optimizer+param"):
        z["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if c.get("offload") == "optimizer+param":
        z["offload_param"] = {"device": "cpu", "pin_memory": True}
    opt_params = {"lr": 1e-5, "weight_decay": 0.0}
    if c.get("torch_adam"):
        opt_params["torch_adam"] = True  # torch.optim.AdamW instead of DeepSpeed's FusedAdam (no op build)
    return {
        "train_micro_batch_size_per_gpu": c.get("micro_batch", 1),
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": c.get("device", "cuda") == "cuda"},
        "zero_optimization": z,
        "optimizer": {"type": "AdamW", "params": opt_params},
        "steps_per_print": 1000,
    }


def hf_config(transformers, s: ModelShape, seq: int):
    """A transformers config for the shape: Qwen2 (bias on q/k/v only) when qkv_bias, else Llama."""
    if s.experts > 1:
        raise ValueError(f"{s.name}: MoE shapes are not built by this bench")
    kw = dict(s.hf_config_fields(), max_position_embeddings=max(4096, seq), attn_implementation="sdpa", use_cache=False)
    return transformers.Qwen2Config(**kw) if s.qkv_bias else transformers.LlamaConfig(**kw)


def _quantize_4bit(model, torch, storage) -> dict:
    """Replace nn.Linear layers (not lm_head) by bitsandbytes Linear4bit holding the model's own random bf16
    weights (quantized to NF4 when moved to cuda), as transformers' bitsandbytes integration does."""
    import bitsandbytes as bnb
    from transformers import BitsAndBytesConfig

    qc = BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
        bnb_4bit_quant_storage=storage,
    )
    old = {n: m for n, m in model.named_modules() if type(m) is torch.nn.Linear and n.split(".")[-1] != "lm_head"}
    how = "transformers.integrations.bitsandbytes.replace_with_bnb_linear"
    try:
        from transformers.integrations.bitsandbytes import replace_with_bnb_linear

        replace_with_bnb_linear(model, modules_to_not_convert=["lm_head"], quantization_config=qc)
    except (ImportError, TypeError) as e:  # API moved: replace by hand, the same way
        how = f"own loop ({type(e).__name__}: {str(e)[:120]})"
        for n, m in old.items():
            new = bnb.nn.Linear4bit(
                m.in_features, m.out_features, m.bias is not None, torch.bfloat16,
                compress_statistics=True, quant_type="nf4", quant_storage=storage,
            )  # fmt: skip
            model.set_submodule(n, new)
    done = 0
    for n, m in old.items():
        new = model.get_submodule(n)
        if not isinstance(new, bnb.nn.Linear4bit):
            continue
        kw = dict(requires_grad=False, compress_statistics=True, quant_type="nf4", quant_storage=storage)
        try:
            w = bnb.nn.Params4bit(m.weight.data, module=new, **kw)
        except TypeError:  # older bitsandbytes: no module argument
            w = bnb.nn.Params4bit(m.weight.data, **kw)
        new.weight = w
        if m.bias is not None:
            new.bias = torch.nn.Parameter(m.bias.data, requires_grad=False)
        new.requires_grad_(False)
        done += 1
    model.is_loaded_in_4bit = True  # what from_pretrained(quantization_config=...) sets; peft reads it
    model.config.quantization_config = qc
    return {"replaced": done, "linear_layers": len(old), "how": how, "quant_storage": str(storage)}


def _families(model, engine, n_params: int, torch) -> dict:
    """GPU bytes per model parameter held by each tensor family (deduplicated by storage)."""
    seen: set[int] = set()
    out = {"params": 0, "grads": 0, "master_fp32": 0, "optimizer_states": 0}

    def add(fam: str, t) -> None:
        if not isinstance(t, torch.Tensor) or not t.is_cuda or t.numel() == 0:
            return
        try:
            st = t.untyped_storage()
            key, size = st.data_ptr(), st.nbytes()
        except RuntimeError:
            key, size = t.data_ptr(), t.numel() * t.element_size()
        if key in seen:
            return
        seen.add(key)
        out[fam] += size

    for p in model.parameters():
        add("params", p.data)
        add("params", getattr(p, "ds_tensor", None))
        add("grads", p.grad)
    opt = getattr(engine, "optimizer", None) if engine is not None else None
    basic = getattr(opt, "optimizer", opt)
    if basic is not None and hasattr(basic, "param_groups"):
        for g in basic.param_groups:
            for p in g["params"]:
                add("master_fp32", p)
                add("grads", p.grad)
        for st in getattr(basic, "state", {}).values():
            for v in st.values():
                add("optimizer_states", v)
    for name in ("averaged_gradients", "grad_partitions_flat_buffer", "ipg_buffer"):
        v = getattr(opt, name, None) if opt is not None else None
        for t in v.values() if isinstance(v, dict) else v if isinstance(v, list) else [v]:
            for x in t if isinstance(t, list) else [t]:
                add("grads", x)
    alloc = torch.cuda.memory_allocated()
    res = {k: round(v / n_params, 3) for k, v in out.items()}
    res["other"] = round((alloc - sum(out.values())) / n_params, 3)
    return res


def run_one(c: dict) -> dict:
    """Train a few steps with one configuration; return the measurements."""
    dev = c.get("device", "cuda")
    if c.get("alloc_conf"):  # must be set before torch initialises CUDA (the --one child imports torch here)
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = c["alloc_conf"]
    if "a" in os.environ.get("TORCH_CUDA_ARCH_LIST", ""):  # 9.0a breaks deepspeed 0.19.8's op builder
        os.environ["TORCH_CUDA_ARCH_LIST"] = os.environ["TORCH_CUDA_ARCH_LIST"].replace("a", "")
    import psutil
    import torch

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:  # one process; under torchrun (world > 1) its env stands
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if dev == "cuda":
        torch.cuda.set_device(local_rank)
    s = model_shape(c["model"])
    res: dict = {
        "config": c,
        "phase": "start",
        "oom": False,
        "shape": {**asdict(s), "tie_word_embeddings": s.tie_embeddings},
    }
    res["env"] = {k: os.environ.get(k) for k in ("PYTORCH_CUDA_ALLOC_CONF", "TORCH_CUDA_ARCH_LIST")}
    res["rank"], res["world_size"] = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    rss = {"peak": 0, "phase_peak": 0}
    stop = threading.Event()
    proc = psutil.Process()

    def rss_now() -> int:
        return proc.memory_info().rss + sum(ch.memory_info().rss for ch in proc.children(recursive=True))

    def sample_rss() -> None:
        while not stop.is_set():
            try:
                r = rss_now()
                rss["peak"] = max(rss["peak"], r)
                rss["phase_peak"] = max(rss["phase_peak"], r)
            except psutil.Error:
                pass
            time.sleep(0.05)

    threading.Thread(target=sample_rss, daemon=True).start()
    gib = 2**30
    cum = {"alloc": 0, "reserved": 0}  # peaks since start, kept by hand: the counter is reset per phase
    if dev == "cuda":
        total = torch.cuda.get_device_properties(local_rank).total_memory
        cap = c.get("cap_gib", 80) * gib
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), local_rank)
        res["gpu"] = torch.cuda.get_device_name(local_rank)
        res["gpu_total_gib"] = round(total / gib, 2)
    state: dict = {"model": None, "engine": None, "n": 1, "t": time.perf_counter()}

    def mark(phase: str) -> None:
        res["phase"] = phase
        ph: dict = {"t_s": round(time.perf_counter() - state["t"], 2)}
        try:
            r = rss_now()
        except psutil.Error:
            r = 0
        ph["host_rss_gib"] = round(r / gib, 2)
        ph["host_rss_peak_gib"] = round(max(rss["phase_peak"], r) / gib, 2)
        rss["phase_peak"] = r
        if dev == "cuda":
            torch.cuda.synchronize()
            pa, pr = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
            cum["alloc"], cum["reserved"] = max(cum["alloc"], pa), max(cum["reserved"], pr)
            res.setdefault("peaks", {})[phase] = {  # cumulative, as in runs a-c
                "allocated_gib": round(cum["alloc"] / gib, 3),
                "reserved_gib": round(cum["reserved"] / gib, 3),
            }
            ms = torch.cuda.memory_stats()
            ph.update(
                allocated_gib=round(torch.cuda.memory_allocated() / gib, 3),
                reserved_gib=round(torch.cuda.memory_reserved() / gib, 3),
                phase_peak_allocated_gib=round(pa / gib, 3),
                phase_peak_reserved_gib=round(pr / gib, 3),
                inactive_split_gib=round(ms.get("inactive_split_bytes.all.current", 0) / gib, 3),
                num_alloc_retries=ms.get("num_alloc_retries", 0),
                num_ooms=ms.get("num_ooms", 0),
            )
            if state["model"] is not None:
                try:
                    ph["families_bytes_per_param"] = _families(state["model"], state["engine"], state["n"], torch)
                except Exception as e:  # noqa: BLE001 - accounting must never spoil the measurement
                    ph["families_error"] = f"{type(e).__name__}: {e}"[:200]
            torch.cuda.reset_peak_memory_stats()
        res.setdefault("phases", {})[phase] = ph
        state["t"] = time.perf_counter()

    try:
        import deepspeed
        import transformers
        from transformers.integrations import HfDeepSpeedConfig

        check_config(c)
        res["versions"] = {
            "torch": torch.__version__,
            "deepspeed": deepspeed.__version__,
            "transformers": transformers.__version__,
        }
        if c.get("lora") or c.get("qlora"):
            import peft

            res["versions"]["peft"] = peft.__version__
        if c.get("qlora"):
            import bitsandbytes

            res["versions"]["bitsandbytes"] = bitsandbytes.__version__
        cfg = hf_config(transformers, s, c["seq"])
        conf = ds_config(c)
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
        zero_init = c["stage"] == 3 and not c.get("qlora")  # QLoRA: the 4-bit model is built whole, then sharded
        keep = HfDeepSpeedConfig(conf) if zero_init else None  # noqa: F841 - zero.Init while alive
        t0 = time.perf_counter()
        if zero_init:
            model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        elif c.get("qlora"):
            model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)  # on CPU
            storage = torch.bfloat16 if c.get("qlora_zero3") else torch.uint8
            res["qlora"] = _quantize_4bit(model, torch, storage)
            model = model.to("cuda")  # Params4bit quantizes here
            if c["stage"] == 3:  # as TrainingArguments does; after the build, so no zero.Init for the 4-bit model
                keep = HfDeepSpeedConfig(conf)  # noqa: F841
        else:
            with torch.device(dev):
                model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        res["params"] = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
        state["n"] = s.params()  # bytes/param against the shape's parameter count (4-bit tensors count less)
        res["shape_params"] = state["n"]
        gc_kwargs = {"use_reentrant": False}
        if c.get("qlora"):
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(
                model, use_gradient_checkpointing=c["ckpt"], gradient_checkpointing_kwargs=gc_kwargs
            )
        elif c["ckpt"]:
            fn = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
            try:
                fn(activation_checkpointing_kwargs=gc_kwargs)
            except TypeError:
                fn(gradient_checkpointing_kwargs=gc_kwargs)
        if c.get("lora") or c.get("qlora"):
            from peft import LoraConfig, get_peft_model

            lc = LoraConfig(
                r=c.get("lora_r", 16),
                lora_alpha=2 * c.get("lora_r", 16),
                lora_dropout=0.0,
                target_modules=c.get("lora_targets", LORA_TARGETS),
                task_type="CAUSAL_LM",
            )
            if c["ckpt"] and not c.get("qlora") and hasattr(model, "enable_input_require_grads"):
                model.enable_input_require_grads()  # what the Trainer does for PEFT + checkpointing
            model = get_peft_model(model, lc)
        trainable = [p for p in model.parameters() if p.requires_grad]
        res["trainable_params"] = sum(getattr(p, "ds_numel", p.numel()) for p in trainable)
        res["frozen_params"] = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if not p.requires_grad)
        res["build_s"] = round(time.perf_counter() - t0, 1)
        state["model"] = model
        mark("model_built")
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=trainable, config=conf)
        state["engine"] = engine
        res["init_s"] = round(time.perf_counter() - t0, 1)
        mark("initialized")
        steps = []
        for step in range(c.get("steps", 3)):
            ids = torch.randint(0, s.vocab, (c.get("micro_batch", 1), c["seq"]), device=engine.device)
            t = time.perf_counter()
            out = engine(input_ids=ids, labels=ids)
            mark(f"forward{step}")
            engine.backward(out.loss)
            mark(f"backward{step}")
            engine.step()
            mark(f"step{step}")
            if dev == "cuda":
                torch.cuda.synchronize()
            steps.append(round(time.perf_counter() - t, 2))
            del out
        if dev == "cuda":
            ids = None
            torch.cuda.synchronize()
        mark("at_rest")
        res["step_s"] = steps
        res["phase"] = "done"
    except torch.OutOfMemoryError as e:
        res["oom"] = True
        res["error"] = str(e).splitlines()[0][:400]
    except Exception as e:  # noqa: BLE001 - record whatever DeepSpeed raised
        res["error"] = f"{type(e).__name__}: {str(e)[:400]}"
        res["traceback"] = traceback.format_exc()[-1500:]
    finally:
        stop.set()
        if dev == "cuda":
            cum["alloc"] = max(cum["alloc"], torch.cuda.max_memory_allocated())
            cum["reserved"] = max(cum["reserved"], torch.cuda.max_memory_reserved())
            res["peak_allocated_gib"] = round(cum["alloc"] / gib, 3)
            res["peak_reserved_gib"] = round(cum["reserved"] / gib, 3)
        res["peak_host_rss_gib"] = round(rss["peak"] / gib, 2)
    return res


def child_env(c: dict) -> dict:
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # a pair with / without must differ only in this
    if c.get("alloc_conf"):
        env["PYTORCH_CUDA_ALLOC_CONF"] = c["alloc_conf"]
    return env


def run_ranks(c: dict, timeout: int) -> dict:
    """One configuration on ``world`` processes of this host (torchrun, one per GPU): rank 0's record, with every
    rank's peaks, host RSS, step times and outcome under ``ranks``, the peak over ranks, and which ranks are missing
    (a killed or hung process). Issue 15: multi-GPU memory per rank."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="gpu-memory-ranks-") as tmp:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={c['world']}",
               __file__, "--one", json.dumps(c), "--rank-out", tmp]  # fmt: skip
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=child_env(c))
            err = None if p.returncode == 0 else f"exit {p.returncode}: {p.stderr[-600:]}"
        except subprocess.TimeoutExpired:
            err = f"timeout after {timeout}s (a hang, or too slow)"
        recs = {int(f.stem[4:]): json.loads(f.read_text()) for f in Path(tmp).glob("rank*.json")}
    if not recs:
        return {"config": c, "error": err or "no rank wrote a result", "ranks": []}
    res = dict(recs.get(0) or next(iter(recs.values())))
    res["ranks"] = [
        {k: r.get(k) for k in ("rank", "phase", "oom", "error", "peak_allocated_gib", "peak_reserved_gib",
                               "peak_host_rss_gib", "step_s")}
        for _, r in sorted(recs.items())
    ]  # fmt: skip
    res["missing_ranks"] = sorted(set(range(c["world"])) - set(recs))
    res["peak_allocated_gib"] = max((r.get("peak_allocated_gib") or 0) for r in recs.values())
    res["oom"] = any(r.get("oom") for r in recs.values())
    if err and not res.get("error"):
        res["error"] = err
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--matrix", default="small")
    ap.add_argument("--one", default=None, help="run one configuration (JSON) in this process")
    ap.add_argument("--list", default=None, help="print a matrix with its expected times and exit")
    ap.add_argument("--out", default="gpu_memory.jsonl")
    ap.add_argument("--cap-gib", type=float, default=80.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per configuration")
    ap.add_argument("--rank-out", default=None, help="with --one under torchrun: write rank<N>.json into this folder")
    a = ap.parse_args()
    if a.list:
        tot = 0
        for i, c in enumerate(MATRICES[a.list], 1):
            tot += c.get("est_s", 0)
            print(f"{i:2d} {c.get('est_s', '?'):>4}s  " + json.dumps({k: v for k, v in c.items() if k != "est_s"}))
        print(f"expected total {tot} s")
        return
    if a.one:
        c = json.loads(a.one)
        c.setdefault("device", a.device)
        try:
            check_config(c)
        except ValueError as e:
            print(f"gpu_memory.py: bad configuration: {e}", file=sys.stderr)
            sys.exit(2)
        res = run_one(c)
        if a.rank_out:
            Path(a.rank_out, f"rank{res['rank']}.json").write_text(json.dumps(res))
        else:
            print("RESULT " + json.dumps(res), flush=True)
        return
    names = a.matrix.split(",")
    unknown = [n for n in names if n not in MATRICES]
    if unknown:
        sys.exit(f"gpu_memory.py: unknown matrix {unknown}; known: {', '.join(MATRICES)}")
    for name in names:
        for c in MATRICES[name]:
            c = {**{k: v for k, v in c.items() if k != "est_s"}, "cap_gib": a.cap_gib, "device": a.device}
            t = time.perf_counter()
            if c.get("world", 1) > 1:
                res = run_ranks(c, a.timeout)
                res["wall_s"] = round(time.perf_counter() - t, 1)
                with open(a.out, "a") as f:
                    f.write(json.dumps(res) + "\n")
                print(json.dumps({k: res.get(k) for k in ("config", "oom", "error", "peak_allocated_gib", "ranks")}))
                continue
            try:
                p = subprocess.run(
                    [sys.executable, __file__, "--one", json.dumps(c)],
                    capture_output=True,
                    text=True,
                    timeout=a.timeout,
                    env=child_env(c),
                )
                line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT ")), None)
                res = (
                    json.loads(line[7:])
                    if line
                    else {"config": c, "error": f"no result, exit {p.returncode}", "stderr": p.stderr[-1500:]}
                )
                if p.returncode and not line:
                    res["killed"] = p.returncode < 0 or p.returncode == 137
            except subprocess.TimeoutExpired:
                res = {"config": c, "error": f"timeout after {a.timeout}s"}
            res["wall_s"] = round(time.perf_counter() - t, 1)
            with open(a.out, "a") as f:
                f.write(json.dumps(res) + "\n")
            print(
                json.dumps(
                    {
                        k: res.get(k)
                        for k in (
                            "config",
                            "oom",
                            "error",
                            "peak_allocated_gib",
                            "peak_reserved_gib",
                            "peak_host_rss_gib",
                            "step_s",
                            "wall_s",
                        )
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
