"""Every lint rule is a unit: metadata, its own bad cases (must fire) and ok cases (must not), both languages.

The cases live with the rules (``kb.doctor.lint.RULES``); this file runs them. docs/lint.md's rule table is
generated from the same registry and must be exactly what ``kb.doctor.lint.rules_markdown()`` prints.
"""

import re
import subprocess
import sys

import pytest

from kb.doctor.configs import parse_config
from kb.doctor.dialect import detect
from kb.doctor.lint import RULES, RULES_BEGIN, RULES_END, SEVERITIES, VIEWS, rules_markdown
from kb.lang import has_cjk
from tests.conftest import ROOT

BAD = [(code, i) for code, r in sorted(RULES.items()) for i in range(len(r.bad))]
OK = [(code, i) for code, r in sorted(RULES.items()) for i in range(len(r.ok))]


def between(text: str, begin: str, end: str) -> str:
    assert text.count(begin) == 1 and text.count(end) == 1, "markers missing or repeated"
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


# each rule module owns a block of codes: core kb/doctor/rules/core.py KB001-KB029, kb/doctor/rules/frontends.py KB030-KB039,
# types.py KB040-KB049, sites.py KB050-KB069, runtime.py KB070-KB089 and KB100-KB119 (its first block filled up),
# dialects.py KB090-KB099; codes are never reused (a retired code stays retired)
CODE_BLOCKS = {
    "kb.doctor.rules.core": (1, 29),
    "kb.doctor.rules.frontends": (30, 39),
    "kb.doctor.rules.types": (40, 49),
    "kb.doctor.rules.sites": (50, 69),
    "kb.doctor.rules.runtime": ((70, 89), (100, 119)),
    "kb.doctor.rules.dialects": (90, 99),
}


def test_codes_are_stable_and_in_their_module_block():
    from kb.doctor.lint import RETIRED

    assert [c for c in sorted(RULES) if c <= "KB029"] == [f"KB{i:03d}" for i in range(1, 21)] + ["KB022"]
    # KB021 became the launcher rules KB030-KB033; KB044 (auto in optimizer / scheduler params) is part of KB007
    assert not set(RETIRED) & set(RULES) and set(RETIRED) == {"KB021", "KB044"}
    for code, r in RULES.items():
        block = CODE_BLOCKS[r.check.__module__]
        ranges = block if isinstance(block[0], tuple) else (block,)
        assert re.fullmatch(r"KB\d{3}", code), code
        assert any(lo <= int(code[2:]) <= hi for lo, hi in ranges), (code, r.check.__module__)


@pytest.mark.parametrize("code", sorted(RULES))
def test_rule_metadata(code):
    r = RULES[code]
    assert r.severity in SEVERITIES and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name)
    assert r.summary.strip() and r.effect.strip() and "|" not in r.summary + r.effect  # one table cell each
    assert r.views and set(r.views) <= set(VIEWS) and set(r.kinds) >= set(r.views)
    assert r.check.__name__ == code.lower()  # the rule's logic is the function named after its code
    assert r.bad and r.ok, f"{code} needs at least one bad and one ok case"
    assert not r.validity or r.severity == "error"


def test_rule_names_are_unique():
    names = [r.name for r in RULES.values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("code,i", BAD, ids=[f"{c}-bad{i}" for c, i in BAD])
def test_bad_case_fires(registry, code, i):
    r = RULES[code]
    case = r.bad[i]
    cfg = parse_config(case.config)
    kind = detect(cfg.kind, cfg.data, registry) or cfg.kind  # a front end's file: its dialect (kb.doctor.dialect)
    assert (kind if kind != "unknown" else "deepspeed") in r.kinds, "a config kind the rule does not apply to"
    hits = [f for f in case.lint(registry) if f.code == code]
    assert hits, f"{code} bad case {case.note!r} did not fire"
    for f in hits:
        assert f.severity == r.severity and f.message


@pytest.mark.parametrize("code,i", OK, ids=[f"{c}-ok{i}" for c, i in OK])
def test_ok_case_does_not_fire(registry, code, i):
    case = RULES[code].ok[i]
    assert code not in {f.code for f in case.lint(registry)}, f"{code} fired on ok case {case.note!r}"


@pytest.mark.parametrize("code,i", BAD, ids=[f"{c}-bad{i}" for c, i in BAD])
def test_bad_case_findings_in_both_languages(registry, code, i):
    for f in RULES[code].bad[i].lint(registry):
        assert f.message and not has_cjk(f.message), f
        assert has_cjk(f.message_zh), f
        assert (f.suggestion is None) == (f.suggestion_zh is None), f
        if f.suggestion is not None:
            assert f.suggestion and has_cjk(f.suggestion_zh) and not has_cjk(f.suggestion), f
        d = f.to_dict()
        assert d["message_zh"] == f.message_zh and d["suggestion_zh"] == f.suggestion_zh
        assert f.text("zh") == (f.message_zh, f.suggestion_zh) and f.text("en") == (f.message, f.suggestion)


def test_findings_link_real_entries(registry, entries):
    ids = {le.entry.id for le in entries}
    linked = {f.entry for r in RULES.values() for case in r.bad + r.ok for f in case.lint(registry)}
    assert linked - {None} <= ids, linked - {None} - ids


def test_every_code_is_documented():
    doc = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    table = between(doc, RULES_BEGIN, RULES_END)
    assert table == rules_markdown(), (
        "docs/lint.md rule table is stale: paste `python -m kb.doctor.lint` between the markers"
    )
    for code, r in RULES.items():
        assert f"| {code} | {r.severity} | `{r.name}` |" in table


def test_module_prints_the_table():
    out = subprocess.run([sys.executable, "-m", "kb.doctor.lint"], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == rules_markdown()


def test_the_engine_imports_no_rule_and_each_rule_module_only_the_engine():
    """No import loop: kb.doctor.engine registers nothing by itself; a rule module imports the engine, never
    kb.doctor.lint or another rule module; kb.doctor.lint imports every rule module."""
    import ast

    code = (
        "import sys, kb.doctor.engine as e; "
        "print(len(e.RULES), sorted(m for m in sys.modules if m.startswith(('kb.doctor.rules', 'kb.doctor.lint'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["0", "[]"]
    for module in sorted(set(CODE_BLOCKS)):
        path = ROOT / (module.replace(".", "/") + ".py")
        imported = {
            n.module
            for n in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("kb.doctor")
        }
        assert "kb.doctor.engine" in imported and not {"kb.doctor.lint", "kb.doctor.rules"} & imported, module
        assert not any(m.startswith("kb.doctor.rules.") for m in imported), module
    from kb.doctor import lint

    assert {m.__name__ for m in lint.RULE_MODULES} == set(CODE_BLOCKS)


def test_rule_refuses_a_retired_code_and_an_unproven_validity_rule():
    from kb.doctor.engine import Case, rule

    meta = dict(views=("deepspeed",), summary="s", effect="e", bad=[Case("{}")], ok=[Case("{}")])
    with pytest.raises(ValueError, match="KB021: a retired code is never reused"):
        rule("KB021", "unknown-flag", "warning", None, **meta)(lambda c: None)
    with pytest.raises(ValueError, match="names no ORACLE"):  # this module names no oracle file
        rule("KB029", "unproven", "error", None, validity=True, **meta)(lambda c: None)
    assert "KB029" not in RULES and "KB021" not in RULES
