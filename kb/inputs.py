"""Bytes from users (stdin, files, chat attachments, --jsonl lines) to text, or a clear refusal.

UTF-8 first (a BOM is dropped); Chinese text saved as GBK / GB18030 (common on Windows in China) is
accepted when it decodes cleanly and contains Chinese; anything else is refused with the offset of
the first bad byte. Never a traceback, never silently mangled text.
"""

from __future__ import annotations

from kb.lang import has_cjk


class InputError(ValueError):
    """Unreadable input; the message names the source."""


def decode_bytes(data: bytes, source: str = "<input>") -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        first_bad = e.start + len(data) - len(e.object)  # e.object is what follows a BOM: the offset is in data
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        text = None
    if text is not None and has_cjk(text):
        return text
    raise InputError(
        f"{source}: not UTF-8 text (invalid byte 0x{data[first_bad]:02x} at offset {first_bad}); "
        "save it as UTF-8 (GBK/GB18030 Chinese text is also accepted)"
    )


def decode_arg(text: str, source: str = "argument") -> str:
    """A command-line argument: Python maps undecodable bytes to surrogates; decode them properly or refuse."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return decode_bytes(text.encode("utf-8", "surrogateescape"), source)
