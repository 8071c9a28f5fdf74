"""(placeholder: filled by its owner)"""

from __future__ import annotations


def extra_records(pkg: str, version: str) -> list[dict]:
    return []
