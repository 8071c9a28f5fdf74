"""The Slack bot: slack-bolt over Socket Mode, a thin adapter of ``bot.service.AnswerService``.

- ``/kb <question>``, ``/kb lint <config>``, ``/kb show <id>``, ``/kb mem <model> [gpus=N stage=N ...]``,
  ``/kb help``: ``ack()`` first (Slack wants it within 3 s), the work on this module's worker threads
  (the core itself on the service's "kb-core" pool), then ``respond(...)`` (ephemeral) at the response_url.
- ``app_mention`` in channels and threads: the answer goes into the thread (``thread_ts`` = the event's
  ``thread_ts`` or ``ts``). The config is a file shared with the mention (size and type are checked
  with ``AnswerService.read_attachment`` before anything is downloaded) or a pasted ``` block; the text
  outside the block, without the bot's own mention, is the question.
- ``Settings.mode = "all"`` also answers plain channel messages in allowed channels, and only when there
  is a confident answer (nobody addressed the bot: no "no answer" or rate-limit replies there).
- Retried events (``X-Slack-Retry-Num``) and repeated ``event_id`` are answered once (an LRU of ids).
- Buttons / select under an answer: more results, the other language, helpful / not helpful + reason.
- Every request gets a reply: an answer, or the reason (refused, rate limited, internal error with an id
  that is in the log). Tokens are never logged.

``build_app`` makes the bolt ``App`` (tests pass ``authorize=`` and a ``WebClient(base_url=...)``);
``run(settings)`` starts Socket Mode; ``dry_run`` returns the chat.postMessage body a mention would get.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
import urllib.request
import weakref
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from slack_sdk.errors import SlackApiError

from bot.messages import msg
from bot.service import AnswerService, AskRequest, AttachmentRefused, Reply, internal_error
from bot.settings import Settings, SettingsError
from bot.slack_render import ACTION_IDS, esc, message_body, problems, render
from kb.lang import detect_lang, has_cjk

log = logging.getLogger("kb.bot.slack")

COMMAND = "/kb"
EVENTS_SEEN = 10_000  # event ids remembered for de-duplication
MAX_FILES = 5  # files of one message looked at
_CODE_TAGS = {"json", "hjson", "yaml", "yml", "toml", "sh", "bash", "shell", "python", "py", "text", "txt", "ini"}
_ENTRY_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_ASK_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# /kb mem options: name -> (Setup field, converter)
_MEM_CHOICES = {"offload": ("none", "optimizer", "optimizer+param"), "precision": ("bf16", "fp16", "fp32")}


def _bounded(cast: Callable[[str], float], lo: float, hi: float) -> Callable[[str], float]:
    """A converter for `/kb mem key=value`: ``cast`` the text, refuse values outside [lo, hi]."""

    def conv(v: str) -> float:
        n = cast(v)
        if not lo <= n <= hi:
            raise ValueError(f"must be between {lo:g} and {hi:g}")
        return n

    return conv


def _int(lo: int, hi: int) -> Callable[[str], float]:
    return _bounded(int, lo, hi)


def _float(lo: float, hi: float) -> Callable[[str], float]:
    return _bounded(float, lo, hi)


def _bool(v: str) -> bool:
    if v.lower() in ("1", "true", "yes", "on"):
        return True
    if v.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _choice(name: str) -> Callable[[str], str]:
    def conv(v: str) -> str:
        if v not in _MEM_CHOICES[name]:
            raise ValueError(f"must be one of {', '.join(_MEM_CHOICES[name])}")
        return v

    return conv


MEM_OPTIONS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "gpus": ("gpus", _int(1, 100_000)),
    "nodes": ("nodes", _int(1, 100_000)),
    "stage": ("stage", _int(0, 3)),
    "offload": ("offload", _choice("offload")),
    "precision": ("precision", _choice("precision")),
    "seq": ("seq", _int(1, 10_000_000)),
    "micro_batch": ("micro_batch", _int(1, 100_000)),
    "mb": ("micro_batch", _int(1, 100_000)),
    "gpu_mem": ("gpu_mem_gib", _float(1, 100_000)),
    "cpu_mem": ("cpu_mem_gib", _float(1, 1_000_000)),
    "lora_rank": ("lora_rank", _int(1, 100_000)),
    "qlora": ("qlora", _bool),
    "activation_checkpointing": ("activation_checkpointing", _bool),
    "ckpt": ("activation_checkpointing", _bool),
}


# ---------------------------------------------------------------- Slack text -> plain text


def unslack(text: str) -> str:
    """Slack's wire text as the user typed it: links ``<url|label>`` -> url, channels -> #name, the
    entities ``&amp; &lt; &gt;`` decoded. User and special mentions (``<@U1>``, ``<!here>``) stay as they
    are (the renderer escapes them on the way out, so they never ping)."""

    def token(m: re.Match[str]) -> str:
        inner = m.group(1)
        if inner.startswith(("@", "!")):
            return m.group(0)
        if inner.startswith("#"):
            cid, _, name = inner.partition("|")
            return f"#{name}" if name else cid
        url, _, label = inner.partition("|")
        return label if url.startswith("mailto:") and label else url

    text = re.sub(r"<([^<>\n]*)>", token, text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def strip_code_fence(text: str) -> str:
    """A config pasted as ```...``` (with or without a language word on the first line) -> the config."""
    t = text.strip()
    m = re.fullmatch(r"```(.*?)```", t, re.S)
    if m:
        t = m.group(1)
        first, nl, rest = t.partition("\n")
        if nl and first.strip().lower() in _CODE_TAGS:
            t = rest
    return t.strip("\n")


def parse_message(text: str, bot_user_id: str | None = None) -> tuple[str, str | None]:
    """(question, pasted config or None) from a message's text: the first ``` block is the config, the
    text around it the question; mentions of the bot itself are removed."""
    config = None
    m = re.search(r"```(.*?)```", text or "", re.S)
    if m:
        config = unslack(strip_code_fence(m.group(0)))
        text = text[: m.start()] + "\n" + text[m.end() :]
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text or "")
    question = unslack(text or "").strip()
    question = re.sub(r"[ \t]{2,}", " ", question)
    return question, (config if config and config.strip() else None)


def _lang_of(text: str) -> str:
    try:
        return detect_lang(text) if text else "en"
    except Exception:  # noqa: BLE001 - a language guess never fails a request
        return "zh" if has_cjk(text or "") else "en"


# ---------------------------------------------------------------- the bot


class SlackBot:
    """The state behind one bolt App: the service, worker threads, seen event ids."""

    def __init__(self, service: AnswerService, settings: Settings):
        self.service = service
        self.settings = settings
        self.pool = ThreadPoolExecutor(max_workers=max(2, settings.workers), thread_name_prefix="kb-slack")
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._seen_lock = threading.Lock()
        self._pending: set[Future[Any]] = set()
        self._pending_lock = threading.Lock()

    # ------------------------------------------------------------ plumbing

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    def seen(self, event_id: str) -> bool:
        """True when this event id was handled already; otherwise remember it (LRU of EVENTS_SEEN)."""
        with self._seen_lock:
            if event_id in self._seen:
                self._seen.move_to_end(event_id)
                return True
            self._seen[event_id] = time.time()
            while len(self._seen) > EVENTS_SEEN:
                self._seen.popitem(last=False)
            return False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Work after the ack, on this bot's threads (never on the thread that acks)."""
        fut = self.pool.submit(fn, *args)
        with self._pending_lock:
            self._pending.add(fut)
        fut.add_done_callback(self._done)
        return fut

    def _done(self, fut: Future[Any]) -> None:
        with self._pending_lock:
            self._pending.discard(fut)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted piece of work finished (tests; a graceful stop)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._pending_lock:
                if not self._pending:
                    return True
            time.sleep(0.01)
        return False

    @staticmethod
    def run(coro: Coroutine[Any, Any, Any]) -> Any:
        """Run one service coroutine to completion from a worker thread (the core runs on the service's pool)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coro)
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(asyncio.run(coro)), name="kb-slack-run")
        t.start()
        t.join()
        return out[0]

    def _log(self, event: str, **fields: Any) -> None:
        log.info(json.dumps({"event": event, "platform": "slack", **fields}, ensure_ascii=False))

    def guarded(self, where: str, lang: str, send: Callable[[Reply], Any], work: Callable[[], Any]) -> None:
        """Run ``work``; any exception becomes the internal_error reason with an id that is in the log."""
        try:
            work()
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            reply = internal_error(f"slack.{where}", e, lang, platform="slack")
            try:
                send(reply)
            except Exception:  # noqa: BLE001
                log.error("kb slack could not send the error reply %s", reply.error_id, exc_info=True)

    # ------------------------------------------------------------ sending

    def post(self, client: Any, channel: str, thread_ts: str | None, reply: Reply) -> None:
        """chat.postMessage in the thread; the file (what did not fit) uploaded beside it."""
        body, file = post_body(reply, channel, thread_ts)
        client.chat_postMessage(**body)
        if file:
            try:
                client.files_upload_v2(
                    channel=channel,
                    thread_ts=thread_ts,
                    content=file["content"],
                    filename=file["filename"],
                    title=file["title"],
                )
            except Exception as e:  # noqa: BLE001 - the message says it did not all fit; the file is extra
                self._log("file_upload_failed", channel=channel, error=type(e).__name__)

    def respond_reply(self, respond: Callable[..., Any], reply: Reply) -> None:
        """A reply at the response_url (slash commands, buttons on ephemeral messages): ephemeral, no file."""
        body = render(reply, files=False)
        body = body if not problems(body) else message_body(body.get("text") or "kb")
        respond(text=body["text"], blocks=body["blocks"], response_type="ephemeral", replace_original=False)

    # ------------------------------------------------------------ files

    def read_files(self, client: Any, files: list[dict[str, Any]], lang: str) -> tuple[str, str]:
        """(text, name) of the first usable config file; AttachmentRefused (the first reason) when none is."""
        first: AttachmentRefused | None = None
        for f in files[:MAX_FILES]:
            info = f
            name = str(f.get("name") or f.get("id") or "<attachment>")
            try:
                if f.get("file_access") == "check_file_info" or not all(
                    k in f for k in ("name", "size", "url_private")
                ):
                    try:
                        info = client.files_info(file=f["id"])["file"]
                    except SlackApiError as e:
                        why = e.response.get("error") if e.response is not None else "error"
                        reason = f"{name}: files.info: {why} (files:read?)"
                        raise AttachmentRefused(msg(lang, "bad_input", reason=reason)) from None
                name = str(info.get("name") or info.get("title") or name)
                size = int(info.get("size") or 0)
                ctype = info.get("mimetype")
                # size and type first, from the file's metadata: nothing is downloaded for a refused file
                self.service.check_attachment(name, ctype, size, lang)
                try:
                    data = self.download(
                        client, info.get("url_private_download") or info.get("url_private"), name, lang
                    )
                except OSError as e:  # urllib's HTTP and network errors
                    reason = f"{name}: download failed ({type(e).__name__})"
                    raise AttachmentRefused(msg(lang, "bad_input", reason=reason)) from None
                text = self.service.read_attachment(name, ctype, size or len(data), data, lang)
            except AttachmentRefused as e:
                self._log("attachment_refused", name_chars=len(name), size=info.get("size"), type=info.get("mimetype"))
                first = first or e
                continue
            self._log("attachment", size=len(data), type=info.get("mimetype"))
            return text, name
        raise first or AttachmentRefused(msg(lang, "attachment_type", name="?"))

    def download(self, client: Any, url: str | None, name: str, lang: str) -> bytes:
        """``url_private`` with the bot token, through the client's proxy / SSL / timeout settings; at most
        ``attachment_bytes`` (+1 to notice more). Only Slack's hosts (or the client's own API host) get the token."""
        if not url or not _trusted_download(url, getattr(client, "base_url", "")):
            raise AttachmentRefused(msg(lang, "bad_input", reason=f"{name}: not a Slack file URL"))
        limit = self.settings.attachment_bytes
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {client.token}"})
        handlers: list[Any] = [_DropAuthOnRedirect(), urllib.request.HTTPSHandler(context=getattr(client, "ssl", None))]
        if getattr(client, "proxy", None):
            handlers.append(urllib.request.ProxyHandler({"http": client.proxy, "https": client.proxy}))
        opener = urllib.request.build_opener(*handlers)
        with opener.open(req, timeout=getattr(client, "timeout", 30) or 30) as resp:
            ctype = resp.headers.get_content_type()
            data = resp.read(limit + 1)
        if ctype == "text/html" and not name.lower().endswith((".html", ".htm")):
            # an HTML page instead of the file (a sign-in page, say): the token could not read it
            raise AttachmentRefused(
                msg(lang, "bad_input", reason=f"{name}: Slack did not return the file (files:read?)")
            )
        return data

    # ------------------------------------------------------------ events

    def handle_message(self, event: dict[str, Any], client: Any, bot_user_id: str | None, addressed: bool) -> None:
        channel = event.get("channel")
        thread_ts = event.get("thread_ts") or event.get("ts")
        question, pasted = parse_message(event.get("text") or "", bot_user_id)
        lang = _lang_of(question)

        def send(reply: Reply) -> None:
            if addressed or reply.kind == "answer":
                self.post(client, channel, thread_ts, reply)
            else:
                self._log("silent", kind=reply.kind, channel=channel)

        def work() -> None:
            user = event.get("user")
            self._log(
                "message",
                addressed=addressed,
                channel=channel,
                chars=len(question),
                files=len(event.get("files") or []),
            )
            gated = self.service.precheck(lang, user, channel)  # allow-list and rate limit, before any download
            if gated is not None:
                send(gated)
                return
            config_text, config_name = None, "<pasted>"
            if event.get("files"):
                try:
                    config_text, config_name = self.read_files(client, event["files"], lang)
                except AttachmentRefused as e:
                    send(Reply("refused", lang, message=str(e)))
                    return
            elif pasted:
                config_text = pasted
            send(self.answer(question, config_text, config_name, user, channel))

        self.guarded("message", lang, send, work)

    def answer(
        self, question: str, config_text: str | None, config_name: str, user: str | None, channel: str | None
    ) -> Reply:
        """Ask; a config alone (no question) is linted."""
        if not question.strip() and config_text:
            return self.run(self.service.lint(config_text, config_name, _lang_of(config_text), user, channel))
        req = AskRequest(question, config_text, config_name, "auto", None, "slack", user, channel)
        return self.run(self.service.ask(req))

    # ------------------------------------------------------------ /kb

    def handle_command(self, body: dict[str, Any], respond: Callable[..., Any]) -> None:
        text = unslack(body.get("text") or "").strip()
        user, channel = body.get("user_id"), body.get("channel_id")
        lang = _lang_of(text)
        self._log("command", channel=channel, chars=len(text))
        self.guarded(
            "command",
            lang,
            lambda r: self.respond_reply(respond, r),
            lambda: self._command(text, user, channel, lang, respond),
        )

    def _command(
        self, text: str, user: str | None, channel: str | None, lang: str, respond: Callable[..., Any]
    ) -> None:
        verb, _, rest = text.partition(" ")
        verb_l = verb.lower()
        rest = rest.strip()
        if "\n" in verb:  # "/kb lint\n{...}"
            verb_l, _, more = verb.partition("\n")
            verb_l, rest = verb_l.lower(), (more + " " + rest).strip()
        say = lambda reply: self.respond_reply(respond, reply)  # noqa: E731
        if verb_l in ("", "help", "帮助", "-h", "--help"):
            from bot.slack_render import help_body

            hb = help_body(lang)
            respond(text=hb["text"], blocks=hb["blocks"], response_type="ephemeral", replace_original=False)
            return
        if verb_l == "lint":
            opt_lang, rest = _lang_option(rest)
            cfg = strip_code_fence(rest)
            lang = opt_lang or lang
            if not cfg.strip():
                say(Reply("refused", lang, message=msg(lang, "slack.usage_lint")))
                return
            say(self.run(self.service.lint(cfg, "<pasted>", lang, user, channel)))
            return
        if verb_l == "show":
            parts = rest.split()
            opt_lang = next((p.split("=", 1)[-1] for p in parts[1:] if p in ("en", "zh", "lang=en", "lang=zh")), None)
            if not parts or not _ENTRY_ID.match(parts[0]):
                say(Reply("refused", lang, message=msg(lang, "slack.usage_show")))
                return
            say(self.run(self.service.show(parts[0], opt_lang or lang, user, channel)))
            return
        if verb_l == "mem":
            setup, err, opt_lang = parse_mem(rest)
            lang = opt_lang or lang
            if err:
                say(
                    Reply(
                        "refused",
                        lang,
                        message=msg(lang, "bad_input", reason=err) + "\n" + msg(lang, "slack.usage_mem"),
                    )
                )
                return
            say(self.run(self.service.mem(lang, user, channel, **setup)))
            return
        say(self.answer(text, None, "<config>", user, channel))

    # ------------------------------------------------------------ buttons

    def handle_action(
        self, body: dict[str, Any], action: dict[str, Any], client: Any, respond: Callable[..., Any]
    ) -> None:
        aid = action.get("action_id")
        raw = (action.get("selected_option") or {}).get("value") if aid == "kb_reason" else action.get("value")
        fields = str(raw or "").split("|")
        ask_id = fields[0]
        lang = fields[1] if len(fields) > 1 and fields[1] in ("en", "zh") else "en"
        reason = fields[2] if len(fields) > 2 else None
        user = (body.get("user") or {}).get("id")
        container = body.get("container") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
        message = body.get("message") or {}
        ephemeral = bool(container.get("is_ephemeral")) or not message.get("ts")
        thread_ts = message.get("thread_ts") or message.get("ts")
        self._log("action", action=aid, channel=channel)

        def send(reply: Reply) -> None:
            if ephemeral or not channel:
                self.respond_reply(respond, reply)
            else:
                self.post(client, channel, thread_ts, reply)

        def thank(text: str) -> None:
            tb = message_body(text, lang)
            if ephemeral or not channel or not user:
                respond(text=tb["text"], blocks=tb["blocks"], response_type="ephemeral", replace_original=False)
            else:
                client.chat_postEphemeral(
                    channel=channel, user=user, text=tb["text"], blocks=tb["blocks"], thread_ts=thread_ts
                )

        def work() -> None:
            if not _ASK_ID.match(ask_id):
                send(Reply("refused", lang, message=msg(lang, "bad_input", reason="unknown button")))
                return
            if aid == "kb_more":
                send(self.run(self.service.again(ask_id, more=True, user=user, channel=channel)))
            elif aid == "kb_lang":
                send(self.run(self.service.again(ask_id, lang=lang, user=user, channel=channel)))
            elif aid in ("kb_vote_up", "kb_vote_down"):
                thank(self.run(self.service.vote(ask_id, aid == "kb_vote_up", None, user, lang)))
            elif aid == "kb_reason":
                thank(self.run(self.service.vote(ask_id, False, reason, user, lang)))

        self.guarded("action", lang, send, work)


class _DropAuthOnRedirect(urllib.request.HTTPRedirectHandler):
    """Follow a redirect, but never send the bot token to another host."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and urlsplit(newurl).netloc != urlsplit(req.full_url).netloc:
            new.remove_header("Authorization")
        return new


