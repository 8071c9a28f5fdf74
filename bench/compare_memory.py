"""Compare `kb mem` estimates with the GPU measurements in data/measurements/ (prints a Markdown table).

python bench/compare_memory.py [data/measurements/*.jsonl]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gpu_memory import SHAPES  # noqa: E402
from kb.memory import PRESETS, ModelShape, Setup, estimate  # noqa: E402


def shape(name: str) -> ModelShape:
    if name in PRESETS:
        return PRESETS[name]
    v, h, i, n, a, kv = SHAPES[name]
    return ModelShape(name, v, h, i, n, a, kv)


def rows(files: list[Path]) -> list[dict]:
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            r = json.loads(line)
            c = r["config"]
            s = Setup(
                shape=shape(c["model"]),
                gpus=1,
                gpu_mem_gib=c.get("cap_gib", 80),
                stage=c["stage"],
                offload=c["offload"],
                seq=c["seq"],
                micro_batch=c.get("micro_batch", 1),
                activation_checkpointing=c["ckpt"],
                cpu_mem_gib=125,
            )
            e = estimate(s)
            measured = r.get("peak_allocated_gib")
            if r.get("killed") or "exit -9" in str(r.get("error", "")):
                outcome = "killed: host out of memory (125 GiB)"
            elif r.get("oom"):
                outcome = f"CUDA OOM after {measured:.1f} GiB allocated"
            elif r.get("error"):
                outcome = f"error: {r['error'][:60]}"
            else:
                outcome = "ran"
            ran = outcome == "ran"
            err = (e.gpu_total_gib - measured) / measured if ran and measured else None
            predicted = (
                "GPU OOM"
                if not e.fits_gpu
                else {"fits": "fits", "tight": "host tight", "does not fit": "host OOM"}.get(e.host_verdict, "fits")
            )
            actual = "fits" if ran else ("GPU OOM" if r.get("oom") else "host OOM" if "host" in outcome else "?")
            out.append(
                {
                    "file": f.name,
                    "model": c["model"],
                    "stage": c["stage"],
                    "offload": c["offload"],
                    "ckpt": c["ckpt"],
                    "seq": c["seq"],
                    "optimizer": "torch AdamW"
                    if c.get("torch_adam")
                    else ("DeepSpeedCPUAdam" if c["offload"] != "none" else "FusedAdam"),
                    "estimate_gib": e.gpu_total_gib,
                    "needed_gib": e.gpu_needed_gib,
                    "host_est_gib": e.host_total_gib,
                    "measured_alloc_gib": measured,
                    "measured_reserved_gib": r.get("peak_reserved_gib"),
                    "host_rss_gib": r.get("peak_host_rss_gib"),
                    "outcome": outcome,
                    "error_pct": err,
                    "verdict_right": predicted == actual
                    or (predicted == "host tight" and actual in ("fits", "host OOM")),
                    "predicted": predicted,
                    "actual": actual,
                    "step_s": r.get("step_s"),
                }
            )
    return out


def table(rs: list[dict]) -> str:
    head = (
        "| model | ZeRO | offload | ckpt | seq | optimizer | estimate (GiB) | measured peak allocated (GiB) | error "
        "| host est. / RSS (GiB) | verdict: predicted / actual |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = ""
    for r in rs:
        meas = f"{r['measured_alloc_gib']:.2f}" if r["outcome"] == "ran" else r["outcome"]
        err = f"{100 * r['error_pct']:+.1f}%" if r["error_pct"] is not None else "-"
        rss = f"{r['host_rss_gib']:.0f}" if r["host_rss_gib"] else "-"
        ok = "✓" if r["verdict_right"] else "✗"
        body += (
            f"| {r['model']} | {r['stage']} | {r['offload']} | {'yes' if r['ckpt'] else 'no'} | {r['seq']} | "
            f"{r['optimizer']} | {r['estimate_gib']:.2f} | {meas} | {err} | {r['host_est_gib']:.0f} / {rss} | "
            f"{r['predicted']} / {r['actual']} {ok} |\n"
        )
    return head + body


if __name__ == "__main__":
    files = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "data" / "measurements").glob("*.jsonl"))
    rs = rows(files)
    print(table(rs))
    errs = [abs(r["error_pct"]) for r in rs if r["error_pct"] is not None]
    print(
        f"runs that trained: {len(errs)}, max |error| {100 * max(errs):.1f}%, within 15%: "
        f"{sum(e <= 0.15 for e in errs)}/{len(errs)}; verdicts right: {sum(r['verdict_right'] for r in rs)}/{len(rs)}"
    )
