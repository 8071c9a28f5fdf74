"""``kb gaps``: the curators' to-do list, from what the bots were asked.

Takes the unanswered, low-score and down-voted questions in the feedback store, groups them by
meaning (the index's own embedder, greedy single pass: a question joins the first group whose centroid
is close enough, else starts one), and reports each group with its size, example questions in both
languages, the entries it came closest to, and the reasons users gave for their down-votes.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from datetime import UTC, datetime

import numpy as np

from kb.contract import GapGroup, GapsReport

LOW_SCORE = 0.55  # answered, but only just above the gate (0.44): a weak match worth a look
MAX_QUERIES = 20_000


def parse_since(text: str | None, now: float | None = None) -> float | None:
    """'7d', '24h', '30m' or an ISO date/time -> epoch seconds; None -> everything."""
    if not text:
        return None
    now = time.time() if now is None else now
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([dhm])\s*", text)
    if m:
        return now - float(m.group(1)) * {"d": 86400, "h": 3600, "m": 60}[m.group(2)]
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r}: use a duration like 7d / 24h or a date like 2026-11-30") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def _why(rec) -> list[str]:
    out = []
    if not rec.answered:
        out.append("unanswered")
    elif rec.top_score is not None and rec.top_score < LOW_SCORE:
        out.append("low_score")
    if any(not v["helpful"] for v in rec.votes):
        out.append("downvoted")
    return out


def gaps(store, embedder, since: float | None = None, threshold: float | None = None) -> GapsReport:
    """The groups, as the contract's GapsReport (``kb gaps``; docs/answer.md)."""
    recs = [(r, w) for r in store.asks(since) if (w := _why(r))][:MAX_QUERIES]
    if not recs:
        return GapsReport(since, 0, [])
    vecs = np.asarray(embedder.embed_queries([r.query[:2000] for r, _ in recs]), dtype=np.float32)
    if threshold is None:
        cal = getattr(embedder, "calibration", None) or {}
        lo, hi = cal.get("en", (0.5, 0.9))
        threshold = lo + 0.8 * (hi - lo)  # well inside "on topic" for this embedder
    centroids: list[np.ndarray] = []
    members: list[list[int]] = []
    for i, v in enumerate(vecs):
        best, best_sim = None, threshold
        for g, c in enumerate(centroids):
            sim = float(c @ v) / max(float(np.linalg.norm(c)), 1e-12)
            if sim >= best_sim:
                best, best_sim = g, sim
        if best is None:
            centroids.append(v.copy())
            members.append([i])
        else:
            centroids[best] += v
            members[best].append(i)
    groups = []
    for idx in members:
        rs = [recs[i] for i in idx]
        examples: dict[str, list[str]] = {"en": [], "zh": []}
        for r, _ in rs:
            lst = examples.setdefault(r.lang, [])
            if r.query not in lst and len(lst) < 3:
                lst.append(r.query)
        closest = Counter(x["id"] for r, _ in rs for x in r.results[:3])
        reasons = Counter(v["reason"] for r, _ in rs for v in r.votes if not v["helpful"] and v["reason"])
        groups.append(
            GapGroup(
                count=len(rs),
                why=dict(Counter(w for _, ws in rs for w in ws)),
                examples=examples,
                closest_entries=[eid for eid, _ in closest.most_common(3)],
                downvote_reasons=dict(reasons.most_common()),
                first_seen=min(r.ts for r, _ in rs),
                last_seen=max(r.ts for r, _ in rs),
                platforms=sorted({r.platform for r, _ in rs}),
            )
        )
    groups.sort(key=lambda g: (-g.count, -g.last_seen))
    return GapsReport(since, len(recs), groups, round(threshold, 3))
