"""Hybrid retrieval: the evidence for each candidate entry, dense (FAISS) + lexical (BM25 / term coverage) +
signatures + parameter names. Turning evidence into a score, and every adjustment after that, is kb.ask.rank.

- dense'    best cosine of any unit of the entry (and the second best), rescaled by the embedder's calibration
            range for the question's language
- coverage  IDF-weighted share of the question's terms found anywhere in the entry's units
- bm25_rel  the entry's best BM25 unit score relative to the best of this question
- signature a pasted error matches one of the entry's signature regexes
- params    the question names a parameter the entry is about (and whether the entry's title names it)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kb.index.load import Index
from kb.index.threads import faiss_query_threads
from kb.lang import CJK

if TYPE_CHECKING:
    from kb.ask.question import Question

DENSE_SECOND_WEIGHT = 0.3  # entry dense = 0.7 * best unit + 0.3 * second best: several phrasings agreeing
CJK_OOV_WEIGHT = 0.3  # a CJK bigram unknown to the index is usually a segmentation artifact
N_DENSE = 64
_CJK_BIGRAM = re.compile(f"^[{CJK}]{{2}}$")


@dataclass
class Hit:
    entry_id: str
    score: float = 0.0
    dense: float = 0.0
    dense2: float = 0.0
    dense_unit: int | None = None
    coverage: float = 0.0
    bm25: float = 0.0
    bm25_unit: int | None = None
    matched_terms: list[str] = field(default_factory=list)
    dense_cal: float = 0.0  # dense' : the aggregated cosine rescaled to 0..1 by the embedder's calibration
    signature: str | None = None
    params: list[str] = field(default_factory=list)
    title_named: bool = False
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # why-notes of the adjustments (i18n key)
    steps: list[tuple[str, str, float]] = field(default_factory=list)  # kb.ask.rank: (name, op, value) that applied


class Retriever:
    def __init__(self, index: Index, embedder):
        self.idx = index
        self.embedder = embedder
        bm = index.bm25
        self._vocab: dict[str, int] = bm.vocab_dict
        self._indptr = bm.scores["indptr"]
        self._indices = bm.scores["indices"]
        self._n_units = len(index.units)
        self._entry_ids = list(index.entries)
        self._entry_pos = {e: i for i, e in enumerate(self._entry_ids)}
        self._unit_entry_idx = np.array([self._entry_pos[e] for e in index.unit_entry], dtype=np.int64)
        # entry -> param names (leaf) and myth names, for "the query names a parameter" matching
        self._names: dict[str, set[str]] = {}
        # signature regex -> (source, entries); keyed by compiled pattern and its required literal
        # signature pattern -> (its required literal, entries); a pattern is compiled the first time a question
        # contains its literal (most never do: compiling all ~350 up front was about a quarter of opening the engine,
        # profiled)
        self._sigs: dict[str, tuple[str, list[str]]] = {}
        self._compiled: dict[str, re.Pattern[str]] = {}
        self._titles = {eid: (e["title"]["en"] + " " + e["title"]["zh"]).lower() for eid, e in index.entries.items()}
        for eid, e in index.entries.items():
            names = {p.split(":", 1)[1].rsplit(".", 1)[-1].split("/")[-1].lower() for p in _all_params(e)}
            names |= {n["name"].lower() for m in e.get("myths", []) for n in m["names"]}
            self._names[eid] = names
            for s in (sig["pattern"] for sig in e.get("signatures", [])):  # {pattern, examples}
                self._sigs.setdefault(s, (_required_literal(s), []))[1].append(eid)

    def vocabulary(self) -> list[str]:
        """Every token the index's units have."""
        return list(self._vocab)

    def knows(self, token: str) -> bool:
        """Does any unit of the index have ``token`` (kb.ask.text.tokenize's form)?"""
        return token in self._vocab

    # ------------------------------------------------------------ pieces

    def _idf(self, tok: str) -> float:
        tid = self._vocab.get(tok)
        df = 0 if tid is None else int(self._indptr[tid + 1] - self._indptr[tid])
        return math.log(1 + (self._n_units - df + 0.5) / (df + 0.5))

    def _coverage(self, qtoks: list[str]) -> tuple[np.ndarray, list[tuple[str, np.ndarray]]]:
        """IDF-weighted share of the query's terms each entry contains (vectorised over entries).

        Returns the coverage per entry index and, for the "why", each matched term with the entry
        indices that contain it.
        """
        cov = np.zeros(len(self._entry_ids), dtype=np.float64)
        matched: list[tuple[str, np.ndarray]] = []
        total = 0.0
        for t in dict.fromkeys(qtoks):
            w = self._idf(t)
            tid = self._vocab.get(t)
            if tid is None and _CJK_BIGRAM.match(t):
                w *= CJK_OOV_WEIGHT
            total += w
            if tid is None:
                continue
            ents = np.unique(self._unit_entry_idx[self._indices[self._indptr[tid] : self._indptr[tid + 1]]])
            cov[ents] += w
            matched.append((t, ents))
        if total > 0:
            cov /= total
        return cov, matched

    def search(self, q: Question, query_params: list[str] | None = None, extra: list[str] | None = None) -> list[Hit]:
        """The candidates for question ``q`` with their evidence (not yet scored: kb.ask.rank). ``query_params`` are
        registry-resolved names found in the question; ``extra`` entries are candidates whatever the text says (the
        entries config findings point to)."""
        idx = self.idx
        hits: dict[str, Hit] = {}

        def hit(eid: str) -> Hit:
            return hits.setdefault(eid, Hit(eid))

        # dense
        dense_floor = 0.0
        if idx.faiss.ntotal:
            qv = self.embedder.embed_queries([q.text[:2000]]).astype(np.float32)
            faiss_query_threads()  # 1 OpenMP thread for faiss on this (possibly a bot's worker) thread
            sims, rows = idx.faiss.search(qv, min(N_DENSE, idx.faiss.ntotal))
            dense_floor = float(sims[0][-1])  # an entry's unseen second unit is at most this similar
            for cos, row in zip(sims[0].tolist(), rows[0].tolist(), strict=True):
                if row < 0:
                    continue
                u = idx.dense_rows[row]
                h = hit(idx.unit_entry[u])
                if cos > h.dense:
                    h.dense, h.dense2, h.dense_unit = cos, h.dense, u
                elif cos > h.dense2:
                    h.dense2 = cos
        # lexical
        qtoks = list(q.tokens)
        if qtoks:
            scores = idx.bm25.get_scores(qtoks)
            top = np.argpartition(-scores, min(N_DENSE, len(scores) - 1))[:N_DENSE]
            top = top[np.argsort(-scores[top])]
            best = float(scores[top[0]]) if len(top) else 0.0
            for u in top.tolist():
                s = float(scores[u])
                if s <= 0:
                    break
                h = hit(idx.unit_entry[u])
                rel = s / best if best > 0 else 0.0
                if rel > h.bm25:
                    h.bm25, h.bm25_unit = rel, u
            cov, matched = self._coverage(qtoks)
            # candidates: whatever dense/BM25 found, plus the best-covered entries
            for ei in np.argpartition(-cov, min(N_DENSE, len(cov) - 1))[:N_DENSE].tolist():
                if cov[ei] > 0:
                    hit(self._entry_ids[ei])
        else:
            cov, matched = np.zeros(len(self._entry_ids)), []
        # signatures (raw and normalised text); a regex runs only if its longest literal is in the text
        norm = q.normalized
        low = f"{q.text}\n{norm}".lower()
        for src, (lit, eids) in self._sigs.items():
            if lit not in low:
                continue
            rx = self._compiled.get(src)
            if rx is None:
                rx = self._compiled[src] = re.compile(src, re.I | re.S)
            if rx.search(q.text) or rx.search(norm):
                for eid in eids:
                    h = hit(eid)
                    h.signature = h.signature or src
        # named parameters
        for name in query_params or []:
            leaf = name.rsplit(".", 1)[-1].lstrip("-").lower()
            for eid, names in self._names.items():
                if leaf in names:
                    h = hit(eid)
                    h.params.append(name)
                    h.title_named = h.title_named or leaf in self._titles[eid]
        for eid in extra or []:
            if eid in idx.entries:
                hit(eid)
        cal = self.embedder.calibration  # cosine range -> dense' 0..1 per query language, the embedder's own
        lo, hi = cal.get(q.text_lang) or cal["en"]
        terms: dict[int, list[str]] = {}  # entry position -> the question's terms it contains (for the "why")
        for term, ents in matched:
            for ei in ents.tolist():
                terms.setdefault(ei, []).append(term)
        for h in hits.values():
            pos = self._entry_pos[h.entry_id]
            h.coverage = float(cov[pos])
            h.matched_terms = terms.get(pos, [])
            agg = (1 - DENSE_SECOND_WEIGHT) * h.dense + DENSE_SECOND_WEIGHT * (h.dense2 or min(h.dense, dense_floor))
            h.dense_cal = min(1.0, max(0.0, (agg - lo) / (hi - lo)))
        return list(hits.values())


def _required_literal(pattern: str) -> str:
    """The longest run of literal text a match of ``pattern`` must contain ('' if unsure), lower-cased."""
    if re.search(r"(?<!\\)[|?*{]", pattern) and "|" in pattern:
        return ""  # alternation: no single literal is required
    runs, cur, i = [], "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt.isalnum():  # \d, \s, \w ... : a class, not a literal
                runs.append(cur)
                cur = ""
            else:
                cur += nxt
            i += 2
            continue
        if c in ".^$*+?{}[]()|":
            if c in "*?{" and cur:
                cur = cur[:-1]  # the quantified character is optional
            runs.append(cur)
            cur = ""
            if c == "[":
                i = pattern.find("]", i + 1) if "]" in pattern[i + 1 :] else len(pattern)
        else:
            cur += c
        i += 1
    runs.append(cur)
    return max(runs, key=len).lower()


def _all_params(e: dict[str, Any]) -> list[str]:
    out = dict.fromkeys(e.get("params", []))
    for f in e.get("fixes", []):
        out.update(dict.fromkeys(f.get("params", [])))
    return list(out)
