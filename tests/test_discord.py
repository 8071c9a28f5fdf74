"""The Discord bot and its renderer, offline: real discord.py objects, no token, no network.

Two levels: the logic level (MagicMock interactions and messages, the command callbacks called directly)
and the wire level (a real ``discord.Interaction`` built from a gateway payload, run through the command
tree or the view store, with a webhook adapter that captures what discord.py would post). Property tests
check that any answer stays within Discord's limits and never splits a code block.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import warnings
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import pytest

with warnings.catch_warnings():  # discord.py imports audioop (deprecated in 3.11) for voice, which kb never uses
    warnings.simplefilter("ignore", DeprecationWarning)
    import discord
from discord.webhook import async_ as webhook_async
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bot.discord_bot import KbDiscordBot, MissingToken, build_view, dry_run, locale_lang, run, wire_payload
from bot.discord_render import LIMITS, code_block, embed_length, problems, render, safe
from bot.layout import control_id, parse_control_id
from bot.messages import msg
from bot.service import AnswerService, Reply
from bot.settings import Settings
from kb.contract import SCHEMA_VERSION
from kb.doctor.frontends import FRONT_ENDS
from kb.present.doc import front_label
from kb.present.labels import L
from kb.present.links import code_url, entry_url
from tests.conftest import ROOT, fuzz_examples

APP_ID = 2
USER = {"id": "42", "username": "asker", "discriminator": "0", "avatar": None, "global_name": None}
BOT_USER = {"id": "555", "username": "kb", "discriminator": "0", "avatar": None, "bot": True}
DS_CONFIG = (ROOT / "examples" / "ds_config.json").read_bytes()
PINGS = re.compile(r"@(everyone|here)|<@[!&]?\d+>")
FENCE = re.compile(r"```([a-z]*)\n(.*?)\n```", re.S)


def arun(coro):
    return asyncio.run(coro)


@pytest.fixture()
def make_service(tmp_path, fake_engine):
    made: list[AnswerService] = []

    def make(**kw: Any) -> AnswerService:
        kw.setdefault("feedback_db", str(tmp_path / f"fb{len(made)}.sqlite"))
        kw.setdefault("user_burst", 100)
        kw.setdefault("user_per_minute", 600.0)
        kw.setdefault("channel_burst", 1000)
        kw.setdefault("channel_per_minute", 6000.0)
        svc = AnswerService(Settings(**kw), engine=fake_engine)
        made.append(svc)
        return svc

    yield make
    for s in made:
        s.close()


async def make_bot(svc: AnswerService) -> KbDiscordBot:
    bot = KbDiscordBot(svc.settings, service=svc, sync_commands=False)
    await bot.setup_hook()
    bot._connection.application_id = APP_ID
    bot._connection.user = discord.ClientUser(state=bot._connection, data=BOT_USER)
    return bot


def interaction(bot, *, user=42, channel=7, locale=discord.Locale.american_english, data=None, message=None):
    it = MagicMock(spec=discord.Interaction)
    it.client = bot
    it.user = MagicMock(id=user)
    it.channel = None
    it.channel_id = channel
    it.locale = locale
    it.data = data or {}
    it.message = message
    it.response = MagicMock()
    it.response.defer = AsyncMock()
    it.response.send_message = AsyncMock()
    it.response.is_done = MagicMock(return_value=True)
    it.followup = MagicMock()
    it.followup.send = AsyncMock()
    return it


def attachment(name="ds_config.json", data=DS_CONFIG, size=None, content_type="application/json"):
    att = MagicMock(spec=discord.Attachment)
    att.filename = name
    att.content_type = content_type
    att.size = len(data) if size is None else size
    att.read = AsyncMock(return_value=data)
    return att


def as_body(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What a send call would post, from its keyword arguments (discord.py objects -> JSON)."""
    view = kwargs.get("view")
    return {
        "content": kwargs.get("content"),
        "embeds": [e.to_dict() for e in kwargs.get("embeds", [])],
        "components": view.to_components() if view is not None else [],
        "allowed_mentions": kwargs["allowed_mentions"].to_dict(),
        "files": [f.filename for f in kwargs.get("files", [])],
        "ephemeral": kwargs.get("ephemeral", False),
    }


def last_sent(it) -> dict[str, Any]:
    assert it.followup.send.await_count >= 1, "nothing was sent"
    return as_body(it.followup.send.await_args.kwargs)


def texts(body: dict[str, Any]) -> list[str]:
    out = [body.get("content") or ""]
    for e in body.get("embeds", []):
        out += [e.get("title", ""), e.get("description", ""), (e.get("footer") or {}).get("text", "")]
        out += [f["name"] for f in e.get("fields", [])] + [f["value"] for f in e.get("fields", [])]
    return out


def custom_ids(body: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in body.get("components", []) for c in row["components"]]


def cmd(bot, name):
    return bot.kb_group.get_command(name)


def message(bot, content, *, mentions=(), everyone=False, attachments=(), channel_id=7, author=42):
    m = MagicMock(spec=discord.Message)
    m.content = content
    m.author = MagicMock(id=author, bot=False)
    m.mentions = list(mentions)
    m.mention_everyone = everyone
    m.role_mentions = []
    m.attachments = list(attachments)
    m.guild = MagicMock()
    m.guild.self_role = None
    m.channel = MagicMock(spec=discord.TextChannel)
    m.channel.id = channel_id
    m.reply = AsyncMock()
    m.create_thread = AsyncMock()
    return m


# ---------------------------------------------------------------- slash commands, logic level


def test_ask_defers_first_and_the_core_runs_off_the_loop(make_service, monkeypatch):
    svc = make_service()
    seen: list[tuple[int, str]] = []

    async def go():
        bot = await make_bot(svc)
        it = interaction(bot)
        core = svc._ask_core

        def spy(*a, **kw):
            seen.append((it.response.defer.await_count, threading.current_thread().name))
            return core(*a, **kw)

        monkeypatch.setattr(svc, "_ask_core", spy)
        await cmd(bot, "ask").callback(it, query="zero3 oom first step")
        return it

    it = arun(go())
    assert seen and seen[0][0] == 1, "defer() must be awaited before the core runs"
    assert seen[0][1].startswith("kb-core")
    assert svc.core_threads and all(n.startswith("kb-core") for n in svc.core_threads)
    body = last_sent(it)
    assert body["allowed_mentions"] == {"parse": []}
    top = body["embeds"][0]
    assert top["title"].startswith("1. ") and "ZeRO-3" in top["title"]
    assert "zero3-single-gpu-no-offload" in top["footer"]["text"]
    assert "```json\n{" in top["description"], "the first fix's config snippet is a json code block"
    links = "\n".join(f["value"] for e in body["embeds"] for f in e.get("fields", [])) + top["description"]
    assert "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage3.py#L4016-L4050" in links
    ids = custom_ids(body)
    ask_id = parse_control_id(ids[0])[1]
    # every id carries what a click needs, the answer's language included (no message to read it from); the
    # answer's buttons in one row, then a "Full answer N" per result in a row of their own
    assert ids == [
        f"kb:more:{ask_id}:en",
        f"kb:lang:{ask_id}:zh",
        f"kb:vote:{ask_id}:up:en",
        f"kb:vote:{ask_id}:down:en",
        f"kb:full:{ask_id}:1:en",
        f"kb:full:{ask_id}:2:en",
        f"kb:full:{ask_id}:3:en",
    ]
    assert [len(row["components"]) for row in body["components"]] == [4, 3]
    assert [c["label"] for c in body["components"][1]["components"]] == [f"Full answer {n}" for n in (1, 2, 3)]


