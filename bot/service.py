"""The answer service both bots call: thin on top of the core, safe for an event loop.

- The engine (index, embedder, registry) opens once, at start; a missing or stale index refuses to start.
- Every core call runs in a bounded thread pool (``Settings.workers``), never on the event loop.
- Answers to the same normalised query (and config, language, k) are cached for ``cache_seconds``.
- Per-user and per-channel token buckets; the allow-list; attachment checks (size, text-like, encoding).
- Every request gets a ``Reply``: an answer, or a reason (no confident answer, rate limited, refused,
  internal error with an id that is in the log). Never silence.
- Logs are JSON lines with ids, sizes and timings; the query text only with ``log_content = true``.

Platform adapters (bot/discord_bot.py, bot/slack_bot.py) turn events into these calls through the
platform-neutral ``bot.chat`` and a ``Reply`` into a payload through ``bot.layout``; nothing
platform-specific lives here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import unicodedata
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from bot.feedback import REASONS, FeedbackStore, SQLiteStore
from bot.messages import msg
from bot.ratelimit import RateLimiter
from bot.settings import Settings
from kb.lang import detect_lang, pick_lang

log = logging.getLogger("kb.bot")

# what a config attachment may be: text formats users attach (by name; the content must also decode)
TEXT_SUFFIXES = (
    ".json",
    ".hjson",
    ".yaml",
    ".yml",
    ".toml",
    ".txt",
    ".sh",
    ".cfg",
    ".conf",
    ".ini",
    ".md",
    ".py",
    ".log",
)
TEXT_TYPES = (
    "text/",
    "application/json",
    "application/x-yaml",
    "application/yaml",
    "application/toml",
    "application/x-sh",
)


@dataclass
class AskRequest:
    query: str
    config_text: str | None = None
    config_name: str = "<attachment>"
    lang: str = "auto"
    k: int | None = None  # None: Settings.results
    platform: str = "test"
    user_id: str | None = None
    channel_id: str | None = None


@dataclass
class Reply:
    """What the adapter renders. ``kind``: answer | no_answer | rate_limited | refused | error | help | lint |
    memory | entry."""

    kind: str
    lang: str
    answer: dict[str, Any] | None = None  # the `kb ask --json` object (kind answer / no_answer)
    data: dict[str, Any] | None = (
        None  # the LintReport / MemReport / ShowReport dict (kb.contract) of lint, memory, entry
    )
    message: str | None = None  # the reason, in ``lang`` (every kind but answer)
    error_id: str | None = None
    ask_id: str | None = None  # for feedback buttons
    cached: bool = False
    site_base_url: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AttachmentRefused(ValueError):
    pass


class _TTLCache:
    def __init__(self, size: int, ttl: float):
        self.size, self.ttl = size, ttl
        self._d: OrderedDict[str, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            hit = self._d.get(key)
            if hit is None or time.monotonic() - hit[0] > self.ttl:
                self._d.pop(key, None)
                return None
            self._d.move_to_end(key)
            return hit[1]

    def put(self, key: str, value: Any) -> None:
        if self.size <= 0 or self.ttl <= 0:
            return
        with self._lock:
            self._d[key] = (time.monotonic(), value)
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)


def internal_error(where: str, exc: BaseException, lang: str = "en", **ctx: Any) -> Reply:
    """An unexpected failure: logged (JSON line + traceback) under a fresh id; the user gets the id. Both bots use it."""
    error_id = uuid.uuid4().hex[:10]
    log.info(
        json.dumps(
            {"event": "error", "error_id": error_id, "where": where, "error": type(exc).__name__, "lang": lang, **ctx},
            ensure_ascii=False,
        )
    )
    log.error("kb bot internal error %s in %s", error_id, where, exc_info=exc)
    return Reply("error", lang, message=msg(lang, "internal_error", error_id=error_id), error_id=error_id)


def normalise(query: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", query).lower().split())


class AnswerService:
    def __init__(self, settings: Settings | None = None, engine=None, store: FeedbackStore | None = None, limiter=None):
        """Opens the engine now (raises IndexMissing / IndexStale / IndexCorrupt: a bot must not start without it)."""
        from kb.ask.engine import Engine

        self.settings = settings or Settings()
        s = self.settings
        self.engine = engine if engine is not None else Engine()
        self.store = store if store is not None else SQLiteStore(s.feedback_db)
        self.limiter = limiter or RateLimiter(s.user_per_minute, s.user_burst, s.channel_per_minute, s.channel_burst)
        self.pool = ThreadPoolExecutor(max_workers=s.workers, thread_name_prefix="kb-core")
        self.cache = _TTLCache(s.cache_size, s.cache_seconds)
        self.core_threads: set[str] = set()  # names of the threads core calls ran on (tests assert it)
        self._recent: OrderedDict[str, AskRequest] = OrderedDict()  # ask_id -> request, for "more" / language buttons
        self._recent_lock = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self, fn, *args, **kwargs):
        def call():
            self.core_threads.add(threading.current_thread().name)
            return fn(*args, **kwargs)

        return await asyncio.get_running_loop().run_in_executor(self.pool, call)

    # ------------------------------------------------------------ gates shared by every request

    def precheck(self, lang: str, user: str | None, channel: str | None) -> Reply | None:
        """The allow-list and rate limits, consuming nothing: call it before downloading an attachment."""
        return self._gate(lang, user, channel, consume=False)

    def _gate(self, lang: str, user: str | None, channel: str | None, consume: bool = True) -> Reply | None:
        if not self.settings.allowed(channel):
            return Reply("refused", lang, message=msg(lang, "not_allowed"))
        limited = (self.limiter.check if consume else self.limiter.peek)(str(user), str(channel))
        if limited:
            who, wait = limited
            return Reply("rate_limited", lang, message=msg(lang, f"rate_limited_{who}", seconds=max(1, round(wait))))
        return None

    def internal_error(self, where: str, exc: BaseException, lang: str = "en", **ctx: Any) -> Reply:
        return internal_error(where, exc, lang, **ctx)

    def _log(self, event: str, **fields: Any) -> None:
        log.info(json.dumps({"event": event, "ts": round(time.time(), 3), **fields}, ensure_ascii=False))

    # ------------------------------------------------------------ attachments

    def check_attachment(self, name: str, content_type: str | None, size: int, lang: str) -> None:
        """Before downloading: AttachmentRefused (with the reason, in ``lang``) when too big or not text-like."""
        limit = self.settings.attachment_bytes
        if size > limit:
            raise AttachmentRefused(
                msg(lang, "attachment_too_big", name=name, size=-(-size // 1024), limit=limit // 1024)
            )
        texty = name.lower().endswith(TEXT_SUFFIXES) or (content_type or "").startswith(TEXT_TYPES)
        if not texty:
            raise AttachmentRefused(msg(lang, "attachment_type", name=name))

    def read_attachment(self, name: str, content_type: str | None, size: int, data: bytes | None, lang: str) -> str:
        """The attachment's text, or AttachmentRefused with the reason (size first: never download a huge file)."""
        from kb.inputs import InputError, decode_bytes

        limit = self.settings.attachment_bytes
        self.check_attachment(name, content_type, size, lang)
        if data is None:
            raise AttachmentRefused(msg(lang, "attachment_type", name=name))
        if len(data) > limit:
            raise AttachmentRefused(
                msg(lang, "attachment_too_big", name=name, size=-(-len(data) // 1024), limit=limit // 1024)
            )
        if b"\x00" in data:
            raise AttachmentRefused(msg(lang, "attachment_type", name=name))
        try:
            return decode_bytes(data, name)
        except InputError:
            raise AttachmentRefused(msg(lang, "attachment_encoding", name=name)) from None

    # ------------------------------------------------------------ asking

    async def ask(self, req: AskRequest) -> Reply:
        from kb.ask.engine import QueryError
        from kb.doctor.configs import ConfigError

        t0 = time.perf_counter()
        query = (req.query or "").strip()
        try:
            lang = pick_lang(query, req.lang) if query else ("zh" if req.lang == "zh" else "en")
        except ValueError:
            lang = detect_lang(query)
        ctx = {"platform": req.platform, "channel": req.channel_id, "lang": lang, "query_chars": len(query)}
        if self.settings.log_content:
            ctx["query"] = query
        gated = self._gate(lang, req.user_id, req.channel_id)
        if gated:
            self._log(gated.kind, **ctx)
            return gated
        if not query:
            return Reply("refused", lang, message=msg(lang, "empty"))
        try:
            answer, cached = await self._answer(req)
            ask_id = await self._run(self.store.record_ask, answer, req.platform, req.channel_id, req.user_id)
        except (QueryError, ConfigError) as e:
            self._log("refused", reason=type(e).__name__, **ctx)
            return Reply("refused", lang, message=msg(lang, "bad_input", reason=str(e)))
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            return self.internal_error("ask", e, **ctx)
        with self._recent_lock:
            self._recent[ask_id] = req
            while len(self._recent) > 10_000:
                self._recent.popitem(last=False)
        kind = "answer" if answer["answered"] else "no_answer"
        self._log(
            kind,
            ask_id=ask_id,
            top=[r["id"] for r in answer["results"][:3]],
            cached=cached,
            ms=round(1000 * (time.perf_counter() - t0), 1),
            **ctx,
        )
        return Reply(
            kind,
            answer["lang"],
            answer=answer,
            message=None if answer["answered"] else answer.get("message"),
            ask_id=ask_id,
            cached=cached,
            site_base_url=self.settings.site_base_url,
        )

    async def again(
        self,
        ask_id: str,
        lang: str | None = None,
        more: bool = False,
        user: str | None = None,
        channel: str | None = None,
    ) -> Reply:
        """Ask an earlier question again: in the other language (``lang``) or with more results (``more``).

        The request is kept in memory (the last 10,000); after a restart the question text comes from
        the feedback store (without its config attachment, which is never stored)."""
        with self._recent_lock:
            req = self._recent.get(ask_id)
        if req is None:
            rec = await self._run(lambda: next((a for a in self.store.asks() if a.id == ask_id), None))
            if rec is None:
                fallback = lang or "en"
                reason = msg(fallback, "unknown_answer", ask_id=ask_id)
                return Reply("refused", fallback, message=msg(fallback, "bad_input", reason=reason))
            req = AskRequest(rec.query, lang=rec.lang, platform=rec.platform, channel_id=rec.channel)
        k = req.k or self.settings.results
        new = AskRequest(
            req.query,
            req.config_text,
            req.config_name,
            lang or req.lang,
            min(20, k * 3) if more else k,
            req.platform,
            user if user is not None else req.user_id,
            channel if channel is not None else req.channel_id,
        )
        return await self.ask(new)

    def _key(self, req: AskRequest) -> str:
        k = req.k or self.settings.results
        cfg_hash = hashlib.sha1(req.config_text.encode("utf-8", "replace")).hexdigest()[:12] if req.config_text else ""
        return f"{normalise(req.query or '')}\0{cfg_hash}\0{req.lang}\0{k}"

    async def _answer(self, req: AskRequest) -> tuple[dict[str, Any], bool]:
        """(the answer to ``req``, whether it came from the cache): the core runs in the pool on a miss."""
        key = self._key(req)
        answer = self.cache.get(key)
        if answer is not None:
            return answer, True
        k = req.k or self.settings.results
        answer = await self._run(
            self._ask_core, (req.query or "").strip(), req.config_text, req.config_name, k, req.lang
        )
        self.cache.put(key, answer)
        return answer, False

    async def expand(
        self, ask_id: str, n: int, lang: str = "en", user: str | None = None, channel: str | None = None
    ) -> Reply:
        """Result ``n`` (1-based) of an earlier answer, whole (a "Full answer" click): the ShowReport of that
        result as the answer had it (the user's versions and front end included) as ``data``. The answer is
        the cached one of the same request, else asked again; after a restart the question comes from the
        feedback store (without its config attachment, which is never stored), and an entry that is no longer
        among its results is shown as ``kb show`` has it. Nothing new is recorded."""
        from kb.ask.engine import QueryError
        from kb.contract import show_report
        from kb.doctor.configs import ConfigError

        if not self.settings.allowed(channel):
            return Reply("refused", lang, message=msg(lang, "not_allowed"))
        unknown = Reply(
            "refused", lang, message=msg(lang, "bad_input", reason=msg(lang, "unknown_answer", ask_id=ask_id))
        )
        with self._recent_lock:
            req = self._recent.get(ask_id)
        seen: str | None = None  # the entry the user was shown at rank n, when the request is gone
        if req is None:
            rec = await self._run(lambda: next((a for a in self.store.asks() if a.id == ask_id), None))
            if rec is None or not 0 < n <= len(rec.results):
                return unknown
            seen = str(rec.results[n - 1]["id"])
            k = max(n, self.settings.results)
            req = AskRequest(rec.query, lang=rec.lang, k=k, platform=rec.platform, channel_id=rec.channel)
        # a cached answer costs nothing (no rate-limit token); when the core must run again, that is an ask
        if self.cache.get(self._key(req)) is None:
            gated = self._gate(lang, user, channel)
            if gated:
                return gated
        try:
            answer, _ = await self._answer(req)
        except (QueryError, ConfigError) as e:
            return Reply("refused", lang, message=msg(lang, "bad_input", reason=str(e)))
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            return self.internal_error("expand", e, lang=lang)
        results = answer.get("results") or []
        r = results[n - 1] if 0 < n <= len(results) else None
        if seen is not None and (r is None or r["id"] != seen):
            r = next((x for x in results if x["id"] == seen), None)
            if r is None and seen in self.engine.index.entries:
                return await self._show(seen, answer.get("lang") or lang)
        if r is None:
            return unknown
        self._log("expand", ask_id=ask_id, n=n, entry=r["id"])
        out_lang = answer.get("lang") or lang
        data = show_report(r, out_lang).to_dict()  # type: ignore[arg-type]
        return Reply("entry", out_lang, data=data, ask_id=ask_id, site_base_url=self.settings.site_base_url)

    def _ask_core(self, query: str, config_text: str | None, config_name: str, k: int, lang: str) -> dict[str, Any]:
        return self.engine.ask(query, config_text=config_text, config_name=config_name, k=k, lang=lang).to_dict()

    async def lint(
        self, config_text: str, name: str, lang: str = "en", user: str | None = None, channel: str | None = None
    ) -> Reply:
        """``kb lint`` of a pasted or attached config: the LintReport (kb.contract) as ``data``."""
        from kb.contract import lint_report
        from kb.doctor.configs import ConfigError, parse_config
        from kb.doctor.lint import lint_config

        gated = self._gate(lang, user, channel)
        if gated:
            return gated

        def run() -> dict[str, Any]:
            cfg = parse_config(config_text, name)
            fs = lint_config(cfg, self.engine.registry)
            return lint_report(name, cfg.kind, cfg.fmt, fs, lang).to_dict()

        try:
            data = await self._run(run)
        except ConfigError as e:
            return Reply("refused", lang, message=msg(lang, "bad_input", reason=str(e)))
        except Exception as e:  # noqa: BLE001
            return self.internal_error("lint", e, lang=lang)
        return Reply("lint", lang, data=data)

    async def mem(self, lang: str = "en", user: str | None = None, channel: str | None = None, **values: Any) -> Reply:
        """``kb mem`` with the options of kb.memory.setup (name -> text or typed value): the MemReport as ``data``.
        The options' bounds are the CLI's; the model is a preset or a size, never a file on this host."""
        from kb.memory.setup import SetupError, report

        gated = self._gate(lang, user, channel)
        if gated:
            return gated
        try:
            data = await self._run(lambda: report(values, lang, allow_files=False).to_dict())
        except SetupError as e:
            return Reply("refused", lang, message=msg(lang, "bad_input", reason=e.text(lang)))
        except ValueError as e:  # the estimate cannot be made (LoRA without a model shape)
            return Reply("refused", lang, message=msg(lang, "bad_input", reason=str(e)))
        except Exception as e:  # noqa: BLE001
            return self.internal_error("mem", e, lang=lang)
        return Reply("memory", lang, data=data)

    async def show(self, entry_id: str, lang: str = "en", user: str | None = None, channel: str | None = None) -> Reply:
        """``kb show``: the ShowReport (kb.contract) as ``data``."""
        gated = self._gate(lang, user, channel)
        if gated:
            return gated
        return await self._show(entry_id, lang)

    async def _show(self, entry_id: str, lang: str) -> Reply:
        from kb.ask.result import entry_result
        from kb.contract import show_report

        e = self.engine.index.entries.get(entry_id)
        if e is None:
            return Reply("refused", lang, message=msg(lang, "unknown_entry", entry_id=entry_id))
        data = await self._run(lambda: show_report(entry_result(e, lang, self.engine.registry), lang).to_dict())
        return Reply("entry", lang, data=data, site_base_url=self.settings.site_base_url)

    def entry_ids(self, prefix: str = "", limit: int = 25) -> list[tuple[str, str]]:
        """(id, English title) of entries whose id or title contains ``prefix`` (autocomplete)."""
        p = prefix.lower().strip()
        out = [
            (eid, e["title"]["en"])
            for eid, e in self.engine.index.entries.items()
            if not p or p in eid or p in e["title"]["en"].lower() or p in e["title"]["zh"]
        ]
        return out[:limit]

    async def vote(self, ask_id: str, helpful: bool, reason: str | None, user: str | None, lang: str = "en") -> str:
        """Record a vote; returns the thank-you text (in ``lang``)."""
        if reason is not None and reason not in REASONS:
            return msg(lang, "bad_input", reason=msg(lang, "unknown_reason", reason=reason))
        try:
            await self._run(self.store.record_vote, ask_id, helpful, reason, user)
        except KeyError:
            return msg(lang, "bad_input", reason=msg(lang, "unknown_answer", ask_id=ask_id))
        self._log("vote", ask_id=ask_id, helpful=helpful, reason=reason)
        return msg(lang, "thanks_reason", reason=msg(lang, f"reason.{reason}")) if reason else msg(lang, "thanks")
