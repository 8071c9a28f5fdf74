"""The platform-neutral chat layer (bot/layout.py, bot/chat.py), and what a third platform costs.

``Webhook`` below is a whole third platform's renderer: a plain-text webhook that takes one JSON object
({"text", "sections", "buttons", "attachment"}), with small limits of its own. It only maps the neutral
``Layout`` to that payload; everything else (what an answer, a lint report and a memory estimate show, in
the reply's language; what is dropped first when it does not fit; the buttons and their ids; feedback,
attachments, rate limits, error replies) comes from the shared layer, and the tests check it does.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest

from bot import chat
from bot.layout import Layout, Limits, Markup, Platform, control_id, parse_control_id, render, shorten
from bot.messages import msg
from bot.service import AnswerService, AskRequest, AttachmentRefused, Reply
from bot.settings import Settings
from kb.contract import SCHEMA_VERSION
from kb.present.labels import L
from tests.conftest import ROOT

CONFIG = (ROOT / "examples" / "ds_config.json").read_text()
QUESTION = "zero3 oom first step"  # the fake engine answers it with zero3-single-gpu-no-offload
FENCE = re.compile(r"```[a-z]*\n(.*?)\n```", re.S)


# ---------------------------------------------------------------- a third platform: the mapping, whole


class Webhook(Platform):
    """Plain text, links as "label (url)", 25 sections of at most 600 characters, 4,000 in all."""

    name = "Webhook"
    markup = Markup()  # plain text: the neutral defaults
    limits = Limits(total=4000, block=600, title=150, min_block=20, reserve=700)
    SECTIONS = 25

    def draw(self, lay: Layout) -> dict[str, Any]:
        sections: list[dict[str, str]] = []
        if lay.headline:
            sections.append({"kind": "header", "text": shorten(lay.headline, self.limits.title)})
        if lay.text:
            sections.append({"kind": "text", "text": lay.text})
        for card in lay.cards:
            head = [card.title] if card.title and not card.heads else []
            head += [f"{card.meta} ({card.url})" if card.url else card.meta] if card.meta else []
            if head:
                sections.append({"kind": "title", "text": "\n".join(head)})
            for part in card.parts:
                sections += [{"kind": card.kind, "text": chunk} for chunk in part.chunks or []]
        if lay.notice:
            sections.append({"kind": "notice", "text": lay.notice})
        body: dict[str, Any] = {
            "text": shorten(lay.fallback, 200) or "kb",
            "sections": sections,
            "buttons": [{"id": c.id, "label": c.label, "choices": [v for v, _ in c.options]} for c in lay.controls],
        }
        if lay.file:
            body["attachment"] = {"name": lay.file.name, "markdown": lay.file.content}
        return body

    def problems(self, body: dict[str, Any]) -> list[str]:
        texts = [s["text"] for s in body["sections"]]
        out = [f"{len(texts)} sections"] if len(texts) > self.SECTIONS else []
        out += ["too long"] if sum(map(len, texts)) > self.limits.total else []
        out += [f"section {i} too long" for i, t in enumerate(texts) if len(t) > self.limits.block]
        return out + [f"section {i}: a fence left open" for i, t in enumerate(texts) if t.count("```") % 2]


WEBHOOK = Webhook()


class Roomy(Webhook):
    """The same webhook with room for a whole compact answer."""

    limits = Limits(total=8000, block=1500, title=150, min_block=20, reserve=700)
    SECTIONS = 40


ROOMY = Roomy()
# The class above is all a third platform's renderer needs (38 lines, counted for issue 20's closing note; the
# figure is not a test: a test of its own source could not fail).


# ---------------------------------------------------------------- fixtures


@pytest.fixture()
def svc(tmp_path, fake_engine):
    made: list[AnswerService] = []

    def make(**kw: Any) -> AnswerService:
        kw.setdefault("feedback_db", str(tmp_path / f"fb{len(made)}.sqlite"))
        for k, v in (("user_burst", 100), ("user_per_minute", 600.0), ("channel_burst", 1000)):
            kw.setdefault(k, v)
        made.append(AnswerService(Settings(**kw), engine=fake_engine))
        return made[-1]

    yield make
    for s in made:
        s.close()


def run(coro):
    return asyncio.run(coro)


def texts(body: dict[str, Any]) -> list[str]:
    return [s["text"] for s in body["sections"]]


# ---------------------------------------------------------------- the same answer, lint and memory on a third platform


def test_an_answer_on_a_third_platform(svc):
    service = svc(site_base_url="https://kb.example.org")
    reply = run(chat.message_reply(service, "webhook", QUESTION, user="u", channel="c", pasted=CONFIG))
    body = render(reply, WEBHOOK)
    assert WEBHOOK.problems(body) == []
    kinds = [s["kind"] for s in body["sections"]]
    assert body["sections"][0] == {"kind": "header", "text": shorten(reply.answer["results"][0]["title"], 150)}
    assert kinds.index("findings") < kinds.index("result"), "the config's findings come first"
    see = [t for t in texts(body) if "see: " in t]
    assert see and all("kb show" not in t for t in see), "a finding's entry is linked to its page on the site"
    assert re.search(r"see: [^\n]+ \(https://kb\.example\.org/en/[a-z0-9-]+/\)", see[0])
    top = reply.answer["results"][0]
    assert f"{top['id']} · {L('en')['score']} {top['score']} (https://kb.example.org/en/{top['id']}/)" in texts(body)
    assert any(t.startswith("Sources\n") for t in texts(body)), "the top result is never shown without its sources"
    snippets = {f["snippet"]["code"].rstrip("\n") for r in reply.answer["results"] for f in r["fixes"] if f["snippet"]}
    for t in texts(body):
        for code in FENCE.findall(t):
            assert code in snippets, "a code block is a whole snippet"
    # it did not all fit in 4,000 characters: the user is told what is missing and where, and gets it all; never
    # pointed at a command they cannot run in a chat
    notice = body["sections"][-1]
    assert notice["kind"] == "notice" and "kb show" not in notice["text"] and "`" not in notice["text"]
    assert re.search(r": (\d+) more part", notice["text"]) and body["attachment"]["name"] == f"kb-answer-{top['id']}.md"
    assert msg("en", "attached", filename=body["attachment"]["name"]) in notice["text"]
    assert "```json" in body["attachment"]["markdown"]
    # the buttons: one id grammar, carrying the answer's language; the reasons under the answer here; then one
    # "Full answer N" per result shown
    ids = [b["id"] for b in body["buttons"]]
    shown = [t for t in texts(body) if re.match(r"\S+ · score ", t)]
    assert len(shown) == len(reply.answer["results"]) == 3, "the top three, each in the message itself"
    assert [parse_control_id(i)[0] for i in ids] == ["more", "lang", "vote", "vote", "reason"] + ["full"] * 3
    assert [parse_control_id(i)[2] for i in ids[5:]] == ["1", "2", "3"]
    assert all(parse_control_id(i)[1] == reply.ask_id for i in ids)
    assert body["buttons"][4]["choices"] == ["didnt_fix", "wrong_version", "different_error", "unclear"]


def test_lint_and_memory_on_a_third_platform_in_chinese(svc):
    service = svc()
    lint = render(run(service.lint(CONFIG, "ds_config.json", "zh")), WEBHOOK)
    assert WEBHOOK.problems(lint) == [] and lint["sections"][0]["text"] == "你的配置（kb lint）"
    head, *findings = [s["text"] for s in lint["sections"] if s["kind"] in ("title", "findings")]
    assert head.startswith("ds_config.json：deepspeed 配置（json），") and head.endswith("条发现")
    # one section per finding; a finding longer than a section goes on in the next one, at its fix line
    starts = [f for f in findings if not f.startswith(("修改", "参见"))]
    assert findings and findings[0].startswith("- KB") and all(re.match(r"- KB\d{3} ", f) for f in starts)
    assert any("nvme_path" in f for f in findings) and all(re.search(r"[\u4e00-\u9fff]", f) for f in findings)
    # a finding's "see" line points at the chat's own /kb show (a terminal's `kb show` is not there)
    assert any("参见：/kb show " in f for f in findings) and not re.search(r"(?<!/)kb show", "".join(findings))
    mem = render(run(service.mem("zh", "u", "c", model="llama2-7b", gpus="1", activation_checkpointing="on")), WEBHOOK)
    assert WEBHOOK.problems(mem) == [] and mem["text"] == "显存估算（kb mem）：llama2-7b：放不下"
    joined = "\n".join(texts(mem))
    assert "每张卡需要" in joined and "激活检查点 开" in joined and "per GPU" not in joined
    assert render(run(service.mem("en", "u", "c", model="7b", stage="9")), WEBHOOK)["sections"] == [
        {"kind": "text", "text": msg("en", "bad_input", reason="stage: must be an integer from 0 to 3, got '9'")}
    ]


def test_a_reason_is_the_whole_reply_and_never_too_long():
    long = render(Reply("refused", "en", message="bad input " * 1000), WEBHOOK)
    assert WEBHOOK.problems(long) == [] and long["sections"][0]["text"].startswith("bad input bad input")
    assert len(long["sections"][0]["text"]) <= 300, "what the platform cannot take is said shorter, not dropped"


def test_a_reason_is_the_whole_reply(svc):
    body = render(Reply("refused", "zh", message=msg("zh", "not_allowed")), WEBHOOK)
    assert body == {
        "text": msg("zh", "not_allowed"),
        "sections": [{"kind": "text", "text": msg("zh", "not_allowed")}],
        "buttons": [],
    }


# ---------------------------------------------------------------- packing, on generated answers


def _result(i: int, fixes: list[str | None]) -> dict[str, Any]:
    return {
        "id": f"e{i}",
        "title": f"Entry {i}",
        "score": 0.5,
        "why": "w",
        "summary": "s" * 300,
        "area": "a",
        "causes": [],
        "fixes": [
            {
                "title": f"Fix {j}",
                "text": "t" * 200,
                "params": [],
                "snippet": {"lang": "json", "code": c} if c else None,
            }
            for j, c in enumerate(fixes, 1)
        ],
        "params": [],
        "param_facts": [],
        "myths": [],
        "sources": [{"type": "docs", "url": f"https://example.org/{i}", "note": None}],
        "applies_to": {},
        "related": [],
        "withdrawn": None,
    }


def _answer(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "query": "q", "lang": "en", "answered": True, "results": results,
            "closest": [], "findings": [], "notes": [], "message": None, "config_facts": None, "memory": None}  # fmt: skip


def test_results_stay_in_rank_order_each_with_its_sources():
    a = _answer([_result(i, ["x = 1\n" * 60] * 3) for i in range(1, 9)])
    body = render(Reply("answer", "en", answer=a, ask_id="a1"), WEBHOOK)
    assert WEBHOOK.problems(body) == []
    shown = [int(m.group(1)) for t in texts(body) if (m := re.search(r"^e(\d+) · score", t, re.M))]
    assert shown == list(range(1, len(shown) + 1)) and 3 <= len(shown) < 8, "a prefix of the results, in rank order"
    assert sum(t.startswith("Sources\n") for t in texts(body)) == len(shown)
    # every result shown gets its title, why and source before any result gets its first fix; the fixes shown
    # are those of the first results, in rank order
    fixes = [i for i, t in enumerate(texts(body)) if t.startswith("1. Fix 1")]
    heads = [i for i, t in enumerate(texts(body)) if t == "why: w"]
    assert len(heads) == len(shown) and len(fixes) < len(shown)
    assert all(h < f for h, f in zip(heads[1 : len(fixes) + 1], fixes[1:], strict=False)) or len(fixes) <= 1
    # a long snippet is not the compact view's: the fix's first sentence stands in for it
    assert "x = 1" not in " ".join(texts(body)) and all("t" * 200 in texts(body)[i] for i in fixes)
    # one "Full answer" button per result shown, none for a result that did not fit
    full = [parse_control_id(b["id"]) for b in body["buttons"] if b["id"].startswith("kb:full:")]
    assert [int(f[2]) for f in full] == shown and {f[3] for f in full} == {"en"}
    notice = body["sections"][-1]["text"]
    assert re.search(r"[1-9]\d* more part\(s\) did not fit here", notice) and "kb show" not in notice
    assert msg("en", "expand_hint") in notice
    assert body["attachment"]["name"] == "kb-answer-e1.md" and "Entry 8" in body["attachment"]["markdown"]


def test_a_snippet_too_long_for_one_block_is_left_out_alone():
    entry = render(Reply("entry", "en", data=_result(1, ["y = 2\n" * 200, "ls"])), WEBHOOK)
    assert WEBHOOK.problems(entry) == []
    assert "y = 2" not in "".join(texts(entry)) and any("```json\nls\n```" in t for t in texts(entry))
    notice = entry["sections"][-1]["text"]
    assert "1 more part(s)" in notice and "kb show" not in notice
    assert entry["attachment"]["name"] == "kb-e1.md" and "y = 2\n" in entry["attachment"]["markdown"]
    # in an answer, the compact view shows the first fix with its first sentence instead: nothing is missing
    compact = render(Reply("answer", "en", answer=_answer([_result(1, ["y = 2\n" * 200, "ls"])])), WEBHOOK)
    assert "y = 2" not in "".join(texts(compact)) and "attachment" not in compact
    assert "1. Fix 1\n" + "t" * 200 + "\n" + msg("en", "more_fixes", n=1) in texts(compact)


def _equivalents() -> list[dict[str, Any]]:
    code = {
        "accelerate_yaml": ("yaml", "deepspeed_config:\n  zero_stage: 3"),
        "accelerate_launch": ("bash", "accelerate launch --zero_stage 3"),
        "accelerate_plugin": ("python", "DeepSpeedPlugin(zero_stage=3)"),
        "training_args": ("python", "TrainingArguments(deepspeed='ds.json')"),
    }
    return [
        {"front_end": fe, "snippet": {"lang": lg, "code": c}, "names": [], "notes": ["n" * 300]}
        for fe, (lg, c) in code.items()
    ]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_compact_view_shows_the_users_front_end_only(lang):
    """The answer says which front end the user has (Answer.front_end, kb.ask.question): the compact view shows the
    fix's snippet and that front end's equivalent, never every front end's (issue 22: ~1,400 characters of a
    message went to them); an unknown front end or a ds_config user gets the ds_config snippet alone."""
    from kb.present.doc import front_label

    r = _result(1, ['{"zero_optimization": {"stage": 3}}'])
    r["fixes"][0]["equivalents"] = _equivalents()
    same = {
        fe: L(lang)["same_in"].format(front=front_label(fe, lang)) for fe in [e["front_end"] for e in _equivalents()]
    }
    for front_end, wanted in (
        (None, []),
        ("deepspeed", []),
        ("accelerate_yaml", ["accelerate_yaml"]),
        ("training_args", ["training_args"]),
        ("accelerate", ["accelerate_yaml"]),  # accelerate, not saying which of its front ends: the first
    ):
        a = {**_answer([r]), "lang": lang, "front_end": front_end}
        joined = "\n".join(texts(render(Reply("answer", lang, answer=a, ask_id="a1"), WEBHOOK)))
        assert '```json\n{"zero_optimization": {"stage": 3}}\n```' in joined
        assert [fe for fe, label in same.items() if label in joined] == wanted, front_end
        for fe in wanted:
            assert next(e["snippet"]["code"] for e in _equivalents() if e["front_end"] == fe) in joined
        assert "n" * 300 not in joined, "an equivalent's notes are the full answer's"


def test_the_top_three_expand_one_at_a_time_even_after_a_restart(svc, tmp_path):
    service = svc(site_base_url="https://kb.example.org")
    reply = run(chat.message_reply(service, "webhook", QUESTION, user="u", channel="c"))
    results = reply.answer["results"]
    assert reply.kind == "answer" and len(results) == 3
    body = render(reply, ROOMY)
    assert ROOMY.problems(body) == [] and "attachment" not in body, "three compact results fit whole"
    joined = "\n".join(texts(body))
    for r in results:
        assert r["title"][:100] in joined and r["id"] in joined  # the first one's title is the message's header
        assert "why: " + shorten(r["why"], 160) in joined
        assert "1. " + shorten(r["fixes"][0]["title"], 200) in joined, "each result with its first fix"
    assert "Same settings in" not in joined, "the question names no front end: no equivalents"
    full = [b["id"] for b in body["buttons"] if b["id"].startswith("kb:full:")]
    assert full == [control_id("full", reply.ask_id, str(n), "en") for n in (1, 2, 3)]
    # a click: that result whole, as the answer had it (every fix), for the conversation (not only the clicker)
    pressed = run(chat.press(service, full[1], None, "u2", "c"))
    assert pressed.text is None and pressed.reply.kind == "entry"
    data = pressed.reply.data
    assert data["kind"] == "show" and data["lang"] == "en" and data["result"] == results[1]
    whole = render(pressed.reply, WEBHOOK)
    everything = "\n".join(texts(whole)) + (whole.get("attachment") or {}).get("markdown", "")
    assert all(f["title"] in everything for f in results[1]["fixes"])
    assert WEBHOOK.problems(whole) == [] and whole["buttons"] == []
    if "attachment" in whole:
        notice = whole["sections"][-1]["text"]
        assert f"https://kb.example.org/en/{results[1]['id']}/" in notice and "kb show" not in notice
    # after a restart (the same feedback store, nothing in memory) the button still shows the same entry
    again = AnswerService(service.settings, engine=service.engine)
    try:
        later = run(chat.press(again, full[2], None, "u", "c"))
        assert later.reply.kind == "entry" and later.reply.data["result"]["id"] == results[2]["id"]
        gone = run(chat.press(again, control_id("full", reply.ask_id, "9", "zh"), None, "u", "c"))
        assert gone.reply.kind == "refused" and gone.reply.message == msg(
            "zh", "bad_input", reason=msg("zh", "unknown_answer", ask_id=reply.ask_id)
        )
    finally:
        again.close()
    assert len(list(service.store.asks())) == 1, "expanding records no new question"


def test_expanding_a_cached_answer_takes_no_rate_limit_token(svc):
    service = svc(user_burst=1, user_per_minute=0.01)
    reply = run(chat.message_reply(service, "webhook", QUESTION, user="u", channel="c"))
    assert reply.kind == "answer"
    for n in (1, 2, 3):  # the answer is in the cache: reading it whole costs nothing
        p = run(chat.press(service, control_id("full", reply.ask_id, str(n), "en"), None, "u", "c"))
        assert p.reply.kind == "entry", p.reply.message
    more = run(chat.press(service, control_id("more", reply.ask_id, lang="en"), None, "u", "c"))
    assert more.reply.kind == "rate_limited", "asking again is an ask"
    service.cache = type(service.cache)(10, 0)  # the cache forgot it: the core runs again, which is rate-limited
    p = run(chat.press(service, control_id("full", reply.ask_id, "1", "en"), None, "u", "c"))
    assert p.reply.kind == "rate_limited"


def test_bot_messages_in_both_languages_and_never_a_cli_command():
    """Every string a chat user reads (bot/messages.py) in English and Chinese with the same fields; none tells the
    user to run a `kb` command (chat users have no terminal; `/kb ...` is the chat's own command)."""
    from string import Formatter

    from bot.messages import MESSAGES

    assert MESSAGES["en"].keys() == MESSAGES["zh"].keys()
    for key, en in MESSAGES["en"].items():
        zh = MESSAGES["zh"][key]
        assert {f for _, f, _, _ in Formatter().parse(en) if f} == {f for _, f, _, _ in Formatter().parse(zh) if f}, key
        assert re.search(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]", zh) or key == "button.lang", (
            f"{key}: not Chinese"
        )
        for text in (en, zh):
            assert not re.search(r"`kb |(?<!/)\bkb show\b", text), f"{key}: a CLI command"


