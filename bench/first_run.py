"""The first `kb ask` on a fresh clone: build the index from the shipped vectors, then answer (issue 14's target:
<= 3 s on an idle 2-core machine).

python bench/first_run.py [--runs 3] [--query "zero3 oom first step"] [--worktree]

Each run clones the committed HEAD of this repository into a new temporary folder (no index, no caches), then
times one `kb ask --json` in a fresh process with that clone's code and data (PYTHONPATH points at the clone; the
interpreter is this venv's). ``--worktree`` copies the working tree's files instead (tracked and untracked ones
that git does not ignore: what the next commit would hold), to measure a change before it is committed.
Prints min / median / max wall seconds, what the build did (units embedded: 0 when data/embeddings/ covers every
unit; reused), and, in another fresh process after the ask, how long reading the shipped vectors takes (one
``<entry id>.npy`` per entry under data/embeddings/<embedder>/: files, MB, ms). Run it on an idle machine; quote
the median.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# run in the clone after the ask: the time to read every shipped vector file (numpy already imported)
READ_VECTORS = """
import json, time
import numpy  # imported before the clock starts: every kb ask imports it anyway
from kb.paths import data_dir
try:
    from kb.index.units import VECTOR_SUFFIX, folder_embedder, load_vector_cache
except ImportError:  # a tree from before the per-entry files (one data/embeddings/<embedder>.npz)
    raise SystemExit(print("{}"))
out = {}
for folder in sorted(p for p in (data_dir() / "embeddings").iterdir() if p.is_dir()):
    files = list(folder.glob("*" + VECTOR_SUFFIX))
    t0 = time.perf_counter()
    n = len(load_vector_cache(folder_embedder(folder)))
    ms = (time.perf_counter() - t0) * 1000
    out[folder.name] = {"files": len(files), "MB": round(sum(f.stat().st_size for f in files) / 1e6, 2),
                        "vectors": n, "read_ms": round(ms, 1)}
print(json.dumps(out))
"""


def copy_worktree(dest: Path) -> None:
    """The files a commit of the working tree would hold: tracked (still present) and untracked, not ignored."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, names):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def one_run(query: str, worktree: bool = False) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="kb-first-run-") as tmp:
        clone = Path(tmp) / "kb"
        if worktree:
            copy_worktree(clone)
        else:
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
        read = subprocess.run(
            [sys.executable, "-c", READ_VECTORS], cwd=clone, env=env, capture_output=True, text=True, check=True
        )
        info["vectors"] = json.loads(read.stdout)
        return wall, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--query", default="zero3 oom first step")
    ap.add_argument("--worktree", action="store_true", help="copy the working tree instead of cloning HEAD")
    args = ap.parse_args()
    walls = []
    for i in range(args.runs):
        wall, info = one_run(args.query, args.worktree)
        walls.append(wall)
        print(f"run {i + 1}: {wall:.2f} s  {info}")
    print(f"first kb ask on a fresh clone: min {min(walls):.2f} / median {statistics.median(walls):.2f} / "
          f"max {max(walls):.2f} s over {len(walls)} runs (target <= 3 s idle)")  # fmt: skip


if __name__ == "__main__":
    main()