def _trusted_download(url: str, api_base: str) -> bool:
    u = urlsplit(url)
    if u.scheme == "https" and (u.hostname or "").endswith(".slack.com"):
        return True
    base = urlsplit(api_base or "")
    return bool(base.netloc) and u.scheme == base.scheme and u.netloc == base.netloc


def _lang_option(rest: str) -> tuple[str | None, str]:
    m = re.match(r"^(?:--lang[ =]|lang=)(en|zh)\b\s*", rest)
    return (m.group(1), rest[m.end() :]) if m else (None, rest)


def parse_mem(text: str) -> tuple[dict[str, Any], str | None, str | None]:
    """``<model> [key=value ...]`` -> (service.mem keyword arguments, error or None, lang option or None).

    The model is a preset name or a size (never a path: a chat user must not make the bot read files)."""
    from kb.memory.estimate import PRESETS, parse_params

    tokens = text.split()
    if not tokens:
        return {}, "give a model (a preset like llama2-7b, or a size like 7b)", None
    model, setup, lang = tokens[0], {}, None
    if model.lower() not in PRESETS:
        try:
            parse_params(model)
        except ValueError:
            return {}, f"unknown model {model!r}: use a preset ({', '.join(PRESETS)}) or a size like 7b", None
    setup["model"] = model
    for tok in tokens[1:]:
        key, eq, value = tok.partition("=")
        key = key.lower().replace("-", "_")
        if key == "lang" and value in ("en", "zh"):
            lang = value
            continue
        if not eq or key not in MEM_OPTIONS:
            return {}, f"unknown option {tok!r} (known: {', '.join(MEM_OPTIONS)})", lang
        field, conv = MEM_OPTIONS[key]
        try:
            setup[field] = conv(value)
        except ValueError as e:
            return {}, f"{key}: {e}", lang
    return setup, None, lang