def test_ask_with_config_shows_findings_first_and_memory(make_service):
    svc = make_service(site_base_url="https://kb.example.org/")

    async def go():
        bot = await make_bot(svc)
        it = interaction(bot)
        query = "llama2-7b on one gpu, zero3 oom at the first step"
        await cmd(bot, "ask").callback(it, query=query, config=attachment())
        return it

    body = last_sent(arun(go()))
    titles = [e.get("title", "") for e in body["embeds"]]
    assert titles[0] == "Your config (kb lint)"
    assert titles[1].startswith("Memory (kb mem) (llama2-7b, 1 GPU)")
    first_result = next(e for e in body["embeds"] if e.get("title", "").startswith("1. "))
    assert first_result["url"].startswith("https://kb.example.org/en/") and first_result["url"].endswith("/")
    top = first_result["footer"]["text"].split(" ")[0]
    assert body["files"] == [f"kb-answer-{top}.md"]  # twelve findings do not fit: the whole answer is attached
    assert body["content"].startswith("This was longer than Discord allows") and "kb show" not in body["content"]
    assert msg("en", "attached", filename=f"kb-answer-{top}.md") in body["content"]


def test_lint_mem_show_and_autocomplete_use_the_locale(make_service):
    svc = make_service()

    async def go():
        bot = await make_bot(svc)
        zh = discord.Locale.chinese
        lint_it = interaction(bot, locale=zh)
        await cmd(bot, "lint").callback(lint_it, config=attachment())
        mem_it = interaction(bot)
        await cmd(bot, "mem").callback(mem_it, model="llama2-7b", gpus=1, stage=3)
        path_it = interaction(bot)
        await cmd(bot, "mem").callback(path_it, model="/etc/passwd")
        show_it = interaction(bot, locale=discord.Locale.taiwan_chinese)
        await cmd(bot, "show").callback(show_it, id="zero3-single-gpu-no-offload")
        missing_it = interaction(bot)
        await cmd(bot, "show").callback(missing_it, id="no-such-entry")
        auto = await bot.autocomplete_entry(interaction(bot), "zero3-single")
        return lint_it, mem_it, path_it, show_it, missing_it, auto

    lint_it, mem_it, path_it, show_it, missing_it, auto = arun(go())
    lint = last_sent(lint_it)["embeds"][0]["title"]
    assert lint.startswith("ds_config.json：deepspeed 配置（json），") and lint.endswith(
        "条发现"
    )  # the LintReport's head
    mem = last_sent(mem_it)["embeds"][0]
    assert mem["title"].startswith("Memory (kb mem) (llama2-7b, 1 GPU)") and "does NOT fit" in mem["title"]
    why = "model: '/etc/passwd': use a preset or a size like 7b"  # kb.memory.setup: never a file on the bot's host
    assert last_sent(path_it)["content"] == msg("en", "bad_input", reason=why)
    show = last_sent(show_it)["embeds"][0]
    assert re.search(r"[\u4e00-\u9fff]", show.get("title") or show["description"]), (
        "zh-TW locale -> the entry in Chinese"
    )
    assert last_sent(missing_it)["content"] == msg("en", "unknown_entry", entry_id="no-such-entry")
    assert auto and auto[0].value == "zero3-single-gpu-no-offload" and all(len(c.name) <= 100 for c in auto)
    assert locale_lang(discord.Locale.chinese) == "zh" and locale_lang(discord.Locale.british_english) == "en"


# ---------------------------------------------------------------- gates: allow-list, rate limit, attachments


def test_allow_list_refusal_and_rate_limit_are_sent(make_service):
    closed = make_service(allow_channels=["99"])
    tight = make_service(user_burst=1, user_per_minute=0.1)

    async def go():
        bot = await make_bot(closed)
        refused = interaction(bot, channel=7)
        await cmd(bot, "ask").callback(refused, query="zero3 oom first step")
        bot2 = await make_bot(tight)
        first, second = interaction(bot2), interaction(bot2)
        await cmd(bot2, "ask").callback(first, query="zero3 oom first step")
        await cmd(bot2, "ask").callback(second, query="zero3 oom first step")
        return refused, first, second

    refused, first, second = arun(go())
    assert last_sent(refused)["content"] == msg("en", "not_allowed")
    assert last_sent(first)["embeds"]
    limited = last_sent(second)
    assert limited["content"].startswith("You are asking faster than I can answer well") and not limited["embeds"]


def test_attachments_are_refused_before_they_are_read(make_service):
    svc = make_service()
    huge = attachment(size=300 * 1024)
    binary = attachment("model.bin", b"\x00\x01\x02", content_type="application/octet-stream")
    nul = attachment("ds_config.json", b'{"a": 1}\x00')
    pinged = attachment("@everyone <@123>.bin", b"x", content_type="application/octet-stream")
    mention_huge = attachment(size=300 * 1024)

    async def go():
        bot = await make_bot(svc)
        its = []
        for att in (huge, binary, nul, pinged):
            it = interaction(bot)
            await cmd(bot, "ask").callback(it, query="zero3 oom first step", config=att)
            its.append(it)
        m = message(bot, f"<@{bot.user.id}> zero3 oom", mentions=[bot.user], attachments=[mention_huge])
        await bot.on_message(m)
        return its, m

    its, m = arun(go())
    assert last_sent(its[0])["content"] == msg("en", "attachment_too_big", name="ds_config.json", size=300, limit=256)
    huge.read.assert_not_awaited()
    assert last_sent(its[1])["content"] == msg("en", "attachment_type", name="model.bin")
    binary.read.assert_not_awaited()
    assert last_sent(its[2])["content"] == msg("en", "attachment_type", name="ds_config.json")  # read, then refused
    refusal = last_sent(its[3])["content"]
    assert not PINGS.search(refusal) and "@\u200beveryone" in refusal
    pinged.read.assert_not_awaited()
    assert as_body(m.reply.await_args.kwargs)["content"].startswith("The attachment ds_config.json is 300 KB")
    mention_huge.read.assert_not_awaited()


def test_pings_in_a_query_never_ping(make_service):
    svc = make_service()

    async def go():
        bot = await make_bot(svc)
        it = interaction(bot)
        await cmd(bot, "ask").callback(it, query="@everyone <@123> <@&456> zero3 oom first step @here")
        return it

    body = last_sent(arun(go()))
    assert body["allowed_mentions"] == {"parse": []}
    assert not any(PINGS.search(t) for t in texts(body))
    # and the renderer defuses them wherever they come from (entry text, findings, notes, messages)
    assert (
        safe("@everyone <@123> <@!9> <@&7> @here") == "@\u200beveryone <@\u200b123> <@\u200b!9> <@\u200b&7> @\u200bhere"
    )


