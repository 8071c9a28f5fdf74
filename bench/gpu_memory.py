"""Measure peak GPU memory of DeepSpeed ZeRO training on a real GPU, to check `kb mem` against.

    python bench/gpu_memory.py --matrix small,7b-oom --out results.jsonl [--cap-gib 80]
    python bench/gpu_memory.py --one '{"model": "tiny", ...}' --device cpu      # smoke test, no GPU

Each configuration runs in its own process (an OOM or a host kill cannot spoil the next): a
Llama-shaped model with random weights (no download) is built the way the HF integration builds it
(under zero.Init for ZeRO-3), wrapped by deepspeed.initialize, and trained for a few steps on random
tokens. The process caps usable GPU memory with torch.cuda.set_per_process_memory_fraction to
emulate an 80 GiB card, and records peak allocated / reserved GPU memory after each phase, peak host
RSS, step time, or where it ran out of memory. One JSON line per configuration.
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

SHAPES = {
    # name: (vocab, hidden, intermediate, layers, heads, kv_heads) -- published Llama shapes
    "llama2-7b": (32000, 4096, 11008, 32, 32, 32),
    "tinyllama-1.1b": (32000, 2048, 5632, 22, 32, 4),
    "tiny": (1000, 64, 128, 2, 4, 4),
}

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
    "small-fused": [
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=False, seq=2048),
        dict(model="tinyllama-1.1b", stage=3, offload="none", ckpt=True, seq=2048),
        dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=False, seq=2048),
        dict(model="tinyllama-1.1b", stage=2, offload="none", ckpt=True, seq=2048),
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
}


def ds_config(c: dict) -> dict:
    z: dict = {"stage": c["stage"]}
    if c["offload"] in ("optimizer", "optimizer+param"):
        z["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if c["offload"] == "optimizer+param":
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


def run_one(c: dict) -> dict:
    """Train a few steps with one configuration; return the measurements."""
    import psutil
    import torch

    dev = c.get("device", "cuda")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    res: dict = {"config": c, "phase": "start", "oom": False}
    peak_rss = [0]
    stop = threading.Event()

    def sample_rss() -> None:
        p = psutil.Process()
        while not stop.is_set():
            try:
                rss = p.memory_info().rss + sum(ch.memory_info().rss for ch in p.children(recursive=True))
                peak_rss[0] = max(peak_rss[0], rss)
            except psutil.Error:
                pass
            time.sleep(0.05)

    threading.Thread(target=sample_rss, daemon=True).start()
    gib = 2**30
    if dev == "cuda":
        total = torch.cuda.get_device_properties(0).total_memory
        cap = c.get("cap_gib", 80) * gib
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
        res["gpu"] = torch.cuda.get_device_name(0)
        res["gpu_total_gib"] = round(total / gib, 2)

    def mark(phase: str) -> None:
        res["phase"] = phase
        if dev == "cuda":
            torch.cuda.synchronize()
            res.setdefault("peaks", {})[phase] = {
                "allocated_gib": round(torch.cuda.max_memory_allocated() / gib, 3),
                "reserved_gib": round(torch.cuda.max_memory_reserved() / gib, 3),
            }

    try:
        import deepspeed
        import transformers
        from transformers.integrations import HfDeepSpeedConfig

        res["versions"] = {
            "torch": torch.__version__,
            "deepspeed": deepspeed.__version__,
            "transformers": transformers.__version__,
        }
        vocab, hidden, inter, layers, heads, kv = SHAPES[c["model"]]
        cfg = transformers.LlamaConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=inter,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            max_position_embeddings=max(4096, c["seq"]),
            attn_implementation="sdpa",
            use_cache=False,
        )
        conf = ds_config(c)
        dtype = torch.bfloat16 if dev == "cuda" else torch.float32
        keep = HfDeepSpeedConfig(conf) if c["stage"] == 3 else None  # noqa: F841 - zero.Init while alive
        t0 = time.perf_counter()
        if c["stage"] == 3:
            model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        else:
            with torch.device(dev):
                model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        res["params"] = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters())
        if c["ckpt"]:
            fn = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
            try:
                fn(activation_checkpointing_kwargs={"use_reentrant": False})
            except TypeError:
                fn(gradient_checkpointing_kwargs={"use_reentrant": False})
        mark("model_built")
        engine, _, _, _ = deepspeed.initialize(
            model=model, model_parameters=[p for p in model.parameters()], config=conf
        )
        res["init_s"] = round(time.perf_counter() - t0, 1)
        mark("initialized")
        steps = []
        for step in range(c.get("steps", 3)):
            ids = torch.randint(0, vocab, (c.get("micro_batch", 1), c["seq"]), device=engine.device)
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
            res["peak_allocated_gib"] = round(torch.cuda.max_memory_allocated() / gib, 3)
            res["peak_reserved_gib"] = round(torch.cuda.max_memory_reserved() / gib, 3)
        res["peak_host_rss_gib"] = round(peak_rss[0] / gib, 2)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--matrix", default="small")
    ap.add_argument("--one", default=None, help="run one configuration (JSON) in this process")
    ap.add_argument("--out", default="gpu_memory.jsonl")
    ap.add_argument("--cap-gib", type=float, default=80.0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per configuration")
    a = ap.parse_args()
    if a.one:
        c = json.loads(a.one)
        c.setdefault("device", a.device)
        print("RESULT " + json.dumps(run_one(c)), flush=True)
        return
    for name in a.matrix.split(","):
        for c in MATRICES[name]:
            c = {**c, "cap_gib": a.cap_gib, "device": a.device}
            t = time.perf_counter()
            try:
                p = subprocess.run(
                    [sys.executable, __file__, "--one", json.dumps(c)],
                    capture_output=True,
                    text=True,
                    timeout=a.timeout,
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