def post_body(reply: Reply, channel: str, thread_ts: str | None = None) -> tuple[dict[str, Any], dict[str, str] | None]:
    """(the exact chat.postMessage arguments, the file to upload beside it or None)."""
    body = render(reply, files=True)
    file = body.pop("file", None)
    if problems(body):  # never happens by construction (tests); never send Slack a body it rejects either
        log.error("kb slack renderer produced an invalid body: %s", problems(body)[:3])
        body = message_body(body.get("text") or "kb")
    out: dict[str, Any] = {"channel": channel, "text": body["text"], "blocks": body["blocks"]}
    if thread_ts:
        out["thread_ts"] = thread_ts
    out["unfurl_links"] = False
    out["unfurl_media"] = False
    return out, file


# ---------------------------------------------------------------- the app


def registered_events(mode: str) -> tuple[str, ...]:
    """The event types ``build_app`` listens to in this mode (bot/slack-manifest.yaml subscribes to them)."""
    return ("app_mention", "message") if mode == "all" else ("app_mention",)


_BOTS: weakref.WeakKeyDictionary[Any, SlackBot] = weakref.WeakKeyDictionary()


def bot_of(app: Any) -> SlackBot:
    """The SlackBot behind an App made by ``build_app`` (its worker threads: ``wait_idle()``, ``close()``)."""
    return _BOTS[app]