# ---------------------------------------------------------------- the conversation: attachments, gates, commands, buttons


class FakeFile:
    def __init__(self, name: str, data: bytes, ctype: str | None = "application/json", size: int | None = None):
        self.name, self.data, self.ctype, self.size = name, data, ctype, len(data) if size is None else size
        self.described = self.downloaded = 0

    async def meta(self) -> tuple[str, str | None, int]:
        self.described += 1
        return self.name, self.ctype, self.size

    async def read(self) -> bytes:
        self.downloaded += 1
        return self.data


def test_attachments_are_checked_before_they_are_read(svc):
    service = svc()
    big, binary = (
        FakeFile("ds_config.json", b"{}", size=300 * 1024),
        FakeFile("w.bin", b"\0", "application/octet-stream"),
    )
    r = run(chat.message_reply(service, "webhook", QUESTION, user="u", channel="c", attachments=[big, binary]))
    assert r.kind == "refused" and r.message == msg(
        "en", "attachment_too_big", name="ds_config.json", size=300, limit=256
    )
    assert big.downloaded == binary.downloaded == 0
    good = FakeFile("ds_config.json", CONFIG.encode())
    r = run(chat.message_reply(service, "webhook", "", user="u", channel="c", attachments=[binary, good]))
    assert r.kind == "lint" and r.data["file"] == "ds_config.json" and good.downloaded == 1  # a config alone: linted
    closed = svc(allow_channels=["ok"])
    r = run(chat.message_reply(closed, "webhook", "配置有问题吗", user="u", channel="no", attachments=[good]))
    assert r.kind == "refused" and r.message == msg("zh", "not_allowed") and good.described == 1  # not even described


