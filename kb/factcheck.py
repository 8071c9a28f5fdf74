"""``kb factcheck``: every parameter-like name in free text (a chat answer, a forum thread), judged
by the registry: valid, deprecated, misplaced, not a config key (an API / kwarg / method), or
does not exist (with the nearest real names).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kb.registry import Registry
from kb.text import identifiers, is_camel_api, looks_like_param

MAX_TEXT_CHARS = 200_000
# a dotted name starting with one of these is code on an object (model.to, torch.bfloat16); when the
# registry does not know it, it is outside what kb can judge, so it is left out rather than condemned
OBJECT_PREFIXES = {
    "model",
    "self",
    "trainer",
    "accelerator",
    "engine",
    "torch",
    "np",
    "os",
    "sys",
    "args",
    "training_args",
    "tokenizer",
    "nn",
    "F",
    "optimizer",
    "scheduler",
    "config",
    "ds_config",
    "peft_model",
}
VERDICT = {
    "exact": "valid",
    "alias": "valid",
    "deprecated": "deprecated",
    "removed": "deprecated",
    "misplaced": "misplaced",
    "not-a-config-key": "not-a-config-key",
    "unknown": "does-not-exist",
}


@dataclass
class NameVerdict:
    name: str
    verdict: str  # valid | deprecated | misplaced | not-a-config-key | does-not-exist
    registry_id: str | None
    suggestions: list[str]
    line: int
    message: str
    kind: str | None = None  # registry kind of the record (config_key, kwarg, method, ...)
    lines: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_names(text: str, registry: Registry, lang: str = "en") -> list[NameVerdict]:
    """One verdict per distinct name, in order of first appearance, with the lines it appears on."""
    text = text[:MAX_TEXT_CHARS]
    found: dict[str, NameVerdict] = {}
    for lineno, line in enumerate(text.splitlines() or [text], 1):
        for name in identifiers(line):
            if name in found:
                if lineno not in found[name].lines:
                    found[name].lines.append(lineno)
                continue
            if not looks_like_param(name):
                continue
            v = judge(name, registry, lang)
            if v is None:
                continue
            v.line = lineno
            v.lines = [lineno]
            found[name] = v
    return list(found.values())


def judge(name: str, registry: Registry, lang: str = "en") -> NameVerdict | None:
    """The registry's verdict on one name, or None when the name is outside what kb can judge."""
    camel = is_camel_api(name)
    first = name.split(".", 1)[0]
    if "." in name and first in OBJECT_PREFIXES:
        # code on an object: judge the attribute among APIs only ("model.half", "torch.cuda.memory_summary")
        lk = registry.resolve(name.split(".", 1)[1])
        if (
            lk.status not in ("not-a-config-key", "exact")
            or not lk.record
            or lk.record["kind"] in ("config_key", "config_section", "yaml_key")
        ):
            lk = registry.resolve(name.rsplit(".", 1)[1])
            if lk.record is None or lk.record["kind"] in ("config_key", "config_section", "yaml_key"):
                return None  # not an API kb knows: outside what it can judge
        lk.status = "not-a-config-key"
    else:
        lk = registry.resolve(name)
    if lk.status == "unknown" and camel:
        return None
    if lk.status == "unknown" and "." in name and first not in OBJECT_PREFIXES:
        # "deepspeed.zero.Init" and friends: try without the package prefix
        for pkg in registry.versions:
            if first == pkg:
                inner = registry.resolve(name.split(".", 1)[1])
                if inner.status != "unknown":
                    lk = inner
                break
    rec = lk.record
    verdict = VERDICT[lk.status]
    if rec is not None and lk.status == "not-a-config-key" and (rec.get("deprecated") or rec.get("noop")):
        verdict = "deprecated"
    return NameVerdict(
        name,
        verdict,
        rec["id"] if rec else None,
        lk.suggestions or [c["id"] for c in lk.candidates[:3] if c is not rec],
        0,
        _message(name, verdict, lk, registry, lang),
        rec["kind"] if rec else None,
    )


def _message(name: str, verdict: str, lk, registry: Registry, lang: str = "en") -> str:
    rec = lk.record
    zh = lang == "zh"
    if verdict == "valid":
        if zh:
            return f"`{name}` 是真实存在的：{rec['id']}（{rec['kind']}，默认值 {rec['default']}）。"
        return f"`{name}` is real: {rec['id']} ({rec['kind']}, default {rec['default']})."
    if verdict == "deprecated":
        if rec.get("noop"):
            tail = " 仍然接受，但不起任何作用。" if zh else " It is accepted and does nothing."
        elif rec.get("replacement"):
            tail = f" 请改用 {rec['replacement']}。" if zh else f" Use {rec['replacement']}."
        else:
            tail = ""
        return f"`{name}` 已弃用（{rec['id']}）。{tail.strip()}" if zh else f"`{name}` is deprecated ({rec['id']}).{tail}"
    if verdict == "misplaced":
        where = ", ".join(c["path"] for c in lk.candidates[:3])
        return f"`{name}` 不能写在这里；它的正确位置是：{where}。" if zh else f"`{name}` is not valid there; it lives at: {where}."
    if verdict == "not-a-config-key":
        if zh:
            return f"`{name}` 不是配置项：它是 {rec['kind']}（{rec['id']}）。"
        return f"`{name}` is not a config key: it is a {rec['kind']} ({rec['id']})."
    packages = ", ".join(sorted(registry.versions))
    if zh:
        near = f" 最接近的真实名字：{', '.join(lk.suggestions)}。" if lk.suggestions else ""
        return f"`{name}` 在 {packages} 中都不存在。{near}".rstrip()
    near = f" Nearest real names: {', '.join(lk.suggestions)}." if lk.suggestions else ""
    return f"`{name}` does not exist in {packages}.{near}"
