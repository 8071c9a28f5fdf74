"""The Slack bot end to end, offline, with the real slack-bolt / slack-sdk.

Every Web API call (chat.postMessage, chat.postEphemeral, files.info, the file download, uploads) and
every response_url post goes to a local HTTP capture server on 127.0.0.1; requests are signed like
Slack signs them and dispatched with ``app.dispatch(BoltRequest(...))``. The renderer is checked on
generated answers (hypothesis) against every Slack limit it keeps.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from slack_bolt import BoltRequest
from slack_bolt.authorization import AuthorizeResult
from slack_sdk import WebClient
from slack_sdk.signature import SignatureVerifier

from bot import slack_render as R
from bot.chat import split_pasted
from bot.feedback import REASONS
from bot.layout import parse_control_id
from bot.messages import msg
from bot.service import AnswerService, Reply
from bot.settings import Settings, SettingsError
from bot.slack_bot import COMMAND, bot_of, build_app, dry_run, message_text, registered_events, run, unslack
from bot.slack_render import escape_slack
from kb.contract import SCHEMA_VERSION
from kb.memory.setup import SetupError, parse_pairs
from kb.present.links import code_url, entry_url
from tests.conftest import fuzz_examples

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "bot" / "slack-manifest.yaml"
SECRET = "test-signing-secret"
BOT_TOKEN = "xoxb-test-token-do-not-log"
CONFIG = (ROOT / "examples" / "ds_config.json").read_text()
QUESTION = "zero3 oom first step"  # the fake engine answers it confidently (zero3-single-gpu-no-offload)


# ---------------------------------------------------------------- the local "Slack"


class Capture(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        self.calls: list[dict] = []
        self.routes: dict[str, dict] = {}  # Web API method -> extra fields of its {"ok": true} answer
        self.files: dict[str, tuple[bytes, str]] = {}  # /files/NAME -> (content, content type)
        self.lock = threading.Lock()

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
        self.routes.clear()
        self.files.clear()

    def of(self, kind: str) -> list[dict]:
        with self.lock:
            return [c for c in self.calls if c["kind"] == kind]


class _Handler(BaseHTTPRequestHandler):
    server: Capture

    def log_message(self, *args) -> None:  # quiet
        pass

    def _record(self, body: bytes) -> dict:
        path, _, query = self.path.partition("?")
        ctype = self.headers.get("content-type", "")
        data: object = body.decode("utf-8", "replace")
        if "json" in ctype:
            data = json.loads(body or b"{}")
        elif "x-www-form-urlencoded" in ctype:
            data = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode()).items()}
        kind = path.split("/")[1] if path.count("/") >= 1 else path
        call = {
            "kind": path[len("/api/") :] if path.startswith("/api/") else kind,
            "path": path,
            "query": {k: v[0] for k, v in urllib.parse.parse_qs(query).items()},
            "data": data,
            "auth": self.headers.get("authorization"),
            "thread": threading.current_thread().name,
        }
        with self.server.lock:
            self.server.calls.append(call)
        return call

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        call = self._record(b"")
        if call["path"].startswith("/files/"):
            content, ctype = self.server.files.get(call["path"][len("/files/") :], (b"", "text/plain"))
            self._send(200, content, ctype)
        else:
            self._api(call)

    def do_POST(self) -> None:
        n = int(self.headers.get("content-length") or 0)
        call = self._record(self.rfile.read(n))
        if call["path"].startswith(("/respond/", "/upload/")):
            self._send(200, b"ok", "text/plain")
        else:
            self._api(call)

    def _api(self, call: dict) -> None:
        extra = dict(self.server.routes.get(call["kind"], {}))
        if call["kind"] == "files.getUploadURLExternal":
            extra = {"file_id": "FUP1", "upload_url": f"{self.server.url}/upload/FUP1", **extra}
        if call["kind"] == "chat.postMessage":
            extra = {"ts": "999.9", "channel": "C1", **extra}
        if call["kind"] == "files.completeUploadExternal":
            extra = {"files": [{"id": "FUP1", "name": "answer.md"}], **extra}
        self._send(200, json.dumps({"ok": True, **extra}).encode(), "application/json")


@pytest.fixture(scope="module")
def server():
    srv = Capture()
    t = threading.Thread(target=srv.serve_forever, name="capture-server", daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _authorize(**_kwargs) -> AuthorizeResult:
    return AuthorizeResult(enterprise_id=None, team_id="T1", bot_user_id="UBOT", bot_id="BBOT", bot_token=BOT_TOKEN)


@pytest.fixture()
def make(server, fake_engine, tmp_path, monkeypatch):
    """make(**settings) -> (app, service); everything is closed after the test."""
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)  # App() would pick it up
    server.reset()
    made = []

    def _make(**kw):
        s = Settings(feedback_db=str(tmp_path / f"fb{len(made)}.sqlite"), **kw)
        service = AnswerService(s, engine=fake_engine)
        client = WebClient(base_url=f"{server.url}/api/")
        app = build_app(
            service, s, client=client, authorize=_authorize, signing_secret=SECRET, process_before_response=True
        )
        made.append((app, service))
        return app, service

    yield _make
    for app, service in made:
        bot_of(app).wait_idle(10)
        bot_of(app).close()
        service.close()


def signed(body: str, ctype: str, ts: int | None = None, secret: str = SECRET, **extra: str) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    sig = SignatureVerifier(secret).generate_signature(timestamp=str(ts), body=body)
    return {"content-type": ctype, "x-slack-signature": sig, "x-slack-request-timestamp": str(ts), **extra}


def dispatch(app, body: str, ctype: str, **headers: str):
    return app.dispatch(BoltRequest(body=body, headers=signed(body, ctype, **headers)))


def command(app, server, text: str, channel: str = "C1", user: str = "U1", n: int = 1):
    form = {
        "token": "legacy",
        "team_id": "T1",
        "channel_id": channel,
        "user_id": user,
        "command": COMMAND,
        "text": text,
        "response_url": f"{server.url}/respond/{n}",
        "trigger_id": "trig",
        "api_app_id": "A1",
    }
    return dispatch(app, urllib.parse.urlencode(form), "application/x-www-form-urlencoded")


_EVENT_N = iter(range(1, 1_000_000))


def event(app, ev: dict, event_id: str | None = None, **headers: str):
    body = {
        "token": "legacy",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_EVENT_N)}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T1", "user_id": "UBOT", "is_bot": True}],
        "event": {"channel": "C1", "user": "U1", "ts": "111.1", "event_ts": "111.1", **ev},
    }
    return dispatch(app, json.dumps(body), "application/json", **headers)


def mention(app, text: str, **ev):
    return event(app, {"type": "app_mention", "text": f"<@UBOT> {text}", **ev})


def click(app, server, action: dict, channel: str = "C1", ephemeral: bool = False, user: str = "U1"):
    payload = {
        "type": "block_actions",
        "team": {"id": "T1"},
        "user": {"id": user},
        "api_app_id": "A1",
        "token": "legacy",
        "trigger_id": "trig",
        "container": {"type": "message", "message_ts": "222.2", "channel_id": channel, "is_ephemeral": ephemeral},
        "channel": {"id": channel},
        "message": {"type": "message", "ts": "222.2", "thread_ts": "111.1", "text": "kb"},
        "response_url": f"{server.url}/respond/action",
        "actions": [{"block_id": "kb_feedback", "action_ts": "1", **action}],
    }
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    return dispatch(app, body, "application/x-www-form-urlencoded")


def settle(app) -> None:
    assert bot_of(app).wait_idle(20), "the bot's work did not finish"


def posts(server) -> list[dict]:
    return [c["data"] for c in server.of("chat.postMessage")]


def arg(call: dict, name: str):
    """A Web API argument, wherever the client put it (query string, form or JSON body)."""
    data = call["data"] if isinstance(call["data"], dict) else {}
    return call["query"].get(name, data.get(name))


def flat(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False)


def header(body: dict) -> str:
    return next(b["text"]["text"] for b in body["blocks"] if b["type"] == "header")


def spy_core(service, gate: threading.Event | None = None, fail: Exception | None = None) -> list[dict]:
    """Record what the core is asked (and optionally hold it until ``gate`` is set, or raise ``fail``)."""
    seen: list[dict] = []
    real = service._ask_core

    def core(query, config_text, config_name, k, lang):
        seen.append({"query": query, "config_text": config_text, "config_name": config_name, "k": k, "lang": lang})
        if gate is not None:
            assert gate.wait(20)
        if fail is not None:
            raise fail
        return real(query, config_text, config_name, k, lang)

    service._ask_core = core
    return seen


# ---------------------------------------------------------------- /kb


def test_slash_command_acks_first_then_answers_at_response_url(make, server):
    app, service = make()
    gate = threading.Event()
    asked = spy_core(service, gate=gate)
    resp = command(app, server, QUESTION)
    assert resp.status == 200  # the ack came back while the core was still held
    assert not server.of("respond")
    gate.set()
    settle(app)
    assert asked and asked[0]["query"] == QUESTION
    (answer,) = [c["data"] for c in server.of("respond")]
    assert answer["response_type"] == "ephemeral"
    assert header(answer).startswith("ZeRO-3 on a single GPU")
    assert R.problems(answer) == []
    assert service.core_threads and all(n.startswith("kb-core") for n in service.core_threads)
    assert threading.current_thread().name not in service.core_threads


def test_slash_subcommands_lint_show_mem_help(make, server):
    app, _ = make()
    command(app, server, "lint ```" + CONFIG + "```", n=1)
    command(app, server, "show zero3-single-gpu-no-offload zh", n=2)
    command(app, server, "mem llama2-7b gpus=1 stage=3 offload=none", n=3)
    command(app, server, "help", n=4)
    command(app, server, "mem /etc/passwd", n=5)
    settle(app)
    by = {c["path"]: c["data"] for c in server.of("respond")}
    lint = flat(by["/respond/1"])
    assert "KB002" in lint and "nvme_path" in lint
    show = by["/respond/2"]
    assert "解决办法" in flat(show) and R.problems(show) == []
    mem = flat(by["/respond/3"])
    assert "GiB" in mem and "does NOT fit" in mem
    assert "/kb lint" in flat(by["/respond/4"])
    assert "use a preset or a size like 7b" in flat(by["/respond/5"])  # never a path on the bot's disk
    assert "[stage=0-3]" in flat(by["/respond/5"])  # with the usage, built from kb.memory.setup.OPTIONS
    assert all(R.problems(b) == [] for b in by.values())


def test_parse_helpers():
    assert split_pasted(message_text('<@UBOT> why oom?\n```json\n{"a": 1}\n```', "UBOT")) == ("why oom?", '{"a": 1}')
    assert split_pasted(message_text("<@UBOT|kb> hi <@U123>", "UBOT")) == ("hi <@U123>", None)
    assert split_pasted(message_text("```\n{&quot;a&quot;: &lt;1&gt;}\n``` &amp;")) == ("&", "{&quot;a&quot;: <1>}")
    assert unslack("see <https://x.org/a?b=1&amp;c=2|x.org> &lt;3") == "see https://x.org/a?b=1&c=2 <3"
    # /kb mem key=value: kb.memory.setup's grammar and bounds (the CLI's), its errors in the user's language
    assert parse_pairs("7b gpus=2 stage=2 offload=optimizer mb=4".split()) == {
        "model": "7b",
        "gpus": "2",
        "stage": "2",
        "offload": "optimizer",
        "micro_batch": "4",
    }
    with pytest.raises(SetupError, match="unknown option 'colour'"):
        parse_pairs(["llama2-7b", "colour=red"])


# ---------------------------------------------------------------- mentions


def test_mention_replies_in_the_thread_without_the_bot_mention(make, server):
    app, service = make()
    asked = spy_core(service)
    mention(app, QUESTION)
    mention(app, QUESTION + " again", ts="333.3", thread_ts="300.0")
    settle(app)
    first, second = sorted(posts(server), key=lambda p: p["thread_ts"])
    assert first["thread_ts"] == "111.1" and first["channel"] == "C1"
    assert second["thread_ts"] == "300.0"
    assert {a["query"] for a in asked} == {QUESTION, QUESTION + " again"}  # no <@UBOT> in the question
    assert header(first).startswith("ZeRO-3 on a single GPU")
    assert R.problems(first) == [] and R.problems(second) == []


def test_shared_file_config_is_checked_then_downloaded_with_the_bot_token(make, server, caplog):
    caplog.set_level("DEBUG")
    app, service = make()
    asked = spy_core(service)
    server.routes["files.info"] = {
        "file": {
            "id": "F1",
            "name": "ds_config.json",
            "mimetype": "application/json",
            "size": len(CONFIG.encode()),
            "url_private": f"{server.url}/files/ds_config.json",
        }
    }
    server.files["ds_config.json"] = (CONFIG.encode(), "application/json")
    mention(app, QUESTION, files=[{"id": "F1", "file_access": "check_file_info"}])
    settle(app)
    assert [arg(c, "file") for c in server.of("files.info")][:1] == ["F1"]
    (download,) = server.of("files")
    assert download["auth"] == f"Bearer {BOT_TOKEN}"
    assert asked[0]["config_text"] == CONFIG and asked[0]["config_name"] == "ds_config.json"
    (body,) = posts(server)
    text = flat(body)
    assert msg("en", "no_answer") not in text
    assert "Your config (kb lint)" in text and "KB002" in text  # the findings of the attached config
    assert BOT_TOKEN not in caplog.text  # tokens are never logged


def test_pasted_code_block_is_the_config(make, server):
    app, service = make()
    asked = spy_core(service)
    mention(app, f"{QUESTION}\n```{CONFIG}```")
    settle(app)
    assert asked[0]["query"] == QUESTION
    assert json.loads(asked[0]["config_text"]) == json.loads(CONFIG)
    (body,) = posts(server)
    assert "KB002" in flat(body)


def test_oversized_and_binary_files_are_refused_and_never_downloaded(make, server):
    app, service = make(attachment_bytes=1024)
    asked = spy_core(service)
    big = {"id": "F2", "name": "ds_config.json", "mimetype": "application/json", "size": 50_000}
    binary = {"id": "F3", "name": "weights.bin", "mimetype": "application/octet-stream", "size": 100}
    for f in (big, binary):
        f["url_private"] = f"{server.url}/files/{f['name']}"
    mention(app, QUESTION, files=[big])
    mention(app, QUESTION, files=[binary], ts="112.1")
    settle(app)
    assert not server.of("files") and not asked  # nothing downloaded, nothing asked
    texts = {p["thread_ts"]: p["text"] for p in posts(server)}
    assert texts["111.1"] == escape_slack(msg("en", "attachment_too_big", name="ds_config.json", size=49, limit=1))
    assert texts["112.1"] == escape_slack(msg("en", "attachment_type", name="weights.bin"))


def test_a_file_slack_will_not_describe_gets_a_reason(make, server):
    app, _ = make()
    server.routes["files.info"] = {"ok": False, "error": "missing_scope"}
    mention(app, QUESTION, files=[{"id": "F9", "file_access": "check_file_info"}])
    settle(app)
    (body,) = posts(server)
    assert "missing_scope" in body["text"] and "files:read" in body["text"]
    assert not server.of("files")


def test_pings_in_the_query_come_back_escaped(make, server):
    app, _ = make()
    mention(app, f"<!everyone> <!here> <@U123> <!channel> {QUESTION}")
    settle(app)
    (body,) = posts(server)
    text = flat(body)
    for ping in ("<!everyone>", "<!here>", "<@U123>", "<!channel>"):
        assert ping not in text
    assert "&lt;!everyone&gt;" in text and "&lt;@U123&gt;" in text


def test_retried_and_repeated_events_are_answered_once(make, server):
    app, _ = make()
    assert event(app, {"type": "app_mention", "text": f"<@UBOT> {QUESTION}"}, event_id="EvA").status == 200
    assert (
        event(
            app,
            {"type": "app_mention", "text": f"<@UBOT> {QUESTION}"},
            event_id="EvA",
            **{
                "x-slack-retry-num": "1",
                "x-slack-retry-reason": "http_timeout",
            },
        ).status
        == 200
    )
    assert event(app, {"type": "app_mention", "text": f"<@UBOT> {QUESTION}", "ts": "5.5"}, event_id="EvB").status == 200
    assert event(app, {"type": "app_mention", "text": f"<@UBOT> {QUESTION}", "ts": "5.5"}, event_id="EvB").status == 200
    settle(app)
    assert sorted(p["thread_ts"] for p in posts(server)) == ["111.1", "5.5"]


@pytest.mark.parametrize("mode", ["mention", "all"])
def test_mode_all_answers_plain_messages_mention_does_not(make, server, mode):
    app, _ = make(mode=mode)
    event(app, {"type": "message", "channel_type": "channel", "text": QUESTION})
    event(app, {"type": "message", "channel_type": "channel", "text": "lunch at noon?", "ts": "2.2"})
    event(app, {"type": "message", "channel_type": "channel", "text": QUESTION, "bot_id": "B9", "ts": "3.3"})
    event(app, {"type": "message", "subtype": "message_changed", "channel_type": "channel", "ts": "4.4"})
    settle(app)
    threads = [p["thread_ts"] for p in posts(server)]
    # mode all: only the confident answer; nobody addressed the bot, so no "no answer" reply, no bots, no edits
    assert threads == (["111.1"] if mode == "all" else [])


def test_allow_list_refusal_is_sent(make, server):
    app, service = make(allow_channels=["COK"])
    asked = spy_core(service)
    server.routes["files.info"] = {
        "file": {"id": "F1", "name": "a.json", "size": 10, "url_private": f"{server.url}/files/a.json"}
    }
    mention(app, QUESTION, channel="CNO", files=[{"id": "F1", "file_access": "check_file_info"}])
    command(app, server, QUESTION, channel="CNO")
    mention(app, QUESTION, channel="COK", ts="7.7")
    settle(app)
    refused = escape_slack(msg("en", "not_allowed"))
    by_channel = {p["channel"]: p for p in posts(server)}
    assert by_channel["CNO"]["text"] == refused
    assert header(by_channel["COK"]).startswith("ZeRO-3")
    assert [c["data"]["text"] for c in server.of("respond")] == [refused]
    assert not server.of("files") and not server.of("files.info")  # refused before looking at the file
    assert len(asked) == 1


def test_rate_limited_user_gets_the_reason(make, server):
    app, _ = make(user_burst=1, user_per_minute=0.1)
    mention(app, QUESTION)
    settle(app)
    mention(app, QUESTION + " please", ts="8.8")
    settle(app)
    replies = {p["thread_ts"]: p for p in posts(server)}
    assert header(replies["111.1"]).startswith("ZeRO-3")
    assert replies["8.8"]["text"].startswith("You are asking faster than I can answer well")


def test_core_exception_gives_an_error_id_that_is_in_the_log(make, server, caplog):
    caplog.set_level("INFO")
    app, service = make()
    spy_core(service, fail=RuntimeError("boom"))
    mention(app, QUESTION)
    settle(app)
    (body,) = posts(server)
    error_id = re.search(r"error id ([0-9a-f]{10})", body["text"]).group(1)
    assert error_id in caplog.text and "RuntimeError" in caplog.text


def test_adapter_exception_gives_an_error_id_too(make, server, caplog, monkeypatch):
    caplog.set_level("INFO")
    app, _ = make()
    monkeypatch.setattr(bot_of(app), "attachments", lambda *a: 1 / 0)
    mention(app, QUESTION, files=[{"id": "F1"}])
    settle(app)
    (body,) = posts(server)
    error_id = re.search(r"error id ([0-9a-f]{10})", body["text"]).group(1)
    assert error_id in caplog.text and "ZeroDivisionError" in caplog.text


def test_bad_signature_or_stale_request_is_401(make, server):
    app, _ = make()
    body = urllib.parse.urlencode({"command": COMMAND, "text": QUESTION, "response_url": f"{server.url}/respond/x"})
    ctype = "application/x-www-form-urlencoded"
    assert app.dispatch(BoltRequest(body=body, headers=signed(body, ctype, secret="wrong"))).status == 401
    assert app.dispatch(BoltRequest(body=body, headers=signed(body, ctype, ts=int(time.time()) - 3600))).status == 401
    settle(app)
    assert not server.calls


# ---------------------------------------------------------------- buttons


def test_buttons_more_language_votes_and_reason(make, server):
    app, service = make()
    mention(app, QUESTION)
    settle(app)
    (answer,) = posts(server)
    actions, expand = [b for b in answer["blocks"] if b["type"] == "actions"]
    assert (actions["block_id"], expand["block_id"]) == ("kb_controls", "kb_expand")
    els = {
        parse_control_id(e["action_id"])[0] + (e.get("value") or "").count(":down") * "_down": e
        for e in actions["elements"]
    }
    assert list(els) == ["more", "lang", "vote", "vote_down", "reason"]  # one id grammar, bot.layout's
    ask_id = parse_control_id(els["more"]["action_id"])[1]
    assert els["lang"]["text"]["text"] == "in 中文" and els["lang"]["action_id"] == f"kb:lang:{ask_id}:zh"
    assert [o["text"]["text"] for o in els["reason"]["options"]] == [msg("en", f"reason.{r}") for r in REASONS]

    def press(name: str, **kw):
        e = els[name]
        return click(app, server, {"action_id": e["action_id"], "type": e["type"], "value": e.get("value")}, **kw)

    server.reset()
    press("more")
    press("lang")
    settle(app)
    more, zh = sorted(posts(server), key=lambda p: "解决办法" in flat(p))
    assert more["thread_ts"] == zh["thread_ts"] == "111.1"  # into the thread of the answer
    assert "解决办法" in flat(zh) and "in English" in flat(zh)
    assert R.problems(more) == [] and R.problems(zh) == []

    server.reset()
    press("vote")
    settle(app)
    (thanks,) = [c["data"] for c in server.of("chat.postEphemeral")]
    assert thanks["user"] == "U1" and thanks["thread_ts"] == "111.1"
    assert thanks["text"] == escape_slack(msg("en", "thanks"))

    def votes():
        (rec,) = [a for a in service.store.asks() if a.id == ask_id]
        return [(v["helpful"], v["reason"]) for v in rec.votes]

    assert votes() == [(True, None)]
    reason = els["reason"]["options"][REASONS.index("unclear")]
    action = {"action_id": els["reason"]["action_id"], "type": "static_select", "selected_option": reason}
    click(app, server, action, ephemeral=True)
    press("vote_down", user="U2")
    settle(app)
    (thanks_reason,) = [c["data"] for c in server.of("respond")]  # the click on an ephemeral message
    assert thanks_reason["text"] == escape_slack(msg("en", "thanks_reason", reason=msg("en", "reason.unclear")))
    # one vote per user and answer: U1 changed theirs and gave a reason; U2 voted too
    assert sorted(votes(), key=str) == sorted([(False, "unclear"), (False, None)], key=str)


def test_full_answer_buttons_post_one_result_whole_into_the_thread(make, server):
    """Issue 22: the top three in the message, each with its first fix; "Full answer N" posts result N whole in the
    answer's thread (an answer to /kb, which only the asker sees, gets it at the response_url)."""
    app, service = make()
    mention(app, QUESTION)
    settle(app)
    (answer,) = posts(server)
    assert R.problems(answer) == [] and not server.of("files.uploadV2") and not server.of("files.upload")
    rec = next(service.store.asks())
    ids = [r["id"] for r in rec.results]
    assert len(ids) == 3 and all(f"`{i}` · score" in flat(answer) for i in ids), "three results, in the message"
    assert sum(t.startswith("*1. ") for t in R._texts(answer["blocks"])) == 3, "each with its first fix"
    assert "Same settings in" not in flat(answer)
    expand = next(b for b in answer["blocks"] if b.get("block_id") == "kb_expand")
    labels = [e["text"]["text"] for e in expand["elements"]]
    assert labels == ["Full answer 1", "Full answer 2", "Full answer 3"]
    server.reset()
    e = expand["elements"][2]
    click(app, server, {"action_id": e["action_id"], "type": "button", "value": e["value"]})
    settle(app)
    (whole,) = posts(server)
    assert whole["thread_ts"] == "111.1" and R.problems(whole) == [] and f"`{ids[2]}`" in flat(whole)
    assert not [b for b in whole["blocks"] if b["type"] == "actions"], "a whole entry has no buttons"
    server.reset()
    click(app, server, {"action_id": e["action_id"], "type": "button", "value": e["value"]}, ephemeral=True)
    settle(app)
    (private,) = [c["data"] for c in server.of("respond")]
    assert private["response_type"] == "ephemeral" and f"`{ids[2]}`" in flat(private)


