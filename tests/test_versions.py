"""kb.registry.versions and `kb env`: the user's versions from a flag, pasted tool output, prose and the environment.

The fixtures in tests/fixtures/versions/ keep the exact line formats of pip freeze, pip list, ds_report
(with its colour codes), transformers env (4.x and 5.x) and accelerate env (0.x and 1.x), with other values.
"""

import importlib.metadata as md
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from cli.main import main
from kb.registry.versions import (
    Pin,
    Versions,
    VersionsError,
    merge,
    packages,
    parse_versions_arg,
    pick_release,
    same_release,
    satisfies,
    version_key,
    versions_from_environment,
    versions_from_text,
    with_origin,
)

FIX = Path(__file__).parent / "fixtures" / "versions"
# the sampled libraries (data/registry/<pkg>.jsonl) and the packages only a timeline records (the front ends)
PACKAGES = ("accelerate", "axolotl", "deepspeed", "llamafactory", "ms-swift", "peft", "torch", "transformers", "trl")
INSTALLED = ("accelerate", "deepspeed", "peft", "torch", "transformers")  # pyproject's registry extra


def test_packages_are_those_the_registry_records(registry):
    assert packages() == PACKAGES == tuple(sorted(registry.versions))


def found(name: str) -> Versions:
    return versions_from_text((FIX / name).read_text(encoding="utf-8"), origin="attachment")


def pins(v: Versions) -> dict[str, str]:
    return {p: v[p] for p in v}


def sources(v: Versions) -> set[str]:
    return {p.source for p in (*v.pins.values(), *v.facts.values())}


# ---------------------------------------------------------------- tool output


@pytest.mark.parametrize(
    "fixture, source, want, facts",
    [
        (
            "pip-freeze.txt",
            "pip-freeze",
            {
                "deepspeed": "0.14.4",
                "transformers": "4.46.3",
                "accelerate": "0.34.2",
                "peft": "0.12.0",
                "torch": "2.4.0+cu121",
                "trl": "0.11.4",  # a front end the timeline records (data/registry/timeline/trl.json)
            },
            {"cuda": "12.1", "nccl": "2.20.5"},
        ),
        (
            "pip-list.txt",
            "pip-list",
            {
                "deepspeed": "0.15.4",
                "transformers": "4.45.2",
                "accelerate": "1.0.1",
                "peft": "0.13.2",
                "torch": "2.5.1",
            },
            {"nccl": "2.21.5"},
        ),
        (
            "ds_report.txt",
            "ds_report",
            {"deepspeed": "0.14.4", "torch": "2.4.0+cu121"},
            {"cuda": "12.1", "nvcc": "12.4"},
        ),
        (
            "transformers-env-4.txt",
            "transformers-env",
            {"transformers": "4.46.3", "accelerate": "1.1.1", "torch": "2.4.0+cu121"},
            {"python": "3.10.14", "cuda": "12.1"},
        ),
        (
            "transformers-env-5.txt",
            "transformers-env",
            {"transformers": "5.2.0", "accelerate": "1.11.0", "deepspeed": "0.18.1", "torch": "2.9.0+cu128"},
            {"python": "3.12.7", "cuda": "12.8"},
        ),
        (
            "accelerate-env-0.txt",
            "accelerate-env",
            {"accelerate": "0.34.2", "torch": "2.4.0+cu121"},
            {"python": "3.10.14", "cuda": "12.1"},
        ),
        (
            "accelerate-env-1.txt",
            "accelerate-env",
            {"accelerate": "1.10.1", "torch": "2.8.0+cu126"},
            {"python": "3.12.7", "cuda": "12.6"},
        ),
    ],
)
def test_each_tool_output_is_read_exactly(fixture, source, want, facts):
    v = found(fixture)
    assert pins(v) == want
    assert {k: p.version for k, p in v.facts.items()} == facts
    assert sources(v) == {source}
    assert not v.conflicts and not v.ambiguous
    lines = (FIX / fixture).read_text(encoding="utf-8").splitlines()
    for p in v.pins.values():  # each pin names the line it came from, and that line holds the version
        assert p.line_no and p.version.split("+")[0] in lines[p.line_no - 1] and p.origin == "attachment"


