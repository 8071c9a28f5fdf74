"""Links every surface uses: a code source at its release on GitHub, an entry's page on the static site.

One home for the package -> repository mapping (Discord, Slack and the site all call ``code_url``).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlsplit

# package -> (GitHub repository, path of the package's folder in it); release tags are "v" + version
REPOS: dict[str, tuple[str, str]] = {
    "deepspeed": ("deepspeedai/DeepSpeed", ""),
    "transformers": ("huggingface/transformers", "src/"),
    "accelerate": ("huggingface/accelerate", "src/"),
    "peft": ("huggingface/peft", "src/"),
    "torch": ("pytorch/pytorch", ""),
    "safetensors": ("huggingface/safetensors", "bindings/python/py_src/"),
    "trl": ("huggingface/trl", ""),
}
# files the DeepSpeed wheel places inside the package that live elsewhere in the repository (setup.py copies them)
_DS_MOVED = (
    ("deepspeed/accelerator/", "accelerator/"),
    ("deepspeed/ops/op_builder/", "op_builder/"),
    ("deepspeed/ops/csrc/", "csrc/"),
)
_LINE = re.compile(r"^(\d+)(?:-(\d+))?$")
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+-]*$")


def code_url(s: dict[str, Any]) -> str | None:
    """A source's own http(s) URL; for a code source, its file at the release tag with the line anchor; else None."""
    if s.get("url"):
        return s["url"] if urlsplit(s["url"]).scheme in ("http", "https") else None
    repo = REPOS.get(str(s.get("package") or "").lower())
    version, path, line = str(s.get("version") or ""), str(s.get("file") or ""), str(s.get("line") or "")
    if repo is None or not _VERSION.match(version) or not path or path.startswith("/") or ".." in path.split("/"):
        return None
    if repo[0] == "deepspeedai/DeepSpeed":
        for old, new in _DS_MOVED:
            if path.startswith(old):
                path = new + path[len(old) :]
                break
        else:
            path = repo[1] + path
    else:
        path = repo[1] + path
    url = f"https://github.com/{repo[0]}/blob/v{version}/{quote(path)}"
    m = _LINE.match(line.replace(" ", ""))
    if m:
        url += f"#L{m.group(1)}" + (f"-L{m.group(2)}" if m.group(2) else "")
    return url


def entry_url(site_base_url: str, lang: str, entry_id: str) -> str | None:
    """``{site_base_url}/{lang}/{id}/`` (the entry's page on the static site), or None without an http(s) base URL."""
    base = (site_base_url or "").strip().rstrip("/")
    if not base or urlsplit(base).scheme not in ("http", "https"):
        return None
    if entry_id.startswith("registry:"):
        return None  # a fact from the registry's release history (Result.kind "registry") has no page
    return f"{base}/{'zh' if lang == 'zh' else 'en'}/{quote(entry_id, safe='')}/"