def test_dry_run_records_a_vote_as_the_reasons_select_would(fake_engine, tmp_path, server):
    service = AnswerService(
        Settings(feedback_db=str(tmp_path / "fb.sqlite"), allow_channels=["C7"]), engine=fake_engine
    )
    try:
        body = dry_run(service, QUESTION, reason="different_error")
        assert body["channel"] == "C7", "a dry run asks where the bot may answer"
        (rec,) = list(service.store.asks())
        assert rec.platform == "slack" and rec.channel == "C7"
        assert [(v["helpful"], v["reason"]) for v in rec.votes] == [(False, "different_error")]
    finally:
        service.close()


def test_buttons_of_messages_posted_before_the_neutral_ids_still_work(make, server):
    """Messages posted before issue 20 carry action ids kb_more / kb_vote_up ... with values "ask_id|lang"."""
    from bot.slack_bot import legacy_control

    assert legacy_control("kb_vote_down", "abc123|zh") == ("kb:vote:abc123:down:zh", None)
    assert legacy_control("kb_reason", "abc123|en|unclear") == ("kb:reason:abc123:en", "unclear")
    assert legacy_control("kb_lang", "abc123|zh") == ("kb:lang:abc123:zh", None)
    assert legacy_control("kb_more", "") is None and legacy_control("kb_more", "bad id!|en") is None
    app, service = make()
    mention(app, QUESTION)
    settle(app)
    (answer,) = posts(server)
    actions = next(b for b in answer["blocks"] if b["type"] == "actions")
    ask_id = parse_control_id(actions["elements"][0]["action_id"])[1]
    server.reset()
    click(app, server, {"action_id": "kb_vote_up", "type": "button", "value": f"{ask_id}|en"})
    click(app, server, {"action_id": "kb_more", "type": "button", "value": f"{ask_id}|en"})
    settle(app)
    (rec,) = [a for a in service.store.asks() if a.id == ask_id]
    assert [(v["helpful"], v["reason"]) for v in rec.votes] == [(True, None)]
    assert [p for p in posts(server) if p.get("thread_ts") == "111.1"], "the old more-results button answers"