def test_freeze_skips_lookalikes_editables_and_urls():
    v = found("pip-freeze.txt")
    assert "transformers" in v and v["transformers"] == "4.46.3"  # not sentence-transformers==3.0.1
    assert v["torch"] == "2.4.0+cu121"  # not torchvision
    assert v.pins["torch"].public == "2.4.0"
    text = "-e git+https://github.com/microsoft/DeepSpeed@abc#egg=deepspeed\ntransformers @ file:///src/transformers\n"
    assert not versions_from_text(text)


def test_ds_report_colour_and_compiled_against_line_are_not_pins():
    v = found("ds_report.txt")
    # "deepspeed wheel compiled w. ...... torch 2.4, cuda 12.1" is what the wheel was built with, not the install
    assert v["torch"] == "2.4.0+cu121" and v.facts["nvcc"].version == "12.4"
    assert "\x1b" in (FIX / "ds_report.txt").read_text(encoding="utf-8")


def test_several_pastes_in_one_text_keep_their_own_source():
    text = (FIX / "transformers-env-4.txt").read_text() + (FIX / "ds_report.txt").read_text()
    v = versions_from_text(text)
    assert v.pins["transformers"].source == "transformers-env" and v.pins["deepspeed"].source == "ds_report"
    assert v["torch"] == "2.4.0+cu121" and not v.conflicts


def test_env_lines_without_their_header_are_not_guessed():
    # "- PyTorch version (GPU?)" is printed by both transformers 4.x and accelerate 0.x: whose is it?
    assert not versions_from_text("- PyTorch version (GPU?): 2.4.0+cu121 (True)\n- Python version: 3.10.14")
    # a key only transformers env prints says whose block it is
    v = versions_from_text("- Safetensors version: 0.4.5\n- PyTorch version (GPU?): 2.4.0+cu121 (True)")
    assert v["torch"] == "2.4.0+cu121" and v.pins["torch"].source == "transformers-env"


def test_not_installed_values_are_skipped():
    text = "- `transformers` version: 4.46.3\n- Accelerate version: not installed\n- PyTorch version (GPU?): not installed (NA)"
    assert pins(versions_from_text(text)) == {"transformers": "4.46.3"}


# ---------------------------------------------------------------- prose


@pytest.mark.parametrize(
    "query, want",
    [
        ("zero3 OOM with transformers 4.46", {"transformers": "4.46"}),
        ("deepspeed v0.14.4 hangs at init", {"deepspeed": "0.14.4"}),
        ("ds 0.14 zero3 offload", {"deepspeed": "0.14"}),
        ("I pinned accelerate==0.34 and it broke", {"accelerate": "0.34"}),
        ("accelerate==0.34", {"accelerate": "0.34"}),  # alone on a line but partial: typed, not pip output
        ("deepspeed version 0.15.1, peft 0.12.0", {"deepspeed": "0.15.1", "peft": "0.12.0"}),
        ("PyTorch 2.4.0+cu121", {"torch": "2.4.0+cu121"}),
        ("transformers 4.46.x", {"transformers": "4.46"}),
        ("transformers版本是4.46.3，训练报错", {"transformers": "4.46.3"}),
        ("用的 deepspeed 0.15，ZeRO-3 卡住", {"deepspeed": "0.15"}),
        ("deepspeed 的版本为 0.14.4。", {"deepspeed": "0.14.4"}),
        ("用的transformers4.46和peft 0.13", {"transformers": "4.46", "peft": "0.13"}),
    ],
)
def test_versions_named_in_prose(query, want):
    v = versions_from_text(query)
    assert pins(v) == want
    assert sources(v) == {"query"}


def test_partial_prose_versions_are_marked_partial():
    v = versions_from_text("transformers 4.46 and deepspeed 0.14.4")
    assert v.pins["transformers"].partial and not v.pins["deepspeed"].partial


@pytest.mark.parametrize(
    "query",
    [
        "ZeRO-3 OOM on the first step",
        "Llama-7B on one A100 80G",
        "stage 3 with bf16",
        "it broke on 2024-06-01 after an upgrade",
        "sentence-transformers 3.0.1 and torchvision 0.19.0",
        "torch_npu 2.1.0 on Ascend",
        "transformers>=4.46 is required",  # a requirement, not the user's version
        "transformers 2024.06",  # a date next to a name
        "deepspeed stage 3",
        "ds_config.json with zero 3",
        "Qwen2.5-72B with transformers",
        "transformers 4",  # a major alone is not enough
    ],
)
def test_not_versions(query):
    v = versions_from_text(query)
    assert not v and not v.ambiguous


