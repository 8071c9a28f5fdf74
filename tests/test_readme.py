"""Every `kb ...` line of README's "Using it" block runs as written (on a copy of the fake-embedder index),
so the docs cannot drift from the code."""

import re
import shlex
import shutil

import pytest
from click.testing import CliRunner

from kb.cli import main
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
    assert {"ask", "lint", "factcheck", "mem", "stats", "show", "registry", "check", "build", "eval"} <= commands


@pytest.fixture(scope="module")
def readme_index(fake_index, tmp_path_factory):
    path = tmp_path_factory.mktemp("readme") / "index"
    shutil.copytree(fake_index, path, symlinks=True)
    return path


# a documented non-zero exit is a finding, not a failure: 1 = problem found, 3 = no confident answer
EXPECTED = {"lint": {1}, "factcheck": {1}, "mem": {1}, "ask": {0, 3}}


@pytest.mark.parametrize("cmd", EXAMPLES)
def test_readme_example_runs(cmd, readme_index, monkeypatch):
    monkeypatch.setenv("KB_INDEX", str(readme_index))
    monkeypatch.setenv("KB_EMBEDDER", "fake")
    monkeypatch.chdir(ROOT)
    argv = shlex.split(cmd)[1:]
    stdin = None
    if "<" in argv:
        i = argv.index("<")
        stdin = (ROOT / argv[i + 1]).read_bytes()
        argv = argv[:i]
    r = CliRunner().invoke(main, argv, input=stdin)
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{cmd}: {r.exception!r}\n{r.output}"
    assert r.exit_code in EXPECTED.get(argv[0], set()) | {0}, f"{cmd} exited {r.exit_code}:\n{r.output}"
    assert r.stdout.strip(), f"{cmd} printed nothing"
