"""The engine every surface calls: a query (and optionally a config) in, an ``Answer`` out.

No generated prose: an answer is curated entries, registry facts about the names it shows and the
names in the query, and deterministic findings (lint, memory). The engine opens a ready index and
never builds one (``indexer.build.ensure_index`` does, for the CLI); it never prints or draws.
``Engine.ask`` returns a ``kb.contract.Answer`` (``.to_dict()`` is the ``kb ask --json`` object).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from kb import contract as C
from kb.ask.retrieve import ANSWER_THRESHOLD, Hit, Retriever
from kb.ask.text import identifiers, looks_like_log, looks_like_param
from kb.doctor.configs import (
    ConfigError,
    ParsedConfig,
    QueryFacts,
    QueryHints,
    facts_from_config,
    facts_from_query,
    hints_from_query,
    micro_batch,
    optimizer_kind,
    parse_config,
)
from kb.i18n import t
from kb.index.load import IndexCorrupt, IndexMissing, IndexStale, check_fresh, load_index
from kb.lang import pick_lang
from kb.paths import entries_dir
from kb.registry.factcheck import judge
from kb.registry.releases import (
    UserVersion,
    applies,
    pins,
    respell,
    spelling_fact,
    user_versions,
    version_notes,
    view_for,
)
from kb.registry.store import Registry, default_registry

MAX_QUERY_CHARS = 20_000
MAX_CLOSEST = 3
MAX_K = 20
# results far below the best match are noise, not alternatives: on the entries' own tests a right
# answer ranked 2nd-3rd scores >= 0.78x the top, a near miss <= 0.70x (docs/retrieval.md)
RELATIVE_KEEP = 0.75
# an entry whose applies_to excludes the user's versions stays visible but ranks below those that apply
VERSION_DEMOTE = 0.8
FINDING_BOOST = {"error": 0.20, "warning": 0.10, "info": 0.0}


class QueryError(ValueError):
    """Bad input to ``ask`` (empty query, bad option): the message says what to change."""


class Engine:
    """Opens the index once; answers many queries. Safe to share across threads for ``ask``."""

    def __init__(
        self,
        index_path: Path | None = None,
        registry: Registry | None = None,
        entries_root: Path | None = None,
        check_stale: bool = True,
    ):
        """Raise IndexMissing / IndexCorrupt / IndexStale (messages name the command that fixes it).

        ``entries_root`` (default data/entries, when it exists) is compared with the index by content
        hash; pass ``check_stale=False`` to serve an index whatever the entries on disk say."""
        self.index = load_index(index_path)
        root = entries_root or entries_dir()
        if check_stale and root.is_dir():
            check_fresh(self.index, root)
        self.registry = registry or default_registry()
        from kb.index.embedders import embedder_for_id

        self.retriever = Retriever(self.index, embedder_for_id(self.index.embedder_id))

    # ------------------------------------------------------------ asking

    def ask(
        self,
        query: str,
        config_text: str | None = None,
        config_name: str = "<config>",
        k: int = 5,
        lang: str = "auto",
        versions: dict[str, str] | None = None,
        front_end: str | None = None,
    ) -> C.Answer:
        """``versions`` (package -> version, e.g. from ``--versions``) win over versions read from the
        query and the config text; ``front_end`` (one of ``kb.doctor.frontends.FRONT_ENDS``, "accelerate",
        "deepspeed", or "all") over the one read from the config's format and the query."""
        if not isinstance(query, str) or not query.strip():
            raise QueryError("empty query: describe the symptom or paste the error")
        attachment_text = config_text if isinstance(config_text, str) else None
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise QueryError(f"k must be an integer from 1 to {MAX_K}")
        if config_text is not None and not isinstance(config_text, str):
            raise QueryError("config must be the text of a config file")
        query = query.strip()
        try:
            lang = pick_lang(query, lang)
        except ValueError as e:
            raise QueryError(str(e)) from None
        notes: list[C.Note] = []
        if len(query) > MAX_QUERY_CHARS:
            query = query[:MAX_QUERY_CHARS]
            notes.append(C.Note("input", t(lang, "truncated", n=MAX_QUERY_CHARS)))
        hints = hints_from_query(query)
        if config_text is not None and is_version_report(config_text):
            config_text = None  # a pasted pip freeze / ds_report / env report: versions, not a config
            notes.append(C.Note("input", t(lang, "attachment_versions")))
        ps = pins(self.registry, user_versions(query, attachment_text, versions))
        view = view_for(self.registry, ps)
        notes.extend(version_notes(self.registry, ps, lang))
        cfg: ParsedConfig | None = None
        facts: QueryFacts | None = None
        findings: list[C.Finding] = []
        boosts: dict[str, float] = {}
        pinned: list[str] = []  # entries explaining error-level findings, in finding order
        if config_text is not None:
            from kb.doctor.lint import lint_config  # only with a config: the rules are not needed to answer a question

            cfg = parse_config(config_text, config_name)  # ConfigError propagates
            facts = facts_from_config(cfg)
            for f in lint_config(cfg, view, world_size=hints.single_gpu, model_params=hints.params):
                findings.append(_finding(f, lang))
                if f.entry:
                    boosts[f.entry] = max(boosts.get(f.entry, 0.0), FINDING_BOOST[f.severity])
                    if f.severity == "error" and f.entry not in pinned:
                        pinned.append(f.entry)
        memory = self._memory(hints, cfg, lang) if cfg is not None else None
        from kb.doctor.frontends import detect_front_end

        if front_end == "all":
            front = None
        elif front_end:
            front = front_end
        else:
            front = detect_front_end(
                cfg.kind if cfg is not None else None, query, cfg.data if cfg is not None else None
            )
        name_notes, resolved = self._name_notes(query, lang, view)
        notes.extend(name_notes)
        n = len(self.index.entries) if pinned else max(k, MAX_CLOSEST)
        stated = facts_from_query(query)  # "zero3", "fp16", "lora": demotes entries it contradicts
        hits = self.retriever.search(query, k=n, facts=facts, query_params=resolved, boosts=boosts, stated=stated)
        if ps:
            hits = self._demote(hits, ps)
        answered = bool(hits) and (hits[0].score >= ANSWER_THRESHOLD or bool(pinned))
        results: list[C.Result] = []
        closest: list[C.Closest] = []
        if answered:
            # entries explaining an error in the user's own config come first: that is a fact, not a guess
            first = [h for eid in pinned for h in hits if h.entry_id == eid]
            rest = [h for h in hits if h.entry_id not in pinned]
            keep = first[:k]
            if rest and rest[0].score >= ANSWER_THRESHOLD:
                floor = max(ANSWER_THRESHOLD * 0.75, rest[0].score * RELATIVE_KEEP)
                keep += [h for h in rest if h.score >= floor][: max(0, k - len(keep))]
            qnames = {n.lower() for n in identifiers(query)}
            results = [self._result(h, lang, qnames, view, ps, front) for h in keep]
        else:
            closest = [
                C.Closest(h.entry_id, self.index.entries[h.entry_id]["title"][lang], round(h.score, 3))
                for h in hits[:MAX_CLOSEST]
            ]
        return C.Answer(
            schema_version=C.SCHEMA_VERSION,
            query=query,
            lang=lang,  # type: ignore[arg-type]
            answered=answered,
            results=results,
            closest=closest,
            findings=findings,
            notes=notes,
            message=None if answered else t(lang, "no_answer"),
            config_facts=facts.as_dict() if facts is not None else None,
            stated_facts=stated.as_dict() or None,
            memory=memory,
            versions=[C.VersionUsed(p.package, p.version, p.release, p.source, p.exact) for p in ps],
            front_end=front,
        )

    def _result(
        self, h: Hit, lang: str, qnames: set[str], view: Registry, ps: list[UserVersion], front: str | None
    ) -> C.Result:
        e = self.index.entries[h.entry_id]
        why = self.retriever.why(h, lang)
        return entry_result(e, lang, view, score=h.score, why=why, qnames=qnames, pins=ps, front_end=front)

    def _demote(self, hits: list[Hit], ps: list[UserVersion]) -> list[Hit]:
        """Entries whose applies_to excludes the user's versions rank lower (they are marked, not hidden)."""
        out = []
        for h in hits:
            ok, _ = applies(self.index.entries[h.entry_id].get("applies_to") or {}, ps, "en")
            out.append(dataclasses.replace(h, score=h.score * VERSION_DEMOTE) if ok is False else h)
        return sorted(out, key=lambda h: -h.score)

    def _memory(self, hints: QueryHints, cfg: ParsedConfig, lang: str) -> C.Memory | None:
        """kb mem for the user's config and the model the query names (a preset, or a size like "7b")."""
        from kb.memory.estimate import DEFAULT_GPU_MEM_GIB, PRESETS, Setup, estimate_with_changes

        if hints.model is None and hints.params is None:
            return None
        shape = PRESETS.get(hints.model) if hints.model else None
        f = facts_from_config(cfg)
        assumptions: list[str] = []
        gpus = hints.gpus
        if gpus is None:
            gpus = 1
            assumptions.append(t(lang, "mem.assume_one_gpu"))
        offload = {("cpu", "cpu"): "optimizer+param", ("nvme", "nvme"): "optimizer+param"}.get(
            (f.offload_optimizer, f.offload_param), "optimizer" if f.offload_optimizer in ("cpu", "nvme") else "none"
        )
        s = Setup(
            shape=shape,
            params=None if shape else int(hints.params or 0),
            gpus=gpus,
            stage=f.zero_stage or 0,
            offload=offload,
            precision=f.precision or "bf16",
            micro_batch=micro_batch(cfg) or 1,
            gpu_mem_gib=DEFAULT_GPU_MEM_GIB,
            optimizer=optimizer_kind(cfg),
        )
        assumptions.append(t(lang, "mem.assume_setup", seq=s.seq, gpu_mem=s.gpu_mem_gib))
        if shape is None:
            assumptions.append(t(lang, "mem.assume_count_only"))
        e = estimate_with_changes(s)
        m = memory_contract(e.to_dict(), lang, assumptions)
        if shape is None:
            m.model = f"{(hints.params or 0) / 1e9:g}B"
        return m

    def _name_notes(self, query: str, lang: str, view: Registry) -> tuple[list[C.Note], list[str]]:
        """The factcheck verdict for each parameter-like name in the query; also the names to boost on."""
        notes: list[C.Note] = []
        resolved: list[str] = []
        is_log = looks_like_log(query)
        for name in identifiers(query)[:40]:
            if not looks_like_param(name):
                continue
            v = judge(name, view, lang)
            if v is None or v.verdict == "unverified":
                continue  # outside what the registry covers: neither confirmed nor accused
            if v.verdict == "does-not-exist" and (is_log or not _config_like(name, query)):
                continue  # tracebacks and prose are full of other names; judge only config-looking ones
            resolved.append(name)
            if is_log and v.verdict != "does-not-exist":
                continue  # names inside a pasted log are the library's own: no note needed
            notes.append(C.Note("param", v.message, name, v.verdict, v.registry_id, v.suggestions))  # type: ignore[arg-type]
        return notes, resolved

    def health(self) -> dict[str, Any]:
        return {
            "index": str(self.index.path),
            "entries": len(self.index.entries),
            "units": len(self.index.units),
            "embedder": self.index.embedder_id,
            "schema_version": C.SCHEMA_VERSION,
        }


