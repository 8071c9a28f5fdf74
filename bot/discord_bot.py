"""The Discord bot: slash commands ``/kb ask | lint | mem | show``, answers to mentions, feedback buttons.

Thin on purpose: an event becomes a ``bot.chat`` call (the platform-neutral conversation: gates,
attachments, commands, buttons) on the ``AnswerService`` (bot/service.py), and the ``Reply`` becomes a
message with ``bot.discord_render.render``. Nothing here ranks, lints or lays out.

- Heavy state at startup: ``setup_hook`` opens the ``AnswerService`` (index, embedder, registry) in a
  thread; a missing or stale index raises there and the bot does not start.
- Every interaction handler ``defer()``s first (Discord's 3-second window), then calls the service, then
  sends a follow-up. An exception anywhere gives the user ``internal_error`` with an id that is in the log.
- No privileged intents in the default mode ("mention"): Discord delivers the content and attachments of a
  message that mentions the bot without the message content intent. Mode "all" (answer every message in
  the allowed channels) needs that intent, so only that mode asks for it.
- Buttons and the reason select are ``DynamicItem``s matched on their id (``bot.layout.CONTROL_ID``),
  registered in ``setup_hook``: they keep working after a restart. Sent views are stopped first, so
  discord.py never tracks them per message (nothing to time out, nothing that could unregister the pattern).
- ``/kb mem``'s options are built from ``kb.memory.setup.OPTIONS`` (the CLI's options and bounds); command
  and option descriptions are in Chinese for zh-CN / zh-TW clients (``KbTranslator``).
- The token comes only from the environment (``DISCORD_TOKEN``) and is never logged.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import discord
from discord import app_commands, ui
from discord.app_commands import locale_str

from bot import chat
from bot.discord_render import render, render_notice, render_reason_prompt
from bot.layout import CONTROL_ID, PRIVATE, parse_control_id, shorten
from bot.messages import msg
from bot.service import AnswerService, Reply, internal_error
from bot.settings import Settings

log = logging.getLogger("kb.bot.discord")

PLATFORM = "discord"
TOKEN_ENV = "DISCORD_TOKEN"
CHOICE_NAME = 100  # Discord: an autocomplete choice's name and value are at most 100 characters
DESCRIPTION = 100  # Discord: a command's or an option's description


class MissingToken(RuntimeError):
    """The bot token is not set (``DISCORD_TOKEN``)."""


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


class DiscordFile:
    """A ``discord.Attachment`` as ``bot.chat.Attachment``: Discord gives the size and type before any download."""

    def __init__(self, att: Any):
        self.att = att

    async def meta(self) -> tuple[str, str | None, int]:
        return self.att.filename, self.att.content_type, int(self.att.size or 0)

    async def read(self) -> bytes:
        return await self.att.read()


def build_view(components: list[dict[str, Any]]) -> ui.View | None:
    """The discord.py view for rendered action rows: every item a ``KbComponent`` (persistent, no timeout)."""
    if not components:
        return None
    view = ui.View(timeout=None)
    for row, action_row in enumerate(components):
        for c in action_row.get("components", []):
            if c["type"] == 2:
                item: Any = ui.Button(
                    style=discord.ButtonStyle(c["style"]), label=c.get("label"), custom_id=c["custom_id"], row=row
                )
            else:  # 3: the reasons select (the renderer makes only buttons and string selects)
                options = [discord.SelectOption(label=o["label"], value=o["value"]) for o in c.get("options", [])]
                item = ui.Select(custom_id=c["custom_id"], placeholder=c.get("placeholder"), options=options, row=row)
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


class KbComponent(ui.DynamicItem[ui.Item], template=CONTROL_ID.pattern):
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


class KbTranslator(app_commands.Translator):
    """Command and option descriptions in Chinese for zh-CN / zh-TW clients (``locale_str(en, zh=...)``)."""

    async def translate(self, string: locale_str, locale: discord.Locale, context: Any) -> str | None:
        return string.extras.get("zh") if locale_lang(locale) == "zh" else None


def text(en: str, zh: str) -> locale_str:
    return locale_str(shorten(en, DESCRIPTION), zh=shorten(zh, DESCRIPTION))


class KbTree(app_commands.CommandTree):
    async def on_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError, /) -> None:
        """An option Discord sent that does not convert, or anything that escaped a handler: never silence."""
        lang = locale_lang(interaction.locale)
        if isinstance(error, app_commands.TransformerError):
            body = render_notice(msg(lang, "bad_input", reason=str(error)), lang)
        else:
            body = render(internal_error("discord.tree", error.__cause__ or error, lang))
        await _reply_anyhow(interaction, body)


async def _reply_anyhow(interaction: discord.Interaction, body: dict[str, Any], ephemeral: bool = False) -> None:
    """Send ``body`` whatever state the interaction is in (not yet answered, deferred); log if even that fails."""
    try:
        if interaction.response.is_done():
            await interaction.followup.send(**send_kwargs(body), ephemeral=ephemeral)
        else:
            await interaction.response.send_message(**send_kwargs(body), ephemeral=ephemeral)
    except Exception:  # noqa: BLE001 - the last resort: the log has it
        log.exception("kb discord: could not send a reply")


Make = Callable[[AnswerService, str | None, str | None], Awaitable[Reply]]


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
        await self.tree.set_translator(KbTranslator())
        if self.sync_commands:
            await self.tree.sync()

    async def close(self) -> None:
        await super().close()
        if self.service is not None:
            self.service.close()

    def _svc(self) -> AnswerService:
        if self.service is None:
            raise RuntimeError("the answer service is not open (setup_hook has not run)")
        return self.service

    async def respond(self, it: discord.Interaction, where: str, make: Make, ephemeral: bool = False) -> None:
        """Defer first, then the Reply ``make`` gives, as one follow-up; an exception: internal error with an id."""
        try:
            await it.response.defer(thinking=True, ephemeral=ephemeral)
            user = getattr(it.user, "id", None)
            reply = await make(
                self._svc(), str(user) if user is not None else None, channel_key(it.channel, it.channel_id)
            )
            await it.followup.send(**send_kwargs(render(reply)), ephemeral=ephemeral)
        except Exception as e:  # noqa: BLE001 - the user gets a reason and an id, the log the traceback
            body = render(internal_error(where, e, locale_lang(it.locale), platform=PLATFORM))
            await _reply_anyhow(it, body, ephemeral=ephemeral)

    # ------------------------------------------------------------ slash commands

    async def handle_ask(self, it: discord.Interaction, query: str, config: Any = None) -> None:
        files = [DiscordFile(config)] if config is not None else []
        lang = chat.lang_of(query or "")
        await self.respond(
            it,
            "discord.ask",
            lambda svc, u, c: chat.message_reply(svc, PLATFORM, query, user=u, channel=c, lang=lang, attachments=files),
        )

    async def handle_lint(self, it: discord.Interaction, config: Any) -> None:
        lang = locale_lang(it.locale)
        files = [DiscordFile(config)]
        await self.respond(
            it,
            "discord.lint",
            lambda svc, u, c: chat.message_reply(svc, PLATFORM, "", user=u, channel=c, lang=lang, attachments=files),
        )

    async def handle_mem(self, it: discord.Interaction, values: dict[str, Any]) -> None:
        lang = locale_lang(it.locale)
        await self.respond(it, "discord.mem", lambda svc, u, c: chat.mem_reply(svc, lang, u, c, values))

    async def handle_show(self, it: discord.Interaction, entry_id: str) -> None:
        lang = locale_lang(it.locale)
        await self.respond(it, "discord.show", lambda svc, u, c: svc.show(entry_id.strip(), lang, u, c))

    async def autocomplete_entry(self, it: discord.Interaction, current: str) -> list[app_commands.Choice[str]]:
        if self.service is None:
            return []
        prefix = (current or "").strip().lower()
        found = self.service.entry_ids(prefix, 25)
        found.sort(key=lambda e: not e[0].startswith(prefix))  # ids that start with what was typed first
        return [
            app_commands.Choice(name=shorten(f"{i} \u00b7 {t}", CHOICE_NAME), value=i[:CHOICE_NAME]) for i, t in found
        ]

    # ------------------------------------------------------------ buttons and the reason select

    async def handle_component(self, it: discord.Interaction, cid: str) -> None:
        parsed = parse_control_id(cid)
        if parsed is None:
            return
        ephemeral = parsed[0] in PRIVATE
        try:
            await it.response.defer(thinking=True, ephemeral=ephemeral)
            user = getattr(it.user, "id", None)
            values = (it.data or {}).get("values") or []
            lang = parsed[3] or locale_lang(it.locale)  # an id made before it carried the language: the user's
            p = await chat.press(
                self._svc(),
                cid,
                str(values[0]) if values else None,
                str(user) if user is not None else None,
                channel_key(it.channel, it.channel_id),
                lang,
                inline_reasons=False,
            )
            if p.reply is not None:
                body = render(p.reply)
            else:
                body = render_reason_prompt(p.ask_reason, lang) if p.ask_reason else render_notice(p.text or "", lang)
            await it.followup.send(**send_kwargs(body), ephemeral=ephemeral)
        except Exception as e:  # noqa: BLE001
            body = render(internal_error(f"discord.{parsed[0]}", e, locale_lang(it.locale), platform=PLATFORM))
            await _reply_anyhow(it, body, ephemeral=ephemeral)

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
        await self.answer_message(message, query, addressed)

    async def answer_message(self, message: discord.Message, query: str, addressed: bool = True) -> None:
        """Answer a message in place (or in a new thread with ``thread_replies``): its first usable attachment
        or a pasted ``` block is the config. A message nobody addressed to the bot gets only a confident answer."""
        files = [DiscordFile(a) for a in message.attachments or []]
        user, channel = str(message.author.id), channel_key(message.channel)
        reply = await chat.converse(
            self._svc(), PLATFORM, query, user=user, channel=channel, addressed=addressed, attachments=files
        )
        if reply is not None:
            try:
                await self.send_reply(message, render(reply), chat.split_pasted(query)[0])
            except Exception:  # noqa: BLE001 - the last resort: the log has it
                log.exception("kb discord: could not send the reply")

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


def _annotation(o: Any) -> Any:
    """A ``kb.memory.setup`` option as a slash-command option type, with its bounds or choices."""
    if o.kind == "int":
        return app_commands.Range[int, int(o.min), int(o.max)]
    if o.kind == "float":
        return app_commands.Range[float, float(o.min), float(o.max)]
    if o.kind == "choice":
        return Literal[o.choices]
    return bool if o.kind == "bool" else str


def mem_command(bot: KbDiscordBot) -> Callable[..., Awaitable[None]]:
    """The ``/kb mem`` callback, its options those of ``kb.memory.setup.OPTIONS`` (the chat ones)."""
    from kb.memory.setup import OPTIONS

    opts = [o for o in OPTIONS if o.chat]

    async def mem(interaction: discord.Interaction, **values: Any) -> None:
        await bot.handle_mem(interaction, values)

    params = [inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=discord.Interaction)]
    for o in opts:  # the model is required; every other option is "not given" (None) unless the user sets it
        default = inspect.Parameter.empty if o.name == "model" else None
        params.append(
            inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=_annotation(o))
        )
    mem.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return app_commands.describe(**{o.name: text(o.help("en"), o.help("zh")) for o in opts})(mem)


def build_group(bot: KbDiscordBot) -> app_commands.Group:
    """``/kb ask | lint | mem | show``: each command hands over to the bot's handler."""
    group = app_commands.Group(
        name="kb",
        description=text(
            "Verified fixes for DeepSpeed / Hugging Face training failures",
            "DeepSpeed / Hugging Face 训练问题的已核实解决办法",
        ),
    )

    @group.command(
        name="ask",
        description=text(
            "Ask about a symptom or paste an error; attach your ds_config.json",
            "描述症状或贴出报错；可附上 ds_config.json",
        ),
    )
    @app_commands.describe(
        query=text("the symptom or the error message", "症状或报错信息"),
        config=text("your DeepSpeed / accelerate config (optional)", "你的 DeepSpeed / accelerate 配置（可选）"),
    )
    async def ask(interaction: discord.Interaction, query: str, config: discord.Attachment | None = None) -> None:
        await bot.handle_ask(interaction, query, config)

    @group.command(
        name="lint",
        description=text("What DeepSpeed will really do with your config", "DeepSpeed 实际会怎样执行你的配置"),
    )
    @app_commands.describe(
        config=text(
            "ds_config.json, an accelerate YAML, TrainingArguments YAML or a launch script",
            "ds_config.json、accelerate YAML、TrainingArguments YAML 或启动脚本",
        )
    )
    async def lint(interaction: discord.Interaction, config: discord.Attachment) -> None:
        await bot.handle_lint(interaction, config)

    group.command(
        name="mem",
        description=text("Will it fit? GPU and host memory, term by term", "显存够不够？逐项列出 GPU 和主机内存"),
    )(mem_command(bot))

    @group.command(name="show", description=text("One entry, everything in it", "查看一个条目的全部内容"))
    @app_commands.describe(id=text("the entry id (start typing to search)", "条目 id（输入以搜索）"))
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
    KbDiscordBot(settings).run(token, log_handler=None)  # logging is configured above; the token is never logged


DRY_RUN_USER = "dry-run"


def dry_run(service: AnswerService, query: str, **options: Any) -> dict[str, Any]:
    """The exact JSON body the bot would post for this question as a mention (no token, no network); the
    question goes into the service's feedback store as user ``dry-run``. ``options``: ``config_text``,
    ``config_name``, ``lang``, and ``vote`` / ``reason``: clicked under the answer as that user would click
    them (``bot.chat.dry_run_reply``; the reasons follow a "not helpful" here, as on Discord)."""
    allow = service.settings.allow_channels
    channel = allow[0] if allow else None
    reply = asyncio.run(
        chat.dry_run_reply(
            service, PLATFORM, query, user=DRY_RUN_USER, channel=channel, inline_reasons=False, **options
        )
    )
    return wire_payload(render(reply))
