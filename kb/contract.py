"""The answer contract: what ``Engine.ask`` returns and every surface renders (docs/answer.md).

Typed, versioned values. An answer is complete: the facts about every parameter it names
(default, type, package, version, source file and line) travel inside it, so a surface never needs
the registry, the index or the entries to render it. Every text field is already in the answer's
language (``Answer.lang``); labels a surface adds come from ``kb.present.labels``.

``to_dict()`` gives the ``kb ask --json`` object; ``json_schema()`` derives its JSON Schema from these
classes (exported to docs/answer.schema.json, checked by a test). Bump ``SCHEMA_VERSION`` when a field
changes meaning or disappears (major) or is added (minor).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = (
    "1.3"  # 1.1: Result.path; 1.2: versions (Answer.versions, ParamFact spellings, Result.applies), Fix.equivalents;
    # 1.3: Memory by phase (gpu_verdict, peak_phase, reserved_gib, phases; MemoryTerm formula and source),
    # Answer.stated_facts
)

Lang = Literal["en", "zh"]
Severity = Literal["error", "warning", "info"]
Verdict = Literal[
    "valid", "deprecated", "misplaced", "not-a-config-key", "other-version", "does-not-exist", "unverified"
]


@dataclass
class Spelling:
    """One name a setting had across the recorded releases (``since`` / ``until``: recorded releases)."""

    id: str
    name: str
    since: str
    until: str


@dataclass
class ParamFact:
    """A registry record, as much of it as a reader needs. ``id`` is ``package:path``."""

    id: str
    name: str
    package: str
    version: str
    kind: str  # config_key | config_section | kwarg | field | method | api | cli_flag | env_var | ...
    type: str | None
    default: str | None  # as the registry records it (a JSON literal or a repr), None when there is none
    source_file: str
    source_line: int
    deprecated: bool = False
    replacement: str | None = None
    known: bool = True  # False: the entry names an id this registry does not have (kb check prevents it)
    shown_name: str | None = None  # the spelling in the user's release when it differs from ``name``
    in_release: bool | None = (
        None  # the user's release has it (under ``shown_name`` or ``name``); None: versions unknown
    )
    spellings: list[Spelling] = field(default_factory=list)  # when the name changed across recorded releases
    note: str | None = None  # the spelling / release note to show beside the name, in the answer's language


@dataclass
class Snippet:
    lang: Literal["json", "yaml", "python", "bash", "text"]
    code: str


@dataclass
class Equivalent:
    """The same settings as a fix's DeepSpeed snippet, written for another front end (kb.doctor.frontends)."""

    front_end: str  # accelerate_yaml | accelerate_launch | training_args | ...
    snippet: Snippet | None  # the settings in that front end's own syntax (None: no equivalent there)
    names: list[dict[str, Any]] = field(default_factory=list)  # each: ds path, front-end name, value, source
    notes: list[str] = field(default_factory=list)  # keys with no equivalent there, and what to do instead


@dataclass
class Fix:
    title: str
    text: str
    params: list[str] = field(default_factory=list)
    snippet: Snippet | None = None
    equivalents: list[Equivalent] = field(default_factory=list)  # the snippet for the user's front end (or all)
    version_notes: list[str] = field(default_factory=list)  # names respelled for the user's release


@dataclass
class Myth:
    claim: str
    correction: str
    names: list[str] = field(default_factory=list)
    touched: bool = False  # the user's query repeats a name this myth is about


@dataclass
class Source:
    """Typed reference (OSV style): code has package, version, file and line; docs/issue a URL."""

    type: Literal["code", "docs", "issue", "measurement"]
    url: str | None = None
    package: str | None = None
    version: str | None = None
    file: str | None = None
    line: str | None = None  # "113" or "382-386"
    note: str | None = None


@dataclass
class Result:
    """One entry that answers the query, in the answer's language."""

    id: str
    title: str
    score: float
    why: str
    summary: str
    area: str
    causes: list[str]
    fixes: list[Fix]
    params: list[str]  # registry ids: the entry's own, then its fixes', de-duplicated
    param_facts: list[ParamFact]  # one per id in ``params``, same order
    myths: list[Myth]
    sources: list[Source]
    applies_to: dict[str, str] = field(default_factory=dict)  # package -> PEP 440 specifier
    related: list[str] = field(default_factory=list)
    withdrawn: str | None = None  # the reason, when the entry was withdrawn (kb show only)
    path: str = ""  # the entry's page on the static site (kb export), relative to its base URL: /<lang>/<id>/
    applies: bool | None = None  # the user's versions satisfy ``applies_to``; None: unknown or no constraint
    version_note: str | None = None  # why it was demoted ("applies to deepspeed >=0.18.3; you run 0.14.4")


@dataclass
class VersionUsed:
    """A package version the answer was judged by: what the user gave and the recorded release used."""

    package: str
    version: str  # as the user gave it (a partial "4.46" stays partial)
    release: str | None  # the recorded registry release that stands for it; None: package not in the registry
    source: str  # flag | pip-freeze | pip-list | ds_report | transformers-env | accelerate-env | query | environment
    exact: bool  # the user's version is a recorded release (otherwise the nearest release at or below it)


