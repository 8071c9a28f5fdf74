"""The Discord bot: slash commands ``/kb ask | lint | mem | show``, answers to mentions, feedback buttons.

Thin on purpose: an event becomes an ``AnswerService`` call (bot/service.py: gates, thread pool, cache,
feedback store) and the ``Reply`` becomes a message with ``bot.discord_render.render``. Nothing here ranks,
lints or formats.

- Heavy state at startup: ``setup_hook`` opens the ``AnswerService`` (index, embedder, registry) in a
  thread; a missing or stale index raises there and the bot does not start.
- Every interaction handler ``defer()``s first (Discord's 3-second window), then calls the service, then
  sends a follow-up. An exception anywhere gives the user ``internal_error`` with an id that is in the log.
- No privileged intents in the default mode ("mention"): Discord delivers the content and attachments of a
  message that mentions the bot without the message content intent. Mode "all" (answer every message in
  the allowed channels) needs that intent, so only that mode asks for it.
- Buttons and the reason select are ``DynamicItem``s matched on their ``custom_id`` (``kb:...``), registered
  in ``setup_hook``: they keep working after a restart. Sent views are stopped first, so discord.py never
  tracks them per message (nothing to time out, nothing that could unregister the pattern).
- The token comes only from the environment (``DISCORD_TOKEN``) and is never logged.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import discord
from discord import app_commands, ui

from bot.discord_render import (
    CUSTOM_ID,
    other_lang,
    parse_custom_id,
    render,
    render_notice,
    render_reason_prompt,
)
from bot.messages import msg
from bot.service import TEXT_SUFFIXES, TEXT_TYPES, AnswerService, AskRequest, AttachmentRefused, Reply
from bot.service import internal_error as service_internal_error
from bot.settings import Settings
from kb.lang import detect_lang

log = logging.getLogger("kb.bot.discord")

PLATFORM = "discord"
TOKEN_ENV = "DISCORD_TOKEN"
CHOICE_NAME = 100  # Discord: an autocomplete choice's name and value are at most 100 characters


class MissingToken(RuntimeError):
    """The bot token is not set (``DISCORD_TOKEN``)."""


# ---------------------------------------------------------------- small helpers


def locale_lang(locale: Any) -> str:
    """``interaction.locale`` -> "zh" for zh-CN / zh-TW, else "en"."""
    value = str(getattr(locale, "value", locale) or "")
    return "zh" if value.lower().startswith("zh") else "en"


def channel_key(channel: Any, channel_id: Any = None) -> str | None:
    """The channel the allow-list and the channel rate limit see: a thread counts as its parent channel."""
    if isinstance(channel, discord.Thread) and channel.parent_id:
        return str(channel.parent_id)
    cid = channel_id if channel_id is not None else getattr(channel, "id", None)
    return str(cid) if isinstance(cid, (int, str)) else None


def is_text_attachment(att: Any) -> bool:
    name = (getattr(att, "filename", "") or "").lower()
    ctype = getattr(att, "content_type", None) or ""
    return name.endswith(TEXT_SUFFIXES) or ctype.startswith(TEXT_TYPES)


def pick_attachment(attachments: list[Any]) -> Any | None:
    """The config of a message: its first text attachment; else its first attachment (which will be refused)."""
    if not attachments:
        return None
    return next((a for a in attachments if is_text_attachment(a)), attachments[0])


def internal_error(lang: str, where: str, exc: BaseException) -> Reply:
    """An unexpected failure in the adapter: logged under a fresh id by the service's one implementation."""
    return service_internal_error(where, exc, lang)


def _model_is_path(model: str) -> bool:
    # kb.memory.estimate.resolve_model also reads config.json files by path: never from chat input
    m = model.strip()
    return "/" in m or "\\" in m or m.startswith(("~", ".")) or m.lower().endswith(".json")