# ---------------------------------------------------------------- Socket Mode, run, dry run, manifest


def test_socket_mode_slash_command(make, server):
    from slack_bolt.adapter.socket_mode import SocketModeHandler
    from slack_sdk.socket_mode.request import SocketModeRequest

    app, _ = make()
    handler = SocketModeHandler(app, app_token="xapp-test")
    try:
        sent = []
        handler.client.send_socket_mode_response = sent.append
        payload = {
            "command": COMMAND,
            "text": QUESTION,
            "user_id": "U1",
            "channel_id": "C1",
            "team_id": "T1",
            "response_url": f"{server.url}/respond/sm",
        }
        handler.handle(handler.client, SocketModeRequest(type="slash_commands", envelope_id="env-1", payload=payload))
        assert [r.envelope_id for r in sent] == ["env-1"]  # acknowledged over the socket
        settle(app)
        (answer,) = [c["data"] for c in server.of("respond")]
        assert header(answer).startswith("ZeRO-3")
    finally:
        handler.close()


def test_run_names_the_missing_token(monkeypatch):
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-set")
    with pytest.raises(SettingsError, match="SLACK_BOT_TOKEN") as e:
        run(Settings())
    assert "xapp-set" not in str(e.value) and "SLACK_APP_TOKEN" not in str(e.value)