def test_only_a_confident_answer_goes_to_someone_who_did_not_ask():
    assert chat.should_post(Reply("answer", "en"), addressed=False)
    for kind in ("no_answer", "rate_limited", "refused", "error"):
        assert not chat.should_post(Reply(kind, "en"), addressed=False) and chat.should_post(Reply(kind, "en"), True)


def test_the_command_grammar(svc):
    service = svc()

    def say(text: str) -> Reply:
        return run(chat.command_reply(service, "webhook", text, "u", "c"))

    assert say("help").kind == "help" and "/kb lint" in say("help").message and "/kb lint" in say("帮助").message
    assert say("lint ```json\n" + CONFIG + "```").kind == "lint"
    assert say("lint").message == msg("en", "usage_lint")
    shown = say("show zero3-single-gpu-no-offload zh").data
    assert shown["kind"] == "show" and shown["lang"] == "zh" and shown["result"]["id"] == "zero3-single-gpu-no-offload"
    assert say("mem llama2-7b gpus=2 mb=2 lang=zh").data["lang"] == "zh"
    bad = say("mem llama2-7b stage=7")
    assert bad.kind == "refused" and "stage: must be an integer from 0 to 3" in bad.message
    from kb.memory.setup import OPTIONS

    assert all(f"[{o.name}=" in bad.message for o in OPTIONS if o.chat and o.name != "model"), (
        "the usage lists them all"
    )
    assert "未知选项 'colour'" in say("mem llama2-7b colour=红").message
    assert "use a preset or a size" in say("mem ~/weights/config.json").message  # never a file on the bot's host
    asked = say(QUESTION + " ```json\n" + CONFIG + "```")
    assert asked.kind == "answer" and asked.answer["findings"], "a pasted block is the question's config"