# ---------------------------------------------------------------- the light entry view (kb ask and kb show)


def entry_result(
    e: dict[str, Any],
    lang: str,
    registry: Registry,
    score: float = 1.0,
    why: str = "",
    qnames: set[str] | frozenset[str] = frozenset(),
    pins: list[UserVersion] | tuple[UserVersion, ...] = (),
    front_end: str | None = None,
) -> C.Result:
    """One entry (a plain dict: the index's entries.json or ``Entry.model_dump(mode="json")``) as a Result.

    ``registry`` is the view of the user's releases (``Registry.at``) when ``pins`` are known: names are
    then shown as those releases spell them, snippets respelled, and ``applies`` says whether the entry's
    ``applies_to`` holds. ``front_end`` picks which equivalents of each DeepSpeed snippet to add (None: all).
    """
    params = list(dict.fromkeys([*e.get("params", []), *(p for f in e["fixes"] for p in f.get("params", []))]))
    facts = [param_fact(registry, rid, lang) for rid in params]
    respelled = {f.id: (f.name, f.shown_name) for f in facts if f.shown_name}
    ok, why_not = applies(e.get("applies_to") or {}, list(pins), lang)
    w = e.get("withdrawn")
    return C.Result(
        id=e["id"],
        title=e["title"][lang],
        score=round(score, 3),
        why=why,
        summary=e["summary"][lang],
        area=e["area"],
        causes=[c[lang] for c in e.get("causes", [])],
        fixes=[_fix(f, lang, registry, respelled, front_end) for f in e["fixes"]],
        params=params,
        param_facts=facts,
        myths=[
            C.Myth(
                m["claim"][lang],
                m["correction"][lang],
                [n["name"] for n in m.get("names", [])],
                any(n["name"].lower() in qnames for n in m.get("names", [])),
            )
            for m in e.get("myths", [])
        ],
        sources=[C.Source(**{k: s.get(k) for k in _SOURCE_FIELDS}) for s in e["sources"]],
        applies_to=dict(e.get("applies_to") or {}),
        related=list(e.get("related", [])),
        withdrawn=(f"{w['date']}: {w['reason']}" if w else None),
        path=site_path(lang, e["id"]),
        applies=ok,
        version_note=why_not,
    )


