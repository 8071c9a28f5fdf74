"""Load on the bots' answer service: asks/s, end-to-end latency, event-loop lag (figures, not a test).

    python -m bench.bot_load [--index DIR] [--n 400] [--concurrency 50] [--workers 4]

Runs ``AnswerService.ask`` on the real index (default: the index kb ask uses) from one asyncio loop,
the way both bots call it, with distinct queries (no cache hits) and then the same queries again
(all cache hits). A ticker coroutine measures event-loop lag every 10 ms: if the core ever ran on the
loop, the lag would show it. Prints min / median / p99 / max.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

QUERIES = [
    "zero3 oom first step",
    "ZeRO-3第一步就OOM",
    "nvme offload crashes at init",
    "多卡训练 generate 卡住不动",
    "save_checkpoint hangs inside is_main_process",
    "lora merge under zero3 gives empty weights",
    "bf16 and fp16 both enabled assertion",
    "NCCL timeout during dataset preprocessing",
    "显存碎片 reserved 比 allocated 大很多",
    "deepspeed launcher ignores CUDA_VISIBLE_DEVICES",
    "how to resume from a zero3 checkpoint with fewer GPUs",
    "cpu adam build fails with cuda mismatch",
]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def _load(service, queries: list[str], concurrency: int) -> tuple[list[float], list[float], float]:
    from bot.service import AskRequest

    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker():
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(max(0.0, time.perf_counter() - t - 0.01))

    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []

    async def one(i: int, q: str):
        async with sem:
            t = time.perf_counter()
            r = await service.ask(AskRequest(q, user_id=f"u{i}", channel_id=f"c{i % 10}", platform="bench"))
            assert r.kind in ("answer", "no_answer"), r
            lat.append(time.perf_counter() - t)

    tick = asyncio.create_task(ticker())
    t0 = time.perf_counter()
    await asyncio.gather(*(one(i, q) for i, q in enumerate(queries)))
    wall = time.perf_counter() - t0
    stop.set()
    await tick
    return lat, lags, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, default=None)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--concurrency", type=int, default=50)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()

    from bot.feedback import SQLiteStore
    from bot.service import AnswerService
    from bot.settings import Settings
    from indexer.build import ensure_index
    from kb.ask.engine import Engine

    ensure_index(args.index)
    eng = Engine(index_path=args.index)
    with tempfile.TemporaryDirectory() as d:
        s = Settings(
            feedback_db=str(Path(d) / "fb.sqlite"),
            workers=args.workers,
            user_per_minute=600,
            user_burst=600,
            channel_per_minute=6000,
            channel_burst=6000,
        )
        svc = AnswerService(s, engine=eng, store=SQLiteStore(s.feedback_db))
        distinct = [f"{QUERIES[i % len(QUERIES)]} (case {i})" for i in range(args.n)]
        print(
            f"index: {eng.index.path} ({len(eng.index.entries)} entries, {eng.index.embedder_id}); workers {args.workers}"
        )
        for label, qs in (("distinct queries (no cache)", distinct), ("repeated queries (cache hits)", distinct)):
            lat, lags, wall = asyncio.run(_load(svc, qs, args.concurrency))
            ms = [x * 1000 for x in lat]
            lag = [x * 1000 for x in lags] or [0.0]
            print(
                f"{label}: {len(qs)} asks, concurrency {args.concurrency}: {len(qs) / wall:.1f} asks/s; "
                f"end to end ms min {min(ms):.1f} / median {statistics.median(ms):.1f} / p99 {pct(ms, 99):.1f} / "
                f"max {max(ms):.1f}; event-loop lag ms median {statistics.median(lag):.2f} / p99 {pct(lag, 99):.2f} / "
                f"max {max(lag):.2f}"
            )
        svc.close()


if __name__ == "__main__":
    main()
