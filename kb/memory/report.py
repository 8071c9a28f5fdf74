"""A ``kb mem`` estimate as the contract's values: the one conversion every surface uses.

``memory_contract``: an ``Estimate`` (or its dict) -> the ``Memory`` an answer carries (kb ask's memory block).
``mem_report``: the same plus the setup echoed back and the explain data -> ``MemReport`` (``kb mem``, the
bots' /mem). Labels, notes and changes come out in the report's language. Imports only the contract.
"""

from __future__ import annotations

from typing import Any

from kb import contract as C


def _estimate_dict(e: Any) -> dict[str, Any]:
    return e.to_dict() if hasattr(e, "to_dict") else e


def _alive(e: dict[str, Any]) -> dict[str, list[str]]:
    """Term key -> the phases it is alive in, from the estimate's own phase lists (what the totals add up)."""
    out: dict[str, list[str]] = {}
    for p in e.get("phases") or []:
        for key in p["terms"]:
            out.setdefault(key, []).append(p["phase"])
    return out


def _term(t: dict[str, Any], lang: str, phases: list[str] | None = None) -> C.MemoryTerm:
    label = t["label_zh"] if lang == "zh" else t["label"]
    return C.MemoryTerm(t["key"], label, t["gib"], t["formula"], t["source"], list(phases or []))


def memory_contract(e: Any, lang: str, assumptions: list[str] | None = None) -> C.Memory:
    """A ``kb mem`` estimate (``Estimate`` or ``Estimate.to_dict()``) as the answer contract's Memory, labels in
    ``lang``: the terms alive at the peak (with their phases), the phases, the verdicts, the cheapest changes."""
    e = _estimate_dict(e)
    s = e.get("setup") or {}
    zh = lang == "zh"
    alive = _alive(e)

    peak = next((p for p in e.get("phases") or [] if p["phase"] == e.get("peak_phase")), None)
    at_peak = set(peak["terms"]) if peak else set()
    ds = e.get("deepspeed_estimator")
    return C.Memory(
        model=s.get("shape") or f"{(e.get('params') or 0) / 1e9:g}B",
        gpus=s.get("gpus", 1) * s.get("nodes", 1),
        gpu_mem_gib=s.get("gpu_mem_gib", 0.0),
        gpu=[_term(t, lang, alive.get(t["key"])) for t in e.get("terms") or [] if t["key"] in at_peak],
        gpu_total_gib=e.get("gpu_total_gib", 0.0),
        gpu_needed_gib=e.get("gpu_needed_gib", 0.0),
        fits_gpu=bool(e.get("fits_gpu")),
        host=[_term(t, lang) for t in e.get("host_terms") or []],
        host_total_gib=e.get("host_total_gib", 0.0),
        deepspeed_estimator_gib=round(ds["gpu_gib"], 3) if ds else None,
        changes=[
            C.MemoryChange(
                c["change_zh"] if zh else c["change"],
                c["cost_zh"] if zh else c["cost"],
                c["gpu_needed_gib"],
                c["host_total_gib"],
            )
            for c in e.get("changes") or []
        ],  # fmt: skip
        assumptions=list(assumptions or []),
        notes=list((e.get("notes_zh") if zh else e.get("notes")) or []),
        gpu_verdict=e.get("gpu_verdict", "fits"),
        peak_phase=e.get("peak_phase", ""),
        reserved_gib=e.get("reserved_gib", 0.0),
        phases=[
            C.MemoryPhase(p["phase"], p["phase_zh"] if zh else p["phase"], p["gib"]) for p in e.get("phases") or []
        ],
    )


def mem_report(e: Any, setup: list[C.SetupValue], lang: str, assumptions: list[str] | None = None) -> C.MemReport:
    """``kb mem``'s report: the Memory of ``e`` plus ``setup`` (kb.memory.setup.echo), the parameter counts,
    every GPU term with its phases, the host verdict and DeepSpeed's estimator."""
    d = _estimate_dict(e)
    m = memory_contract(d, lang, assumptions)
    alive = _alive(d)
    ds = d.get("deepspeed_estimator")
    return C.MemReport(
        **{f: getattr(m, f) for f in C.Memory.__dataclass_fields__},
        lang=lang,  # type: ignore[arg-type]
        setup=list(setup),
        shape=(d.get("setup") or {}).get("shape"),
        params=int(d.get("params") or 0),
        trainable_params=int(d.get("trainable_params") or 0),
        terms=[_term(t, lang, alive.get(t["key"])) for t in d.get("terms") or []],
        fits_host=d.get("fits_host"),
        host_verdict=d.get("host_verdict", "unknown"),
        deepspeed_estimator=(
            C.DeepSpeedEstimate(
                ds["function"], int(ds["gpu_bytes"]), int(ds["cpu_bytes"]), ds["gpu_gib"], ds["cpu_gib"]
            )
            if ds
            else None
        ),
    )