def test_cuda_python_nccl_are_facts_not_pins():
    v = versions_from_text("CUDA 12.1, python 3.10, NCCL 2.18.1 on 8x A100 80G")
    assert not v.pins
    assert {k: p.version for k, p in v.facts.items()} == {"cuda": "12.1", "python": "3.10", "nccl": "2.18.1"}


@pytest.mark.parametrize(
    "query",
    [
        "transformers 4.46 or 4.47",
        "from transformers 4.46 to 4.48",
        "transformers 4.46 -> 4.48",
        "transformers 4.46 还是 4.47",
        "transformers 4.46 ... later transformers 4.48",
    ],
)
def test_two_versions_of_one_package_in_prose_give_nothing(query):
    v = versions_from_text(query)
    assert "transformers" not in v
    assert "transformers" in v.ambiguous and len({p.version for p in v.ambiguous["transformers"]}) == 2


def test_compatible_prose_mentions_are_not_ambiguous():
    v = versions_from_text("transformers 4.46 (transformers 4.46.3 exactly)")
    assert v["transformers"] == "4.46.3" and not v.ambiguous and not v.conflicts


def test_tool_output_beats_prose_and_the_conflict_is_kept():
    text = "on transformers 4.45 I think\n" + (FIX / "pip-freeze.txt").read_text()
    v = versions_from_text(text)
    assert v["transformers"] == "4.46.3"
    (c,) = v.conflicts
    assert (
        c.name == "transformers"
        and c.kept.source == "pip-freeze"
        and (c.dropped.source, c.dropped.version) == ("query", "4.45")
    )
    assert c.dropped.line_no == 1


def test_two_tool_outputs_that_disagree_keep_the_first_and_record_it():
    text = "torch==2.4.0+cu121\ndeepspeed==0.14.4\n" + (FIX / "accelerate-env-1.txt").read_text()
    v = versions_from_text(text)
    assert v["torch"] == "2.4.0+cu121"
    assert [(c.name, c.kept.version, c.dropped.version) for c in v.conflicts] == [
        ("torch", "2.4.0+cu121", "2.8.0+cu126"),
        ("cuda", "12.1", "12.6"),
    ]


# ---------------------------------------------------------------- --versions


def test_versions_arg_forms():
    v = parse_versions_arg("deepspeed==0.14.4 transformers==4.46.3")
    assert pins(v) == {"deepspeed": "0.14.4", "transformers": "4.46.3"} and sources(v) == {"flag"}
    w = parse_versions_arg("DS=0.14, PyTorch==2.4.0+cu121;peft==v0.12.0")
    assert pins(w) == {"deepspeed": "0.14", "torch": "2.4.0+cu121", "peft": "0.12.0"}
    assert w.pins["deepspeed"].partial and w.as_pins() == {"deepspeed": "0.14", "peft": "0.12.0", "torch": "2.4.0"}


@pytest.mark.parametrize(
    "arg, token, key",
    [
        ("deepspeed==0.14.4 foo==1.0", "foo==1.0", "versions.unknown_package"),
        ("transformers==latest", "transformers==latest", "versions.bad_version"),
        ("transformers==4", "transformers==4", "versions.bad_version"),
        ("deepspeed 0.14.4", "deepspeed", "versions.bad_token"),
        ("transformers>=4.46", "transformers>=4.46", "versions.bad_token"),
        ("torch==2.4.0 torch==2.5.0", "torch==2.5.0", "versions.twice"),
    ],
)
def test_bad_versions_arg_names_the_token(arg, token, key):
    with pytest.raises(VersionsError) as e:
        parse_versions_arg(arg)
    assert e.value.key == key and e.value.token == token
    assert repr(token) in str(e.value) and repr(token) in e.value.text("zh")
    assert e.value.text("zh") != str(e.value)


def test_empty_versions_arg_lists_what_is_accepted():
    with pytest.raises(
        ValueError, match="accelerate, axolotl, deepspeed, llamafactory, ms-swift, peft, torch, transformers, trl"
    ):
        parse_versions_arg("  ")


# ---------------------------------------------------------------- environment and merging