@dataclass
class Closest:
    """An entry near the query when there is no confident answer: never presented as an answer."""

    id: str
    title: str
    score: float
    closest: bool = True


@dataclass
class Finding:
    """A deterministic finding about the user's config (``kb lint``), in the answer's language."""

    code: str
    severity: Severity
    path: str
    line: int | None
    message: str
    suggestion: str | None = None
    entry: str | None = None  # the entry that explains it


@dataclass
class Note:
    """Something the reader should know that is not an entry: a verdict on a name they used, or about the input."""

    kind: Literal["param", "input", "version"]
    message: str
    name: str | None = None
    verdict: Verdict | None = None
    registry_id: str | None = None
    suggestions: list[str] = field(default_factory=list)


@dataclass
class MemoryTerm:
    key: str  # stable id of the term, e.g. "master32"
    label: str  # in the answer's language
    gib: float
    formula: str = ""  # bytes per parameter (or per token) with the numbers filled in
    source: str = ""  # where the formula comes from: DeepSpeed file:line, or a measurement


@dataclass
class MemoryPhase:
    phase: str  # build | initialize | forward/backward | optimizer step
    label: str  # in the answer's language
    gib: float  # allocated in that phase


@dataclass
class MemoryChange:
    change: str
    cost: str
    gpu_needed_gib: float
    host_total_gib: float


@dataclass
class Memory:
    """``kb mem`` for the user's config and the model the query names."""

    model: str
    gpus: int
    gpu_mem_gib: float
    gpu: list[MemoryTerm]  # the terms alive in the peak phase
    gpu_total_gib: float  # estimated peak allocated by PyTorch (the largest phase)
    gpu_needed_gib: float  # plus the CUDA context: what is compared with the card
    fits_gpu: bool  # false only for "does not fit"
    host: list[MemoryTerm]
    host_total_gib: float
    deepspeed_estimator_gib: float | None  # DeepSpeed's own model-state figure per GPU, for reference
    changes: list[MemoryChange]
    assumptions: list[str]
    notes: list[str]
    gpu_verdict: str = (
        "fits"  # fits | tight (fits by allocation, not with the allocator's usual reserve) | does not fit
    )
    peak_phase: str = ""
    reserved_gib: float = 0.0  # expected peak reserved (allocated x the measured reserved/allocated ratio)
    phases: list[MemoryPhase] = field(default_factory=list)


@dataclass
class Answer:
    schema_version: str
    query: str
    lang: Lang
    answered: bool
    results: list[Result]
    closest: list[Closest]
    findings: list[Finding]
    notes: list[Note]
    message: str | None = None  # why there is no confident answer (answered false)
    config_facts: dict[str, Any] | None = None  # what ranking used from the config: stage, offload, precision, method
    stated_facts: dict[str, Any] | None = None  # what ranking used from the question: stage, precision, method, when
    memory: Memory | None = None
    versions: list[VersionUsed] = field(default_factory=list)  # empty: versions unknown (both spellings shown)
    front_end: str | None = None  # the front end equivalents were written for; None: all of them

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


@dataclass
class ErrorObject:
    """What ``--json`` / ``--jsonl`` print instead of an answer when the input is bad."""

    schema_version: str
    error: str
    kind: Literal["input", "config", "index", "internal"] = "input"
    line: int | None = None  # --jsonl: the input line

    def to_dict(self) -> dict[str, Any]:
        return to_dict(self)


def to_dict(obj: Any) -> Any:
    """Dataclasses to plain JSON-ready values (None-valued optional fields are kept: the schema lists them)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


# ---------------------------------------------------------------- JSON Schema, derived from the classes


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return {}
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        subs = [_type_schema(a, defs) for a in args if a is not type(None)]
        if type(None) in args:
            subs.append({"type": "null"})
        return subs[0] if len(subs) == 1 else {"anyOf": subs}
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(args[1], defs)}
    if dataclasses.is_dataclass(tp):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            defs[name] = _class_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if tp in simple:
        return {"type": simple[tp]} if tp is not float else {"type": "number"}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _class_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props = {f.name: _type_schema(hints[f.name], defs) for f in dataclasses.fields(cls)}
    doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    out: dict[str, Any] = {
        "type": "object",
        "properties": props,
        "required": [f.name for f in dataclasses.fields(cls)],
        "additionalProperties": False,
    }
    if doc:
        out["description"] = doc
    return out


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one line of ``kb ask --json`` / ``--jsonl`` output (an answer or an error object)."""
    defs: dict[str, Any] = {}
    answer = _type_schema(Answer, defs)
    error = _type_schema(ErrorObject, defs)
    for name in ("Answer", "ErrorObject"):
        defs[name]["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kb answer",
        "description": "One object printed by `kb ask --json` (or one line of `--jsonl`): an Answer or an ErrorObject.",
        "anyOf": [answer, error],
        "$defs": dict(sorted(defs.items())),
    }


if __name__ == "__main__":  # python -m kb.contract > docs/answer.schema.json
    import json

    print(json.dumps(json_schema(), indent=2, ensure_ascii=False))