def test_dry_run_is_the_exact_post_body(fake_engine, tmp_path, server):
    server.reset()
    service = AnswerService(Settings(feedback_db=str(tmp_path / "fb.sqlite")), engine=fake_engine)
    try:
        body = dry_run(service, QUESTION)
        assert set(body) == {"channel", "text", "blocks", "unfurl_links", "unfurl_media"}
        assert body["channel"] == "C0DRYRUN" and header(body).startswith("ZeRO-3")
        assert R.problems(body) == []
        with_config = dry_run(service, QUESTION, config_text=CONFIG, config_name="ds_config.json")
        assert "KB002" in flat(with_config)
        assert not server.calls  # no network
    finally:
        service.close()


def _manifest(mode: str) -> dict:
    text = MANIFEST.read_text()
    if mode == "all":
        text = re.sub(r"(?m)^(\s*)# mode all: (- \S+)", r"\1\2", text)
    return yaml.safe_load(text)


@pytest.mark.parametrize("mode", ["mention", "all"])
def test_manifest_lists_every_event_command_and_scope_the_app_uses(make, server, mode):
    m = _manifest(mode)
    events = set(m["settings"]["event_subscriptions"]["bot_events"])
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    wire = {"app_mention": {"app_mention"}, "message": {"message.channels", "message.groups"}}
    registered = registered_events(mode)
    assert events == set().union(*(wire[e] for e in registered))
    assert [c["command"] for c in m["features"]["slash_commands"]] == [COMMAND]
    assert m["settings"]["interactivity"]["is_enabled"] is True and m["settings"]["socket_mode_enabled"] is True
    base = {"app_mentions:read", "chat:write", "commands", "files:read", "files:write"}
    assert scopes == (base | {"channels:history", "groups:history"} if mode == "all" else base)
    # the app registers exactly these listeners: the events, the command and the buttons
    app, _ = make(mode=mode)
    assert len(app._listeners) == len(registered) + 1 + 1  # the events, the command, every button and select
    assert event(app, {"type": "reaction_added", "reaction": "+1"}).status == 404  # nothing else is listened to


