"""What a chat bot does, whatever the platform: an event in, a ``bot.service.Reply`` out.

A platform module turns its event into one of these calls and the Reply into its payload
(``bot.layout.render``); nothing here knows a client library.

- ``message_reply``: a message that addresses the bot (a mention, a DM, ``/kb ask``): the allow-list and
  the rate limit first (nothing is downloaded in a refused channel), then the config (the first usable
  attachment, size and type checked before it is read, or a pasted ``` block), then ``kb ask``, or
  ``kb lint`` when there is a config and no question.
- ``command_reply``: the text grammar of ``/kb`` (``help``, ``lint <config>``, ``show <id>``,
  ``mem <model> key=value ...``, else a question) for platforms whose commands are one line of text.
- ``mem_reply``: ``kb mem`` from a chat form; the options, their bounds and their errors are
  ``kb.memory.setup``'s (the same as the CLI's), and the model is never a path on the bot's host.
- ``press``: a button or the reasons select (``bot.layout`` ids): more results, the other language, one
  result in full, a vote.
- ``should_post``: a message nobody addressed to the bot (mode "all") gets only a confident answer.
- ``Worker``: for a platform whose SDK calls back on threads (Slack's bolt): the work after the ack on a
  pool of its own, each service coroutine run to completion, retried events answered once, and any
  exception turned into the internal-error reply with an id that is in the log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from bot.layout import parse_control_id
from bot.messages import msg
from bot.service import AnswerService, AskRequest, AttachmentRefused, Reply, internal_error
from bot.settings import Settings
from kb.lang import detect_lang

log = logging.getLogger("kb.bot.chat")

MAX_FILES = 5  # attachments of one message looked at
CODE_TAGS = {"json", "hjson", "yaml", "yml", "toml", "sh", "bash", "shell", "python", "py", "text", "txt", "ini"}
HELP = ("", "help", "帮助", "-h", "--help")
_ENTRY_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")


def lang_of(text: str | None) -> str:
    """The language a user wrote in ("en" for nothing): kb.lang.detect_lang, which never fails."""
    return detect_lang(text or "")


def strip_code_fence(text: str) -> str:
    """A config pasted as ```...``` (with or without a language word on the first line) -> the config."""
    t = text.strip()
    m = re.fullmatch(r"```(.*?)```", t, re.S)
    if m:
        t = m.group(1)
        first, nl, rest = t.partition("\n")
        if nl and first.strip().lower() in CODE_TAGS:
            t = rest
    return t.strip("\n")


def split_pasted(text: str) -> tuple[str, str | None]:
    """(question, pasted config or None): the first ``` block of a message is the config, the rest the question."""
    text = text or ""
    m = re.search(r"```(.*?)```", text, re.S)
    config = strip_code_fence(m.group(0)) if m else None
    if m:
        text = text[: m.start()] + "\n" + text[m.end() :]
    return re.sub(r"[ \t]{2,}", " ", text).strip(), config if config and config.strip() else None


# ---------------------------------------------------------------- attachments


class Attachment(Protocol):
    """A file shared with a message, as a platform module wraps it."""

    async def meta(self) -> tuple[str, str | None, int]:
        """(name, content type, size in bytes) without downloading it; may raise AttachmentRefused."""
        ...

    async def read(self) -> bytes:
        """Its content (called only after the size and the type passed); may raise AttachmentRefused."""
        ...


async def read_config(service: AnswerService, attachments: Iterable[Attachment], lang: str) -> tuple[str, str]:
    """(text, name) of the first usable attachment: size and type are checked before it is read, then it must
    decode as text. AttachmentRefused with the first reason when none is usable."""
    first: AttachmentRefused | None = None
    for att in list(attachments)[:MAX_FILES]:
        size, ctype = None, None
        try:
            name, ctype, size = await att.meta()
            service.check_attachment(name, ctype, size, lang)
            data = await att.read()
            text = service.read_attachment(name, ctype, size or len(data), data, lang)
        except AttachmentRefused as e:
            service._log("attachment_refused", size=size, type=ctype)
            first = first or e
            continue
        service._log("attachment", size=len(data), type=ctype)
        return text, name
    raise first or AttachmentRefused(msg(lang, "attachment_type", name="?"))


# ---------------------------------------------------------------- messages and commands


async def message_reply(
    service: AnswerService,
    platform: str,
    question: str,
    *,
    user: str | None,
    channel: str | None,
    lang: str | None = None,
    attachments: Iterable[Attachment] = (),
    pasted: str | None = None,
) -> Reply:
    """A message addressed to the bot: ask (with its config), or lint a config sent without a question.
    ``lang``: the language of the reasons and of a lint (default: the question's; a lint: the config's)."""
    said = lang or lang_of(question)
    gated = service.precheck(said, user, channel)  # allow-list and rate limit, before any download
    if gated is not None:
        return gated
    atts = list(attachments)
    text, name = pasted, "<pasted>"
    if atts:
        try:
            text, name = await read_config(service, atts, said)
        except AttachmentRefused as e:
            return Reply("refused", said, message=str(e))
    if not question.strip() and text:
        return await service.lint(text, name, lang or lang_of(text), user, channel)
    return await service.ask(AskRequest(question, text, name, "auto", None, platform, user, channel))


def should_post(reply: Reply, addressed: bool) -> bool:
    """Nobody addressed the bot (mode "all"): only a confident answer is posted; no reasons, no "no answer"."""
    return addressed or reply.kind == "answer"


async def converse(
    service: AnswerService,
    platform: str,
    text: str,
    *,
    user: str | None,
    channel: str | None,
    addressed: bool = True,
    attachments: Iterable[Attachment] = (),
) -> Reply | None:
    """A message (the bot's own mention removed; a ``` block in it is the config) -> the reply to post, or
    None when nobody addressed the bot and there is no confident answer. Never raises: an exception is the
    internal-error reply, with an id that is in the log."""
    question, pasted = split_pasted(text)
    try:
        reply = await message_reply(
            service, platform, question, user=user, channel=channel, attachments=attachments, pasted=pasted
        )
    except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
        reply = internal_error(f"{platform}.message", e, lang_of(question), platform=platform)
    if should_post(reply, addressed):
        return reply
    service._log("silent", platform=platform, kind=reply.kind, channel=channel)
    return None


def usage_mem(lang: str) -> str:
    """``/kb mem`` usage, with every chat option and what it accepts (kb.memory.setup.OPTIONS)."""
    from kb.memory.setup import OPTIONS

    def what(o: Any) -> str:
        if o.kind == "choice":
            return "|".join(o.choices)
        if o.kind == "bool":
            return "true|false"
        if o.kind == "int" and o.max is not None and o.max <= 10:
            return f"{o.min:g}-{o.max:g}"
        return "N"

    opts = " ".join(f"[{o.name}={what(o)}]" for o in OPTIONS if o.chat and o.name != "model")
    return msg(lang, "usage_mem", options=opts)


def check_mem(values: dict[str, Any], lang: str) -> str | None:
    """Why these ``kb mem`` values cannot be estimated (bounds, a path, an unknown model), or None."""
    from kb.memory.setup import SetupError, build_setup, validate

    try:
        build_setup(validate(values))
    except SetupError as e:
        return e.text(lang)
    return None


async def mem_reply(
    service: AnswerService, lang: str, user: str | None, channel: str | None, values: dict[str, Any]
) -> Reply:
    """``kb mem`` from a chat form (option name -> value: text or typed; None: not given)."""
    return await service.mem(lang, user, channel, **{k: v for k, v in values.items() if v is not None})


async def command_reply(
    service: AnswerService, platform: str, text: str, user: str | None, channel: str | None
) -> Reply:
    """``/kb ...`` as one line of text: help, lint, show, mem, or a question."""
    from kb.memory.setup import SetupError, parse_pairs

    text = text.strip()
    lang = lang_of(text)
    verb, _, rest = text.partition(" ")
    if "\n" in verb:  # "/kb lint\n{...}"
        verb, _, more = verb.partition("\n")
        rest = (more + " " + rest).strip()
    verb, rest = verb.lower(), rest.strip()
    opt = re.match(r"^(?:--lang[ =]|lang=)(en|zh)\b\s*", rest)
    if verb in HELP:
        return Reply("help", lang, message=msg(lang, "help"))
    if verb == "lint":
        lang, rest = (opt.group(1), rest[opt.end() :]) if opt else (lang, rest)
        cfg = strip_code_fence(rest)
        if not cfg.strip():
            return Reply("refused", lang, message=msg(lang, "usage_lint"))
        return await service.lint(cfg, "<pasted>", lang, user, channel)
    if verb == "show":
        parts = rest.split()
        lang = next((p.split("=", 1)[-1] for p in parts[1:] if p in ("en", "zh", "lang=en", "lang=zh")), lang)
        if not parts or not _ENTRY_ID.match(parts[0]):
            return Reply("refused", lang, message=msg(lang, "usage_show"))
        return await service.show(parts[0], lang, user, channel)
    if verb == "mem":
        tokens = rest.split()
        lang = next((t[5:] for t in tokens if t in ("lang=en", "lang=zh")), lang)
        try:
            values: dict[str, Any] = parse_pairs(t for t in tokens if t not in ("lang=en", "lang=zh"))
            why = check_mem(values, lang)
        except SetupError as e:
            why = e.text(lang)
        if why:
            return Reply("refused", lang, message=msg(lang, "bad_input", reason=why) + "\n" + usage_mem(lang))
        return await mem_reply(service, lang, user, channel, values)
    question, pasted = split_pasted(text)
    return await message_reply(service, platform, question, user=user, channel=channel, lang=lang, pasted=pasted)


class DryRunError(ValueError):
    """A dry run's vote that cannot be recorded (the reply has no answer to vote on, a bad reason)."""