def build_app(
    service: AnswerService,
    settings: Settings,
    token: str | None = None,
    client: Any = None,
    authorize: Callable[..., Any] | None = None,
    *,
    signing_secret: str | None = None,
    process_before_response: bool = False,
) -> Any:
    """The bolt App with every listener. ``App(token=...)`` calls auth.test now; tests pass ``authorize=``
    (returning an ``AuthorizeResult``) and ``client=WebClient(base_url=...)`` instead. ``signing_secret``
    (default: $SLACK_SIGNING_SECRET) verifies HTTP requests; Socket Mode needs none."""
    from slack_bolt import App, BoltResponse

    bot = SlackBot(service, settings)
    kwargs: dict[str, Any] = {
        "name": "kb",
        "process_before_response": process_before_response,
        "signing_secret": signing_secret,
        "logger": logging.getLogger("kb.bot.slack.bolt"),
    }
    if client is not None:
        if token and not client.token:
            client.token = token
        kwargs["client"] = client
    if authorize is not None:
        kwargs["authorize"] = authorize
    elif token and client is None:
        kwargs["token"] = token
    app = App(**kwargs)
    _BOTS[app] = bot

    @app.use
    def dedupe(body: dict[str, Any], request: Any, next_: Callable[[], None]) -> Any:
        """Retried or repeated events are acknowledged and skipped: each event is answered once."""
        event_id = body.get("event_id") if body.get("type") == "event_callback" else None
        if event_id and bot.seen(str(event_id)):
            retry = (request.headers.get("x-slack-retry-num") or [None])[0]
            bot._log("duplicate", event_id=event_id, retry=retry)
            return BoltResponse(status=200, body="")
        return next_()

    @app.command(COMMAND)
    def on_command(ack: Callable[..., Any], body: dict[str, Any], respond: Callable[..., Any]) -> None:
        ack()
        bot.submit(bot.handle_command, body, respond)

    @app.event("app_mention")
    def on_mention(event: dict[str, Any], client: Any, context: Any) -> None:
        bot.submit(bot.handle_message, event, client, context.get("bot_user_id"), True)

    if "message" in registered_events(settings.mode):

        @app.event("message")
        def on_message(event: dict[str, Any], client: Any, context: Any) -> None:
            bot_user = context.get("bot_user_id")
            if event.get("subtype") not in (None, "file_share") or event.get("bot_id"):
                return  # edits, deletions, joins, other bots
            if bot_user and f"<@{bot_user}" in (event.get("text") or ""):
                return  # a mention: app_mention answers it
            if event.get("channel_type") not in (None, "channel", "group") or not settings.allowed(
                event.get("channel")
            ):
                return
            bot.submit(bot.handle_message, event, client, bot_user, False)

    for aid in ACTION_IDS:

        @app.action(aid)
        def on_action(
            ack: Callable[..., Any], body: dict[str, Any], action: dict[str, Any], client: Any, respond: Any
        ) -> None:
            ack()
            bot.submit(bot.handle_action, body, action, client, respond)

    return app