# ---------------------------------------------------------------- the renderer, on any answer


# text with everything that could break a message: mrkdwn, entities, pings, fences, CJK, newlines
def num(lo: float, hi: float):
    return st.integers(int(lo * 10), int(hi * 10)).map(lambda x: x / 10)  # cheaper to draw than floats


ALPHABET = st.sampled_from(
    list("abcxyz_-.:/ 019") + ["\n", "<", ">", "&", "*", "`", "```", "<!everyone>", "<@U1>", "显存", "|"]
)
small = st.lists(ALPHABET, max_size=6).map("".join)
big = st.tuples(st.lists(ALPHABET, min_size=1, max_size=8).map("".join), st.integers(1, 10_000)).map(
    lambda t: (t[0] * (t[1] // len(t[0]) + 1))[: t[1]]
)
text_st = st.one_of(small, small, small, big)
line_st = st.lists(st.sampled_from(list("ab{}:\"'[], =#<>&") + ["  ", "x_y", "`", "```"]), max_size=8).map("".join)
# up to 200 lines, drawn cheaply: a few distinct lines repeated
snippet_st = st.one_of(
    st.none(),
    st.builds(
        lambda lines, n, lang: {"lang": lang, "code": "\n".join((lines * (n // len(lines) + 1))[:n])},
        st.lists(line_st, min_size=1, max_size=4),
        st.integers(1, 200),
        st.sampled_from(["json", "yaml", "python", "bash", "text"]),
    ),
)
fix_st = st.fixed_dictionaries({"title": text_st, "text": text_st, "params": st.just([]), "snippet": snippet_st})
source_st = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("code"),
            "url": st.none(),
            "package": st.sampled_from(["deepspeed", "transformers", "accelerate", "peft", "torch", "other"]),
            "version": st.sampled_from(["0.19.8", "5.24.0", "1.15.0"]),
            "file": st.sampled_from(["deepspeed/runtime/zero/stage3.py", "a b/c|d.py"]),
            "line": st.sampled_from(["113", "382-386", "?"]),
            "note": st.one_of(st.none(), text_st),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["docs", "issue"]),
            "url": st.sampled_from(["https://example.org/a|b>c", "https://x.org/" + "p" * 300, "javascript:alert(1)"]),
            "note": st.one_of(st.none(), text_st),
        }
    ),
)
param_st = st.fixed_dictionaries(
    {
        "id": text_st,
        "name": small,
        "package": st.just("deepspeed"),
        "version": st.just("0.19.8"),
        "kind": st.just("config_key"),
        "type": st.none(),
        "default": st.one_of(st.none(), small),
        "source_file": small,
        "source_line": st.integers(1, 9999),
        "deprecated": st.booleans(),
        "replacement": st.one_of(st.none(), small),
        "known": st.booleans(),
    }
)
myth_st = st.fixed_dictionaries(
    {"claim": text_st, "correction": text_st, "names": st.just([]), "touched": st.booleans()}
)
result_st = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["zero3-oom", "a", "x" * 40, "nvme-offload-setup"]),
        "title": text_st,
        "score": num(0, 1.3),
        "why": text_st,
        "summary": text_st,
        "area": st.just("memory"),
        "causes": st.lists(text_st, max_size=3),
        "fixes": st.lists(fix_st, max_size=4),
        "params": st.just([]),
        "param_facts": st.lists(param_st, max_size=4),
        "myths": st.lists(myth_st, max_size=3),
        "sources": st.lists(source_st, max_size=6),
        "applies_to": st.dictionaries(st.sampled_from(["deepspeed", "peft"]), small, max_size=2),
        "related": st.lists(small, max_size=2),
        "withdrawn": st.one_of(st.none(), small),
    }
)
finding_st = st.fixed_dictionaries(
    {
        "code": st.sampled_from(["KB001", "KB002"]),
        "severity": st.sampled_from(["error", "warning", "info"]),
        "path": text_st,
        "line": st.one_of(st.none(), st.integers(1, 500)),
        "message": text_st,
        "suggestion": st.one_of(st.none(), text_st),
        "entry": st.one_of(st.none(), small),
    }
)
term_st = st.fixed_dictionaries({"key": small, "label": text_st, "gib": num(0, 1e5)})
memory_st = st.fixed_dictionaries(
    {
        "model": small,
        "gpus": st.integers(1, 64),
        "gpu_mem_gib": num(1, 200),
        "gpu": st.lists(term_st, max_size=8),
        "gpu_total_gib": num(0, 1e5),
        "gpu_needed_gib": num(0, 1e5),
        "fits_gpu": st.booleans(),
        "host": st.lists(term_st, max_size=3),
        "host_total_gib": num(0, 1e5),
        "deepspeed_estimator_gib": st.one_of(st.none(), num(0, 1e5)),
        "changes": st.lists(
            st.fixed_dictionaries(
                {"change": text_st, "cost": small, "gpu_needed_gib": num(0, 1e4), "host_total_gib": num(0, 1e4)}
            ),
            max_size=4,
        ),
        "assumptions": st.lists(text_st, max_size=3),
        "notes": st.lists(text_st, max_size=2),
    }
)
note_st = st.fixed_dictionaries(
    {"kind": st.just("param"), "message": text_st, "verdict": st.sampled_from(["valid", "does-not-exist"])}
)


