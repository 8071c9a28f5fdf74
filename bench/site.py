"""Static site benchmark (figures, not tests): `kb export` of the whole KB, both languages.

    python bench/site.py [--runs 3] [--json]

Prints, per run and as the median: the export (render + write) seconds, the Pagefind indexing seconds
(both bundles, including making them byte-stable and the Chinese vocabulary), the total, the page count
and the site size in MB. Target (2-core machine): the whole export under 30 s. Quote the median; with other
work on the machine the figures move a lot (docs/site.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sitegen import build_site  # noqa: E402

TARGET_S = 30.0


def one_run(tmp: Path, i: int) -> dict:
    out = tmp / f"site-{i}"
    t0 = time.perf_counter()
    rep = build_site(out)
    total = time.perf_counter() - t0
    return {
        "export_s": rep["seconds"]["render"],
        "pagefind_s": rep["seconds"]["pagefind"],
        "total_s": round(total, 3),
        "pages": rep["pages_total"],
        "files": rep["files"],
        "mb": round(rep["bytes"] / 1e6, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="Print the runs and the medians as JSON.")
    args = ap.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="kb-site-bench-") as d:
        for i in range(args.runs):
            runs.append(one_run(Path(d), i))
            if not args.json:
                r = runs[-1]
                print(
                    f"run {i + 1}: export {r['export_s']:.2f} s, pagefind {r['pagefind_s']:.2f} s, "
                    f"total {r['total_s']:.2f} s, {r['pages']} pages, {r['mb']:.1f} MB"
                )
    med = {k: statistics.median(r[k] for r in runs) for k in ("export_s", "pagefind_s", "total_s", "pages", "mb")}
    if args.json:
        print(json.dumps({"runs": runs, "median": med, "target_s": TARGET_S}, indent=2))
        return
    verdict = "ok" if med["total_s"] <= TARGET_S else "OVER"
    print(
        f"median of {len(runs)}: export {med['export_s']:.2f} s, pagefind {med['pagefind_s']:.2f} s, "
        f"total {med['total_s']:.2f} s (target {TARGET_S:.0f} s: {verdict}), "
        f"{med['pages']:.0f} pages, {med['mb']:.1f} MB"
    )


if __name__ == "__main__":
    main()
