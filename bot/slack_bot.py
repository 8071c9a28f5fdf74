"""The Slack bot: slack-bolt over Socket Mode, a thin adapter of the platform-neutral ``bot.chat``.

- ``/kb <question>``, ``/kb lint <config>``, ``/kb show <id>``, ``/kb mem <model> [gpus=N stage=N ...]``,
  ``/kb help`` (the grammar is ``bot.chat.command_reply``'s): ``ack()`` first (Slack wants it within 3 s),
  the work on this module's worker threads (the core itself on the service's "kb-core" pool), then
  ``respond(...)`` (ephemeral) at the response_url.
- ``app_mention`` in channels and threads: the answer goes into the thread (``thread_ts`` = the event's
  ``thread_ts`` or ``ts``). The config is a file shared with the mention (size and type are checked from
  its metadata before anything is downloaded) or a pasted ``` block; the text outside the block, without
  the bot's own mention, is the question.
- ``Settings.mode = "all"`` also answers plain channel messages in allowed channels, and only when there
  is a confident answer (``bot.chat.should_post``).
- Retried events (``X-Slack-Retry-Num``) and repeated ``event_id`` are answered once (an LRU of ids).
- Buttons / select under an answer (``bot.layout`` control ids, one listener): ``bot.chat.press``.
- Every request gets a reply: an answer, or the reason (refused, rate limited, internal error with an id
  that is in the log). Tokens are never logged.

``build_app`` makes the bolt ``App`` (tests pass ``authorize=`` and a ``WebClient(base_url=...)``);
``run(settings)`` starts Socket Mode; ``dry_run`` returns the chat.postMessage body a mention would get.
"""

from __future__ import annotations

import json
import logging
import re
import urllib.request
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from slack_sdk.errors import SlackApiError

from bot import chat
from bot.layout import CONTROL_ID, control_id
from bot.messages import msg
from bot.service import AnswerService, AttachmentRefused, Reply
from bot.settings import Settings, SettingsError
from bot.slack_render import esc, render

log = logging.getLogger("kb.bot.slack")

COMMAND = "/kb"
PLATFORM = "slack"
# every kb button and select: one listener; the second form is the ids of messages posted before the
# platform-neutral ids (issue 20), still pressed on old messages: ``legacy_control`` translates them
LEGACY_ACTION = re.compile(r"^kb_(more|lang|vote_up|vote_down|reason)$")
ACTION_ID = re.compile(rf"^(?:{CONTROL_ID.pattern}|kb_(?:more|lang|vote_up|vote_down|reason))$")


def legacy_control(action_id: str, raw: str | None) -> tuple[str, str | None] | None:
    """An old button (action id ``kb_more`` ..., value ``ask_id|lang[|reason]``) as (control id, value)."""
    m = LEGACY_ACTION.match(action_id)
    fields = str(raw or "").split("|")
    if not m or not fields[0]:
        return None
    ask_id, lang = fields[0], fields[1] if len(fields) > 1 and fields[1] in ("en", "zh") else "en"
    kind = m.group(1)
    try:
        if kind == "lang":
            return control_id("lang", ask_id, lang), None
        if kind in ("vote_up", "vote_down"):
            return control_id("vote", ask_id, kind.split("_")[1], lang), None
        if kind == "reason":
            return control_id("reason", ask_id, lang=lang), fields[2] if len(fields) > 2 else None
        return control_id("more", ask_id, lang=lang), None
    except ValueError:
        return None  # not an ask id kb made: refused like any unknown button


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