async def dry_run_reply(
    service: AnswerService,
    platform: str,
    query: str,
    config_text: str | None = None,
    config_name: str = "<config>",
    lang: str = "auto",
    user: str | None = None,
    channel: str | None = None,
    vote: str | None = None,
    reason: str | None = None,
    inline_reasons: bool = True,
) -> Reply:
    """What a mention with this question (and config) would get, as ``kb bot ... --dry-run`` shows it. The
    question is recorded in the service's feedback store like any ask; ``vote`` ("up" / "down") and ``reason``
    (one of bot.feedback.REASONS; it means "down") are then clicked as that user would click them
    (``dry_run_vote``), so ``kb gaps`` sees them."""
    question, pasted = split_pasted(query) if config_text is None else (query, None)
    if config_text is None and pasted:
        config_text, config_name = pasted, "<pasted>"
    if not question.strip() and config_text:
        reply = await service.lint(config_text, config_name, lang if lang in ("en", "zh") else lang_of(config_text))
    else:
        reply = await service.ask(AskRequest(question, config_text, config_name, lang, None, platform, user, channel))
    if vote or reason:
        await dry_run_vote(service, reply, vote or "down", reason, user, channel, inline_reasons)
    return reply


def dry_run_note(path: str, vote: str | None, reason: str | None) -> str:
    """What a dry run recorded in the feedback database at ``path``, for the one who ran it (a terminal)."""
    voted = ""
    if vote or reason:
        voted = f" and a {'down' if reason else vote} vote" + (f" ({reason})" if reason else "")
    return f"recorded the question{voted} in {path}: kb gaps --db {path}"