def test_errors_give_an_id_that_is_in_the_log(make_service, monkeypatch, caplog):
    svc = make_service()
    caplog.set_level(logging.INFO, logger="kb.bot")

    def broken(*a, **kw):
        raise RuntimeError("core exploded")

    async def go():
        bot = await make_bot(svc)
        core = interaction(bot)
        monkeypatch.setattr(svc, "_ask_core", broken)
        await cmd(bot, "ask").callback(core, query="zero3 oom first step")
        monkeypatch.setattr(svc, "ask", AsyncMock(side_effect=KeyError("handler exploded")))
        handler = interaction(bot, locale=discord.Locale.chinese)
        await cmd(bot, "ask").callback(handler, query="zero3 oom first step")
        m = message(bot, f"<@{bot.user.id}> zero3 oom", mentions=[bot.user])
        await bot.on_message(m)
        return core, handler, m

    core, handler, m = arun(go())
    for body, lang in ((last_sent(core), "en"), (last_sent(handler), "zh"), (as_body(m.reply.await_args.kwargs), "en")):
        error_id = re.search(r"([0-9a-f]{10})", body["content"]).group(1)
        assert body["content"] == msg(lang, "internal_error", error_id=error_id)
        assert error_id in caplog.text
    assert "core exploded" in caplog.text and "handler exploded" in caplog.text


# ---------------------------------------------------------------- mentions


def test_mention_mode_answers_only_when_addressed(make_service):
    svc = make_service()

    async def go():
        bot = await make_bot(svc)
        plain = message(bot, "zero3 oom first step")
        everyone = message(bot, "@everyone zero3 oom first step", everyone=True)
        other = message(bot, "<@777> zero3 oom first step", mentions=[MagicMock(id=777)])
        addressed = message(
            bot, f"<@{bot.user.id}> zero3 oom first step", mentions=[bot.user], attachments=[attachment()]
        )
        only_config = message(bot, f"<@{bot.user.id}>", mentions=[bot.user], attachments=[attachment()])
        for m in (plain, everyone, other, addressed, only_config):
            await bot.on_message(m)
        return plain, everyone, other, addressed, only_config

    plain, everyone, other, addressed, only_config = arun(go())
    for m in (plain, everyone, other):
        m.reply.assert_not_awaited()
    body = as_body(addressed.reply.await_args.kwargs)
    assert body["allowed_mentions"] == {"parse": []}
    assert body["embeds"][0]["title"] == L("en")["findings"], "the attachment was the config"
    assert custom_ids(body)[0].startswith("kb:more:")
    lint = as_body(only_config.reply.await_args.kwargs)
    assert lint["embeds"][0]["title"].startswith("ds_config.json: deepspeed config (json), ") and not lint["components"]


def test_mode_all_and_thread_replies(make_service):
    svc = make_service(mode="all", allow_channels=["7"], thread_replies=True)

    async def go():
        bot = await make_bot(svc)
        assert bot.intents.message_content, "mode all reads unaddressed messages: it needs the content intent"
        here = message(bot, "zero3 oom first step", channel_id=7)
        thread = MagicMock()
        thread.send = AsyncMock()
        here.create_thread = AsyncMock(return_value=thread)
        elsewhere = message(bot, "zero3 oom first step", channel_id=8)
        addressed_elsewhere = message(bot, f"<@{bot.user.id}> zero3 oom", mentions=[bot.user], channel_id=8)
        for m in (here, elsewhere, addressed_elsewhere):
            await bot.on_message(m)
        return here, thread, elsewhere, addressed_elsewhere

    here, thread, elsewhere, addressed_elsewhere = arun(go())
    here.create_thread.assert_awaited_once_with(name="zero3 oom first step")
    assert as_body(thread.send.await_args.kwargs)["embeds"]
    here.reply.assert_not_awaited()
    elsewhere.reply.assert_not_awaited()
    elsewhere.create_thread.assert_not_awaited()
    # addressed outside the allow-list: the reason, in place (a refusal opens no thread)
    addressed_elsewhere.create_thread.assert_not_awaited()
    assert as_body(addressed_elsewhere.reply.await_args.kwargs)["content"] == msg("en", "not_allowed")


def test_default_intents_are_not_privileged(make_service):
    async def go():
        return KbDiscordBot(Settings(), service=make_service(), sync_commands=False).intents

    intents = arun(go())
    assert not intents.message_content and not intents.members and not intents.presences
    assert intents.guild_messages and intents.dm_messages


# ---------------------------------------------------------------- buttons and the reason select, logic level


def test_buttons_more_language_and_votes(make_service, monkeypatch):
    svc = make_service()
    ks: list[int] = []
    core = svc._ask_core

    def spy(query, config_text, config_name, k, lang):
        ks.append(k)
        return core(query, config_text, config_name, k, lang)

    monkeypatch.setattr(svc, "_ask_core", spy)

    async def go():
        bot = await make_bot(svc)
        ask = interaction(bot)
        await cmd(bot, "ask").callback(ask, query="zero3 oom first step")
        more_id, lang_id, up_id, down_id = custom_ids(last_sent(ask))[:4]
        out = {}
        for name, cid in (("more", more_id), ("lang", lang_id), ("up", up_id), ("down", down_id)):
            it = interaction(bot, data={"custom_id": cid, "component_type": 2})
            await bot.handle_component(it, cid)
            out[name] = it
        ask_id = parse_control_id(more_id)[1]
        reason_cid = custom_ids(last_sent(out["down"]))[0]
        it = interaction(bot, data={"custom_id": reason_cid, "component_type": 3, "values": ["wrong_version"]})
        await bot.handle_component(it, reason_cid)
        out["reason"] = it
        return ask_id, out

    ask_id, out = arun(go())
    assert ks[0] == 3 and ks[1] == 9, "more results asks again for 3 x the results"
    more = last_sent(out["more"])
    out["more"].response.defer.assert_awaited_once_with(thinking=True, ephemeral=False)
    assert more["embeds"] and not more["ephemeral"]
    zh = last_sent(out["lang"])
    assert re.search(r"[\u4e00-\u9fff]", zh["embeds"][0]["title"])
    assert custom_ids(zh)[1].endswith(":en"), "the Chinese answer offers English"
    up = last_sent(out["up"])
    assert up["ephemeral"] and up["content"] == msg("en", "thanks")
    down = last_sent(out["down"])
    assert down["ephemeral"] and down["content"] == msg("en", "reason.prompt")
    select = down["components"][0]["components"][0]
    assert select["custom_id"] == f"kb:reason:{ask_id}:en" and [o["value"] for o in select["options"]] == [
        "didnt_fix",
        "wrong_version",
        "different_error",
        "unclear",
    ]
    assert [o["label"] for o in select["options"]][1] == msg("en", "reason.wrong_version")
    reason = last_sent(out["reason"])
    assert reason["ephemeral"] and reason["content"] == msg(
        "en", "thanks_reason", reason=msg("en", "reason.wrong_version")
    )
    rec = next(a for a in svc.store.asks() if a.id == ask_id)
    # one vote per user and answer: up, then down, then a reason ends as one "not helpful: wrong version"
    assert [(v["helpful"], v["reason"]) for v in rec.votes] == [(False, "wrong_version")]