def build_view(components: list[dict[str, Any]]) -> ui.View | None:
    """The discord.py view for rendered action rows: every item a ``KbComponent`` (persistent, no timeout)."""
    if not components:
        return None
    view = ui.View(timeout=None)
    for row, action_row in enumerate(components):
        for c in action_row.get("components", []):
            if c["type"] == 2:
                item: Any = ui.Button(
                    style=discord.ButtonStyle(c["style"]),
                    label=c.get("label"),
                    custom_id=c["custom_id"],
                    disabled=c.get("disabled", False),
                    row=row,
                )
            elif c["type"] == 3:
                item = ui.Select(
                    custom_id=c["custom_id"],
                    placeholder=c.get("placeholder"),
                    min_values=c.get("min_values", 1),
                    max_values=c.get("max_values", 1),
                    options=[discord.SelectOption(label=o["label"], value=o["value"]) for o in c.get("options", [])],
                    disabled=c.get("disabled", False),
                    row=row,
                )
            else:  # pragma: no cover - the renderer makes only buttons and string selects
                raise ValueError(f"unsupported component type {c['type']}")
            view.add_item(KbComponent(item))
    # never tracked per message: the KbComponent pattern registered in setup_hook dispatches every click
    view.stop()
    return view


def send_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """A rendered body -> keyword arguments for ``followup.send`` / ``Messageable.send`` / ``Message.reply``."""
    kw: dict[str, Any] = {
        "content": body.get("content", ""),
        "embeds": [discord.Embed.from_dict(e) for e in body.get("embeds", [])],
        "allowed_mentions": discord.AllowedMentions.none(),
    }
    view = build_view(body.get("components") or [])
    if view is not None:
        kw["view"] = view
    files = [discord.File(io.BytesIO(text.encode("utf-8")), filename=name) for name, text in body.get("files") or []]
    if files:
        kw["files"] = files
    return kw


def wire_payload(body: dict[str, Any], ephemeral: bool = False) -> dict[str, Any]:
    """The JSON discord.py 2.7 posts for ``followup.send(**send_kwargs(body))`` (built by discord.py itself)."""
    from discord.http import handle_message_parameters

    kw = send_kwargs(body)
    flags = discord.MessageFlags(ephemeral=True) if ephemeral else discord.utils.MISSING
    with handle_message_parameters(
        content=kw["content"],
        embeds=kw["embeds"],
        view=kw.get("view", discord.utils.MISSING),
        files=kw.get("files", discord.utils.MISSING),
        flags=flags,
        allowed_mentions=kw["allowed_mentions"],
        previous_allowed_mentions=discord.AllowedMentions.none(),
    ) as params:
        if params.payload is not None:
            return json.loads(json.dumps(params.payload))
        return json.loads(params.multipart[0]["value"])


# ---------------------------------------------------------------- persistent components


class KbComponent(ui.DynamicItem[ui.Item], template=CUSTOM_ID):
    """Every kb button and the reason select, matched on the custom_id: survives restarts."""

    def __init__(self, item: ui.Item) -> None:
        super().__init__(item)

    @classmethod
    async def from_custom_id(cls, interaction: discord.Interaction, item: ui.Item, match: re.Match[str], /):
        return cls(item)

    async def callback(self, interaction: discord.Interaction) -> None:
        client = interaction.client
        if isinstance(client, KbDiscordBot):
            await client.handle_component(interaction, self.custom_id)


# ---------------------------------------------------------------- the bot


class KbTree(app_commands.CommandTree):
    async def on_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError, /) -> None:
        """An option Discord sent that does not convert, or anything that escaped a handler: never silence."""
        lang = locale_lang(interaction.locale)
        if isinstance(error, app_commands.TransformerError):
            await _reply_anyhow(interaction, render_notice(msg(lang, "bad_input", reason=str(error))))
            return
        await _reply_anyhow(interaction, render(internal_error(lang, "discord.tree", error.__cause__ or error)))


