"""(placeholder: filled by its owner)"""

from __future__ import annotations


def site_records(pkg: str, version: str) -> list[dict]:
    return []