def test_the_top_three_in_the_message_each_with_its_first_fix_and_a_full_answer_button(make_service):
    """Issue 22: the message itself holds the top three (title, why, first fix with a short snippet, first source),
    no front end's equivalents when the question names none, nothing in an attached file; "Full answer 2" posts
    the second result whole for everyone in the channel."""
    svc = make_service(site_base_url="https://kb.example.org")

    async def go():
        bot = await make_bot(svc)
        ask = interaction(bot)
        await cmd(bot, "ask").callback(ask, query="zero3 oom first step")
        full = [c for c in custom_ids(last_sent(ask)) if c.startswith("kb:full:")]
        it = interaction(bot, data={"custom_id": full[1], "component_type": 2})
        await bot.handle_component(it, full[1])
        return ask, it

    ask, it = arun(go())
    body = last_sent(ask)
    rec = next(svc.store.asks())
    results = [r["id"] for r in rec.results]
    assert len(results) == 3 and not body["files"] and body["content"] == "", "nothing left out, nothing attached"
    assert [e["footer"]["text"].split(" ")[0] for e in body["embeds"]] == results
    for n, e in enumerate(body["embeds"], 1):
        assert e["title"].startswith(f"{n}. ") and e["url"] == f"https://kb.example.org/en/{results[n - 1]}/"
        assert e["description"].startswith("why: ") and "\n\n**1. " in e["description"]
        assert [f["name"] for f in e["fields"]] == ["Sources"] and e["fields"][0]["value"].startswith("- [")
    assert "```json\n{" in body["embeds"][0]["description"]
    assert not any("Same settings in" in t for t in texts(body))
    assert sum(embed_length(e) for e in body["embeds"]) < 4000
    whole = last_sent(it)
    it.response.defer.assert_awaited_once_with(thinking=True, ephemeral=False)
    assert not whole["ephemeral"] and whole["embeds"][0]["footer"]["text"] == results[1]
    assert whole["embeds"][0]["url"] == f"https://kb.example.org/en/{results[1]}/"
    assert problems({**whole, "components": []}) == [] and not custom_ids(whole)
    shown = "\n".join(texts(whole)) + "".join(whole["files"])
    entry = svc.engine.index.entries[results[1]]
    assert all(f["title"]["en"] in shown for f in entry["fixes"]) and "kb show" not in whole["content"]


def test_dry_run_votes_like_a_click(make_service):
    from bot.chat import DryRunError

    svc = make_service()
    body = dry_run(svc, "zero3 oom first step", vote="down", reason="wrong_version")
    ask_id = parse_control_id(custom_ids(body)[0])[1]
    (rec,) = list(svc.store.asks())
    assert rec.id == ask_id and rec.platform == "discord" and rec.user_hash == svc.store.hash_user("dry-run")
    assert [(v["helpful"], v["reason"]) for v in rec.votes] == [(False, "wrong_version")]
    dry_run(svc, "zero3 oom first step", vote="up")
    assert [(a.id, [v["helpful"] for v in a.votes]) for a in svc.store.asks()][1][1] == [True]
    with pytest.raises(DryRunError, match="nothing to vote on"):
        dry_run(svc, "```json\n{}\n```", vote="up")  # a config alone is linted: no answer to vote on
    with pytest.raises(DryRunError):
        dry_run(svc, "zero3 oom first step", vote="up", reason="unclear")


# ---------------------------------------------------------------- wire level


