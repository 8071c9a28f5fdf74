"""``kb lint``: what a DeepSpeed / accelerate / TrainingArguments config or launch command really does.

Deterministic rules over the parsed config and the parameter registry; no DeepSpeed at run time.

This module is the entry point: it imports every rule module (kb/doctor/rules/: core KB001-KB029, dialects KB090-KB092,
frontends KB030-KB039, types KB040-KB049, sites KB050-KB069), so ``RULES`` holds them all, and lints
with them (``lint_config``). The engine (the rule registry, ``rule``, ``Ctx``, ``Finding``, ``Case``)
is ``kb.doctor.engine``, which imports no rule module; each rule module imports only the engine.
``tests/test_rules.py`` runs every rule's cases; ``tests/test_lint_oracle.py`` and the rule modules'
own oracle files prove every validity rule (DeepSpeed or accelerate raises) against the real code.
The rule table of docs/lint.md is generated from ``RULES`` (``python -m kb.doctor.lint``).
"""

from __future__ import annotations

from kb.doctor.engine import FREE_FORM, RETIRED, RULES, SEVERITIES, VIEWS, Case, Ctx, Finding, Rule, rule, run
from kb.doctor.rules import core, dialects, frontends, runtime, sites, types

__all__ = [
    "CORE_ORACLE",
    "FREE_FORM",
    "RETIRED",
    "RULES",
    "RULES_BEGIN",
    "RULES_END",
    "SEVERITIES",
    "VIEWS",
    "Case",
    "Ctx",
    "Finding",
    "Rule",
    "lint_config",
    "rule",
    "rules_markdown",
]

RULE_MODULES = (
    core,
    dialects,
    frontends,
    runtime,
    sites,
    types,
)  # every rule module: importing one registers its rules
CORE_ORACLE = core.ORACLE  # proves the validity rules of the core module


# All findings for one parsed config, in file order: line, then severity, then path (then code). The engine's
# ``run``: every rule module is imported above, so it runs them all.
lint_config = run


# ---------------------------------------------------------------- the docs table


RULES_BEGIN = "<!-- rules:begin (generated from kb.doctor.lint.RULES by `python -m kb.doctor.lint`; do not edit) -->"
RULES_END = "<!-- rules:end -->"


def rules_markdown() -> str:
    """The rule table of docs/lint.md, generated from RULES."""
    rows = [
        "| code | severity | name | rule | what DeepSpeed (or accelerate) does | applies to | entry |",
        "|---|---|---|---|---|---|---|",
    ]
    for code in sorted(RULES):
        r = RULES[code]
        effect = r.effect + (f" (proven in `{r.oracle}`)" if r.validity else "")
        entry = f"`{r.entry}`" if r.entry else ""
        rows.append(
            f"| {r.code} | {r.severity} | `{r.name}` | {r.summary} | {effect} | {', '.join(r.kinds)} | {entry} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(rules_markdown())
