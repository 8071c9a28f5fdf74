"""Compare `kb mem` estimates with the GPU measurements in data/measurements/ (prints a Markdown table).

python bench/compare_memory.py [data/measurements/*.jsonl]

Runs made by the issue-13 bench (those with per-phase ``phases`` records) get a second table: memory held and
the peak within each phase, tensor families in bytes per parameter, fragmentation, host RSS per phase, and a
third one pairing runs that differ only in PYTORCH_CUDA_ALLOC_CONF.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gpu_memory import model_shape  # noqa: E402
from kb.memory import PRESETS, ModelShape, Setup, estimate  # noqa: E402


def shape(name: str) -> ModelShape:
    if name in PRESETS:
        return PRESETS[name]
    return model_shape(name)  # the bench's own shapes and its synthetic variants


def label(c: dict) -> str:
    """The model column: the name, plus what runs a-c never set (so their rows read as before)."""
    extra = []
    if c.get("micro_batch", 1) != 1:
        extra.append(f"mb{c['micro_batch']}")
    if c.get("qlora"):
        extra.append(f"QLoRA r{c.get('lora_r', 16)}" + (" (bf16 storage)" if c.get("qlora_zero3") else ""))
    elif c.get("lora"):
        extra.append(f"LoRA r{c.get('lora_r', 16)}")
    if c.get("alloc_conf"):
        extra.append("expandable" if "expandable_segments:True" in c["alloc_conf"] else c["alloc_conf"])
    return " ".join([c["model"], *extra])


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
                lora_rank=c.get("lora_r", 16) if c.get("lora") or c.get("qlora") else None,
                qlora=bool(c.get("qlora")),
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
                    "model": label(c),
                    "config": c,
                    "phases": r.get("phases"),
                    "trainable_params": r.get("trainable_params"),
                    "shape": r.get("shape"),
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


PHASES = ("model_built", "initialized", "forward0", "backward0", "step0", "step2", "at_rest")


def _gib(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def phase_table(rs: list[dict]) -> str:
    """Per-phase accounting of the runs that recorded it (issue 13)."""
    head = (
        "| model | ZeRO | seq | " + " | ".join(f"{p}: held / peak" for p in PHASES)
        + " | reserved - allocated at peak | alloc retries | B/param at step0: params / grads / master / states / other "
        "| host RSS peak per phase (GiB) |\n|" + "---|" * (len(PHASES) + 6) + "\n"
    )  # fmt: skip
    body = ""
    for r in rs:
        ph = r.get("phases") or {}
        if not ph:
            continue
        cells = [f"{_gib(ph[p].get('allocated_gib'))} / {_gib(ph[p].get('phase_peak_allocated_gib'))}" if p in ph else "-"
                 for p in PHASES]  # fmt: skip
        peak = max(ph.values(), key=lambda x: x.get("phase_peak_allocated_gib") or 0)
        slack = (peak.get("phase_peak_reserved_gib") or 0) - (peak.get("phase_peak_allocated_gib") or 0)
        retries = max((x.get("num_alloc_retries") or 0) for x in ph.values())
        fam = (ph.get("step0") or {}).get("families_bytes_per_param")
        fams = " / ".join(f"{fam[k]:.2f}" for k in ("params", "grads", "master_fp32", "optimizer_states", "other")) if fam else "-"
        rss = max((x.get("host_rss_peak_gib") or 0) for x in ph.values())
        body += (
            f"| {r['model']} | {r['stage']} | {r['seq']} | " + " | ".join(cells)
            + f" | {slack:.2f} | {retries} | {fams} | {rss:.1f} |\n"
        )  # fmt: skip
    return head + body if body else ""


def alloc_pairs(rs: list[dict]) -> str:
    """Runs identical but for PYTORCH_CUDA_ALLOC_CONF: what the setting changes, measured."""
    def key(r: dict) -> str:
        return json.dumps({k: v for k, v in r["config"].items() if k != "alloc_conf"}, sort_keys=True)

    base = {key(r): r for r in rs if not r["config"].get("alloc_conf")}
    body = ""
    for r in rs:
        if not r["config"].get("alloc_conf") or key(r) not in base:
            continue
        b = base[key(r)]
        body += (
            f"| {b['model']} | {r['config']['alloc_conf']} | {_gib(b['measured_alloc_gib'])} / {_gib(r['measured_alloc_gib'])} "
            f"| {_gib(b['measured_reserved_gib'])} / {_gib(r['measured_reserved_gib'])} | {b['outcome']} / {r['outcome']} |\n"
        )  # fmt: skip
    head = ("| run | PYTORCH_CUDA_ALLOC_CONF | peak allocated: without / with (GiB) | peak reserved: without / with (GiB) "
            "| outcome |\n|---|---|---|---|---|\n")  # fmt: skip
    return head + body if body else ""


if __name__ == "__main__":
    files = [Path(p) for p in sys.argv[1:]] or sorted((ROOT / "data" / "measurements").glob("*.jsonl"))
    rs = rows(files)
    print(table(rs))
    errs = [abs(r["error_pct"]) for r in rs if r["error_pct"] is not None]
    print(
        f"runs that trained: {len(errs)}, max |error| {100 * max(errs):.1f}%, within 15%: "
        f"{sum(e <= 0.15 for e in errs)}/{len(errs)}; verdicts right: {sum(r['verdict_right'] for r in rs)}/{len(rs)}"
    )
    for extra in (phase_table(rs), alloc_pairs(rs)):
        if extra:
            print()
            print(extra, end="")