def _many(item, most: int):
    """0..most items drawn cheaply: a few drawn ones, repeated (results get distinct ids)."""

    def grow(t):
        items, n = t
        out = [dict(items[i % len(items)]) for i in range(n)] if items else []
        for i, it in enumerate(out):
            if "id" in it and "score" in it:
                it["id"] = f"{it['id']}-{i}"
        return out

    return st.tuples(st.lists(item, min_size=1, max_size=3), st.integers(0, most)).map(grow)


@st.composite
def answers(draw):
    results = draw(_many(result_st, 20))
    answered = bool(results) and draw(st.booleans() | st.just(True))
    closest = (
        []
        if answered
        else [{"id": r["id"], "title": r["title"], "score": r["score"], "closest": True} for r in results[:3]]
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "query": draw(text_st),
        "lang": draw(st.sampled_from(["en", "zh"])),
        "answered": answered,
        "results": results if answered else [],
        "closest": closest,
        "findings": draw(_many(finding_st, 30)),
        "notes": draw(st.lists(note_st, max_size=4)),
        "message": None if answered else draw(text_st),
        "config_facts": None,
        "memory": draw(st.one_of(st.none(), memory_st)),
    }


FENCE = re.compile(r"```\n(.*?)\n```", re.S)


def _check_body(body: dict, snippets: list[str]) -> None:
    assert R.problems(body) == [], R.problems(body)
    shown = {escape_slack(s.rstrip("\n")) for s in snippets}
    for t in R._texts(body["blocks"]):
        assert t.count("```") % 2 == 0  # every ``` opened is closed within the same text object
        for code in FENCE.findall(t):
            assert code in shown  # a snippet shown is shown whole
        for ping in ("<!", "<@", "<#"):
            assert ping not in t
    assert len(body["text"]) <= R.FALLBACK_MAX


