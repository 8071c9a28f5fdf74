"""The bots' answer service, feedback store and `kb gaps` (platform-free; the fake-embedder index)."""

import asyncio
import json
import logging
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from bot.feedback import SCHEMA_VERSION, MemoryStore, SQLiteStore
from bot.gaps import gaps, parse_since
from bot.ratelimit import RateLimiter, TokenBucket
from bot.service import AnswerService, AskRequest, AttachmentRefused
from bot.settings import Settings, SettingsError, load_settings
from cli.main import main
from kb.contract import SCHEMA_VERSION as ANSWER_SCHEMA


@pytest.fixture()
def service(fake_engine, tmp_path):
    s = Settings(
        feedback_db=str(tmp_path / "fb.sqlite"),
        user_per_minute=600,
        user_burst=100,
        channel_burst=1000,
        channel_per_minute=6000,
    )
    svc = AnswerService(s, engine=fake_engine)
    yield svc
    svc.close()


def run(coro):
    return asyncio.run(coro)


def test_answers_and_records(service):
    r = run(service.ask(AskRequest("ZeRO-3第一步就OOM", platform="test", user_id="u1", channel_id="c1")))
    assert r.kind in ("answer", "no_answer") and r.lang == "zh" and r.ask_id
    assert r.answer["schema_version"] == ANSWER_SCHEMA
    rec = next(service.store.asks())
    assert rec.query == "ZeRO-3第一步就OOM" and rec.user_hash and rec.user_hash != "u1"  # hashed, never stored raw


def test_core_runs_in_the_pool_not_on_the_event_loop(service):
    async def go():
        loop_thread = threading.current_thread().name
        await service.ask(AskRequest("zero3 oom", user_id="u", channel_id="c"))
        return loop_thread

    loop_thread = run(go())
    assert service.core_threads and all(t.startswith("kb-core") for t in service.core_threads)
    assert loop_thread not in service.core_threads


def test_cache_reuses_normalised_queries(service):
    a = run(service.ask(AskRequest("Zero3  OOM first step", user_id="u", channel_id="c")))
    b = run(service.ask(AskRequest("zero3 oom first step", user_id="u", channel_id="c")))
    assert not a.cached and b.cached and a.answer == b.answer
    c = run(
        service.ask(
            AskRequest(
                "zero3 oom first step", config_text='{"zero_optimization": {"stage": 3}}', user_id="u", channel_id="c"
            )
        )
    )
    assert not c.cached  # a config changes the answer: not the same key


def test_rate_limits_reply_politely(fake_engine, tmp_path):
    svc = AnswerService(
        Settings(feedback_db=str(tmp_path / "f.sqlite"), user_per_minute=1, user_burst=2), engine=fake_engine
    )
    kinds = [run(svc.ask(AskRequest("oom", user_id="u", channel_id="c"))).kind for _ in range(3)]
    assert kinds[:2] != ["rate_limited"] * 2 and kinds[2] == "rate_limited"
    r = run(svc.ask(AskRequest("显存不足", user_id="u", channel_id="c")))
    assert r.kind == "rate_limited" and "秒后再试" in r.message
    assert run(svc.ask(AskRequest("oom", user_id="other", channel_id="c"))).kind != "rate_limited"


def test_token_bucket_refills():
    t = [0.0]
    b = TokenBucket(per_minute=60, burst=1, now=lambda: t[0])
    assert b.take() == 0.0 and b.take() > 0
    t[0] = 1.0
    assert b.take() == 0.0
    lim = RateLimiter(60, 5, 60, 1, now=lambda: t[0])
    assert lim.check("u1", "c") is None and lim.check("u2", "c")[0] == "channel"


def test_allow_list_refuses_with_a_reason(fake_engine, tmp_path):
    svc = AnswerService(Settings(feedback_db=str(tmp_path / "f.sqlite"), allow_channels=["c-ok"]), engine=fake_engine)
    r = run(svc.ask(AskRequest("zero3 oom", user_id="u", channel_id="c-other")))
    assert r.kind == "refused" and "allow_channels" in r.message
    assert run(svc.ask(AskRequest("zero3 oom", user_id="u", channel_id="c-ok"))).kind in ("answer", "no_answer")


def test_bad_config_and_empty_query_get_reasons(service):
    r = run(
        service.ask(AskRequest("oom", config_text='{"zero_optimization": {"stage": 3,,}}', user_id="u", channel_id="c"))
    )
    assert r.kind == "refused" and "invalid JSON" in r.message
    assert run(service.ask(AskRequest("   ", user_id="u", channel_id="c"))).kind == "refused"