async def dry_run_vote(
    service: AnswerService,
    reply: Reply,
    vote: str,
    reason: str | None,
    user: str | None,
    channel: str | None,
    inline_reasons: bool = True,
) -> list[str]:
    """Click "helpful" / "not helpful" under ``reply`` (and choose ``reason`` in the reasons select) the way
    ``press`` handles a real click; the thank-you texts. DryRunError when there is nothing to vote on."""
    from bot.feedback import REASONS
    from bot.layout import control_id

    if vote not in ("up", "down") or (reason is not None and (vote != "down" or reason not in REASONS)):
        raise DryRunError(f"a vote is up or down; a reason ({', '.join(REASONS)}) goes with a down vote only")
    if not reply.ask_id:
        raise DryRunError(f"nothing to vote on: the reply is {reply.kind} ({reply.message or 'no question asked'})")
    lang = reply.lang
    clicks = [(control_id("vote", reply.ask_id, vote, lang), None)]
    if reason:
        clicks.append((control_id("reason", reply.ask_id, lang=lang), reason))
    said = []
    for cid, value in clicks:
        p = await press(service, cid, value, user, channel, lang, inline_reasons)
        said.append(p.text or "")
    expected = msg(lang, "thanks_reason", reason=msg(lang, f"reason.{reason}")) if reason else msg(lang, "thanks")
    if said[-1] != expected:
        raise DryRunError(said[-1])
    return said


# ---------------------------------------------------------------- buttons and the reasons select


@dataclass
class Pressed:
    reply: Reply | None = None  # a new answer for the conversation (more results, the other language)
    text: str | None = None  # a thank-you or why not: for the one who clicked only
    ask_reason: str | None = None  # the ask_id whose reasons to offer (where answers carry no reasons select)


async def press(
    service: AnswerService,
    control: str,
    value: str | None,
    user: str | None,
    channel: str | None,
    lang: str = "en",
    inline_reasons: bool = True,
) -> Pressed:
    """A click on a kb button or a choice in the reasons select (``value``: the reason)."""
    parsed = parse_control_id(control)
    if parsed is None:
        return Pressed(text=msg(lang, "bad_input", reason=msg(lang, "unknown_button")))
    action, ask_id, arg, carried = parsed
    lang = carried or lang
    if action in ("more", "lang"):
        more = action == "more"
        return Pressed(reply=await service.again(ask_id, None if more else arg, more, user, channel))
    if action == "full":
        return Pressed(reply=await service.expand(ask_id, int(arg or 0), lang, user, channel))
    if action == "vote":
        text = await service.vote(ask_id, arg == "up", None, user, lang)
        ask = arg == "down" and not inline_reasons and text == msg(lang, "thanks")
        return Pressed(text=text, ask_reason=ask_id if ask else None)
    return Pressed(text=await service.vote(ask_id, False, value, user, lang))