class CaptureAdapter(webhook_async.AsyncWebhookAdapter):
    """Records what discord.py would post to Discord; answers like Discord would."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict[str, Any]] = []

    async def request(self, route, session, *, payload=None, multipart=None, files=None, **kw):
        body = json.loads(multipart[0]["value"]) if multipart else payload
        self.calls.append(
            {"method": route.method, "path": route.path, "body": body, "files": [f.filename for f in files or []]}
        )
        if route.path.endswith("/callback"):
            return {"interaction": {"id": str(route.webhook_id), "type": 2}}
        return message_payload(body or {}, author=BOT_USER)

    def posted(self) -> list[dict[str, Any]]:
        return [c for c in self.calls if not c["path"].endswith("/callback")]

    def callbacks(self) -> list[dict[str, Any]]:
        return [c["body"] for c in self.calls if c["path"].endswith("/callback")]


def message_payload(body: dict[str, Any], author: dict[str, Any], mid: str = "900") -> dict[str, Any]:
    return {
        "id": mid,
        "channel_id": "7",
        "author": author,
        "content": body.get("content", ""),
        "timestamp": "2026-01-01T00:00:00+00:00",
        "edited_timestamp": None,
        "tts": False,
        "mention_everyone": False,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": body.get("embeds", []),
        "pinned": False,
        "type": 0,
        "components": body.get("components", []),
        "flags": body.get("flags", 0),
    }


def interaction_payload(
    itype: int, data: dict[str, Any], iid: str, message: dict[str, Any] | None = None
) -> dict[str, Any]:
    p = {
        "id": iid,
        "application_id": str(APP_ID),
        "type": itype,
        "token": f"token-{iid}",
        "version": 1,
        "locale": "en-US",
        "attachment_size_limit": 10 * 1024 * 1024,
        "guild_id": "100",
        "channel": {
            "id": "7",
            "type": 0,
            "guild_id": "100",
            "name": "help",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
        },
        "member": {
            "user": USER,
            "roles": [],
            "joined_at": "2024-01-01T00:00:00+00:00",
            "deaf": False,
            "mute": False,
            "flags": 0,
            "permissions": "0",
        },
        "data": data,
    }
    if message is not None:
        p["message"] = message
    return p


async def dispatch_component(bot, payload) -> None:
    """What the gateway does with INTERACTION_CREATE of a component: the view store schedules the DynamicItem."""
    bot._connection.parse_interaction_create(payload)
    for _ in range(100):
        tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("discord-ui-dynamic-item")]
        if not tasks:
            return
        await asyncio.gather(*tasks)


def without_ask_id(body: dict[str, Any]) -> dict[str, Any]:
    return json.loads(re.sub(r"(kb:[a-z]+:)[0-9a-f]{16}", r"\1ASK", json.dumps(body, ensure_ascii=False)))


def test_wire_ask_button_and_votes(make_service):
    svc = make_service()
    query = "zero3 oom first step"
    expected = dry_run(svc, query, config_text=DS_CONFIG.decode(), config_name="ds_config.json")

    async def go():
        bot = await make_bot(svc)
        errors: list[BaseException] = []

        async def collect(it, error):
            errors.append(error)

        bot.tree.on_error = collect
        bot.http.get_from_cdn = AsyncMock(return_value=DS_CONFIG)
        cap = CaptureAdapter()
        webhook_async.async_context.set(cap)
        ask = {
            "id": "3",
            "name": "kb",
            "type": 1,
            "options": [
                {
                    "type": 1,
                    "name": "ask",
                    "options": [
                        {"type": 3, "name": "query", "value": query},
                        {"type": 11, "name": "config", "value": "77"},
                    ],
                }
            ],
            "resolved": {
                "attachments": {
                    "77": {
                        "id": "77",
                        "filename": "ds_config.json",
                        "size": len(DS_CONFIG),
                        "content_type": "application/json",
                        "url": "https://cdn.discordapp.com/attachments/1/77/ds_config.json",
                        "proxy_url": "https://media.discordapp.net/x",
                    }
                }
            },
        }
        await bot.tree._call(discord.Interaction(data=interaction_payload(2, ask, "1000"), state=bot._connection))
        assert not errors, errors
        answer = cap.posted()[0]
        steps = {"ask": (cap.callbacks(), answer)}
        on_message = message_payload(answer["body"], author=BOT_USER)
        ids = custom_ids(answer["body"])
        full = next(c for c in ids if c.startswith("kb:full:"))
        for name, cid in (("more", ids[0]), ("down", ids[3]), ("full", full)):
            cap.calls.clear()
            data = {"custom_id": cid, "component_type": 2}
            await dispatch_component(bot, interaction_payload(3, data, f"2{len(steps)}", on_message))
            steps[name] = (cap.callbacks(), cap.posted()[0])
        prompt = steps["down"][1]["body"]
        cap.calls.clear()
        reason = {"custom_id": custom_ids(prompt)[0], "component_type": 3, "values": ["didnt_fix"]}
        await dispatch_component(bot, interaction_payload(3, reason, "3000", message_payload(prompt, BOT_USER, "901")))
        steps["reason"] = (cap.callbacks(), cap.posted()[0])
        bot.http.get_from_cdn.assert_awaited_once()
        return parse_control_id(ids[0])[1], steps

    ask_id, steps = arun(go())
    callbacks, answer = steps["ask"]
    assert callbacks == [{"type": 5}], "defer first"
    assert answer["body"]["allowed_mentions"] == {"parse": []}
    assert without_ask_id(answer["body"]) == without_ask_id(expected), "dry_run is exactly what the bot posts"
    assert answer["body"]["embeds"][0]["title"] == "Your config (kb lint)"
    (name,) = answer["files"]
    assert name.startswith("kb-answer-") and answer["body"]["attachments"] == [{"id": 0, "filename": name}]
    callbacks, more = steps["more"]
    assert callbacks == [{"type": 5}] and more["body"]["embeds"] and not more["body"].get("flags")
    callbacks, full = steps["full"]
    top = next(
        e["footer"]["text"] for e in answer["body"]["embeds"] if " · " in (e.get("footer") or {}).get("text", "")
    )
    assert callbacks == [{"type": 5}] and not full["body"].get("flags"), "a result in full is for the channel"
    assert full["body"]["embeds"][0]["footer"]["text"] == top.split(" ")[0] and full["body"]["allowed_mentions"] == {
        "parse": []
    }
    callbacks, down = steps["down"]
    assert callbacks == [{"type": 5, "data": {"flags": 64}}] and down["body"]["flags"] == 64
    assert down["body"]["components"][0]["components"][0]["custom_id"] == f"kb:reason:{ask_id}:en"
    callbacks, reason = steps["reason"]
    assert callbacks == [{"type": 5, "data": {"flags": 64}}]
    assert reason["body"]["content"] == msg("en", "thanks_reason", reason=msg("en", "reason.didnt_fix"))
    rec = next(a for a in svc.store.asks() if a.id == ask_id)
    assert [(v["helpful"], v["reason"]) for v in rec.votes] == [
        (False, "didnt_fix")
    ]  # the down-vote and its reason: one vote


def test_dry_run_is_the_renderer_body(make_service):
    svc = make_service()
    body = dry_run(svc, "zero3 oom first step")
    assert set(body) >= {"content", "embeds", "components", "allowed_mentions"} and body["allowed_mentions"] == {
        "parse": []
    }
    reply = arun(svc.again(parse_control_id(custom_ids(body)[0])[1]))
    rendered = render(reply)
    assert without_ask_id(wire_payload(rendered)) == without_ask_id(body)
    for key in ("content", "embeds", "components", "allowed_mentions"):
        assert without_ask_id(rendered)[key] == without_ask_id(body)[key], key


def test_run_needs_the_token_and_a_ready_index(monkeypatch, tmp_path):
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    with pytest.raises(MissingToken, match="DISCORD_TOKEN"):
        run(Settings(feedback_db=str(tmp_path / "fb.sqlite")))
    monkeypatch.setenv("KB_INDEX", str(tmp_path / "no-index"))
    from kb.index.load import IndexMissing

    async def go():
        bot = KbDiscordBot(Settings(feedback_db=str(tmp_path / "fb.sqlite")), sync_commands=False)
        await bot.setup_hook()

    with pytest.raises(IndexMissing):
        arun(go())


# ---------------------------------------------------------------- renderer: fixed cases


def test_code_links_and_entry_links():
    src = {
        "type": "code",
        "package": "accelerate",
        "version": "1.15.0",
        "file": "accelerate/accelerator.py",
        "line": "2228-2235",
    }
    assert (
        code_url(src)
        == "https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/accelerator.py#L2228-L2235"
    )
    src = {
        "type": "code",
        "package": "deepspeed",
        "version": "0.19.8",
        "file": "deepspeed/ops/op_builder/async_io.py",
        "line": "105",
    }
    assert code_url(src) == "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/op_builder/async_io.py#L105"
    src = {
        "type": "code",
        "package": "transformers",
        "version": "5.24.0",
        "file": "transformers/trainer.py",
        "line": "1",
    }
    assert code_url(src) == "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py#L1"
    src = {"type": "code", "package": "peft", "version": "0.21.2", "file": "peft/peft_model.py", "line": None}
    assert code_url(src) == "https://github.com/huggingface/peft/blob/v0.21.2/src/peft/peft_model.py"
    assert code_url({"type": "code", "package": "unknownpkg", "version": "1", "file": "x.py", "line": "1"}) is None
    assert entry_url("https://kb.example.org/", "zh", "a-b") == "https://kb.example.org/zh/a-b/"
    assert entry_url("", "en", "a") is None


def test_components_are_what_discordpy_sends():
    from bot.discord_render import components
    from bot.layout import answer_controls, reason_select

    for lang in ("en", "zh"):
        answer = components(answer_controls("0123456789abcdef", lang, reasons=False))
        for comps in (answer, components([reason_select("0123456789abcdef", lang)])):
            assert build_view(comps).to_components() == comps
    labels = [c["label"] for c in components(answer_controls("0123456789abcdef", "zh", False))[0]["components"]]
    assert labels == ["更多结果", "in English", "👍 有帮助", "👎 没帮助"]
    assert [c["style"] for c in components(answer_controls("0123456789abcdef", "en", False))[0]["components"]] == [
        1,
        2,
        3,
        4,
    ]


def test_control_ids_are_stable_short_and_carry_the_language():
    assert control_id("lang", "0123456789abcdef", "zh") == "kb:lang:0123456789abcdef:zh"
    assert control_id("vote", "0123456789abcdef", "down", "zh") == "kb:vote:0123456789abcdef:down:zh"
    assert parse_control_id("kb:vote:0123456789abcdef:down:zh") == ("vote", "0123456789abcdef", "down", "zh")
    assert parse_control_id("kb:lang:0123456789abcdef:en") == ("lang", "0123456789abcdef", "en", "zh")
    assert parse_control_id("kb:reason:0123456789abcdef:en") == ("reason", "0123456789abcdef", None, "en")
    # ids sent before they carried the language still work: the bot falls back to the user's
    assert parse_control_id("kb:vote:0123456789abcdef:down") == ("vote", "0123456789abcdef", "down", None)
    assert parse_control_id("kb:reason:0123456789abcdef") == ("reason", "0123456789abcdef", None, None)
    assert control_id("full", "0123456789abcdef", "3", "zh") == "kb:full:0123456789abcdef:3:zh"
    assert parse_control_id("kb:full:0123456789abcdef:10:en") == ("full", "0123456789abcdef", "10", "en")
    bad_ids = ("kb:vote:abc:sideways", "other:more:abc", "kb:more:abc:fr", "kb:lang:abc:en:zh", "kb:more:a b")
    bad_ids += ("kb:full:abc", "kb:full:abc:0:en", "kb:full:abc:11:en", "kb:more:abc:12", "kb:vote:abc:up:1")
    for bad in bad_ids:
        assert parse_control_id(bad) is None, bad
    with pytest.raises(ValueError):
        control_id("more", "x" * 200)


def test_notices_and_no_answer():
    err = render(
        Reply("error", "zh", message=msg("zh", "internal_error", error_id="abc123def0"), error_id="abc123def0")
    )
    assert (
        err["content"] == msg("zh", "internal_error", error_id="abc123def0")
        and not err["embeds"]
        and not err["components"]
    )
    long = render(Reply("refused", "en", message="bad " + "x" * 5000))
    assert len(long["content"]) <= LIMITS["content"]
    answer = {
        "lang": "en",
        "answered": False,
        "query": "q",
        "results": [],
        "findings": [],
        "notes": [],
        "memory": None,
        "message": "No confident answer.",
        "closest": [{"id": "a", "title": "A title", "score": 0.1, "closest": True}],
    }
    no = render(
        Reply("no_answer", "en", answer=answer, ask_id="0123456789abcdef", site_base_url="https://kb.example.org")
    )
    desc = no["embeds"][0]["description"]
    assert desc.startswith("No confident answer.") and "Closest entries (not a confident match)" in desc
    assert "- ? [A title](https://kb.example.org/en/a/)" in desc
    assert custom_ids(no)[0] == "kb:more:0123456789abcdef:en"


def test_memory_and_lint_speak_the_replys_language():
    """`kb mem` and `kb lint` replies are the MemReport / LintReport drawn by kb.present.doc: every label in the
    reply's language (the memory block used to say `activation_checkpointing False` in a Chinese reply)."""
    from kb.memory.setup import report

    for lang, ckpt, off in (("en", "activation checkpointing", "off"), ("zh", "激活检查点", "关")):
        body = render(Reply("memory", lang, data=report({"model": "llama2-7b", "gpus": 2}, lang).to_dict()))
        text = "\n".join(texts(body))
        assert f"{ckpt} {off}" in text and "activation_checkpointing" not in text and "False" not in text
        assert problems(body) == []
    zh = "\n".join(texts(render(Reply("memory", "zh", data=report({"model": "llama2-7b"}, "zh").to_dict()))))
    assert "每张卡需要" in zh and "放不下" in zh and "per GPU" not in zh