async def _reply_anyhow(interaction: discord.Interaction, body: dict[str, Any], ephemeral: bool = False) -> None:
    """Send ``body`` whatever state the interaction is in (not yet answered, deferred); log if even that fails."""
    try:
        if interaction.response.is_done():
            await interaction.followup.send(**send_kwargs(body), ephemeral=ephemeral)
        else:
            await interaction.response.send_message(**send_kwargs(body), ephemeral=ephemeral)
    except Exception:  # noqa: BLE001 - the last resort: the log has it
        log.exception("kb discord: could not send a reply")


class KbDiscordBot(discord.Client):
    """``discord.Client`` with the ``/kb`` command group; ``service`` is opened in ``setup_hook`` unless given."""

    def __init__(
        self, settings: Settings | None = None, service: AnswerService | None = None, *, sync_commands: bool = True
    ):
        self.settings = settings or (service.settings if service is not None else Settings())
        intents = discord.Intents.default()  # guilds, guild and DM messages; no members, presences
        intents.message_content = self.settings.mode == "all"  # privileged: only "all" reads unaddressed messages
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none())
        self.service: AnswerService | None = service
        self.sync_commands = sync_commands
        self.tree = KbTree(self)
        self.kb_group = build_group(self)
        self.tree.add_command(self.kb_group)

    async def setup_hook(self) -> None:
        if self.service is None:
            # opens the index (raises IndexMissing / IndexStale / IndexCorrupt: then the bot does not start)
            self.service = await asyncio.to_thread(AnswerService, self.settings)
        self.add_dynamic_items(KbComponent)
        if self.sync_commands:
            await self.tree.sync()

    async def close(self) -> None:
        await super().close()
        if self.service is not None:
            self.service.close()

    # ------------------------------------------------------------ shared steps

    def _svc(self) -> AnswerService:
        if self.service is None:
            raise RuntimeError("the answer service is not open (setup_hook has not run)")
        return self.service

    async def read_config(self, att: Any, lang: str) -> str:
        """An attachment's text. Size and type are checked BEFORE it is downloaded; refusals raise AttachmentRefused."""
        svc = self._svc()
        # the declared size and the name / content type only (empty data): nothing is downloaded yet
        svc.check_attachment(att.filename, att.content_type, int(att.size or 0), lang)
        data = await att.read()
        return svc.read_attachment(att.filename, att.content_type, int(att.size or 0), data, lang)

    async def _guarded(
        self, interaction: discord.Interaction, where: str, work: Callable[[], Awaitable[None]], ephemeral: bool = False
    ) -> None:
        try:
            await work()
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            lang = locale_lang(interaction.locale)
            await _reply_anyhow(interaction, render(internal_error(lang, where, e)), ephemeral=ephemeral)

    @staticmethod
    def _who(interaction: discord.Interaction) -> tuple[str | None, str | None]:
        user = getattr(interaction.user, "id", None)
        return (str(user) if user is not None else None), channel_key(interaction.channel, interaction.channel_id)

    # ------------------------------------------------------------ slash commands

    async def handle_ask(
        self, interaction: discord.Interaction, query: str, config: discord.Attachment | None = None
    ) -> None:
        async def work() -> None:
            await interaction.response.defer(thinking=True)
            user, channel = self._who(interaction)
            lang = detect_lang(query or "")
            text = None
            if config is not None:
                gated = self._svc().precheck(lang, user, channel)  # allow-list and rate limit before any download
                if gated is not None:
                    await interaction.followup.send(**send_kwargs(render(gated)))
                    return
                try:
                    text = await self.read_config(config, lang)
                except AttachmentRefused as e:
                    await interaction.followup.send(**send_kwargs(render_notice(str(e))))
                    return
            req = AskRequest(
                query,
                text,
                config.filename if config is not None else "<attachment>",
                "auto",
                platform=PLATFORM,
                user_id=user,
                channel_id=channel,
            )
            reply = await self._svc().ask(req)
            await interaction.followup.send(**send_kwargs(render(reply)))

        await self._guarded(interaction, "discord.ask", work)

    async def handle_lint(self, interaction: discord.Interaction, config: discord.Attachment) -> None:
        async def work() -> None:
            await interaction.response.defer(thinking=True)
            user, channel = self._who(interaction)
            lang = locale_lang(interaction.locale)
            try:
                text = await self.read_config(config, lang)
            except AttachmentRefused as e:
                await interaction.followup.send(**send_kwargs(render_notice(str(e))))
                return
            reply = await self._svc().lint(text, config.filename, lang=lang, user=user, channel=channel)
            await interaction.followup.send(**send_kwargs(render(reply)))

        await self._guarded(interaction, "discord.lint", work)

    async def handle_mem(self, interaction: discord.Interaction, model: str, **setup: Any) -> None:
        async def work() -> None:
            await interaction.response.defer(thinking=True)
            user, channel = self._who(interaction)
            lang = locale_lang(interaction.locale)
            if _model_is_path(model):
                reply = Reply("refused", lang, message=msg(lang, "bad_input", reason=msg(lang, "model_path")))
            else:
                reply = await self._svc().mem(lang, user, channel, model=model, **setup)
            await interaction.followup.send(**send_kwargs(render(reply)))

        await self._guarded(interaction, "discord.mem", work)

    async def handle_show(self, interaction: discord.Interaction, entry_id: str) -> None:
        async def work() -> None:
            await interaction.response.defer(thinking=True)
            user, channel = self._who(interaction)
            reply = await self._svc().show(
                entry_id.strip(), lang=locale_lang(interaction.locale), user=user, channel=channel
            )
            await interaction.followup.send(**send_kwargs(render(reply)))

        await self._guarded(interaction, "discord.show", work)

    async def autocomplete_entry(
        self, interaction: discord.Interaction, current: str
    ) -> list[app_commands.Choice[str]]:
        if self.service is None:
            return []
        out = []
        prefix = (current or "").strip().lower()
        found = self.service.entry_ids(prefix, 25)
        found.sort(key=lambda e: not e[0].startswith(prefix))  # ids that start with what was typed first
        for eid, title in found:
            name = f"{eid} \u00b7 {title}"
            out.append(
                app_commands.Choice(
                    name=name if len(name) <= CHOICE_NAME else name[: CHOICE_NAME - 1] + "\u2026",
                    value=eid[:CHOICE_NAME],
                )
            )
        return out

    # ------------------------------------------------------------ buttons and the reason select

    @staticmethod
    def message_lang(interaction: discord.Interaction) -> str:
        """The language of the message a component sits on: the answer's (its language button names the
        other one), else what its text is written in, else the user's locale."""
        m = interaction.message
        if m is not None:
            texts: list[str] = [m.content or ""]
            for row in m.components or []:
                for c in getattr(row, "children", [row]):
                    parsed = parse_custom_id(getattr(c, "custom_id", None) or "")
                    if parsed and parsed[0] == "lang" and parsed[2]:
                        return other_lang(parsed[2])
                    texts += [o.label for o in getattr(c, "options", [])] + [getattr(c, "placeholder", None) or ""]
            texts += [(e.title or "") + (e.description or "") for e in m.embeds]
            if any(texts):
                return detect_lang(" ".join(texts))
        return locale_lang(interaction.locale)

    async def handle_component(self, interaction: discord.Interaction, cid: str) -> None:
        parsed = parse_custom_id(cid)
        if parsed is None:
            return
        action, ask_id, arg = parsed
        ephemeral = action in ("vote", "reason")

        async def work() -> None:
            await interaction.response.defer(thinking=True, ephemeral=ephemeral)
            user, channel = self._who(interaction)
            svc = self._svc()
            lang = self.message_lang(interaction)
            if action in ("more", "lang"):
                reply = await svc.again(
                    ask_id, lang=arg if action == "lang" else None, more=action == "more", user=user, channel=channel
                )
                await interaction.followup.send(**send_kwargs(render(reply)))
            elif action == "vote" and arg == "up":
                text = await svc.vote(ask_id, True, None, user, lang)
                await interaction.followup.send(**send_kwargs(render_notice(text)), ephemeral=True)
            elif action == "vote":
                text = await svc.vote(ask_id, False, None, user, lang)
                body = render_reason_prompt(ask_id, lang) if text == msg(lang, "thanks") else render_notice(text)
                await interaction.followup.send(**send_kwargs(body), ephemeral=True)
            else:  # the reason select
                values = (interaction.data or {}).get("values") or []
                text = await svc.vote(ask_id, False, str(values[0]) if values else None, user, lang)
                await interaction.followup.send(**send_kwargs(render_notice(text)), ephemeral=True)

        await self._guarded(interaction, f"discord.{action}", work, ephemeral=ephemeral)

    # ------------------------------------------------------------ mentions

    def addressed(self, message: discord.Message) -> bool:
        """A DM, or a message that mentions the bot (by name or by its role), not merely @everyone / @here."""
        me = self.user
        if me is None:
            return False
        if message.guild is None:
            return True
        if me.mentioned_in(message) and not message.mention_everyone:
            return True
        if any(getattr(u, "id", None) == me.id for u in message.mentions):  # named, beside an @everyone
            return True
        role = message.guild.self_role
        return role is not None and role in (message.role_mentions or [])

    def strip_mentions(self, text: str, message: discord.Message | None = None) -> str:
        me = self.user
        if me is None:
            return (text or "").strip()
        text = re.sub(rf"<@!?{me.id}>", " ", text or "")
        role = message.guild.self_role if message is not None and message.guild is not None else None
        if role is not None:
            text = text.replace(f"<@&{role.id}>", " ")
        return " ".join(text.split()) if "\n" not in text else text.strip()

    async def on_message(self, message: discord.Message) -> None:
        if self.user is None or message.author.bot or message.author.id == self.user.id:
            return
        addressed = self.addressed(message)
        if not addressed:
            # "mention": only when addressed; "all": every message, but silently outside the allowed channels
            if self.settings.mode != "all" or not self.settings.allowed(channel_key(message.channel)):
                return
        query = self.strip_mentions(message.content or "", message)
        if not addressed and not query and not message.attachments:
            return
        await self.answer_message(message, query)

    async def answer_message(self, message: discord.Message, query: str) -> None:
        """Answer a message in place (or in a new thread with ``thread_replies``); its first text attachment is the config."""
        lang = detect_lang(query) if query else "en"
        try:
            svc = self._svc()
            user, channel = str(message.author.id), channel_key(message.channel)
            att = pick_attachment(list(message.attachments or []))
            text = None
            if att is not None:
                try:
                    text = await self.read_config(att, lang)
                except AttachmentRefused as e:
                    await self.send_reply(message, render_notice(str(e)), query)
                    return
            if not query and text is not None:  # only a config: lint it
                reply = await svc.lint(text, att.filename, lang=lang, user=user, channel=channel)
            else:
                name = att.filename if att is not None else "<attachment>"
                reply = await svc.ask(
                    AskRequest(query, text, name, "auto", platform=PLATFORM, user_id=user, channel_id=channel)
                )
            await self.send_reply(message, render(reply), query)
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            try:
                await message.reply(**send_kwargs(render(internal_error(lang, "discord.message", e))))
            except Exception:  # noqa: BLE001
                log.exception("kb discord: could not send the error reply")

    async def send_reply(self, message: discord.Message, body: dict[str, Any], query: str = "") -> None:
        kw = send_kwargs(body)
        in_thread = isinstance(message.channel, discord.Thread)
        # a thread for an answer; a reason (refused, rate limited, an error) is said in place
        if self.settings.thread_replies and body.get("embeds") and message.guild is not None and not in_thread:
            try:
                name = (query.splitlines()[0] if query else "kb").strip()[:100] or "kb"
                thread = await message.create_thread(name=name)
                await thread.send(**kw)
                return
            except discord.HTTPException as e:  # no Create Public Threads permission, a forum post ...: reply in place
                log.warning("kb discord: could not open a thread (%s); replying in place", type(e).__name__)
                kw = send_kwargs(body)  # files were consumed by the failed attempt
        await message.reply(**kw)