def test_environment_reads_installed_metadata():
    v = versions_from_environment()
    for pkg in INSTALLED:
        assert v[pkg] == md.version(pkg)
        assert v.pins[pkg].source == "environment"
    assert v["torch"].endswith("+cpu") and "+" not in v.as_pins()["torch"]  # label kept for display only
    assert v.facts["python"].version == ".".join(map(str, sys.version_info[:3]))


def test_reading_the_environment_imports_nothing_heavy():
    code = (
        "import sys, kb.registry.versions as v; v.versions_from_environment(); v.versions_from_text('torch==2.4.0');"
        "print(sorted(m for m in ('torch', 'deepspeed', 'transformers', 'kb.registry.store', 'click', 'indexer') if m in sys.modules))"
    )
    out = subprocess.check_output([sys.executable, "-c", code], cwd=Path(__file__).parent.parent, text=True)
    assert out.strip() == "[]"


def test_merge_order_flag_attachment_query_environment():
    env = versions_from_environment()
    query = versions_from_text("deepspeed 0.13.5 and transformers 4.44 and peft 0.11.1")
    attach = found("pip-freeze.txt")
    flag = parse_versions_arg("deepspeed==0.15.0")
    m = merge(env, query, attach, flag)  # argument order does not matter: origin does
    assert m["deepspeed"] == "0.15.0" and m.pins["deepspeed"].origin == "flag"
    assert m["transformers"] == "4.46.3" and m.pins["transformers"].origin == "attachment"
    assert m["peft"] == "0.12.0"  # the attachment's pip freeze beats the query's 0.11.1
    m2 = merge(env, versions_from_text("peft 0.11.1"))
    assert m2["peft"] == "0.11.1" and m2.pins["peft"].origin == "query"
    kept = {(c.name, c.kept.origin, c.dropped.origin) for c in m.conflicts}
    assert ("deepspeed", "flag", "attachment") in kept and ("peft", "attachment", "query") in kept


def test_merge_refines_a_partial_version_without_a_conflict():
    m = merge(parse_versions_arg("transformers==4.46"), found("pip-freeze.txt"))
    assert m["transformers"] == "4.46.3" and not [c for c in m.conflicts if c.name == "transformers"]


def test_merge_settles_an_ambiguous_name():
    m = merge(versions_from_text("transformers 4.46 or 4.47"), parse_versions_arg("transformers==4.47.1"))
    assert m["transformers"] == "4.47.1" and not m.ambiguous


def test_with_origin_rejects_unknown():
    assert with_origin(versions_from_text("peft 0.12.0"), "attachment").pins["peft"].origin == "attachment"
    with pytest.raises(ValueError, match="unknown origin"):
        with_origin(Versions(), "chat")


def test_to_dict_shape():
    d = merge(found("ds_report.txt"), versions_from_text("transformers 4.46 or 4.47")).to_dict()
    assert list(d) == ["packages", "facts", "conflicts", "ambiguous"]
    assert d["packages"]["torch"] == {
        "version": "2.4.0+cu121",
        "public": "2.4.0",
        "partial": False,
        "source": "ds_report",
        "origin": "attachment",
        "line": "torch version .................... 2.4.0+cu121",
        "line_no": 21,
    }
    assert [p["version"] for p in d["ambiguous"]["transformers"]] == ["4.46", "4.47"]
    json.dumps(d)


# ---------------------------------------------------------------- matching


@pytest.mark.parametrize(
    "version, spec, some, every",
    [
        ("2.4.0+cu121", ">=2.4", True, True),
        ("2.4.0+cu121", "<2.4", False, False),
        ("4.47.0.dev0", ">=4.46", True, True),
        ("4.46.3", "", True, True),
        ("4.46", ">=4.46,<4.47", True, True),
        ("4.46", ">=4.46.2", True, False),  # 4.46.0 and 4.46.1 do not, 4.46.2+ do
        ("4.46", "<4.46.1", True, False),
        ("4.46", "==4.46.3", True, False),
        ("4.46", "!=4.46.3", True, False),
        ("4.46", ">=4.47", False, False),
        ("4.46", "<4.46", False, False),
        ("4.46", "==4.46.*", True, True),
        ("0.14", "~=0.14.4", True, False),
    ],
)
def test_satisfies(version, spec, some, every):
    assert satisfies(version, spec) is some
    assert satisfies(version, spec, strict=True) is every