def message_text(text: str, bot_user_id: str | None = None) -> str:
    """A message's text as the user typed it (``unslack``), without the bot's own mention."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text or "")
    return unslack(text or "").strip()


class SlackFile:
    """A file shared with a message as ``bot.chat.Attachment``: its metadata from the event (or files.info),
    its content downloaded with the bot token only after the size and the type passed."""

    def __init__(self, bot: SlackBot, client: Any, f: dict[str, Any], lang: str):
        self.bot, self.client, self.f, self.lang, self.info = bot, client, f, lang, f

    async def meta(self) -> tuple[str, str | None, int]:
        f = self.f
        name = str(f.get("name") or f.get("id") or "<attachment>")
        if f.get("file_access") == "check_file_info" or not all(k in f for k in ("name", "size", "url_private")):
            try:
                self.info = self.client.files_info(file=f["id"])["file"]
            except SlackApiError as e:
                why = e.response.get("error") if e.response is not None else "error"
                raise self.refused(name, msg(self.lang, "slack.file_info", error=why)) from None
        self.name = str(self.info.get("name") or self.info.get("title") or name)
        return self.name, self.info.get("mimetype"), int(self.info.get("size") or 0)

    async def read(self) -> bytes:
        url = self.info.get("url_private_download") or self.info.get("url_private")
        try:
            return self.bot.download(self.client, url, self.name, self.lang)
        except OSError as e:  # urllib's HTTP and network errors
            raise self.refused(self.name, msg(self.lang, "download_failed", error=type(e).__name__)) from None

    def refused(self, name: str, why: str) -> AttachmentRefused:
        reason = msg(self.lang, "attachment_unreadable", name=name, why=why)
        return AttachmentRefused(msg(self.lang, "bad_input", reason=reason))


# ---------------------------------------------------------------- the bot


class SlackBot(chat.Worker):
    """The state behind one bolt App: the service, worker threads (``bot.chat.Worker``), seen event ids."""

    platform = PLATFORM

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
        respond(text=body["text"], blocks=body["blocks"], response_type="ephemeral", replace_original=False)

    # ------------------------------------------------------------ files

    def attachments(self, client: Any, files: list[dict[str, Any]], lang: str) -> list[SlackFile]:
        return [SlackFile(self, client, f, lang) for f in files]

    def download(self, client: Any, url: str | None, name: str, lang: str) -> bytes:
        """``url_private`` with the bot token, through the client's proxy / SSL / timeout settings; at most
        ``attachment_bytes`` (+1 to notice more). Only Slack's hosts (or the client's own API host) get the token."""
        if not url or not _trusted_download(url, getattr(client, "base_url", "")):
            reason = msg(lang, "attachment_unreadable", name=name, why=msg(lang, "slack.file_url"))
            raise AttachmentRefused(msg(lang, "bad_input", reason=reason))
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
            reason = msg(lang, "attachment_unreadable", name=name, why=msg(lang, "slack.file_html"))
            raise AttachmentRefused(msg(lang, "bad_input", reason=reason))
        return data

    # ------------------------------------------------------------ events, /kb, buttons

    def handle_message(self, event: dict[str, Any], client: Any, bot_user_id: str | None, addressed: bool) -> None:
        channel, thread_ts = event.get("channel"), event.get("thread_ts") or event.get("ts")
        text = message_text(event.get("text") or "", bot_user_id)
        lang = chat.lang_of(chat.split_pasted(text)[0])  # of the reasons a file is refused with
        self.message(
            text,
            user=event.get("user"),
            channel=channel,
            post=lambda reply: self.post(client, channel, thread_ts, reply),
            addressed=addressed,
            attachments=lambda: self.attachments(client, event.get("files") or [], lang),
        )

    def handle_command(self, body: dict[str, Any], respond: Callable[..., Any]) -> None:
        text = unslack(body.get("text") or "").strip()
        reply = lambda r: self.respond_reply(respond, r)  # noqa: E731
        self.command(text, user=body.get("user_id"), channel=body.get("channel_id"), reply=reply)

    def handle_action(
        self, body: dict[str, Any], action: dict[str, Any], client: Any, respond: Callable[..., Any]
    ) -> None:
        user = (body.get("user") or {}).get("id")
        container = body.get("container") or {}
        channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
        message = body.get("message") or {}
        ephemeral = bool(container.get("is_ephemeral")) or not message.get("ts") or not channel
        thread_ts = message.get("thread_ts") or message.get("ts")

        def post(reply: Reply) -> None:  # into the answer's thread; on an ephemeral message, at the response_url
            if ephemeral:
                self.respond_reply(respond, reply)
            else:
                self.post(client, channel, thread_ts, reply)

        def private(reply: Reply) -> None:
            if ephemeral or not user:
                self.respond_reply(respond, reply)
            else:
                tb = render(reply, files=False)
                client.chat_postEphemeral(
                    channel=channel, user=user, text=tb["text"], blocks=tb["blocks"], thread_ts=thread_ts
                )

        aid, value = str(action.get("action_id") or ""), (action.get("selected_option") or {}).get("value")
        if LEGACY_ACTION.match(aid):
            old = legacy_control(aid, value if aid == "kb_reason" else action.get("value"))
            aid, value = old if old is not None else ("kb:unknown", None)
        self.click(aid, value, user=user, channel=channel, post=post, private=private)


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


def post_body(reply: Reply, channel: str, thread_ts: str | None = None) -> tuple[dict[str, Any], dict[str, str] | None]:
    """(the exact chat.postMessage arguments, the file to upload beside it or None)."""
    body = render(reply, files=True)  # within every limit (bot.layout.fit checks it with slack_render.problems)
    file = body.pop("file", None)
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

    @app.action(ACTION_ID)
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


DRY_RUN_USER = "U0DRYRUN"


def dry_run(service: AnswerService, query: str, channel: str | None = None, **options: Any) -> dict[str, Any]:
    """The exact chat.postMessage body (with "channel") the bot would send for a mention with this question;
    no token, no network. The channel is the first of ``allow_channels`` (else ``C0DRYRUN``); the question
    goes into the service's feedback store as user ``U0DRYRUN``. ``options``: ``config_text``,
    ``config_name``, ``lang``, and ``vote`` / ``reason``: clicked under the answer as that user would click them
    (``bot.chat.dry_run_reply``); like a mention, a ``` block in ``query`` is the config when there is no
    ``config_text``."""
    allow = service.settings.allow_channels
    channel = channel or (allow[0] if allow else "C0DRYRUN")
    reply = SlackBot.run(
        chat.dry_run_reply(service, PLATFORM, query, user=DRY_RUN_USER, channel=channel, inline_reasons=True, **options)
    )
    return post_body(reply, channel)[0]


__all__ = [
    "SlackBot",
    "build_app",
    "bot_of",
    "dry_run",
    "esc",
    "message_text",
    "post_body",
    "registered_events",
    "run",
    "unslack",
]
