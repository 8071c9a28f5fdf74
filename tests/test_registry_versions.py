"""The registry over releases: views for a user's versions, spellings, and answers that use them.

Synthetic format-1 records (one per id and release) are merged by the loader exactly as the
committed format-2 files are; the tests below pin the behaviour of the views on them.
"""

from __future__ import annotations

import pytest

from kb.contract import SCHEMA_VERSION
from kb.registry.releases import UserVersion, applies, pins, respell, spelling_fact, version_notes
from kb.registry.store import Registry, RegistryError
from kb.registry.versions import satisfies

RELEASES = ("4.46.3", "4.57.6", "5.24.0")


def rec(path: str, version: str, **kw) -> dict:
    pkg = kw.pop("package", "transformers")
    base = dict(
        id=f"{pkg}:{path}",
        kind="field",
        name=path.rsplit(".", 1)[-1],
        path=path,
        package=pkg,
        version=version,
        type="bool",
        default="false",
        aliases=[],
        choices=None,
        constraints=None,
        deprecated=False,
        replacement=None,
        noop=False,
        status="active",
        validated=False,
        forbids_unknown=None,
        doc=None,
        source_file="transformers/training_args.py",
        source_line=100,
    )
    base.update(kw)
    return base


@pytest.fixture(scope="module")
def reg() -> Registry:
    rs = []
    for v in RELEASES:  # gradient_checkpointing everywhere, deprecated in 5.x; activation_checkpointing new in 5.x
        rs.append(rec("TrainingArguments.gradient_checkpointing", v, deprecated=v.startswith("5")))
    rs.append(rec("TrainingArguments.activation_checkpointing", "5.24.0"))
    for v in RELEASES[:2]:  # removed in 5.x
        rs.append(rec("TrainingArguments.evaluation_strategy", v, source_line=200 if v == "4.46.3" else 210))
    for v in ("0.14.4", "0.19.4", "0.19.8"):  # default changed in the newest
        rs.append(
            rec(
                "zero_optimization.offload_optimizer.pin_memory",
                v,
                package="deepspeed",
                kind="config_key",
                default="true" if v == "0.19.8" else "false",
                source_file="deepspeed/runtime/zero/offload_config.py",
            )
        )
    r = Registry(rs)
    for x in r._all:  # the merge records renames; the synthetic set says it here
        if x["id"].endswith("gradient_checkpointing"):
            x["renamed_to"] = "transformers:TrainingArguments.activation_checkpointing"
        if x["id"].endswith("activation_checkpointing"):
            x["renamed_from"] = ["transformers:TrainingArguments.gradient_checkpointing"]
    return Registry(r._all)


def test_merge_keeps_one_record_per_id_with_history(reg):
    r = next(x for x in reg._all if x["id"] == "deepspeed:zero_optimization.offload_optimizer.pin_memory")
    assert r["releases"] == ["0.14.4", "0.19.4", "0.19.8"]
    assert r["default"] == "true" and r["version"] == "0.19.8"
    assert r["history"] == {"0.14.4": {"default": "false"}, "0.19.4": {"default": "false"}}
    assert reg.releases["transformers"] == list(RELEASES)


def test_default_view_is_newest_and_keeps_removed_names_findable(reg):
    assert reg.get("deepspeed:zero_optimization.offload_optimizer.pin_memory")["default"] == "true"
    lk = reg.resolve("evaluation_strategy")
    assert lk.status == "removed" and lk.record["until"] == "4.57.6"


def test_view_at_a_release_has_that_release_values(reg):
    old = reg.at({"deepspeed": "0.14.4"})
    assert old.get("deepspeed:zero_optimization.offload_optimizer.pin_memory")["default"] == "false"
    assert old.versions["deepspeed"] == "0.14.4" and old.pins == {"deepspeed": "0.14.4"}
    # between recorded releases: the nearest one at or below; older than all: the oldest
    assert reg.at({"deepspeed": "0.19.5"}).pins == {"deepspeed": "0.19.4"}
    assert reg.at({"deepspeed": "0.10.0"}).pins == {"deepspeed": "0.14.4"}
    assert reg.at({"transformers": "4.46"}).pins == {"transformers": "4.46.3"}  # a partial version: its series
    assert reg.at({}) is reg and reg.at({"deepspeed": "0.14.4"}) is old  # views are cached


