"""Lint rules beyond kb/lint.py's core set, one module per concern; each module registers its rules
with ``kb.lint.rule`` when imported (kb/lint.py imports them all at its end)."""