def _fix(
    f: dict[str, Any], lang: str, view: Registry, respelled: dict[str, tuple[str, str]], front_end: str | None
) -> C.Fix:
    """One fix; names its entry spells differently in the user's release are respelled in code and in `code`."""
    text = f["text"][lang]
    snippet = C.Snippet(f["snippet"]["lang"], f["snippet"]["code"]) if f.get("snippet") else None
    notes: list[str] = []
    by_pkg: dict[str, list[str]] = {}
    for rid, (old, new) in sorted(respelled.items()):
        pair = [(old, new)]
        new_text = re.sub(r"`[^`]+`", lambda m, pair=pair: respell(m.group(0), pair), text)
        new_code = respell(snippet.code, pair) if snippet else None
        if new_text == text and (snippet is None or new_code == snippet.code):
            continue
        text = new_text
        if snippet is not None and new_code is not None:
            snippet = C.Snippet(snippet.lang, new_code)
        by_pkg.setdefault(rid.split(":", 1)[0], []).append(f"`{old}` \u2192 `{new}`")
    for pkg, done in sorted(by_pkg.items()):
        notes.append(t(lang, "ver.respelled", pkg=pkg, release=view.pins.get(pkg, ""), pairs=", ".join(done)))
    return C.Fix(
        f["title"][lang],
        text,
        list(f.get("params", [])),
        snippet,
        equivalents=fix_equivalents(snippet, view, front_end, lang),
        version_notes=notes,
    )


