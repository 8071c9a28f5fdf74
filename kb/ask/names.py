"""The names a question uses, judged against the registry: the notes an answer carries about them (invented,
deprecated, misplaced, other release) and the names retrieval may boost on."""

from __future__ import annotations

import re

from kb import contract as C
from kb.registry.factcheck import check_names, judge
from kb.registry.store import Registry


def judge_names(
    names: tuple[str, ...], text: str, is_log: bool, view: Registry, lang: str
) -> tuple[list[C.Note], list[str]]:
    """The factcheck verdict for each parameter-like name (``Question.param_names``); also the names to boost on.

    The user's own text is read as `kb factcheck` reads it (kb.registry.factcheck.check_names: a keyword of a call
    such as ``TrainingArguments(eval_every_n_steps=100)`` is judged in that class, a key in a pasted config in its
    section, a name in prose in the namespace the prose implies), so an invented argument is named as invented with
    a did-you-mean from the right namespace. A name the registry does not know and no such context places is
    judged only where a reader would take it for a config key (prefix, or written as ``key:`` / ``key=`` /
    ``"key"``), and never inside a pasted log: tracebacks and prose are full of other names."""
    notes: list[C.Note] = []
    resolved: list[str] = []
    in_context = {} if is_log else {v.name: v for v in check_names(text, view, lang)}
    for name in names[:40]:
        config_like = _config_like(name, text)
        placed = in_context.get(name)
        v = placed if placed is not None and placed.verdict != "unverified" else judge(name, view, lang)
        if v is None or v.verdict == "unverified":
            continue  # outside what the registry covers: neither confirmed nor accused
        if v.verdict == "does-not-exist" and (is_log or not (config_like or v is placed)):
            continue
        resolved.append(name)
        if is_log and v.verdict != "does-not-exist":
            continue  # names inside a pasted log are the library's own: no note needed
        notes.append(C.Note("param", v.message, name, v.verdict, v.registry_id, v.suggestions))  # type: ignore[arg-type]
    return notes, resolved


_CONFIG_PREFIX = re.compile(
    r"^(zero|stage\d?_|offload|cpu_offload|nvme|pin_|overlap|reduce_|allgather|contiguous|sub_group|round_robin|"
    r"train_|gradient_|fp16|bf16|aio|activation|partition|memory_|prefetch|max_live|param_|ds_|deepspeed)"
)


def _config_like(name: str, query: str) -> bool:
    """Would a reader take this unknown name for a config key? (prefix, or written as key: / key= / "key")"""
    if re.search(r"\.(bin|json|safetensors|pt|pth|txt|ya?ml|py|sh|log|md)$", name):
        return False
    if _CONFIG_PREFIX.match(name.split(".")[-1]):
        return True
    return bool(re.search(rf"[\"']{re.escape(name)}[\"']\s*:|\b{re.escape(name)}\s*[:=]", query))