def test_core_exception_gives_an_error_id_that_is_logged(service, monkeypatch, caplog):
    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(service.engine, "ask", boom)
    with caplog.at_level(logging.INFO, logger="kb.bot"):
        r = run(service.ask(AskRequest("something new", user_id="u", channel_id="c")))
    assert r.kind == "error" and r.error_id and r.error_id in r.message
    assert r.error_id in caplog.text and "RuntimeError" in caplog.text


def test_logs_carry_no_query_text_unless_enabled(service, caplog):
    with caplog.at_level(logging.INFO, logger="kb.bot"):
        run(service.ask(AskRequest("secret project falcon zero3 oom", user_id="u", channel_id="c")))
    assert "falcon" not in caplog.text and '"query_chars"' in caplog.text
    for rec in caplog.records:
        json.loads(rec.getMessage())  # structured: every line is JSON


def test_attachments(service):
    big = service.settings.attachment_bytes + 1
    with pytest.raises(AttachmentRefused, match="256 KB"):
        service.read_attachment("ds.json", "application/json", big, None, "en")
    with pytest.raises(AttachmentRefused, match="not a text file"):
        service.read_attachment("model.bin", "application/octet-stream", 10, b"\x00\x01", "en")
    with pytest.raises(AttachmentRefused, match="不是文本文件"):
        service.read_attachment("ds.json", "application/json", 4, b"a\x00bc", "zh")
    assert service.read_attachment("ds.json", None, 30, b'{"zero_optimization": {}}', "en").startswith("{")
    assert service.read_attachment("配置.yaml", "text/yaml", 9, "阶段: 3".encode("gbk"), "zh") == "阶段: 3"


def test_again_switches_language_and_shows_more(service):
    first = run(service.ask(AskRequest("zero3 oom first step", user_id="u", channel_id="c", k=1)))
    zh = run(service.again(first.ask_id, lang="zh"))
    assert zh.answer["lang"] == "zh"
    more = run(service.again(first.ask_id, more=True))
    assert len(more.answer["results"]) >= len(first.answer["results"])
    assert run(service.again("nope")).kind == "refused"


def test_votes_with_reasons(service):
    r = run(service.ask(AskRequest("zero3 oom", user_id="u", channel_id="c")))
    assert "wrong version" in run(service.vote(r.ask_id, False, "wrong_version", "u"))
    assert "版本不对" in run(service.vote(r.ask_id, False, "wrong_version", "u", lang="zh"))
    assert "unknown reason" in run(service.vote(r.ask_id, False, "meh", "u"))
    run(service.vote(r.ask_id, False, None, "other-user"))
    rec = next(a for a in service.store.asks() if a.id == r.ask_id)
    assert [v["reason"] for v in rec.votes] == ["wrong_version", None]  # one vote per user, the reason kept


def test_200_concurrent_asks_all_answered(service):
    queries = [f"zero3 oom first step variant {i % 17}" if i % 2 else f"显存不足 第 {i % 13} 次" for i in range(200)]

    async def go():
        return await asyncio.gather(
            *(service.ask(AskRequest(q, user_id=f"u{i}", channel_id=f"c{i % 7}")) for i, q in enumerate(queries))
        )

    replies = run(go())
    assert len(replies) == 200 and all(r.kind in ("answer", "no_answer") for r in replies)
    assert len(list(service.store.asks())) == 200 and len({r.ask_id for r in replies}) == 200


def test_1000_concurrent_feedback_writes(tmp_path):
    store = SQLiteStore(tmp_path / "fb.sqlite")
    ask_id = store.record_ask({"query": "q", "lang": "en", "answered": True, "results": []}, "test", "c", "u")

    def write(i):
        if i % 2:
            store.record_vote(ask_id, bool(i % 3), None if i % 3 else "unclear", f"u{i}")
        else:
            store.record_ask({"query": f"q{i}", "lang": "en", "answered": False, "closest": []}, "test", "c", f"u{i}")

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(1000)))
    recs = list(SQLiteStore(tmp_path / "fb.sqlite").asks())
    assert len(recs) == 501 and len(next(r for r in recs if r.id == ask_id).votes) == 500


def test_store_schema_is_versioned_and_migrated(tmp_path):
    path = tmp_path / "fb.sqlite"
    assert SQLiteStore(path).schema_version() == SCHEMA_VERSION
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.commit()
    con.close()
    with pytest.raises(RuntimeError, match="newer than this kb"):
        SQLiteStore(path)


