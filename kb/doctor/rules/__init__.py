"""Lint rules beyond kb/doctor/lint.py's core set, one module per concern; each module registers its rules
with ``kb.doctor.lint.rule`` when imported (kb/doctor/lint.py imports them all at its end)."""