# ---------------------------------------------------------------- renderer: property tests

# Hypothesis draws a few texts (up to 10k characters, made of pieces that cause trouble in Discord:
# backtick runs, pings, Markdown, CJK, emoji), a few snippets (up to 200 lines) and a seed; the seed
# builds the answer from them (0-20 results, 0-30 findings, both languages, memory or not), so an example
# costs a few dozen draws, not thousands.
_PIECES = [
    "zero3 oom ",
    "stage3_prefetch_bucket_size",
    "```",
    "``",
    "`",
    "````",
    "@everyone",
    "@here",
    "<@123>",
    "<@!45>",
    "<@&6>",
    "显存不足",
    "第一步就OOM",
    "**",
    "__init__",
    "[x](y)",
    "\n",
    "\n\n",
    " ",
    "a" * 97,
    "\u200b",
    "https://github.com/a/b/issues/1",
    "- item",
    "> quote",
    "# title",
    "||spoiler||",
    "😀",
    "<>&\"'\\",
]
_piece = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4).map("".join)
_text = st.builds(lambda s, n: (s * n)[:10_000], _piece, st.integers(1, 10_000))
_snippet = st.builds(lambda line, n: "\n".join([line[:200]] * n), _piece, st.integers(1, 200))


class _Pool:
    def __init__(self, rnd, texts: list[str], snippets: list[str]):
        self.rnd, self.texts, self.snippets = rnd, texts, snippets

    def text(self, max_len: int = 10_000) -> str:
        t = self.rnd.choice(self.texts)
        return t[: self.rnd.choice([1, 40, 300, max_len])] or "x"

    def some(self, n: int) -> int:
        return self.rnd.randint(0, n)


def _source(p: _Pool) -> dict[str, Any]:
    kind = p.rnd.choice(["code", "code", "docs", "issue", "measurement"])
    note = p.text(500) if p.rnd.random() < 0.7 else None
    if kind == "code":
        pkg = p.rnd.choice(["deepspeed", "transformers", "accelerate", "peft", "torch", "other"])
        return {
            "type": "code",
            "url": None,
            "package": pkg,
            "version": "1.2.3",
            "file": p.text(200),
            "line": p.rnd.choice(["1", "10-20", None]),
            "note": note,
        }
    if kind == "measurement":
        return {
            "type": kind,
            "url": None,
            "package": None,
            "version": None,
            "file": p.text(200),
            "line": None,
            "note": p.text(300),
        }
    url = p.rnd.choice(["https://github.com/a/b/issues/1", "https://x.org/p (q)", "https://x.org/" + p.text(80)])
    return {"type": kind, "url": url, "package": None, "version": None, "file": None, "line": None, "note": note}


