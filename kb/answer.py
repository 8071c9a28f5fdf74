"""The engine every surface calls: a query (and optionally a config) in, an answer object out.

No generated prose: an answer is curated entries, registry facts about the names in the query,
and deterministic findings. ``Engine.ask`` returns a plain dict (the ``kb ask --json`` object).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kb.configs import ConfigError, QueryFacts, facts_from_config, parse_config
from kb.factcheck import judge
from kb.index import Index, IndexCorrupt, IndexMissing, load_index
from kb.lang import pick_lang
from kb.lint import lint_config
from kb.paths import entries_dir, index_dir
from kb.registry import Registry, default_registry
from kb.retrieve import ANSWER_THRESHOLD, Hit, Retriever
from kb.text import identifiers, looks_like_log

MAX_QUERY_CHARS = 20_000
MAX_CLOSEST = 3
# results far below the best match are noise, not alternatives: on the entries' own tests a right
# answer ranked 2nd-3rd scores >= 0.78x the top, a near miss <= 0.70x (docs/retrieval.md)
RELATIVE_KEEP = 0.75

MESSAGES = {
    "en": {
        "no_answer": "No confident answer: this does not match anything the knowledge base covers well. "
        "The closest entries are listed below, marked as such; they may not apply.",
        "truncated": "The query was longer than {n} characters; only the first {n} were used.",
    },
    "zh": {
        "no_answer": "没有把握的答案：知识库里没有和这个问题足够匹配的条目。下面列出的只是最接近的条目，不一定适用。",
        "truncated": "问题超过 {n} 个字符，只用了前 {n} 个。",
    },
}


class QueryError(ValueError):
    pass


class Engine:
    """Loads the index once; answers many queries."""

    def __init__(
        self,
        index_path: Path | None = None,
        registry: Registry | None = None,
        auto_build: bool = True,
        progress: Callable[[str], None] | None = None,
        entries_root: Path | None = None,
    ):
        self.index_path = index_path or index_dir()
        self.entries_root = entries_root or entries_dir()
        self.registry = registry or default_registry()
        self.progress = progress or (lambda msg: print(msg, file=sys.stderr))
        self.index = self._load(auto_build)
        from kb.embedders import embedder_for_id

        self.retriever = Retriever(self.index, embedder_for_id(self.index.embedder_id))

    def _load(self, auto_build: bool) -> Index:
        try:
            idx = load_index(self.index_path)
        except IndexMissing:
            if not auto_build:
                raise
            self.progress("no index yet: building it (first run only) ...")
            self._build()
            return load_index(self.index_path)
        if self.entries_root.is_dir() and idx.is_stale(self.entries_root):
            if not auto_build:
                raise IndexCorrupt(f"index at {idx.path} is older than the entries; run `kb build`")
            self.progress("entries changed since the last build: updating the index ...")
            self._build()
            idx = load_index(self.index_path)
        return idx

    def _build(self) -> None:
        from indexer.build import build_index

        rep = build_index(self.index_path, self.entries_root, progress=_bar(self.progress))
        self.progress(
            f"index built: {rep.entries} entries, {rep.units} units ({rep.embedded} embedded) in {rep.seconds:.1f}s"
        )
        for s in rep.skipped:
            self.progress(f"skipped invalid entry: {s}")

    # ------------------------------------------------------------ asking

    def ask(
        self,
        query: str,
        config_text: str | None = None,
        config_name: str = "<config>",
        k: int = 5,
        lang: str = "auto",
    ) -> dict[str, Any]:
        if query is None or not query.strip():
            raise QueryError("empty query: describe the symptom or paste the error")
        notes: list[dict[str, Any]] = []
        query = query.strip()
        lang = pick_lang(query, lang)
        if len(query) > MAX_QUERY_CHARS:
            query = query[:MAX_QUERY_CHARS]
            notes.append({"kind": "input", "message": MESSAGES[lang]["truncated"].format(n=MAX_QUERY_CHARS)})
        facts: QueryFacts | None = None
        findings: list[dict[str, Any]] = []
        boosts: dict[str, float] = {}
        pinned: list[str] = []  # entries explaining error-level findings, in finding order
        if config_text is not None:
            cfg = parse_config(config_text, config_name)  # ConfigError propagates
            facts = facts_from_config(cfg)
            for f in lint_config(cfg, self.registry, world_size=_single_gpu(query), model_params=_model_size(query)):
                findings.append(f.to_dict())
                if f.entry:
                    boosts[f.entry] = max(boosts.get(f.entry, 0.0), FINDING_BOOST[f.severity])
                    if f.severity == "error" and f.entry not in pinned:
                        pinned.append(f.entry)
        memory = self._memory(query, cfg) if config_text is not None else None
        name_notes, resolved = self._name_notes(query)
        notes.extend(name_notes)
        n = len(self.index.entries) if pinned else max(k, MAX_CLOSEST)
        hits = self.retriever.search(query, k=n, facts=facts, query_params=resolved, boosts=boosts)
        answered = bool(hits) and (hits[0].score >= ANSWER_THRESHOLD or bool(pinned))
        out: dict[str, Any] = {"query": query, "lang": lang, "answered": answered}
        if answered:
            # entries explaining an error in the user's own config come first: that is a fact, not a guess
            first = [h for eid in pinned for h in hits if h.entry_id == eid]
            rest = [h for h in hits if h.entry_id not in pinned]
            keep = first[:k]
            if rest and rest[0].score >= ANSWER_THRESHOLD:
                floor = max(ANSWER_THRESHOLD * 0.75, rest[0].score * RELATIVE_KEEP)
                keep += [h for h in rest if h.score >= floor][: max(0, k - len(keep))]
            out["results"] = [self._result(h, lang, query) for h in keep]
            out["closest"] = []
        else:
            out["results"] = []
            out["message"] = MESSAGES[lang]["no_answer"]
            out["closest"] = [
                {
                    "id": h.entry_id,
                    "title": self.index.entries[h.entry_id]["title"][lang],
                    "score": round(h.score, 3),
                    "closest": True,
                }
                for h in hits[:MAX_CLOSEST]
            ]
        out["findings"] = findings
        out["notes"] = notes
        if facts is not None:
            out["config_facts"] = facts.as_dict()
        if memory is not None:
            out["memory"] = memory
        return out

    def _memory(self, query: str, cfg) -> dict[str, Any] | None:
        """kb mem for the user's config and the model size the query states (e.g. "7b", "llama2-13b")."""
        from kb.memory import PRESETS, Setup, estimate_with_changes

        shape = next(
            (sh for name, sh in PRESETS.items() if name.replace("-", "") in query.lower().replace("-", "")), None
        )
        size = _model_size(query)
        if shape is None and size is None:
            return None
        f = facts_from_config(cfg)
        d = (
            cfg.data.get("deepspeed")
            if cfg.kind == "training_args" and isinstance(cfg.data.get("deepspeed"), dict)
            else cfg.data
        )
        mb = d.get("train_micro_batch_size_per_gpu") if isinstance(d, dict) else None
        gpus = _gpu_count(query)
        assumptions = []
        if gpus is None:
            gpus = 1
            assumptions.append("one GPU (say how many GPUs in the question to change this)")
        offload = {("cpu", "cpu"): "optimizer+param", ("nvme", "nvme"): "optimizer+param"}.get(
            (f.offload_optimizer, f.offload_param), "optimizer" if f.offload_optimizer in ("cpu", "nvme") else "none"
        )
        s = Setup(
            shape=shape,
            params=None if shape else int(size),
            gpus=gpus,
            stage=f.zero_stage or 0,
            offload=offload,
            precision=f.precision or "bf16",
            micro_batch=mb if isinstance(mb, int) and mb > 0 else 1,
        )
        assumptions.append(f"sequence length {s.seq}, 80 GiB per GPU, activation checkpointing off")
        if shape is None:
            assumptions.append("parameter count only (name a preset such as llama2-7b for activations)")
        e = estimate_with_changes(s)
        return {
            "model": shape.name if shape else f"{size / 1e9:g}B",
            "gpu": e.gpu,
            "gpu_total_gib": e.gpu_total_gib,
            "gpu_needed_gib": e.gpu_needed_gib,
            "fits_gpu": e.fits_gpu,
            "host": e.host,
            "host_total_gib": e.host_total_gib,
            "deepspeed_estimator": e.deepspeed_estimator,
            "changes": e.changes,
            "assumptions": assumptions,
            "notes": e.notes,
        }

    def _result(self, h: Hit, lang: str, query: str) -> dict[str, Any]:
        e = self.index.entries[h.entry_id]
        qnames = {n.lower() for n in identifiers(query)}
        params = list(dict.fromkeys([*e.get("params", []), *(p for f in e["fixes"] for p in f.get("params", []))]))
        return {
            "id": e["id"],
            "title": e["title"][lang],
            "score": round(h.score, 3),
            "params": params,
            "why": self.retriever.why(h, lang),
            "summary": e["summary"][lang],
            "fixes": [
                {
                    "title": f["title"][lang],
                    "text": f["text"][lang],
                    "params": f.get("params", []),
                    **({"snippet": f["snippet"]} if f.get("snippet") else {}),
                }
                for f in e["fixes"]
            ],
            "myths": [
                {
                    "claim": m["claim"][lang],
                    "correction": m["correction"][lang],
                    "names": [n["name"] for n in m["names"]],
                    "touched": any(n["name"].lower() in qnames for n in m["names"]),
                }
                for m in e.get("myths", [])
            ],
            "sources": e["sources"],
            "applies_to": e.get("applies_to", {}),
        }

    def _name_notes(self, query: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The factcheck verdict for each parameter-like name in the query; also the names to boost on."""
        notes: list[dict[str, Any]] = []
        resolved: list[str] = []
        is_log = looks_like_log(query)
        for name in identifiers(query)[:40]:
            if not _param_like(name):
                continue
            v = judge(name, self.registry)
            if v is None:
                continue
            if v.verdict == "does-not-exist" and (is_log or not _config_like(name, query)):
                continue  # tracebacks and prose are full of other names; judge only config-looking ones
            resolved.append(name)
            if is_log and v.verdict != "does-not-exist":
                continue  # names inside a pasted log are the library's own: no note needed
            notes.append(
                {
                    "kind": "param",
                    "name": name,
                    "verdict": v.verdict,
                    "registry_id": v.registry_id,
                    "suggestions": v.suggestions,
                    "message": v.message,
                }
            )
        return notes, resolved

    def health(self) -> dict[str, Any]:
        return {
            "index": str(self.index.path),
            "entries": len(self.index.entries),
            "units": len(self.index.units),
            "embedder": self.index.embedder_id,
        }


def _param_like(name: str) -> bool:
    return "_" in name or "." in name or name.startswith("--") or bool(re.match(r"^[A-Z][a-z]+[A-Z]", name))


_CONFIG_PREFIX = re.compile(
    r"^(zero|stage\d?_|offload|cpu_offload|nvme|pin_|overlap|reduce_|allgather|contiguous|sub_group|round_robin|"
    r"train_|gradient_|fp16|bf16|aio|activation|partition|memory_|prefetch|max_live|param_|ds_|deepspeed)"
)


def _config_like(name: str, query: str) -> bool:
    """Would a reader take this unknown name for a config key? (prefix, or written as key: / key= / "key")"""
    if re.search(r"\.(bin|json|safetensors|pt|pth|txt|ya?ml|py|sh|log|md)$", name):
        return False
    if _CONFIG_PREFIX.match(name.split(".")[-1]):
        return True
    return bool(re.search(rf"[\"']{re.escape(name)}[\"']\s*:|\b{re.escape(name)}\s*[:=]", query))


FINDING_BOOST = {"error": 0.20, "warning": 0.10, "info": 0.0}


def _model_size(query: str) -> float | None:
    """A model size stated in the query ("7b", "70B", "13b"), in parameters."""
    m = re.search(r"(?<![\w.])(\d+(?:\.\d+)?)\s*[bB](?!\w)", query)
    return float(m.group(1)) * 1e9 if m else None


def _gpu_count(query: str) -> int | None:
    """The number of GPUs the query states ("8 gpus", "4卡", "single gpu", "单卡")."""
    if _single_gpu(query):
        return 1
    m = re.search(r"(\d+)\s*[x×]?\s*(?:gpus?|cards?|卡|张卡|块卡|[ah]100s?|h800s?|a800s?)\b", query, re.I) or re.search(
        r"(\d+)\s*(?:卡|张卡|块卡)", query
    )
    return int(m.group(1)) if m and 0 < int(m.group(1)) <= 4096 else None


def _single_gpu(query: str) -> int | None:
    """1 when the query says it runs on one GPU, else unknown."""
    rx = r"\b(single|one|1)[\s-]*(gpu|card|a100|h100|h800|a800)\b|单卡|一张卡|单张"
    return 1 if re.search(rx, query, re.I) else None


def _bar(progress: Callable[[str], None]) -> Callable[[int, int], None] | None:
    """A progress bar on stderr when it is a terminal (rich); silent counters otherwise."""
    if not sys.stderr.isatty():
        return None
    from rich.progress import Progress

    state: dict[str, Any] = {}

    def update(done: int, total: int) -> None:
        if "p" not in state:
            state["p"] = Progress(transient=True)
            state["p"].start()
            state["t"] = state["p"].add_task("embedding", total=total)
        state["p"].update(state["t"], completed=done)
        if done >= total:
            state["p"].stop()

    return update


__all__ = ["ConfigError", "Engine", "IndexCorrupt", "IndexMissing", "QueryError"]