def test_names_of_other_releases_are_absent_not_unknown(reg):
    v4 = reg.at({"transformers": "4.46.3"})
    lk = v4.resolve("activation_checkpointing")
    assert lk.status == "absent" and lk.record["absent"] == "added" and lk.record["since"] == "5.24.0"
    assert v4.resolve("evaluation_strategy").status == "not-a-config-key"  # a real field (not a DeepSpeed key)
    assert v4.get("transformers:TrainingArguments.evaluation_strategy")["source_line"] == 200
    v5 = reg.at({"transformers": "5.24.0"})
    gone = v5.resolve("evaluation_strategy")
    assert gone.status == "absent" and gone.record["absent"] == "removed" and gone.record["until"] == "4.57.6"
    assert v5.resolve("gradient_checkpointing").record["deprecated"] is True


def test_spelled_follows_renames(reg):
    rid = "transformers:TrainingArguments.activation_checkpointing"
    assert reg.at({"transformers": "4.46.3"}).spelled(rid)["name"] == "gradient_checkpointing"
    assert reg.at({"transformers": "5.24.0"}).spelled(rid)["name"] == "activation_checkpointing"
    assert [s["name"] for s in reg.spellings(rid)] == ["gradient_checkpointing", "activation_checkpointing"]
    assert reg.exists_in(rid, "4.57.6") is False and reg.exists_in(rid, "5.24.0") is True
    assert [rel for rel, r in reg.timeline(rid) if r] == ["5.24.0"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_spelling_fact_known_and_unknown_versions(reg, lang):
    rid = "transformers:TrainingArguments.activation_checkpointing"
    known = spelling_fact(reg.at({"transformers": "4.46.3"}), rid, lang)
    assert known["shown_name"] == "gradient_checkpointing" and known["in_release"] is True
    assert "gradient_checkpointing" in known["note"] and "4.46.3" in known["note"]
    unknown = spelling_fact(reg, rid, lang)
    assert "shown_name" not in unknown and "5.24.0" in unknown["note"] and "gradient_checkpointing" in unknown["note"]
    assert spelling_fact(reg, "transformers:TrainingArguments.evaluation_strategy", lang) == {}


def test_applies_to_and_satisfies():
    ps = [UserVersion("deepspeed", "0.14.4", "flag", "0.14.4")]
    assert applies({"deepspeed": ">=0.18.3"}, ps, "en")[0] is False
    assert "0.14.4" in applies({"deepspeed": ">=0.18.3"}, ps, "en")[1]
    assert applies({"deepspeed": ">=0.10"}, ps, "en") == (True, None)
    assert applies({"transformers": ">=5"}, ps, "en") == (None, None)  # not known: not judged
    assert satisfies("2.4.0+cu121", ">=2.1") and satisfies("4.46", ">=4.46,<4.47")


def test_user_versions_are_matched_to_releases_by_packagings_order(reg):
    """A local label is the release itself (no note); a version past the newest release says so; 0.19.10 is
    newer than 0.19.8 by number (as text it sorts before it)."""
    ps = pins(reg, {"deepspeed": ("0.19.8+cpu", "flag"), "transformers": ("5.24.0", "flag")})
    assert [p.exact for p in ps] == [True, True] and version_notes(reg, ps, "en") == []
    ps = pins(reg, {"deepspeed": ("0.19.10", "flag"), "transformers": ("4.50.0", "flag")})
    assert [(p.release, p.exact) for p in ps] == [("0.19.8", False), ("4.46.3", False)]
    notes = {n.name: n.message for n in version_notes(reg, ps, "en")}
    assert "0.19.10" in notes["deepspeed"] and "0.19.8" in notes["deepspeed"] and "newer" in notes["deepspeed"]
    assert "4.50.0" in notes["transformers"] and "4.46.3" in notes["transformers"]
    assert "newer" not in notes["transformers"]
    assert UserVersion("deepspeed", "0.19", "flag", "0.19.8").exact  # a partial version: its series
    assert not UserVersion("deepspeed", "0.19.8", "flag", None).exact


def test_a_view_pins_only_recorded_releases(reg):
    with pytest.raises(ValueError, match="deepspeed 0.15.0"):
        Registry(reg._all, {"deepspeed": "0.15.0"})
    assert reg.at({"deepspeed": "0.15.0"}).pins == {"deepspeed": "0.14.4"}  # at() maps it onto a recorded one


def _registry_dir(tmp_path, lines: list[str]):
    (tmp_path / "deepspeed.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return tmp_path


def test_load_names_the_file_and_line_of_a_bad_record(tmp_path):
    import json

    good = json.dumps({**rec("zero_optimization.stage", "0.19.8", package="deepspeed"), "releases": ["0.19.8"]})
    cases = [
        ("{not json", "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        (json.dumps({"id": "deepspeed:x", "package": "deepspeed"}), "'version' is missing"),
        (good.replace('"releases": ["0.19.8"]', '"releases": ["0.19.x", "0.19.8"]'), "releases '0.19.x' is not a"),
        (good.replace('"version": "0.19.8"', '"version": "latest"'), "version 'latest' is not a version"),
        (good.replace('"releases": ["0.19.8"]', '"releases": "0.19.8"'), "'releases' must be a list"),
        (good.replace('"releases": ["0.19.8"]', '"releases": [["0.19.8"]]'), "'releases' must be a list"),
    ]
    for bad, message in cases:
        root = _registry_dir(tmp_path, [good, "", bad])
        with pytest.raises(RegistryError, match=message) as e:
            Registry.load(root)
        assert f"{root / 'deepspeed.jsonl'}:3:" in str(e.value) and "kb registry build" in str(e.value)
    assert Registry.load(_registry_dir(tmp_path, [good])).releases == {"deepspeed": ["0.19.8"]}


def test_respell_touches_whole_names_only():
    code = "TrainingArguments(activation_checkpointing=True, activation_checkpointing_kwargs={}) # x.activation_checkpointing"
    out = respell(code, [("activation_checkpointing", "gradient_checkpointing")])
    assert out.startswith("TrainingArguments(gradient_checkpointing=True, activation_checkpointing_kwargs")
    assert out.endswith("x.gradient_checkpointing")  # a method called on an object is respelled too


# ---------------------------------------------------------------- the committed registry and the engine

RID_AC = "transformers:TrainingArguments.activation_checkpointing"


def _shown(ans) -> str:
    from kb.present import render_answer

    return render_answer(ans, "plain", "")


def test_committed_registry_has_several_releases(registry):
    assert (
        len(registry.releases["deepspeed"]) >= 4
        and registry.releases["deepspeed"][-1] == registry.versions["deepspeed"]
    )
    for pkg in ("transformers", "accelerate", "peft"):
        assert len(registry.releases[pkg]) >= 3, pkg
    old = registry.at({"transformers": registry.releases["transformers"][0]})
    assert old.spelled(RID_AC)["name"] == "gradient_checkpointing"


def test_done_when_the_answer_speaks_the_users_release(engine):
    """The issue's acceptance line: 4.46.3 names gradient_checkpointing, 5.24.0 activation_checkpointing."""
    q = "gradient checkpointing oom lora"
    old = engine.ask(q, versions={"transformers": "4.46.3"})
    new = engine.ask(q, versions={"transformers": "5.24.0"})
    facts_old = {f.id: f for r in old.results for f in r.param_facts}
    facts_new = {f.id: f for r in new.results for f in r.param_facts}
    assert facts_old[RID_AC].shown_name == "gradient_checkpointing" and facts_old[RID_AC].in_release is True
    assert facts_new[RID_AC].shown_name is None and facts_new[RID_AC].in_release is True
    code_old = "\n".join(f.snippet.code for r in old.results for f in r.fixes if f.snippet)
    code_new = "\n".join(f.snippet.code for r in new.results for f in r.fixes if f.snippet)
    assert "gradient_checkpointing=True" in code_old and "activation_checkpointing=True" not in code_old
    assert "activation_checkpointing=True" in code_new
    assert any(n for r in old.results for f in r.fixes for n in f.version_notes)
    assert [v.__dict__ for v in old.versions] == [
        {"package": "transformers", "version": "4.46.3", "release": "4.46.3", "source": "flag", "exact": True}
    ]
    # unknown versions: both spellings, with their releases
    unknown = engine.ask(q)
    f = next(f for r in unknown.results for f in r.param_facts if f.id == RID_AC)
    assert f.shown_name is None and "gradient_checkpointing" in f.note and len(f.spellings) == 2


def test_versions_read_from_the_query_and_an_attachment(engine):
    ans = engine.ask("gradient checkpointing oom lora on transformers 4.46")
    assert [(v.package, v.version, v.release, v.source) for v in ans.versions] == [
        ("transformers", "4.46", "4.46.3", "query")
    ]
    freeze = "deepspeed==0.14.4\ntransformers==4.46.3\ntorch==2.4.1+cu121\n"
    ans = engine.ask("gradient checkpointing oom lora", config_text=freeze)
    assert {v.package: v.source for v in ans.versions} == {
        "deepspeed": "pip-freeze",
        "transformers": "pip-freeze",
        "torch": "pip-freeze",
    }
    assert ans.findings == [] and any(n.kind == "input" for n in ans.notes)  # a freeze is not linted as a config


def test_entries_that_do_not_apply_are_marked_and_ranked_lower(engine, entries):
    from kb.ask import rank
    from kb.ask.question import read_question
    from kb.ask.result import entry_result
    from kb.registry.releases import applies, pins

    e = next(le.entry for le in entries if le.entry.applies_to.get("deepspeed", "").startswith(">=0.18"))
    q = e.queries.en[0]
    old = pins(engine.registry, {"deepspeed": ("0.14.4", "flag")})
    new = pins(engine.registry, {"deepspeed": ("0.19.8", "flag")})
    question = read_question(q)
    ranked = rank.score(engine.retriever.search(question), rank.Context(question, engine.index.entries))
    before = next(h.score for h in ranked if h.entry_id == e.id)

    def select(ps):
        return rank.select(
            ranked, 5, [], lambda eid: applies(engine.index.entries[eid].get("applies_to") or {}, ps, "en")[0]
        )

    assert e.id not in select(new).not_applying and e.id in select(old).not_applying
    # ordered lower, its calibrated score kept: a version mismatch never changes the gate's decision
    assert next(h.score for h in ranked if h.entry_id == e.id) == before
    assert select(old).answered == select(new).answered == select([]).answered
    data = engine.index.entries[e.id]
    marked = entry_result(data, "en", engine.registry.at({"deepspeed": "0.14.4"}), pins=old)
    assert marked.applies is False and "0.14.4" in marked.version_note
    zh = entry_result(data, "zh", engine.registry.at({"deepspeed": "0.14.4"}), pins=old)
    assert "0.14.4" in zh.version_note and zh.version_note != marked.version_note
    assert entry_result(data, "en", engine.registry, pins=new).applies is True
    assert entry_result(data, "en", engine.registry).applies is None  # versions unknown: not judged
    # end to end: the same query with the older release puts the entry lower (or drops it below the keep line)
    rank = lambda a: [r.id for r in a.results].index(e.id) if e.id in [r.id for r in a.results] else 99  # noqa: E731
    assert rank(engine.ask(q, versions={"deepspeed": "0.14.4"}, k=5)) >= rank(
        engine.ask(q, versions={"deepspeed": "0.19.8"}, k=5)
    )


def test_lint_judges_the_users_release(registry):
    from kb.doctor.configs import parse_config
    from kb.doctor.lint import lint_config

    cfg = parse_config('{"zero_optimization": {"stage": 3, "leaf_module": {"classes": ["X"]}}}')
    assert not [f for f in lint_config(cfg, registry) if f.path.startswith("zero_optimization.leaf_module")]
    old = [f for f in lint_config(cfg, registry.at({"deepspeed": "0.14.4"})) if "leaf_module" in f.path]
    assert old and old[0].severity == "error" and "0.18.9" in old[0].message and "0.18.9" in old[0].message_zh


def test_cli_versions_flag(cli_env_real):
    import json

    from click.testing import CliRunner

    from cli.main import main

    r = CliRunner().invoke(
        main, ["ask", "gradient checkpointing oom lora", "--versions", "transformers==4.46.3", "--json"]
    )
    d = json.loads(r.output)
    assert d["schema_version"] == SCHEMA_VERSION and d["versions"][0]["release"] == "4.46.3"
    bad = CliRunner().invoke(main, ["ask", "x", "--versions", "transformerz==4.46.3", "--json"])
    assert bad.exit_code == 2 and "transformerz" in json.loads(bad.output)["error"]
    lk = CliRunner().invoke(
        main, ["registry", "lookup", "gradient_checkpointing", "--version", "transformers==5.24.0", "--json"]
    )
    d = json.loads(lk.output)
    assert d["judged_by"] == {"transformers": "5.24.0"} and [h["release"] for h in d["history"]][-1] == "5.24.0"
    assert {s["name"] for s in d["spellings"]} == {"gradient_checkpointing", "activation_checkpointing"}
