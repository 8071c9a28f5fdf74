"""Reproduce `generate` hanging under ZeRO-3 when ranks produce different lengths, and `synced_gpus=True` fixing it.

python bench/multi_rank_generate.py [--world 2] [--device cpu|cuda] [--timeout 90]

Starts ``world`` processes with torchrun (one per GPU with --device cuda; gloo processes on CPU otherwise). Each
builds the same tiny random Llama under ZeRO-3 (zero.Init via HfDeepSpeedConfig, then deepspeed.initialize with no
optimizer), and calls ``generate`` with greedy decoding and a different ``max_new_tokens`` per rank (rank r asks
for 4 + 6 r tokens, with no EOS), once with ``synced_gpus=False`` and once with ``synced_gpus=True``. Under ZeRO-3
every forward all-gathers the partitioned weights, so a rank that stops early leaves the others waiting in that
all-gather. The run without synced_gpus is expected to hang (the process group timeout is set to 30 s, so it ends
with a collective timeout instead of hanging forever); the one with synced_gpus finishes. Prints one JSON line per
mode with the outcome and seconds. Issue 15 asks for this on GPUs; on CPU it reproduces the mechanism.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(synced: bool, device: str) -> None:
    import datetime

    import deepspeed
    import torch
    import transformers
    from transformers.integrations import HfDeepSpeedConfig

    rank = int(os.environ["RANK"])
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    deepspeed.init_distributed(timeout=datetime.timedelta(seconds=30))
    # persistence threshold 0: every parameter is partitioned (the default keeps small ones whole, and a tiny model
    # would then never all-gather)
    conf = {
        "train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
    }
    keep = HfDeepSpeedConfig(conf)  # noqa: F841 - zero.Init while alive
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=4, eos_token_id=None,
                                   pad_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    engine = deepspeed.initialize(model=model, config=conf)[0]
    engine.module.eval()
    ids = torch.ones((1, 8), dtype=torch.long, device=engine.device)
    t = time.perf_counter()
    with torch.no_grad():
        out = engine.module.generate(ids, max_new_tokens=4 + 6 * rank, do_sample=False, synced_gpus=synced)
    print(json.dumps({"rank": rank, "synced_gpus": synced, "new_tokens": out.shape[1] - 8,
                      "s": round(time.perf_counter() - t, 2)}), flush=True)  # fmt: skip
    torch.distributed.barrier()  # a training script goes on: the finished rank waits in the next collective


def _json_line(line: str) -> dict | None:
    try:
        r = json.loads(line)
    except ValueError:
        return None
    return r if isinstance(r, dict) else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--timeout", type=int, default=90, help="seconds before a mode is called hung and killed")
    ap.add_argument("--worker", choices=["synced", "unsynced"], default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker == "synced", a.device)
        return
    for mode in ("unsynced", "synced"):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={a.world}", __file__,
               "--worker", mode, "--device", a.device]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        t = time.perf_counter()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
            done = [r for r in map(_json_line, p.stdout.splitlines()) if r and "rank" in r]
            tail = [x[:300] for x in (p.stderr + p.stdout).splitlines() if "imeout" in x or "Error" in x][-3:]
            outcome = "finished" if p.returncode == 0 and len(done) == a.world else f"failed (exit {p.returncode})"
        except subprocess.TimeoutExpired:
            done, tail, outcome = [], [], f"hung: killed after {a.timeout}s"
        print(json.dumps({"synced_gpus": mode == "synced", "world": a.world, "device": a.device, "outcome": outcome,
                          "ranks_finished": done, "s": round(time.perf_counter() - t, 1), "log": tail}))  # fmt: skip


if __name__ == "__main__":
    main()
