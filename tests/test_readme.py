"""Every `kb ...` line of README's "Using it" block runs as written (on a copy of the fake-embedder index),
so the docs cannot drift from the code."""

import json
import re
import shlex
import shutil

import pytest
from click.testing import CliRunner

from cli.main import main
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _examples() -> list[str]:
    block = re.search(r"## Using it.*?```bash\n(.*?)```", README, re.S)
    assert block, "README has no ```bash block under '## Using it'"
    lines = []
    for raw in block.group(1).splitlines():
        cmd = raw.split("  #", 1)[0].strip()
        if cmd.startswith("kb "):
            lines.append(cmd)
    return lines


EXAMPLES = _examples()


def test_readme_has_examples_for_every_command():
    commands = {shlex.split(c)[1] for c in EXAMPLES}
    assert {
        "ask",
        "lint",
        "factcheck",
        "mem",
        "stats",
        "show",
        "registry",
        "check",
        "build",
        "eval",
        "export",
    } <= commands


@pytest.fixture(scope="module")
def readme_index(fake_index, tmp_path_factory):
    path = tmp_path_factory.mktemp("readme") / "index"
    shutil.copytree(fake_index, path, symlinks=True)
    return path


# a documented non-zero exit is a finding, not a failure: 1 = problem found, 3 = no confident answer
EXPECTED = {"lint": {1}, "factcheck": {1}, "mem": {1}, "ask": {0, 3}}


# slow (left out of `pytest -m "not slow"`): `kb export` builds the whole site, `kb check` checks every shipped entry
@pytest.mark.parametrize(
    "cmd", [pytest.param(c, marks=pytest.mark.slow) if c in ("kb check", "kb export site/") else c for c in EXAMPLES]
)
def test_readme_example_runs(cmd, readme_index, monkeypatch, tmp_path):
    monkeypatch.setenv("KB_INDEX", str(readme_index))
    monkeypatch.setenv("KB_EMBEDDER", "fake")
    monkeypatch.chdir(ROOT)
    argv = shlex.split(cmd)[1:]
    if argv[0] == "export":
        pytest.importorskip("jinja2")
        pytest.importorskip("pagefind")
        argv[1] = str(tmp_path / "site")  # not into the checkout
    stdin = None
    if "<" in argv:
        i = argv.index("<")
        stdin = (ROOT / argv[i + 1]).read_bytes()
        argv = argv[:i]
    r = CliRunner().invoke(main, argv, input=stdin)
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{cmd}: {r.exception!r}\n{r.output}"
    assert r.exit_code in EXPECTED.get(argv[0], set()) | {0}, f"{cmd} exited {r.exit_code}:\n{r.output}"
    assert r.stdout.strip(), f"{cmd} printed nothing"


def _bot_examples() -> list[str]:
    block = re.search(r"## Chat bots.*?```bash\n(.*?)```", README, re.S)
    assert block, "README has no ```bash block under '## Chat bots'"
    out = []
    for raw in block.group(1).splitlines():
        cmd = raw.split("  #", 1)[0].strip()
        if cmd.startswith("kb ") and ("--dry-run" in cmd or "--check" in cmd or cmd.split()[1] in ("gaps", "feedback")):
            out.append(cmd)  # the lines that need no token (starting a bot needs one)
    return out


BOT_EXAMPLES = _bot_examples()


def test_bot_examples_cover_dry_runs_check_gaps_and_export():
    text = " ".join(BOT_EXAMPLES)
    assert "bot discord --dry-run" in text and "bot slack --dry-run" in text and "--check" in text
    assert "kb gaps" in text and "kb feedback export" in text


@pytest.mark.parametrize("cmd", BOT_EXAMPLES)
def test_readme_bot_example_runs(cmd, readme_index, monkeypatch, tmp_path):
    """In a fresh folder holding examples/, a settings file and a feedback database the bots filled."""
    pytest.importorskip("discord")
    pytest.importorskip("slack_bolt")
    from bot.feedback import SQLiteStore

    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "kb-bot.toml").write_text('[bot]\nmode = "mention"\n')
    store = SQLiteStore(tmp_path / "kb-feedback.sqlite")
    ask = store.record_ask(
        {"query": "how to train a diffusion model", "lang": "en", "answered": False, "closest": []}, "test", "c", "u"
    )
    store.record_vote(ask, False, "unclear", "u")
    monkeypatch.setenv("KB_INDEX", str(readme_index))
    monkeypatch.setenv("KB_EMBEDDER", "fake")
    for name in ("DISCORD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"):
        monkeypatch.setenv(name, "test-token")
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, shlex.split(cmd)[1:])
    assert r.exit_code == 0, f"{cmd} exited {r.exit_code}:\n{r.output}"
    assert (r.stdout.strip() or "--out" in cmd) and "test-token" not in r.output
    if "--dry-run" in cmd:
        body = json.loads(r.stdout)
        assert ("blocks" in body) if "slack" in cmd else ("embeds" in body or "content" in body)
    if "feedback export" in cmd:
        assert json.loads((tmp_path / "feedback.jsonl").read_text().splitlines()[0])["votes"]


def test_ci_runs_exactly_the_readme_test_command():
    """README's second Quickstart command is the command `.ci/run` runs (the two cannot drift apart)."""
    quick = re.search(r"## Quickstart(.*?)## Using it", README, re.S).group(1)
    commands = re.findall(r"```bash\n(.*?)\n```", quick, re.S)
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines() if ln.startswith("python3 ")]
    assert len(commands) >= 2 and ci == [commands[1]]
    assert "ruff check ." in ci[0] and "ruff format --check ." in ci[0] and "kb check" in ci[0]