# ---------------------------------------------------------------- the /kb command group


def build_group(bot: KbDiscordBot) -> app_commands.Group:
    """``/kb ask | lint | mem | show``: each command hands over to the bot's handler."""
    group = app_commands.Group(name="kb", description="Verified fixes for DeepSpeed / Hugging Face training failures")

    @group.command(name="ask", description="Ask about a symptom or paste an error; attach your ds_config.json")
    @app_commands.describe(
        query="the symptom or the error message", config="your DeepSpeed / accelerate config (optional)"
    )
    async def ask(interaction: discord.Interaction, query: str, config: discord.Attachment | None = None) -> None:
        await bot.handle_ask(interaction, query, config)

    @group.command(name="lint", description="What DeepSpeed will really do with your config")
    @app_commands.describe(config="ds_config.json, an accelerate YAML, TrainingArguments YAML or a launch script")
    async def lint(interaction: discord.Interaction, config: discord.Attachment) -> None:
        await bot.handle_lint(interaction, config)

    @group.command(name="mem", description="Will it fit? GPU and host memory, term by term")
    @app_commands.describe(
        model="a preset (llama2-7b, qwen2.5-72b, ...) or a size like 7b",
        gpus="GPUs per node",
        stage="ZeRO stage",
        offload="what is offloaded to CPU",
        seq="sequence length",
        micro_batch="micro-batch per GPU",
        activation_checkpointing="activation (gradient) checkpointing on",
    )
    async def mem(
        interaction: discord.Interaction,
        model: str,
        gpus: app_commands.Range[int, 1, 4096] = 1,
        stage: app_commands.Range[int, 0, 3] = 3,
        offload: Literal["none", "optimizer", "optimizer+param"] = "none",
        seq: app_commands.Range[int, 1, 1_048_576] = 2048,
        micro_batch: app_commands.Range[int, 1, 4096] = 1,
        activation_checkpointing: bool = False,
    ) -> None:
        await bot.handle_mem(
            interaction,
            model,
            gpus=gpus,
            stage=stage,
            offload=offload,
            seq=seq,
            micro_batch=micro_batch,
            activation_checkpointing=activation_checkpointing,
        )

    @group.command(name="show", description="One entry, everything in it")
    @app_commands.describe(id="the entry id (start typing to search)")
    async def show(interaction: discord.Interaction, id: str) -> None:
        await bot.handle_show(interaction, id)

    @show.autocomplete("id")
    async def show_id(interaction: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        return await bot.autocomplete_entry(interaction, current)

    return group


# ---------------------------------------------------------------- entry points


def run(settings: Settings | None = None) -> None:
    """Start the bot (blocks until it stops). Raises MissingToken when ``DISCORD_TOKEN`` is not set."""
    settings = settings or Settings()
    token = settings.token(TOKEN_ENV)
    if not token:
        raise MissingToken(
            f"{TOKEN_ENV} is not set: export {TOKEN_ENV}=<the bot token from the Discord developer portal, Bot tab>"
        )
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    bot = KbDiscordBot(settings)
    bot.run(token, log_handler=None)  # logging is configured above or by the caller; the token is never logged


def dry_run(
    service: AnswerService,
    query: str,
    config_text: str | None = None,
    config_name: str = "<config>",
    lang: str = "auto",
) -> dict[str, Any]:
    """The exact JSON body the bot would post for ``/kb ask`` (no token, no network)."""

    async def go() -> dict[str, Any]:
        allow = service.settings.allow_channels
        req = AskRequest(
            query,
            config_text,
            config_name,
            lang,
            platform=PLATFORM,
            user_id="dry-run",
            channel_id=allow[0] if allow else None,
        )
        reply = await service.ask(req)
        return wire_payload(render(reply))

    return asyncio.run(go())