def test_satisfies_uses_the_pins_partial_flag():
    exact = versions_from_text("pip list output:\ntransformers==4.46.0\ndeepspeed==0.14.4").pins["transformers"]
    assert not exact.partial and not satisfies(exact, ">=4.46.2")
    assert satisfies(Pin("transformers", "4.46", "query"), ">=4.46.2")
    with pytest.raises(ValueError, match="invalid version specifier"):
        satisfies("4.46.3", "4.46 or newer")


@pytest.mark.parametrize(
    "version, want",
    [
        ("0.14.4", "0.14.4"),
        ("0.14.5", "0.14.4"),
        ("0.14", "0.14.4"),  # the newest recorded 0.14.x
        ("0.15", "0.14.4"),  # nothing recorded in 0.15: the newest below
        ("0.13.1", "0.12.6"),
        ("0.9.0", "0.12.6"),  # older than all: the oldest
        ("0.19.8+cpu", "0.19.8"),
        ("1.0", "0.19.8"),
    ],
)
def test_pick_release(version, want):
    assert pick_release(version, ["0.19.8", "0.12.6", "0.14.0", "0.14.4"]) == want


def test_pick_release_of_nothing():
    assert pick_release("1.0.0", []) is None


def test_version_key_orders_as_packaging_does():
    """The one order of kb.registry: numbers by value (0.9 < 0.14), pre-releases before their release,
    local labels ignored. The hand-written key it replaces put 1.0.0rc1 level with 1.0.0 and 0.19.8+cpu after it."""
    texts = ["0.14.4", "0.9.0", "1.0.0", "1.0.0rc1", "0.19.8+cpu", "0.19.8.dev0", "0.14.10"]
    assert sorted(texts, key=version_key) == [
        "0.9.0",
        "0.14.4",
        "0.14.10",
        "0.19.8.dev0",
        "0.19.8+cpu",
        "1.0.0rc1",
        "1.0.0",
    ]
    assert version_key("0.19.8+cpu") == version_key("0.19.8")


@pytest.mark.parametrize("text", ["latest", "0.14.x", "", "v-1"])
def test_version_key_refuses_what_packaging_cannot_read(text):
    with pytest.raises(ValueError, match=f"{text!r} is not a version"):
        version_key(text)


@pytest.mark.parametrize(
    "version, release, same",
    [
        ("0.14.4", "0.14.4", True),
        ("2.4.0+cu121", "2.4.0", True),  # a local label is the same release
        ("4.46", "4.46.3", True),  # a partial version: its series
        ("4.46.2", "4.46.3", False),
        ("4.47.0.dev0", "4.47.0", False),
        ("1.0.0rc1", "1.0.0", False),
        ("4.4", "4.46.3", False),  # by number, not by text
    ],
)
def test_same_release(version, release, same):
    assert same_release(version, release) is same


@given(
    pkg=st.sampled_from(PACKAGES),
    release=st.lists(st.integers(0, 99), min_size=3, max_size=3),
    local=st.sampled_from(["", "+cu121", "+cpu"]),
    sep=st.sampled_from(["==", " ", " v", " version ", "版本是", " 的版本为 "]),
    noise=st.sampled_from(["", "zero3 OOM, ", "ZeRO-3 在 A100 80G 上，", "Llama-7B bf16 stage 3; "]),
)
def test_property_a_named_version_is_read_back(pkg, release, local, sep, noise):
    ver = ".".join(map(str, release)) + local
    v = versions_from_text(f"{noise}{pkg}{sep}{ver} please help")
    assert pins(v) == {pkg: ver}
    assert parse_versions_arg(f"{pkg}=={ver}")[pkg] == ver
    assert satisfies(ver, f"=={'.'.join(map(str, release))}")


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .-_=:,/zeroZeRO版本显存", max_size=80))
def test_property_text_without_package_names_gives_no_pins(text):
    names = ("deepspeed", "transformers", "accelerate", "peft", "torch", "ds", "pytorch")
    if any(n in text.lower() for n in names):
        return
    assert not versions_from_text(text).pins


# ---------------------------------------------------------------- kb env


def run(*args, **kw):
    return CliRunner().invoke(main, ["env", *args], **kw)


def test_kb_env_shows_the_environment():
    r = run()
    assert r.exit_code == 0, r.output
    assert "current environment" in r.output
    for pkg in INSTALLED:
        assert f"{pkg} " in r.output and md.version(pkg) in r.output
    zh = run("--lang", "zh")
    assert "当前环境" in zh.output and md.version("deepspeed") in zh.output