def test_settings_file(tmp_path):
    p = tmp_path / "kb-bot.toml"
    p.write_text('[bot]\nmode = "all"\nallow_channels = [123]\n[limits]\nuser_per_minute = 2\n')
    s = load_settings(p)
    assert s.mode == "all" and s.allow_channels == ["123"] and s.user_per_minute == 2.0 and s.workers == 4
    for bad, match in [
        ('[bot]\nmood = "all"\n', "unknown key 'mood'"),
        ("[limits]\nworkers = 0\n", "between 1 and 64"),
        ('[bot]\nmode = "sometimes"\n', "mode must be"),
        ("[bot\n", "invalid TOML"),
        ('[tokens]\nDISCORD_TOKN = "x"\n', "unknown key DISCORD_TOKN"),
    ]:
        p.write_text(bad)
        with pytest.raises(SettingsError, match=match):
            load_settings(p)


def test_tokens_are_never_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("DISCORD_TOKEN", "very-secret-token")
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    r = CliRunner().invoke(main, ["bot", "discord", "--check"])
    assert r.exit_code == 0 and "very-secret-token" not in r.output and json.loads(r.stdout)["missing_tokens"] == []
    r = CliRunner().invoke(main, ["bot", "slack", "--check"])
    assert r.exit_code == 1 and json.loads(r.stdout)["missing_tokens"] == ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]


# ---------------------------------------------------------------- kb gaps / kb feedback export


@pytest.fixture()
def filled_store(service):
    for q in [
        "how do I train a diffusion model with deepspeed",
        "deepspeed diffusion unet training",
        "扩散模型 deepspeed 训练",
        "zero3 oom first step",
        "how to fine-tune whisper with zero3",
    ]:
        r = run(service.ask(AskRequest(q, user_id="u", channel_id="c")))
        if "oom" in q and r.ask_id:
            run(service.vote(r.ask_id, False, "wrong_version", "u"))
    return service.store


def test_gaps_groups_the_curators_todo_list(filled_store, fake_engine):
    from kb.contract import GapsReport

    rep = gaps(filled_store, fake_engine.retriever.embedder)
    assert isinstance(rep, GapsReport) and rep.questions >= 1 and rep.groups
    assert sum(g.count for g in rep.groups) == rep.questions
    down = [g for g in rep.groups if "downvoted" in g.why]
    assert down and down[0].downvote_reasons == {"wrong_version": 1}
    assert [g.count for g in rep.groups] == sorted((g.count for g in rep.groups), reverse=True)  # largest first