# ---------------------------------------------------------------- work after the ack, for thread-based SDKs


class Worker:
    """The work a thread-based platform does after its ack: on this pool (never on the thread that acks),
    each service coroutine run to completion (the core itself on the service's pool)."""

    platform = "chat"
    EVENTS_SEEN = 10_000  # event ids remembered for de-duplication

    def __init__(self, service: AnswerService, settings: Settings):
        self.service, self.settings = service, settings
        self.pool = ThreadPoolExecutor(max_workers=max(2, settings.workers), thread_name_prefix=f"kb-{self.platform}")
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def seen(self, event_id: str) -> bool:
        """True when this event id was handled already (a retry); otherwise remember it (an LRU)."""
        with self._lock:
            if event_id in self._seen:
                self._seen.move_to_end(event_id)
                return True
            self._seen[event_id] = time.time()
            while len(self._seen) > self.EVENTS_SEEN:
                self._seen.popitem(last=False)
            return False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut = self.pool.submit(fn, *args)
        with self._lock:
            self._pending.add(fut)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(fut)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted piece of work finished (tests; a graceful stop)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not self._pending:
                    return True
            time.sleep(0.01)
        return False

    @staticmethod
    def run(coro: Coroutine[Any, Any, Any]) -> Any:
        """One service coroutine to completion from a worker thread (or from inside a running loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(asyncio.run(coro)), name="kb-chat-run")
        t.start()
        t.join()
        return out[0]

    def _log(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, "platform": self.platform, **fields}, ensure_ascii=False)
        logging.getLogger(f"kb.bot.{self.platform}").info(line)

    def message(
        self,
        text: str,
        *,
        user: str | None,
        channel: str | None,
        post: Callable[[Reply], Any],
        addressed: bool = True,
        attachments: Callable[[], list[Attachment]] = list,
    ) -> None:
        """A message (``converse``) on this worker thread; its reply, if any, goes out with ``post``."""

        def send(reply: Reply) -> None:
            if should_post(reply, addressed):
                post(reply)

        def work() -> None:
            atts = attachments()
            self._log("message", addressed=addressed, channel=channel, chars=len(text), files=len(atts))
            reply = self.run(
                converse(
                    self.service, self.platform, text, user=user, channel=channel, addressed=addressed, attachments=atts
                )
            )
            if reply is not None:
                post(reply)

        self.guarded("message", lang_of(text), send, work)

    def command(self, text: str, *, user: str | None, channel: str | None, reply: Callable[[Reply], Any]) -> None:
        """``/kb ...`` as text (``command_reply``): the reply goes out with ``reply``."""
        self._log("command", channel=channel, chars=len(text))
        work = lambda: reply(self.run(command_reply(self.service, self.platform, text, user, channel)))  # noqa: E731
        self.guarded("command", lang_of(text), reply, work)

    def click(
        self,
        control: str,
        value: str | None,
        *,
        user: str | None,
        channel: str | None,
        post: Callable[[Reply], Any],
        private: Callable[[Reply], Any],
        inline_reasons: bool = True,
    ) -> None:
        """A button or the reasons select (``press``): a new answer goes out with ``post``, a thank-you (or
        why not) with ``private`` (only the one who clicked sees it)."""
        lang = (parse_control_id(control) or ("", "", None, None))[3] or "en"
        self._log("action", action=control.split(":")[1] if ":" in control else control, channel=channel)

        def work() -> None:
            p = self.run(press(self.service, control, value, user, channel, lang, inline_reasons))
            if p.reply is not None:
                post(p.reply)
            else:
                private(Reply("thanks", lang, message=p.text or ""))

        self.guarded("action", lang, post, work)

    def guarded(self, where: str, lang: str, send: Callable[[Reply], Any], work: Callable[[], Any]) -> None:
        """Run ``work``; any exception becomes the internal_error reason with an id that is in the log."""
        try:
            work()
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            reply = internal_error(f"{self.platform}.{where}", e, lang, platform=self.platform)
            try:
                send(reply)
            except Exception:  # noqa: BLE001
                log.error("kb %s could not send the error reply %s", self.platform, reply.error_id, exc_info=True)