def run(settings: Settings) -> None:
    """Start the bot over Socket Mode and block. SLACK_BOT_TOKEN and SLACK_APP_TOKEN come from
    ``Settings.token`` (the environment, or a [tokens] table of a settings file named on the command line)."""
    missing = settings.missing_tokens("slack")
    if missing:
        what = {
            "SLACK_BOT_TOKEN": "the bot token, xoxb-...",
            "SLACK_APP_TOKEN": "the app-level token, xapp-..., scope connections:write",
        }
        raise SettingsError(
            "Slack needs "
            + " and ".join(f"{n} ({what[n]})" for n in missing)
            + ": set it in the environment (docs/slack.md)"
        )
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    service = AnswerService(settings)  # opens the index now: refuses to start on a missing or stale one
    app = build_app(service, settings, token=settings.token("SLACK_BOT_TOKEN"))
    handler = SocketModeHandler(app, app_token=settings.token("SLACK_APP_TOKEN"))
    log.info(json.dumps({"event": "start", "platform": "slack", "mode": settings.mode, "workers": settings.workers}))
    try:
        handler.start()
    finally:
        handler.close()
        bot_of(app).close()
        service.close()


def dry_run(
    service: AnswerService,
    query: str,
    config_text: str | None = None,
    config_name: str = "<config>",
    lang: str = "auto",
    channel: str = "C0DRYRUN",
) -> dict[str, Any]:
    """The exact chat.postMessage body (with "channel") the bot would send for a mention with this question;
    no token, no network. Like a mention, a ``` block in ``query`` is the config when ``config_text`` is None."""
    question, pasted = parse_message(query)
    if config_text is None and pasted:
        config_text, config_name = pasted, "<pasted>"
    if not question.strip() and config_text:
        reply = SlackBot.run(
            service.lint(config_text, config_name, lang if lang in ("en", "zh") else "en", None, channel)
        )
    else:
        req = AskRequest(question, config_text, config_name, lang, None, "slack", "U0DRYRUN", channel)
        reply = SlackBot.run(service.ask(req))
    body, _file = post_body(reply, channel)
    return body


__all__ = [
    "SlackBot",
    "build_app",
    "bot_of",
    "dry_run",
    "esc",
    "parse_mem",
    "parse_message",
    "post_body",
    "registered_events",
    "run",
    "unslack",
]