def test_cli_gaps_and_export(filled_store, cli_env, tmp_path):
    db = filled_store.path
    r = CliRunner().invoke(main, ["gaps", "--db", db, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["groups"]
    r = CliRunner().invoke(main, ["gaps", "--db", db])
    assert r.exit_code == 0 and "group(s)" in r.stdout
    out = tmp_path / "fb.jsonl"
    r = CliRunner().invoke(main, ["feedback", "export", "--db", db, "--out", str(out)])
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert r.exit_code == 0 and len(rows) == 5 and all("votes" in x for x in rows)
    r = CliRunner().invoke(main, ["gaps", "--db", str(tmp_path / "none.sqlite"), "--json"])
    assert r.exit_code == 2 and "no feedback database" in json.loads(r.stdout)["error"]
    r = CliRunner().invoke(main, ["gaps", "--db", db, "--since", "last tuesday"])
    assert r.exit_code == 2 and "--since" in r.output


@pytest.mark.parametrize("platform", ["discord", "slack"])
def test_a_dry_run_with_a_vote_feeds_kb_gaps(platform, cli_env, tmp_path):
    """`kb gaps` end to end without a token: a dry run records the question and clicks the vote (and the reason)
    into --feedback-db; `kb gaps --db` on that store lists it with the reason."""
    db = tmp_path / "fb.sqlite"
    q = "how do I train a diffusion model with deepspeed"
    dry = ["bot", platform, "--dry-run", q, "--feedback-db", str(db)]
    r = CliRunner().invoke(main, [*dry, "--vote", "down", "--reason", "wrong_version"])
    assert r.exit_code == 0, r.output
    body = json.loads(r.stdout)  # stdout is the body alone; what was recorded is said on stderr
    assert ("blocks" in body) if platform == "slack" else ("embeds" in body)
    assert f"kb gaps --db {db}" in r.stderr
    r = CliRunner().invoke(main, ["gaps", "--db", str(db), "--json"])
    assert r.exit_code == 0, r.output
    (group,) = json.loads(r.stdout)["groups"]
    assert group["examples"]["en"] == [q] and group["platforms"] == [platform]
    assert group["why"]["downvoted"] == 1 and group["downvote_reasons"] == {"wrong_version": 1}
    # an up-vote is recorded too (and the same question asked again is a second ask)
    assert CliRunner().invoke(main, [*dry, "--vote", "up"]).exit_code == 0
    assert [[v["helpful"] for v in a.votes] for a in SQLiteStore(db).asks()] == [[False], [True]]


def test_dry_run_feedback_options_are_checked(cli_env, tmp_path):
    db = tmp_path / "fb.sqlite"
    run_cli = lambda *a: CliRunner().invoke(main, ["bot", "discord", *a])  # noqa: E731
    r = run_cli("--dry-run", "zero3 oom first step")
    assert r.exit_code == 0 and not db.exists(), "without --feedback-db nothing is written"
    for argv, why in (
        (["--dry-run", "zero3 oom", "--vote", "down"], "add --feedback-db PATH"),
        (["--dry-run", "zero3 oom", "--feedback-db", str(db), "--vote", "up", "--reason", "unclear"], "down vote"),
        (["--feedback-db", str(db), "--vote", "up"], "go with --dry-run"),
        (
            ["--dry-run", '```json\n{"zero_optimization": {}}\n```', "--feedback-db", str(db), "--vote", "up"],
            "nothing to vote on",
        ),
        (["--dry-run", "zero3 oom", "--feedback-db", str(db), "--reason", "bored"], "Invalid value"),
    ):
        r = run_cli(*argv)
        assert r.exit_code == 2 and why in r.output, (argv, r.output)
    assert "--feedback-db PATH" in run_cli("--help").output and "kb gaps --db" in run_cli("--help").output


def test_parse_since():
    assert parse_since("7d", now=1_000_000) == 1_000_000 - 7 * 86400
    assert parse_since("2026-11-30") > 0 and parse_since(None) is None
    with pytest.raises(ValueError):
        parse_since("yesterday")


def test_memory_store_matches_the_interface():
    m = MemoryStore()
    a = m.record_ask(
        {"query": "q", "lang": "en", "answered": True, "results": [{"id": "x", "score": 0.5}]}, "t", "c", "u"
    )
    m.record_vote(a, False, "unclear", "u")
    rec = next(m.asks())
    assert rec.top_score == 0.5 and rec.votes[0]["reason"] == "unclear"
    with pytest.raises(KeyError):
        m.record_vote("nope", True, None, "u")


def test_lint_mem_and_show_give_the_contracts_reports(service):
    """The service returns kb.contract's reports (what the CLI prints with --json), in the asker's language;
    kb mem's options and bounds are kb.memory.setup's, and chat input never names a file on the bot's host."""
    lint = run(service.lint('{"zero_optimization": {"stage": 3, "nvme_path": "/x"}}', "ds.json", "zh"))
    assert lint.data["kind"] == "lint" and lint.data["schema_version"] == ANSWER_SCHEMA and lint.data["lang"] == "zh"
    assert lint.data["findings"] and all("nvme_path" in f["path"] for f in lint.data["findings"][:1])
    mem = run(service.mem("zh", "u", "c", model="llama2-7b", gpus="8", micro_batch=2))
    assert mem.kind == "memory" and mem.data["kind"] == "mem" and mem.data["lang"] == "zh"
    setup = {v["name"]: v for v in mem.data["setup"]}
    assert setup["gpus"]["value"] == 8 and setup["gpus"]["given"] and not setup["seq"]["given"]
    for values, why in (
        ({"model": "llama2-7b", "gpus": "0"}, "gpus：必须是1 到 100000 之间的整数"),
        ({"model": "/etc/passwd"}, "model：'/etc/passwd'：请用预置模型名或参数量"),
        ({"model": "llama2-7b", "colour": "red"}, "未知选项 'colour'"),
    ):
        r = run(service.mem("zh", "u", "c", **values))
        assert r.kind == "refused" and why in r.message, r.message
    show = run(service.show("zero3-single-gpu-no-offload", "zh"))
    assert show.data["kind"] == "show" and show.data["result"]["id"] == "zero3-single-gpu-no-offload"
    assert "找不到回答" in run(service.vote("nope", True, None, "u", "zh")) and "未知原因" in run(
        service.vote("nope", False, "meh", "u", "zh")
    )