@settings(max_examples=fuzz_examples(600, 20), deadline=None)  # about 0.2 s an example: 20 everyday, 600 with KB_FUZZ=1
@given(answers(), st.one_of(st.none(), st.just("abcdef0123456789")), st.sampled_from(["", "https://kb.example.org"]))
def test_any_answer_stays_within_every_slack_limit(answer, ask_id, site):
    """Within every Slack limit, and still the whole answer: each result (or closest entry) is named by its id in the
    blocks or in the attached file, and the same answer renders the same body."""
    kind = "answer" if answer["answered"] else "no_answer"
    body = R.render(Reply(kind, answer["lang"], answer=answer, ask_id=ask_id, site_base_url=site))
    assert R.render(Reply(kind, answer["lang"], answer=answer, ask_id=ask_id, site_base_url=site)) == body
    snippets = [f["snippet"]["code"] for r in answer["results"] for f in r["fixes"] if f["snippet"]]
    _check_body(body, snippets)
    shown = " ".join(R._texts(body["blocks"])) + (body.get("file") or {}).get("content", "")
    for r in answer["results"] + answer["closest"]:
        assert escape_slack(r["id"]) in shown, r["id"]
    if body.get("file"):
        assert any(b["type"] == "context" and "kb-answer-" in flat(b) for b in body["blocks"])  # the user is told
    reply = Reply("answer" if answer["answered"] else "no_answer", answer["lang"], answer=answer, ask_id=ask_id)
    again = R.render(reply.to_dict(), files=False)
    assert "file" not in again
    _check_body(again, snippets)


