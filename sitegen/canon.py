"""Make a Pagefind bundle byte-identical from run to run.

Pagefind 1.5 writes its filter files (``filter/<hash>.pf_filter``) and the filter list of the language's
metadata (``pagefind.<hash>.pf_meta``) in hash-map order, which changes on every run; the pages, the word
index and the fragments are already stable. This module rewrites those two in sorted order, names them
after their new content (the same ``<language>_<hex>`` scheme, so pagefind.js finds them through
``pagefind-entry.json`` as before) and updates ``pagefind-entry.json``.

The files are gzip (mtime 0) of ``pagefind_dcd`` + CBOR; the codec below covers the CBOR Pagefind writes
(unsigned and negative integers, byte and text strings, arrays, maps, booleans, null).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import Any

SIGNATURE = b"pagefind_dcd"


class BundleFormatError(ValueError):
    """The bundle is not in the format this module knows (a newer Pagefind?)."""


# ---------------------------------------------------------------- CBOR


def cbor_decode(b: bytes, i: int = 0) -> tuple[Any, int]:
    ib = b[i]
    major, info = ib >> 5, ib & 31
    i += 1
    if info < 24:
        val = info
    elif info in (24, 25, 26, 27):
        n = 1 << (info - 24)
        val = int.from_bytes(b[i : i + n], "big")
        i += n
    else:
        raise BundleFormatError(f"unsupported CBOR item 0x{ib:02x} at byte {i - 1}")
    if major == 0:
        return val, i
    if major == 1:
        return -1 - val, i
    if major == 2:
        return bytes(b[i : i + val]), i + val
    if major == 3:
        return b[i : i + val].decode("utf-8"), i + val
    if major == 4:
        arr = []
        for _ in range(val):
            x, i = cbor_decode(b, i)
            arr.append(x)
        return arr, i
    if major == 5:
        obj = {}
        for _ in range(val):
            k, i = cbor_decode(b, i)
            obj[k], i = cbor_decode(b, i)
        return obj, i
    if major == 7 and info in (20, 21, 22):
        return {20: False, 21: True, 22: None}[info], i
    raise BundleFormatError(f"unsupported CBOR item 0x{ib:02x} at byte {i - 1}")


def _head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
        if n < 1 << (8 * size):
            return bytes([major << 5 | info]) + n.to_bytes(size, "big")
    raise BundleFormatError(f"integer too large for CBOR: {n}")


def cbor_encode(x: Any) -> bytes:
    if x is False or x is True or x is None:
        return bytes([0xF4 if x is False else 0xF5 if x is True else 0xF6])
    if isinstance(x, int):
        return _head(0, x) if x >= 0 else _head(1, -1 - x)
    if isinstance(x, bytes):
        return _head(2, len(x)) + x
    if isinstance(x, str):
        raw = x.encode("utf-8")
        return _head(3, len(raw)) + raw
    if isinstance(x, list):
        return _head(4, len(x)) + b"".join(cbor_encode(v) for v in x)
    if isinstance(x, dict):
        return _head(5, len(x)) + b"".join(cbor_encode(k) + cbor_encode(v) for k, v in x.items())
    raise BundleFormatError(f"cannot encode {type(x).__name__}")


def read_pf(path: Path) -> Any:
    raw = gzip.decompress(path.read_bytes())
    if not raw.startswith(SIGNATURE):
        raise BundleFormatError(f"{path}: not a Pagefind file")
    value, end = cbor_decode(raw, len(SIGNATURE))
    if end != len(raw):
        raise BundleFormatError(f"{path}: trailing bytes")
    return value


def pf_bytes(value: Any) -> bytes:
    return gzip.compress(SIGNATURE + cbor_encode(value), compresslevel=9, mtime=0)


# ---------------------------------------------------------------- the bundle


def _name(prefix: str, data: bytes, width: int) -> str:
    return f"{prefix}_{hashlib.sha256(data).hexdigest()[:width]}"


def canonicalize_bundle(bundle: Path) -> None:
    """Rewrite the filter files and the metadata of every language in ``bundle`` in sorted order."""
    entry_path = bundle / "pagefind-entry.json"
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    for info in entry.get("languages", {}).values():
        meta_path = bundle / f"pagefind.{info['hash']}.pf_meta"
        meta = read_pf(meta_path)
        # [version, pages, index chunks, filters [[key, file hash]], sorts, meta fields]
        if not (
            isinstance(meta, list) and len(meta) >= 4 and all(isinstance(f, list) and len(f) == 2 for f in meta[3])
        ):
            raise BundleFormatError(f"{meta_path}: unexpected metadata layout")
        filters = []
        for key, old in meta[3]:
            old_path = bundle / "filter" / f"{old}.pf_filter"
            fkey, values = read_pf(old_path)
            data = pf_bytes([fkey, sorted(values, key=lambda v: v[0])])
            new = _name(old.rsplit("_", 1)[0], data, 7)
            old_path.unlink()
            (bundle / "filter" / f"{new}.pf_filter").write_bytes(data)
            filters.append([key, new])
        meta[3] = sorted(filters)
        data = pf_bytes(meta)
        new_hash = _name(info["hash"].rsplit("_", 1)[0], data, 10)
        meta_path.unlink()
        (bundle / f"pagefind.{new_hash}.pf_meta").write_bytes(data)
        info["hash"] = new_hash
    entry_path.write_text(json.dumps(entry, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


# ---------------------------------------------------------------- the Chinese vocabulary

MAX_WORD = 6  # characters: longer "words" in the index are runs its segmenter did not cut
_CJK_WORD = re.compile(rf"^[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{{1,{MAX_WORD}}}$")


def index_words(bundle: Path) -> list[str]:
    """Every word of every language index in ``bundle`` (the word index chunks), sorted."""
    words: set[str] = set()
    for p in sorted((bundle / "index").glob("*.pf_index")):
        chunk = read_pf(p)
        if not (isinstance(chunk, list) and chunk and isinstance(chunk[0], list)):
            raise BundleFormatError(f"{p}: unexpected index layout")
        for item in chunk[0]:
            if not (isinstance(item, list) and item and isinstance(item[0], str)):
                raise BundleFormatError(f"{p}: unexpected word entry")
            words.add(item[0])
    return sorted(words)


def vocabulary_json(bundle: Path) -> str:
    """The Chinese words (1-6 characters) the index holds, for cutting a query the way the index was cut."""
    words = [w for w in index_words(bundle) if _CJK_WORD.match(w)]
    return (
        json.dumps(
            {"max": max((len(w) for w in words), default=1), "words": words}, ensure_ascii=False, separators=(",", ":")
        )
        + "\n"
    )
