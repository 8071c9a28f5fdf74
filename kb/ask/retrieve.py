"""Hybrid retrieval: dense (FAISS) + lexical (BM25 / term coverage) + signatures + parameter names.

Scores are per entry, in [0, ~1.3], and calibrated so that one threshold (``ANSWER_THRESHOLD``)
separates "we have this" from "we do not" (see docs/retrieval.md for how it was set):

    score = W_DENSE * dense' + W_COVER * coverage + W_BM25 * bm25_rel
            + SIGNATURE_BONUS * signature_hit + PARAM_BONUS * param_hit + condition_adjust

- dense'    best cosine of any unit of the entry, rescaled by the embedder's calibration range
- coverage  IDF-weighted share of the query's terms found anywhere in the entry's units
- bm25_rel  the entry's best BM25 unit score relative to the best of this query
- signature a pasted error matches one of the entry's signature regexes
- param     the query names a parameter the entry is about
- condition the user's config satisfies (+) or contradicts (-) the entry's conditions
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kb.ask.text import DOMAIN_ANCHORS, OFF_TASK, TRAINING_ANCHORS, normalize_traceback, tokenize
from kb.doctor.configs import QueryFacts
from kb.i18n import t as _t
from kb.index.load import Index
from kb.index.threads import faiss_query_threads
from kb.lang import CJK, detect_lang

W_DENSE, W_COVER, W_BM25 = 0.45, 0.35, 0.20
SIGNATURE_BONUS = 0.25
PARAM_BONUS = 0.12
TITLE_NAME_BONUS = 0.08  # ... and more when the entry is about that name (it is in the title)
DENSE_SECOND_WEIGHT = 0.3  # entry dense = 0.7 * best unit + 0.3 * second best: several phrasings agreeing
CONDITION_BOOST, CONDITION_PENALTY = 0.06, 0.15
ANSWER_THRESHOLD = 0.44
NO_ANCHOR_FACTOR = 0.8  # the query names nothing of the field (no anchor term, no registry name)
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
    signature: str | None = None
    params: list[str] = field(default_factory=list)
    condition: float = 0.0
    condition_notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (kb.i18n key, fields)


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
        self._sigs: dict[tuple[re.Pattern[str], str], tuple[str, list[str]]] = {}
        self._titles = {eid: (e["title"]["en"] + " " + e["title"]["zh"]).lower() for eid, e in index.entries.items()}
        for eid, e in index.entries.items():
            names = {p.split(":", 1)[1].rsplit(".", 1)[-1].split("/")[-1].lower() for p in _all_params(e)}
            names |= {n["name"].lower() for m in e.get("myths", []) for n in m["names"]}
            self._names[eid] = names
            for s in (sig["pattern"] for sig in e.get("signatures", [])):  # {pattern, examples}
                key = (re.compile(s, re.I | re.S), _required_literal(s))
                self._sigs.setdefault(key, (s, []))[1].append(eid)

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

    def search(
        self,
        query: str,
        k: int = 5,
        facts: QueryFacts | None = None,
        query_params: list[str] | None = None,
        boosts: dict[str, float] | None = None,
        stated: QueryFacts | None = None,
    ) -> list[Hit]:
        """Rank entries for ``query``; ``query_params`` are registry-resolved names found in the query; ``facts``
        come from the user's config, ``stated`` from the question (kb.doctor.configs.facts_from_query)."""
        idx = self.idx
        hits: dict[str, Hit] = {}

        def hit(eid: str) -> Hit:
            return hits.setdefault(eid, Hit(eid))

        # dense
        dense_floor = 0.0
        if idx.faiss.ntotal:
            qv = self.embedder.embed_queries([query[:2000]]).astype(np.float32)
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
        qtoks = tokenize(query)
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
        norm = normalize_traceback(query)
        low = f"{query}\n{norm}".lower()
        for (rx, lit), (src, eids) in self._sigs.items():
            if lit in low and (rx.search(query) or rx.search(norm)):
                for eid in eids:
                    h = hit(eid)
                    h.signature = h.signature or src
        # named parameters
        title_named: set[str] = set()
        for name in query_params or []:
            leaf = name.rsplit(".", 1)[-1].lstrip("-").lower()
            for eid, names in self._names.items():
                if leaf in names:
                    hit(eid).params.append(name)
                    if leaf in self._titles[eid]:
                        title_named.add(eid)
        for h in hits.values():
            h.coverage = float(cov[self._entry_pos[h.entry_id]])
        # entries that config findings point to (kb.doctor.lint)
        for eid, bonus in (boosts or {}).items():
            if eid in idx.entries:
                h = hit(eid)
                h.coverage = float(cov[self._entry_pos[eid]])
                h.condition += bonus
                h.condition_notes.append(("why.finding", {}))
        # config conditions, and what the question states
        if facts is not None or stated is not None:
            for eid, h in hits.items():
                self._apply_conditions(h, idx.entries[eid].get("conditions"), facts, stated)

        cal = self.embedder.calibration  # cosine range -> dense' 0..1 per query language, the embedder's own
        lo, hi = cal.get(detect_lang(query)) or cal["en"]
        anchored = (
            bool(query_params)
            or any(t in DOMAIN_ANCHORS for t in qtoks)
            or any(a in query for a in DOMAIN_ANCHORS if not a.isascii())
        )
        factor = 1.0 if anchored else NO_ANCHOR_FACTOR
        if _off_task(query, qtoks):  # serving a model, installing a driver: near the field, not kb's
            factor *= NO_ANCHOR_FACTOR
        for h in hits.values():
            agg = (1 - DENSE_SECOND_WEIGHT) * h.dense + DENSE_SECOND_WEIGHT * (h.dense2 or min(h.dense, dense_floor))
            d = min(1.0, max(0.0, (agg - lo) / (hi - lo)))
            h.score = (
                W_DENSE * d
                + W_COVER * h.coverage
                + W_BM25 * h.bm25
                + (SIGNATURE_BONUS if h.signature else 0.0)
                + (PARAM_BONUS if h.params else 0.0)
                + h.condition
                + (TITLE_NAME_BONUS if h.entry_id in title_named else 0.0)
            )
            if not h.signature:
                h.score *= factor
        ranked = sorted(hits.values(), key=lambda h: (-h.score, h.entry_id))[:k]
        for h in ranked:  # for the "why" of the results shown only
            ei = self._entry_pos[h.entry_id]
            h.matched_terms = [t for t, ents in matched if ents[min(np.searchsorted(ents, ei), len(ents) - 1)] == ei]
        return ranked

    def _apply_conditions(self, h: Hit, cond: dict | None, facts: QueryFacts | None, stated: QueryFacts | None) -> None:
        """The user's facts boost entries whose conditions they satisfy and demote those they contradict: the config's,
        and what the question states ("zero3", "fp16", "lora", "on the first step") where the config says nothing."""
        if not cond:
            return
        have_cfg = facts.as_dict() if facts is not None else {}
        if have_cfg.get("evaluates") is False and cond.get("when") == [
            "eval"
        ]:  # an eval failure in a run that never evaluates
            h.condition -= CONDITION_PENALTY
            h.condition_notes.append(("why.cond_mismatch", {"key": "evaluation", "have": "off", "want": "eval"}))
        for key, have in {**(stated.as_dict() if stated is not None else {}), **have_cfg}.items():  # config wins
            if key == "evaluates":
                continue
            want = cond.get(key)
            if not want:
                continue
            if have in want:
                h.condition += CONDITION_BOOST
                h.condition_notes.append(("why.cond_match", {"key": key, "have": have}))
            else:
                h.condition -= CONDITION_PENALTY
                h.condition_notes.append(
                    ("why.cond_mismatch", {"key": key, "have": have, "want": "/".join(map(str, want))})
                )

    def why(self, h: Hit, lang: str) -> str:
        """One line saying what matched."""
        parts: list[str] = []
        if h.signature:
            parts.append(_t(lang, "why.signature", pattern=h.signature[:60]))
        if h.params:
            parts.append(_t(lang, "why.names", names=", ".join(dict.fromkeys(h.params))))
        if h.dense_unit is not None:
            u = self.idx.units[h.dense_unit]
            unit = _t(lang, f"unit.{u['kind']}")
            parts.append(_t(lang, "why.dense", unit=unit, text=_clip(u["text"]), cos=f"{h.dense:.2f}"))
        if h.bm25_unit is not None and h.bm25_unit != h.dense_unit:
            u = self.idx.units[h.bm25_unit]
            parts.append(_t(lang, "why.words", unit=_t(lang, f"unit.{u['kind']}"), text=_clip(u["text"])))
        if h.matched_terms:
            parts.append(_t(lang, "why.terms", terms=" ".join(h.matched_terms[:8])))
        parts.extend(_t(lang, key, **fields) for key, fields in h.condition_notes)
        return ("；" if lang == "zh" else "; ").join(parts)


def _off_task(query: str, qtoks: list[str]) -> bool:
    """The question is about serving or installing (kb.ask.text.OFF_TASK) and says nothing of training."""
    low = query.lower()
    off = any(t in OFF_TASK for t in qtoks) or any(w in query for w in OFF_TASK if not w.isascii())
    training = any(t in TRAINING_ANCHORS for t in qtoks) or any(w in low for w in TRAINING_ANCHORS if not w.isascii())
    return off and not training


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


def _clip(s: str, n: int = 70) -> str:
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _all_params(e: dict[str, Any]) -> list[str]:
    out = dict.fromkeys(e.get("params", []))
    for f in e.get("fixes", []):
        out.update(dict.fromkeys(f.get("params", [])))
    return list(out)