def test_kb_env_json():
    r = run("--json")
    assert r.exit_code == 0
    d = json.loads(r.output)
    assert d["from"] == "environment" and d["packages"]["deepspeed"]["version"] == md.version("deepspeed")


def test_kb_env_from_file_and_stdin():
    r = run("--from", str(FIX / "transformers-env-4.txt"))
    assert r.exit_code == 0
    assert "transformers  4.46.3" in r.output and "line 4: - `transformers` version: 4.46.3" in r.output
    r = run("--from", "-", "--json", input=(FIX / "pip-list.txt").read_bytes())
    d = json.loads(r.output)
    assert r.exit_code == 0 and d["from"] == "<stdin>" and d["packages"]["deepspeed"]["version"] == "0.15.4"
    assert d["packages"]["deepspeed"]["origin"] == "attachment"


def test_kb_env_from_text_with_nothing_in_it():
    r = run("--from", "-", input="Llama-7B on A100 80G with ZeRO-3\n")
    assert r.exit_code == 0 and "No version of accelerate, axolotl, deepspeed" in r.output


def test_kb_env_flag_wins_and_conflicts_are_shown():
    r = run("--from", str(FIX / "pip-freeze.txt"), "--versions", "deepspeed==0.15.1")
    assert r.exit_code == 0
    assert (
        "deepspeed     0.15.1" in r.output
        and "deepspeed: using 0.15.1 (flag, deepspeed==0.15.1), not 0.14.4" in r.output
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--from", "/nonexistent/freeze.txt"], "cannot read"),
        (["--from", str(FIX)], "is a folder"),
        (["--versions", "deepspeed==0.14.4 foo==1.0"], "'foo==1.0'"),
    ],
)
def test_kb_env_bad_input_exits_2(args, message):
    r = run(*args)
    assert r.exit_code == 2 and message in r.output
    j = run(*args, "--json")
    assert j.exit_code == 2 and message in json.loads(j.output)["error"]


def test_kb_env_undecodable_and_empty_input_exit_2():
    r = run("--from", "-", input=b"\xff\xfe\x00garbage")
    assert r.exit_code == 2 and "not UTF-8" in r.output
    r = run("--from", "-", "--lang", "zh", input=b"  \n")
    assert r.exit_code == 2 and "内容为空" in r.output


def test_kb_env_bad_versions_in_chinese():
    r = run("--versions", "deepspeed=最新", "--lang", "zh")
    assert r.exit_code == 2 and "不是版本号" in r.output


def test_kb_env_help():
    r = run("--help")
    assert r.exit_code == 0 and "--from" in r.output and "--versions" in r.output


def test_a_long_line_is_cut_around_the_version():
    line = "x " * 5000 + "deepspeed 0.14.4 hangs " + "y " * 5000
    pin = versions_from_text(line).pins["deepspeed"]
    assert "deepspeed 0.14.4" in pin.line and len(pin.line) < 200 and pin.line.startswith("…")


def test_kb_env_shows_a_partial_version_as_a_series():
    r = run("--from", "-", input="用的 deepspeed 0.15\n")
    assert r.exit_code == 0 and "any 0.15.x" in r.output and "query, line 1: 用的 deepspeed 0.15" in r.output
    zh = run("--from", "-", "--lang", "zh", input="用的 deepspeed 0.15\n")
    assert "0.15.x 中任一版本" in zh.output and "第 1 行：用的 deepspeed 0.15" in zh.output


def test_a_pip_list_table_ends_where_its_rows_do():
    text = (FIX / "pip-list.txt").read_text() + "and then transformers 4.46 crashes\n"
    v = versions_from_text(text)
    assert v["transformers"] == "4.45.2" and v.pins["transformers"].source == "pip-list"
    (c,) = v.conflicts  # the prose line after the table is prose, and disagrees with the table
    assert (c.dropped.source, c.dropped.version, c.dropped.line_no) == ("query", "4.46", 13)


def test_kb_env_without_a_registry_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("KB_DATA", str(tmp_path))
    r = run("--json")
    assert r.exit_code == 2 and "no parameter registry" in json.loads(r.output)["error"]
    assert "没有参数注册表" in run("--lang", "zh").output