@settings(max_examples=fuzz_examples(300, 30), deadline=None)
@given(result_st, st.sampled_from(["en", "zh"]))
def test_any_entry_stays_within_every_slack_limit(result, lang):
    body = R.render(Reply("entry", lang, data={"lang": lang, "result": result}, site_base_url="https://kb.example.org"))
    _check_body(body, [f["snippet"]["code"] for f in result["fixes"] if f["snippet"]])


def test_a_snippet_too_long_for_one_block_goes_to_the_file_whole():
    code = "\n".join(f'  "key_{i}": {i},' for i in range(200))
    fix = {"title": "Long", "text": "t", "params": [], "snippet": {"lang": "json", "code": code}}
    result = {
        "id": "e1",
        "title": "Entry",
        "score": 0.9,
        "why": "w",
        "summary": "s",
        "area": "a",
        "causes": [],
        "fixes": [fix, {"title": "Short", "text": "t2", "params": [], "snippet": {"lang": "bash", "code": "ls"}}],
        "params": [],
        "param_facts": [],
        "myths": [],
        "applies_to": {},
        "related": [],
        "withdrawn": None,
        "sources": [
            {
                "type": "code",
                "url": None,
                "package": "peft",
                "version": "0.21.2",
                "file": "peft/tuners/lora/config.py",
                "line": "632-652",
                "note": None,
            }
        ],
    }
    a = {
        "schema_version": SCHEMA_VERSION,
        "query": "q",
        "lang": "en",
        "answered": True,
        "results": [result],
        "closest": [],
        "findings": [],
        "notes": [],
        "message": None,
        "config_facts": None,
        "memory": None,
    }
    # the entry in full (a "Full answer" click, /kb show): the snippet goes to the file, the other fix stays
    body = R.render(Reply("entry", "en", data={"kind": "show", "lang": "en", "result": result}))
    assert R.problems(body) == []
    assert code not in flat(body["blocks"])
    assert "\n".join("  " + ln for ln in code.splitlines()) in body["file"]["content"]  # whole (list-indented)
    assert "```\nls\n```" in "\n".join(R._texts(body["blocks"]))  # the other fix is still shown
    assert "https://github.com/huggingface/peft/blob/v0.21.2/src/peft/tuners/lora/config.py#L632-L652" in flat(body)
    assert "1 more part(s)" in flat(body) and "kb-e1.md" in flat(body) and "kb show" not in flat(body)
    # the compact answer shows the first fix with one line of its text instead: nothing is missing, no file
    body = R.render(Reply("answer", "en", answer=a, ask_id="a1"))
    assert R.problems(body) == [] and "file" not in body and code not in flat(body["blocks"])
    assert "*1. Long*\nt\n" + escape_slack(msg("en", "more_fixes", n=1)) in R._texts(body["blocks"])
    full = [e["action_id"] for b in body["blocks"] if b.get("block_id") == "kb_expand" for e in b["elements"]]
    assert full == ["kb:full:a1:1:en"]


def test_source_links_and_entry_links():
    src = {
        "type": "code",
        "package": "deepspeed",
        "version": "0.19.8",
        "file": "deepspeed/runtime/zero/stage3.py",
        "line": "840",
    }
    assert (
        code_url(src) == "https://github.com/deepspeedai/DeepSpeed/blob/v0.19.8/deepspeed/runtime/zero/stage3.py#L840"
    )
    tr = {
        "type": "code",
        "package": "transformers",
        "version": "5.24.0",
        "file": "transformers/trainer.py",
        "line": "1-2",
    }
    assert code_url(tr) == "https://github.com/huggingface/transformers/blob/v5.24.0/src/transformers/trainer.py#L1-L2"
    acc = {
        "type": "code",
        "package": "accelerate",
        "version": "1.15.0",
        "file": "accelerate/accelerator.py",
        "line": "9",
    }
    assert code_url(acc).startswith("https://github.com/huggingface/accelerate/blob/v1.15.0/src/accelerate/")
    assert code_url({"type": "docs", "url": "javascript:alert(1)"}) is None
    assert entry_url("https://kb.example.org/", "zh", "a-b") == "https://kb.example.org/zh/a-b/"
    assert entry_url("", "en", "a") is None


def test_reason_bodies_lint_and_memory():
    for kind in ("rate_limited", "refused", "error"):
        body = R.render(
            Reply(kind, "zh", message="<!here> 请 5 秒后再试", error_id="abc123" if kind == "error" else None)
        )
        assert R.problems(body) == [] and "<!here>" not in flat(body)
        assert ("abc123" in flat(body)) == (kind == "error")
    from kb.contract import lint_report
    from kb.doctor.engine import Finding
    from kb.memory.setup import report

    clean = lint_report("c.json", "deepspeed", "json", [], "en").to_dict()
    lint = R.render(Reply("lint", "en", data=clean))
    assert "nothing to flag" in flat(lint) and R.problems(lint) == []
    many = [Finding("KB005", "warning", "p", i, "m " * 400, None, None, "中 " * 400, None) for i in range(60)]
    lint = R.render(Reply("lint", "zh", data=lint_report("c.json", "deepspeed", "json", many, "zh").to_dict()))
    assert R.problems(lint) == [] and "中" in flat(lint) and "kb lint" in flat(lint)
    assert "m m m" not in flat(lint)  # the report in Chinese, not the English text beside it
    for lang in ("en", "zh"):
        body = R.render(
            Reply("memory", lang, data=report({"model": "llama2-7b", "gpus": 1, "stage": 3}, lang).to_dict())
        )
        assert R.problems(body) == [] and "GiB" in flat(body)
    zh = R.render(Reply("memory", "zh", data=report({"model": "llama2-7b"}, "zh").to_dict()))
    assert "放不下" in flat(zh) and "激活检查点 关" in flat(zh)