def _result(p: _Pool, i: int) -> dict[str, Any]:
    fixes = [
        {
            "title": p.text(300),
            "text": p.text(),
            "params": [],
            "snippet": {
                "lang": p.rnd.choice(["json", "yaml", "python", "bash", "text"]),
                "code": p.rnd.choice(p.snippets),
            }
            if p.rnd.random() < 0.6
            else None,
            "equivalents": [
                {
                    "front_end": fe,
                    "snippet": {"lang": "yaml", "code": p.rnd.choice(p.snippets)} if p.rnd.random() < 0.8 else None,
                    "names": [],
                    "notes": [p.text(300) for _ in range(p.some(2))],
                }
                for fe in p.rnd.sample(FRONT_ENDS, p.some(len(FRONT_ENDS)))
            ],
        }
        for _ in range(p.some(8))
    ]
    params = [
        {
            "id": f"deepspeed:{p.text(60)}",
            "name": "x",
            "package": "deepspeed",
            "version": "0.19.8",
            "kind": "config_key",
            "type": "int",
            "default": p.rnd.choice([None, "3", p.text(100)]),
            "source_file": "deepspeed/x.py",
            "source_line": 3,
            "deprecated": p.rnd.random() < 0.2,
            "replacement": None,
            "known": p.rnd.random() < 0.9,
        }
        for _ in range(p.some(10))
    ]
    return {
        "id": f"entry-{i}-{p.some(999)}",
        "title": p.text(400),
        "score": 0.5,
        "why": p.text(500),
        "summary": p.text(),
        "area": "oom",
        "causes": [p.text(300) for _ in range(p.some(3))],
        "fixes": fixes,
        "params": [x["id"] for x in params],
        "param_facts": params,
        "myths": [
            {"claim": p.text(), "correction": p.text(), "names": [], "touched": p.rnd.random() < 0.5}
            for _ in range(p.some(4))
        ],
        "sources": [_source(p) for _ in range(p.some(10))],
        "applies_to": {"deepspeed": ">=0.1"},
        "related": ["x"],
        "withdrawn": p.rnd.choice([None, None, p.text(200)]),
    }


def _finding(p: _Pool) -> dict[str, Any]:
    return {
        "code": p.rnd.choice(["KB001", "KB012"]),
        "severity": p.rnd.choice(["error", "warning", "info"]),
        "path": p.text(200),
        "line": p.rnd.choice([None, 3, 999]),
        "message": p.text(),
        "suggestion": p.rnd.choice([None, p.text(500)]),
        "entry": "x",
    }


def _memory(p: _Pool) -> dict[str, Any]:
    terms = [{"key": f"t{j}", "label": p.text(300), "gib": 1.25} for j in range(p.some(8))]
    return {
        "model": p.text(400),
        "gpus": 1,
        "gpu_mem_gib": 80.0,
        "gpu": terms,
        "gpu_total_gib": 10.0,
        "gpu_needed_gib": 12.0,
        "fits_gpu": p.rnd.random() < 0.5,
        "host": terms[:2],
        "host_total_gib": 3.0,
        "deepspeed_estimator_gib": 1.5,
        "changes": [
            {"change": p.text(300), "cost": "x", "gpu_needed_gib": 3.0, "host_total_gib": 1.0} for _ in range(p.some(4))
        ],
        "assumptions": [p.text(300) for _ in range(p.some(3))],
        "notes": [p.text(300) for _ in range(p.some(1))],
    }


@st.composite
def pools(draw) -> _Pool:
    import random

    texts = draw(st.lists(_text, min_size=1, max_size=6))
    snippets = draw(st.lists(_snippet, min_size=1, max_size=3))
    return _Pool(random.Random(draw(st.integers(0, 2**32))), texts, snippets)


@st.composite
def answers(draw) -> dict[str, Any]:
    p = draw(pools())
    results = [_result(p, i) for i in range(draw(st.integers(0, 20)))]
    answered = bool(results)
    return {
        "schema_version": SCHEMA_VERSION,
        "query": p.text(),
        "lang": draw(st.sampled_from(["en", "zh"])),
        "answered": answered,
        "results": results,
        "closest": []
        if answered
        else [{"id": f"c{j}", "title": p.text(500), "score": 0.1, "closest": True} for j in range(p.some(3))],
        "findings": [_finding(p) for _ in range(draw(st.integers(0, 30)))],
        "notes": [
            {
                "kind": "param",
                "message": p.text(),
                "name": "x",
                "verdict": p.rnd.choice(["valid", "does-not-exist"]),
                "registry_id": None,
                "suggestions": [],
            }
            for _ in range(p.some(5))
        ],
        "message": None if answered else p.text(),
        "config_facts": None,
        "memory": _memory(p) if draw(st.booleans()) else None,
        "front_end": draw(st.sampled_from([None, "deepspeed", "accelerate", *FRONT_ENDS])),
    }


def check_limits(body: dict[str, Any], snippets: list[str]) -> None:
    assert problems(body) == [], problems(body)
    assert set(body) - {"files"} == {"content", "embeds", "components", "allowed_mentions"}
    assert body["allowed_mentions"] == {"parse": []}
    assert len(body["content"]) <= LIMITS["content"]
    assert len(body["embeds"]) <= LIMITS["embeds"]
    assert sum(embed_length(e) for e in body["embeds"]) <= LIMITS["total"]
    for e in body["embeds"]:
        assert len(discord.Embed.from_dict(e)) == embed_length(e)  # the same count as discord.py's
        assert len(e.get("title", "")) <= LIMITS["title"] and len(e.get("description", "")) <= LIMITS["description"]
        assert len(e.get("fields", [])) <= LIMITS["fields"]
        for f in e.get("fields", []):
            assert 0 < len(f["name"]) <= LIMITS["field_name"] and 0 < len(f["value"]) <= LIMITS["field_value"]
        assert len((e.get("footer") or {}).get("text", "")) <= LIMITS["footer"]
        assert e.get("title") or e.get("description") or e.get("fields")
    shown = {safe(s) for s in snippets}
    for text in texts(body):
        assert text.count("```") % 2 == 0, "a code block was opened and not closed in the same text"
        assert not PINGS.search(text)
        for _lang, code in FENCE.findall(text):
            assert code in shown, "a code block that is not a whole snippet"
    for cid in custom_ids(body):
        assert len(cid) <= LIMITS["custom_id"]
    assert len(body["components"]) <= LIMITS["rows"]
    assert all(len(row["components"]) <= LIMITS["row_buttons"] for row in body["components"])
    if body["components"]:  # discord.py itself builds the same rows (ui.View refuses a row of six, a sixth row)
        assert build_view(body["components"]).to_components() == body["components"]
    assert "kb show" not in body["content"] and "`kb " not in body["content"], "never a command to run elsewhere"
    assert body["content"] or body["embeds"], "Discord refuses an empty message"
    if body.get("files"):
        assert body["content"], "whatever is left out is attached, and the user is told"