def test_buttons_record_one_vote_per_user_and_speak_the_answers_language(svc):
    service = svc()
    asked = run(service.ask(AskRequest("ZeRO-3第一步就OOM", user_id="u", channel_id="c")))
    ask_id, lang = asked.ask_id, asked.lang
    down = run(chat.press(service, control_id("vote", ask_id, "down", lang), None, "u", "c", inline_reasons=False))
    assert down.text == msg("zh", "thanks") and down.ask_reason == ask_id, "the reasons follow a down-vote here"
    inline = run(chat.press(service, control_id("vote", ask_id, "down", lang), None, "u", "c"))
    assert inline.ask_reason is None, "the reasons are under the answer already"
    why = run(chat.press(service, control_id("reason", ask_id, lang=lang), "unclear", "u", "c"))
    assert why.text == msg("zh", "thanks_reason", reason=msg("zh", "reason.unclear"))
    (rec,) = [a for a in service.store.asks() if a.id == ask_id]
    assert [(v["helpful"], v["reason"]) for v in rec.votes] == [(False, "unclear")]
    other = run(chat.press(service, control_id("lang", ask_id, "en"), None, "u", "c"))
    assert other.reply.answer["lang"] == "en"
    assert run(chat.press(service, "kb:vote:nope", None, "u", "c")).text == msg(
        "en", "bad_input", reason=msg("en", "unknown_button")
    )


def test_a_worker_answers_each_event_once_and_never_silently(svc, caplog):
    caplog.set_level(logging.INFO, logger="kb.bot")
    worker = chat.Worker(svc(), Settings())
    try:
        assert not worker.seen("Ev1") and worker.seen("Ev1")
        sent: list[Reply] = []
        worker.guarded("message", "zh", sent.append, lambda: 1 / 0)
        (reply,) = sent
        assert reply.kind == "error" and reply.message == msg("zh", "internal_error", error_id=reply.error_id)
        assert reply.error_id in caplog.text and "ZeroDivisionError" in caplog.text
    finally:
        worker.close()


def test_attachment_refused_from_a_platform_is_the_reply(svc):
    class Gone(FakeFile):
        async def meta(self):
            raise AttachmentRefused(msg("en", "bad_input", reason="files.info: file_not_found"))

    r = run(chat.message_reply(svc(), "webhook", QUESTION, user="u", channel="c", attachments=[Gone("a", b"")]))
    assert r.kind == "refused" and "file_not_found" in r.message
