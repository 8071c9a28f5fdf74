"""Languages kb answers in, and the one definition of "Chinese text" every module uses."""

from __future__ import annotations

import re

LANGS = ("en", "zh")
# CJK Unified Ideographs (+ Extension A and the compatibility block): what makes a text Chinese
CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# ... plus CJK punctuation and full-width forms: the characters between which YAML folding leaves a stray space
CJK_WIDE = r"\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
HAS_CJK = re.compile(f"[{CJK}]")


def has_cjk(text: str) -> bool:
    return bool(HAS_CJK.search(text))


def detect_lang(text: str) -> str:
    """'zh' when the text has Chinese characters, else 'en'."""
    return "zh" if HAS_CJK.search(text) else "en"


def pick_lang(text: str, lang: str = "auto") -> str:
    """The answer language: the query's when ``lang`` is "auto", else ``lang`` (must be one of LANGS)."""
    if lang == "auto":
        return detect_lang(text)
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}: use auto, {', '.join(LANGS)}")
    return lang
