"""What autograd saves for backward in a Llama-family decoder layer, counted on CPU, against kb.memory.estimate's formula.

python bench/saved_activations.py [--tokens 1024]

Builds small bf16 Llama models from transformers (random weights, SDPA attention) with 2 and 4 layers, runs one
forward with labels under ``torch.autograd.graph.saved_tensors_hooks`` and adds up the distinct storages saved
(parameters excluded). The difference between 4 and 2 layers, halved, is one layer's bytes; divided by the tokens
it is the per-token figure that ``kb.memory.estimate.layer_activation_bytes`` (22h + 4kv + 8i) stands for. Modes: a full
fine-tune; peft LoRA r16 on every linear layer with the adapters cast to bf16; LoRA as get_peft_model leaves it
(fp32 adapters, ``autocast_adapter_dtype=True``), whose extra over bf16 adapters is what
``kb.memory.estimate.LORA_FP32_INPUT_BYTES`` x (6h + i) stands for. With activation checkpointing a layer keeps its
input (2h). The figures do not depend on a GPU: the same tensors are saved there (run d, docs/memory.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kb.memory.estimate import LORA_FP32_INPUT_BYTES, ModelShape, layer_activation_bytes  # noqa: E402

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SHAPES = [
    ModelShape("small-gqa", 1000, 512, 1408, 2, 8, 2),
    ModelShape("small-mha", 1000, 384, 1024, 2, 6, 6),
]


def _build(shape: ModelShape, layers: int, mode: str, ckpt: bool, attn: str = "sdpa"):
    import torch
    import transformers

    cfg = transformers.LlamaConfig(
        **{**shape.hf_config_fields(), "num_hidden_layers": layers},
        attn_implementation=attn,
        use_cache=False,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    if ckpt:
        kw = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers 5 spelling
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
        if mode != "full":
            model.enable_input_require_grads()
    if mode != "full":
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
        model = get_peft_model(model, lc)
        if mode == "lora-bf16":
            model = model.to(torch.bfloat16)
    model.train()
    return model


def saved_bytes(model, vocab: int, tokens: int) -> int:
    """Distinct storages autograd saves during one forward with labels (parameters excluded)."""
    import torch

    seen: dict[int, int] = {}

    def pack(t):
        try:
            st = t.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        except (RuntimeError, NotImplementedError):
            pass
        return t

    ids = torch.randint(0, vocab, (1, tokens))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    return sum(v for k, v in seen.items() if k not in params)


def per_layer(shape: ModelShape, mode: str, ckpt: bool, tokens: int = 512, attn: str = "sdpa") -> float:
    """Bytes per token one decoder layer keeps for backward (measured: 4 layers minus 2 layers, halved)."""
    two = saved_bytes(_build(shape, 2, mode, ckpt, attn), shape.vocab, tokens)
    four = saved_bytes(_build(shape, 4, mode, ckpt, attn), shape.vocab, tokens)
    return (four - two) / 2 / tokens


def eager_extra(shape: ModelShape, tokens: int = 512) -> float:
    """What eager attention keeps per layer beyond SDPA, in units of a·s² (heads x tokens²): kb.memory.estimate counts 6
    (the fp32 softmax output and its 16-bit copy)."""
    extra = (per_layer(shape, "full", False, tokens, "eager") - per_layer(shape, "full", False, tokens)) * tokens
    return extra / (shape.heads * tokens * tokens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=1024)
    args = ap.parse_args()
    print("| shape | mode | checkpointing | measured bytes/token/layer | kb.memory.estimate | error |")
    print("|---|---|---|---|---|---|")
    for s in SHAPES:
        base = layer_activation_bytes(s, 1, 1)
        lora_extra = LORA_FP32_INPUT_BYTES * (6 * s.hidden + s.intermediate)
        bf16 = None
        for mode in ("full", "lora-bf16", "lora-fp32"):
            for ckpt in (False, True):
                m = per_layer(s, mode, ckpt, args.tokens)
                if mode == "lora-bf16" and not ckpt:
                    bf16 = m
                kb = 2 * s.hidden if ckpt else base + (lora_extra if mode == "lora-fp32" else 0)
                print(
                    f"| {s.name} | {mode} | {'yes' if ckpt else 'no'} | {m:,.0f} | {kb:,.0f} | {100 * (kb - m) / m:+.1f}% |"
                )
        print(
            f"\n{s.name}: eager attention keeps {eager_extra(s, args.tokens):.2f} x a·s² bytes per layer more than SDPA"
        )
        if bf16:
            fp32 = per_layer(s, "lora-fp32", False, args.tokens)
            print(f"\n{s.name}: fp32 adapters add {fp32 - bf16:,.0f} bytes/token/layer = "
                  f"{(fp32 - bf16) / (6 * s.hidden + s.intermediate):.2f} x (6h + i)\n")  # fmt: skip


if __name__ == "__main__":
    main()
