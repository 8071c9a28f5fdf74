"""The engine every surface calls: a query (and optionally a config) in, an ``Answer`` out.

No generated prose: an answer is curated entries, registry facts about the names it shows and the
names in the query, and deterministic findings (lint, memory). The engine opens a ready index and
never builds one (``indexer.build.ensure_index`` does, for the CLI); it never prints or draws.
``Engine.ask`` returns a ``kb.contract.Answer`` (``.to_dict()`` is the ``kb ask --json`` object).
"""

from __future__ import annotations

from pathlib import Path

from kb import contract as C
from kb.ask import rank
from kb.ask.facts import PREFIX, fact_result, registry_facts, subcommand_facts
from kb.ask.logs import LogTriage
from kb.ask.names import judge_names
from kb.ask.question import MAX_QUERY_CHARS, QueryError, Question, read_question
from kb.ask.result import entry_result
from kb.ask.retrieve import Hit, Retriever
from kb.doctor.configs import ConfigError
from kb.i18n import t
from kb.index.load import IndexCorrupt, IndexMissing, IndexStale, check_fresh, load_index
from kb.paths import entries_dir
from kb.registry.releases import applies, judge_versions
from kb.registry.store import Registry, default_registry

MAX_CLOSEST = 3
MAX_K = 20


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
        self._registry_words: frozenset[str] | None = None
        self._ds_config_words: frozenset[str] | None = None
        self._by_initial: dict[str, list[str]] | None = None

    def knows(self, token: str) -> bool:
        """Is ``token`` (kb.ask.text.tokenize's form) a word of kb's: an entry's, a field term, a registry name?"""
        if self._registry_words is None:  # built the first time a question has a word the entries do not
            self._registry_words = frozenset(n.lower() for n in self.registry._default_view().by_name)
        return self.retriever.knows(token) or token in rank.DOMAIN_ANCHORS or token in self._registry_words

    def typo_of_known(self, word: str) -> bool:
        """Is ``word`` one edit (a letter changed, added, dropped, or two swapped) from a word the entries use, with
        the same first letter (a typo keeps it: "optimzer", "gradeint"; "ollama" is not "llama")? Words of 5 letters
        or more only."""
        if len(word) < 5:
            return False
        if self._by_initial is None:
            self._by_initial = {}
            for tok in self.retriever.vocabulary():
                if tok.isascii() and tok.isalpha() and len(tok) >= 4:
                    self._by_initial.setdefault(tok[0], []).append(tok)
        from rapidfuzz.distance import DamerauLevenshtein
        from rapidfuzz.process import extractOne

        near = [t for t in self._by_initial.get(word[0], []) if abs(len(t) - len(word)) <= 1]
        return extractOne(word, near, scorer=DamerauLevenshtein.distance, score_cutoff=1) is not None

    def ds_config_word(self, token: str) -> bool:
        """Is ``token`` a section or top-level key of DeepSpeed's config (``nebula``, ``zero_optimization``,
        ``steps_per_print``): what a ds_config is made of, so a question naming one is in kb's field."""
        if self._ds_config_words is None:
            self._ds_config_words = frozenset(
                path.lower()
                for path, recs in self.registry._default_view().by_path.items()
                if "." not in path
                and any(r["package"] == "deepspeed" and r["kind"] in ("config_section", "config_key") for r in recs)
            )
        return token in self._ds_config_words

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
        log: LogTriage | None = None,
    ) -> C.Answer:
        """``versions`` (package -> version, e.g. from ``--versions``) win over versions read from the
        query and the config text; ``front_end`` (one of ``kb.doctor.frontends.FRONT_ENDS``, "accelerate",
        "deepspeed", or "all") over the one read from the config's format and the query. ``log``: a log the
        caller read from a file or stdin (``kb.ask.logs.read_log``); ``query`` is then the user's words, if any."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise QueryError(f"k must be an integer from 1 to {MAX_K}")
        q = read_question(query, config_text, config_name, lang, versions, front_end, log)  # QueryError, ConfigError
        return self.answer(q, k)

    def answer(self, q: Question, k: int = 5) -> C.Answer:
        """The answer to a question read by ``kb.ask.question.read_question``."""
        lang = q.lang
        notes: list[C.Note] = []
        if q.truncated:
            notes.append(C.Note("input", t(lang, "truncated", n=MAX_QUERY_CHARS)))
        log = _log_read(q.log) if q.log is not None else None
        if q.log is not None:
            notes.append(C.Note("input", _log_note(q.log, lang)))
            if not q.text.strip():  # a log with no error and no words of the user's: nothing to answer from
                return C.Answer(
                    schema_version=C.SCHEMA_VERSION,
                    query="",
                    lang=lang,  # type: ignore[arg-type]
                    answered=False,
                    results=[],
                    closest=[],
                    findings=[],
                    notes=notes,
                    message=t(lang, "no_error_in_log"),
                    log=log,
                )
        if q.attachment is not None and q.attachment.versions_only:
            notes.append(C.Note("input", t(lang, "attachment_versions")))
        ps, view, judged = judge_versions(self.registry, q.versions, lang)
        notes.extend(judged)
        cfg = q.config
        facts = q.config_facts
        findings: list[C.Finding] = []
        pointed: dict[str, list[str]] = {}  # entry -> the severities of the findings that point to it
        pinned: list[str] = []  # entries explaining error-level findings, in finding order
        if cfg is not None:
            from kb.doctor.judge import lint_file  # only with a config: the rules are not needed to answer a question

            given = {p.package: p.version for p in ps if p.release}
            judged = lint_file(cfg, self.registry, given, world_size=q.stated.single_gpu, model_params=q.stated.params)
            assumed = [v for v in judged.versions if v.origin == "assumed"]
            if assumed:
                pins = ", ".join(f"{v.package} {v.version}" for v in assumed)
                notes.append(C.Note("version", t(lang, "ver.assumed", pins=pins, dialect=judged.kind)))
            for f in judged.findings:
                findings.append(C.finding(f, lang))  # the one conversion kb lint uses too
                if f.entry:
                    pointed.setdefault(f.entry, []).append(f.severity)
                    if f.severity == "error" and f.entry not in pinned:
                        pinned.append(f.entry)
        memory = None
        if cfg is not None:  # only with a config: kb mem's modules are not needed to answer a question
            from kb.memory.setup import setup_for_question

            if (setup := setup_for_question(q.stated, cfg, lang)) is not None:
                from kb.memory.estimate import estimate_with_changes
                from kb.memory.report import memory_contract

                memory = memory_contract(estimate_with_changes(setup[0]), lang, setup[1])
        notes_on_names, resolved = judge_names(q.param_names, q.text, q.is_log, view, lang)
        # a name only a front end has says something only to a question about that front end (see _anchors)
        notes.extend(n for n in notes_on_names if n.name is None or rank.anchors(n.name, q.text, view))
        found = self.retriever.search(q, query_params=resolved, extra=list(pointed))
        entries = self.index.entries
        anchors = [n for n in resolved if rank.anchors(n, q.text, view)]
        ctx = rank.Context(
            q,
            entries,
            facts,
            pointed,
            named=bool(anchors),
            units=self.index.units,
            known=self.knows,
            typo=self.typo_of_known,
            field_word=self.ds_config_word,
        )
        ranked = rank.score(found, ctx)
        if ctx.other_tools:
            notes.append(C.Note("input", t(lang, "other_tool", names=", ".join(ctx.other_tools))))
        # the registry's own answers (a name renamed / removed / added / deprecated), ranked with the entries
        base = self.registry._default_view()
        lifecycle = {
            PREFIX + f.rid: f
            for f in [*registry_facts(q.param_names, q.text, base, view), *subcommand_facts(q.text, base)]
        }
        if lifecycle:
            ranked = sorted(
                [*ranked, *(Hit(rid, score=f.score) for rid, f in lifecycle.items())],
                key=lambda h: (-h.score, h.entry_id),
            )

        def entry_applies(eid: str) -> bool | None:
            return None if eid in lifecycle else applies(entries[eid].get("applies_to") or {}, ps, "en")[0]

        sel = rank.select(ranked, k, pinned, entry_applies, MAX_CLOSEST)
        if ctx.thin and not sel.answered:
            notes.append(C.Note("input", t(lang, "thin")))  # what to add; an answered short question needs no advice
        results: list[C.Result] = []
        closest: list[C.Closest] = []
        if sel.answered:
            for h in sel.results:
                if h.entry_id in lifecycle:
                    results.append(fact_result(lifecycle[h.entry_id], lang, view))
                    continue
                w = rank.why(h, ctx, lang)
                results.append(
                    entry_result(
                        entries[h.entry_id], lang, view, h.score, w, q.name_set, ps, q.front_end, rank.steps(h)
                    )
                )
        else:
            closest = [
                C.Closest(
                    h.entry_id,
                    fact_result(lifecycle[h.entry_id], lang, view).title
                    if h.entry_id in lifecycle
                    else entries[h.entry_id]["title"][lang],
                    round(h.score, 3),
                )
                for h in sel.closest
                if round(h.score, 3) > 0  # nothing matched at all: an alphabetical list would be noise
            ]
        stated = q.stated.facts
        return C.Answer(
            schema_version=C.SCHEMA_VERSION,
            query=q.text,
            lang=lang,  # type: ignore[arg-type]
            answered=sel.answered,
            results=results,
            closest=closest,
            findings=findings,
            notes=notes,
            message=None if sel.answered else t(lang, "no_answer"),
            config_facts=facts.as_dict() if facts is not None else None,
            stated_facts=stated.as_dict() or None,
            memory=memory,
            versions=[C.VersionUsed(p.package, p.version, p.release, p.source, p.exact) for p in ps],
            front_end=q.front_end,
            log=log,
        )


def _log_read(lt: LogTriage) -> C.LogRead:
    return C.LogRead(
        lt.lines,
        lt.chars,
        lt.blocks_seen,
        [C.LogBlock(b.kind, b.start, b.end, b.text, b.rank, b.repeats) for b in lt.used],  # type: ignore[arg-type]
        lt.failing_rank,
    )


def _log_note(lt: LogTriage, lang: str) -> str:
    if not lt.used:
        return t(lang, "log.none_prose" if lt.prose.strip() else "log.none", lines=f"{lt.lines:,}")
    parts = []
    for b in lt.used:
        kind = t(lang, f"log.kind.{b.kind}")
        key = "log.block_rank" if b.rank is not None else "log.block"
        parts.append(t(lang, key, start=b.start, end=b.end, kind=kind, rank=b.rank))
    sep = "; " if lang == "en" else "；"
    return t(lang, "log.used", lines=f"{lt.lines:,}", blocks=lt.blocks_seen, used=sep.join(parts))


__all__ = ["ConfigError", "Engine", "IndexCorrupt", "IndexMissing", "IndexStale", "QueryError", "entry_result"]
