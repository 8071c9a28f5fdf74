"""The first `kb ask` on a fresh clone: build the index from the shipped vectors, then answer (issue 14's target:
<= 3 s on an idle 2-core machine).

python bench/first_run.py [--runs 3] [--query "zero3 oom first step"]

Each run clones the committed HEAD of this repository into a new temporary folder (no index, no caches), then
times one `kb ask --json` in a fresh process with that clone's code and data (PYTHONPATH points at the clone; the
interpreter is this venv's). Prints min / median / max wall seconds, and what the build did: units embedded (0
when data/embeddings/ covers every unit) and reused. Run it on an idle machine; quote the median.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one_run(query: str) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="kb-first-run-") as tmp:
        clone = Path(tmp) / "kb"
        subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{ROOT}", str(clone)], check=True)
        env = {**os.environ, "PYTHONPATH": str(clone), "OMP_WAIT_POLICY": "PASSIVE"}
        env.pop("KB_INDEX", None)
        env.pop("KB_DATA", None)
        code = "from cli.main import main; main()"
        t0 = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", code, "ask", query, "--json"], cwd=clone, env=env, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        if out.returncode not in (0, 1):
            raise SystemExit(f"kb ask failed ({out.returncode}): {out.stderr[-800:]}")
        answer = json.loads(out.stdout)
        built = re.search(r"(\d+) units, embedded (\d+), reused (\d+)", out.stderr)
        info = {"answered": answer["answered"], "top": [r["id"] for r in answer["results"]][:1]}
        if built:
            info.update(units=int(built.group(1)), embedded=int(built.group(2)), reused=int(built.group(3)))
        return wall, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--query", default="zero3 oom first step")
    args = ap.parse_args()
    walls = []
    for i in range(args.runs):
        wall, info = one_run(args.query)
        walls.append(wall)
        print(f"run {i + 1}: {wall:.2f} s  {info}")
    print(f"first kb ask on a fresh clone: min {min(walls):.2f} / median {statistics.median(walls):.2f} / "
          f"max {max(walls):.2f} s over {len(walls)} runs (target <= 3 s idle)")  # fmt: skip


if __name__ == "__main__":
    main()