@hsettings(
    max_examples=fuzz_examples(600, 60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(answers(), st.booleans())
def test_any_answer_stays_within_discords_limits(a, with_site):
    """Within every Discord limit, and still the whole answer: each result (or closest entry) is named by its id in
    the message or in an attached file, and the same answer renders the same body."""
    site = "https://kb.example.org" if with_site else ""
    kind = "answer" if a["answered"] else "no_answer"
    body = render(Reply(kind, a["lang"], answer=a, ask_id="0123456789abcdef", site_base_url=site))
    assert render(Reply(kind, a["lang"], answer=a, ask_id="0123456789abcdef", site_base_url=site)) == body
    snippets = [f["snippet"]["code"].rstrip("\n") for r in a["results"] for f in r["fixes"] if f["snippet"]]
    snippets += [
        e["snippet"]["code"].rstrip("\n")
        for r in a["results"]
        for f in r["fixes"]
        for e in f["equivalents"]
        if e["snippet"]
    ]
    check_limits(body, snippets)
    # the compact view writes a fix's equivalent for the user's front end only, never another's
    others = {L(a["lang"])["same_in"].format(front=front_label(fe, a["lang"])) for fe in FRONT_ENDS}
    mine = {
        fe
        for fe in FRONT_ENDS
        if fe == a["front_end"] or (a["front_end"] == "accelerate" and fe.startswith("accelerate_"))
    }
    others -= {L(a["lang"])["same_in"].format(front=front_label(fe, a["lang"])) for fe in mine}
    assert not any(label in t for t in texts(body) for label in others)
    shown = " ".join(texts(body)) + " ".join(content for _name, content in body.get("files") or [])
    for r in a["results"] + a["closest"]:
        assert r["id"] in shown, r["id"]
    # the results shown are the first ones, in order, no gaps; each one with its sources
    shown = [
        int(m.group(1))
        for e in body["embeds"]
        if (m := re.match(r"entry-(\d+)-", (e.get("footer") or {}).get("text", "")))
    ]
    assert shown == list(range(len(shown)))
    label = "来源" if a["lang"] == "zh" else "Sources"
    with_sources = sum(1 for i in shown if a["results"][i]["sources"])
    labelled = sum(1 for e in body["embeds"] for f in e.get("fields", []) if f["name"] == label)
    labelled += sum(e.get("description", "").count(f"**{label}**\n") for e in body["embeds"])
    assert labelled >= with_sources
    # the answer's buttons, then one "Full answer N" per result shown (in rows of five), none for one left out
    assert custom_ids(body)[:4] == [
        "kb:more:0123456789abcdef:" + a["lang"],
        "kb:lang:0123456789abcdef:" + ("en" if a["lang"] == "zh" else "zh"),
        f"kb:vote:0123456789abcdef:up:{a['lang']}",
        f"kb:vote:0123456789abcdef:down:{a['lang']}",
    ]
    full = [parse_control_id(c) for c in custom_ids(body)[4:]]
    assert [int(f[2]) - 1 for f in full] == shown[:10] and all(f[0] == "full" for f in full)


@hsettings(
    max_examples=fuzz_examples(300, 30),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(pools(), st.sampled_from(["en", "zh"]), st.integers(0, 30))
def test_entry_lint_and_memory_stay_within_limits(p, lang, n_findings):
    result = _result(p, 0)
    snippets = [f["snippet"]["code"].rstrip("\n") for f in result["fixes"] if f["snippet"]]
    snippets += [e["snippet"]["code"].rstrip("\n") for f in result["fixes"] for e in f["equivalents"] if e["snippet"]]
    check_limits(render(Reply("entry", lang, data=result, site_base_url="https://kb.example.org")), snippets)
    findings = [_finding(p) for _ in range(n_findings)]  # a LintReport's findings are in its language already
    counts = {s: sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")}
    data = {"lang": lang, "file": "x.json", "config_kind": "deepspeed", "config_format": "json", "counts": counts}
    lint = render(Reply("lint", lang, data={**data, "findings": findings}))
    if findings:
        check_limits(lint, [])
    else:
        assert lint["content"] and not lint["embeds"]
    check_limits(render(Reply("memory", lang, data=_memory(p))), [])


def test_code_block_helper_keeps_fences_balanced():
    block = code_block("a = '```'\n@everyone", "python")
    assert block.startswith("```python\n") and block.endswith("\n```") and block.count("```") == 2


# ---------------------------------------------------------------- the shared chat layer, as Discord uses it


def test_mem_options_are_kb_mem_setups_with_chinese_descriptions(make_service):
    """/kb mem offers kb.memory.setup's chat options with the same bounds and choices as the CLI; zh-CN and zh-TW
    clients see every description in Chinese."""
    from bot.discord_bot import KbTranslator
    from bot.layout import shorten
    from kb.memory.setup import OPTIONS

    async def go():
        bot = await make_bot(make_service())
        payload = await cmd(bot, "mem").get_translated_payload(bot.tree, KbTranslator())
        return cmd(bot, "mem").parameters, payload

    params, payload = arun(go())
    chat_opts = [o for o in OPTIONS if o.chat]
    assert [p.name for p in params] == [o.name for o in chat_opts]
    by = {p.name: p for p in params}
    for o in chat_opts:
        p = by[o.name]
        assert p.required == (o.name == "model")
        if o.kind in ("int", "float"):
            assert (p.min_value, p.max_value) == (o.min, o.max), o.name
        if o.kind == "choice":
            assert [c.value for c in p.choices] == list(o.choices), o.name
    for opt in payload["options"]:
        o = next(o for o in chat_opts if o.name == opt["name"])
        assert opt["description"] == shorten(o.help("en"), 100) and len(opt["description"]) <= 100
        assert opt["description_localizations"]["zh-CN"] == shorten(o.help("zh"), 100), o.name
    assert "显存" in payload["description_localizations"]["zh-TW"]


def test_mode_all_posts_only_confident_answers_and_a_pasted_block_is_the_config(make_service):
    svc = make_service(mode="all", allow_channels=["7"])

    async def go():
        bot = await make_bot(svc)
        chatter = message(bot, "lunch at noon?", channel_id=7)
        pasted = message(
            bot, f"<@{bot.user.id}> zero3 oom first step\n```json\n{DS_CONFIG.decode()}\n```", mentions=[bot.user]
        )
        for m in (chatter, pasted):
            await bot.on_message(m)
        return chatter, pasted

    chatter, pasted = arun(go())
    chatter.reply.assert_not_awaited()  # nobody asked the bot: no "no confident answer" reply
    body = as_body(pasted.reply.await_args.kwargs)
    assert body["embeds"][0]["title"] == L("en")["findings"], "the pasted block was read as the config"


def test_a_button_sent_before_ids_carried_the_language_still_works(make_service):
    svc = make_service()

    async def go():
        bot = await make_bot(svc)
        ask = interaction(bot)
        await cmd(bot, "ask").callback(ask, query="zero3 oom first step")
        ask_id = parse_control_id(custom_ids(last_sent(ask))[0])[1]
        old = f"kb:vote:{ask_id}:up"  # the id grammar before the language was carried
        it = interaction(bot, locale=discord.Locale.chinese, data={"custom_id": old, "component_type": 2})
        await bot.handle_component(it, old)
        return it

    up = last_sent(arun(go()))
    assert up["ephemeral"] and up["content"] == msg("zh", "thanks"), "the user's locale decides"