def fix_equivalents(snippet: C.Snippet | None, view: Registry, front_end: str | None, lang: str) -> list[C.Equivalent]:
    """The DeepSpeed settings of a JSON snippet, written for other front ends (kb.doctor.frontends)."""
    if snippet is None or snippet.lang != "json":
        return []
    from kb.doctor.frontends import equivalents

    try:
        data = json.loads(snippet.code)
    except ValueError:
        return []
    if not isinstance(data, dict):
        return []
    return [eq for eq in equivalents(data, view, front_end, lang) if eq.front_end != "deepspeed"]


def is_version_report(text: str) -> bool:
    """A pasted ``pip freeze`` / ``pip list`` / ``ds_report`` / env report rather than a config (kb.registry.versions)."""
    from kb.doctor.configs import ConfigError, parse_config
    from kb.registry.versions import versions_from_text

    found = versions_from_text(text, origin="attachment")
    if not any(p.source != "query" for p in found.pins.values()):
        return False
    try:
        parse_config(text, "<attachment>")
    except ConfigError:
        return True
    return False


def site_path(lang: str, entry_id: str) -> str:
    """Where an entry's page lives on the static site (kb export), relative to the site's base URL."""
    return f"/{lang}/{entry_id}/"


_SOURCE_FIELDS = ("type", "url", "package", "version", "file", "line", "note")


def param_fact(registry: Registry, rid: str, lang: str = "en") -> C.ParamFact:
    r = registry.get(rid)
    if r is None:
        pkg, _, path = rid.partition(":")
        return C.ParamFact(rid, path.rsplit(".", 1)[-1], pkg, "", "", None, None, "", 0, known=False)
    default = r.get("default")
    return C.ParamFact(
        id=r["id"],
        name=r["name"],
        package=r["package"],
        version=r["version"],
        kind=r["kind"],
        type=r.get("type") or None,
        default=None if default in (None, "null") else str(default),
        source_file=r["source_file"],
        source_line=int(r["source_line"]),
        deprecated=bool(r.get("deprecated")),
        replacement=r.get("replacement"),
        **spelling_fact(registry, rid, lang),
    )


def _finding(f, lang: str) -> C.Finding:
    msg, sug = f.text(lang)
    return C.Finding(f.code, f.severity, f.path, f.line, msg, sug, f.entry)


def memory_contract(e: dict[str, Any], lang: str, assumptions: list[str] | None = None) -> C.Memory:
    """A ``kb mem`` estimate (``Estimate.to_dict()``) as the answer contract's Memory, labels in ``lang``: the one
    conversion every surface uses (kb ask's memory block, the bots' /mem)."""
    s = e.get("setup") or {}
    zh = lang == "zh"

    def term(t: dict[str, Any]) -> C.MemoryTerm:
        return C.MemoryTerm(t["key"], t["label_zh"] if zh else t["label"], t["gib"], t["formula"], t["source"])

    peak = next((p for p in e.get("phases") or [] if p["phase"] == e.get("peak_phase")), None)
    alive = set(peak["terms"]) if peak else set()
    ds = e.get("deepspeed_estimator")
    return C.Memory(
        model=s.get("shape") or f"{(e.get('params') or 0) / 1e9:g}B",
        gpus=s.get("gpus", 1) * s.get("nodes", 1),
        gpu_mem_gib=s.get("gpu_mem_gib", 0.0),
        gpu=[term(t) for t in e.get("terms") or [] if t["key"] in alive],
        gpu_total_gib=e.get("gpu_total_gib", 0.0),
        gpu_needed_gib=e.get("gpu_needed_gib", 0.0),
        fits_gpu=bool(e.get("fits_gpu")),
        host=[term(t) for t in e.get("host_terms") or []],
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


__all__ = ["ConfigError", "Engine", "IndexCorrupt", "IndexMissing", "IndexStale", "QueryError", "entry_result"]
