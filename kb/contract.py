"""The contract: what every command returns and every surface renders (docs/answer.md).

Typed, versioned values: the ``Answer`` of ``Engine.ask`` (``kb ask``) and one report per other command
(``LintReport``, ``MemReport``, ``ShowReport``, ``FactcheckReport``, ``GapsReport``). A value is complete:
the facts about every parameter it names (default, type, package, version, source file and line) travel
inside it, so a surface never needs the registry, the index or the entries to render it. Every text field
is already in the value's language (``lang``); labels a surface adds come from ``kb.present.labels``.

``to_dict()`` gives the ``--json`` object; ``json_schema(name)`` derives its JSON Schema from these classes
(``python -m kb.contract --all docs/`` writes docs/<name>.schema.json; a test checks the files).
``from_dict(cls, data)`` rebuilds a value from its JSON (a surface that got it over the wire).
``SCHEMA_VERSION`` is major.minor: a new field bumps the minor version (readers ignore fields they do not
know, and the schemas allow them); a field that changes meaning or disappears bumps the major version.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

SCHEMA_VERSION = (
    "2.2"  # 1.1: Result.path; 1.2: versions (Answer.versions, ParamFact spellings, Result.applies), Fix.equivalents;
    # 1.3: Memory by phase (gpu_verdict, peak_phase, reserved_gib, phases; MemoryTerm formula and source),
    # Answer.stated_facts; 2.0: a typed report for every command (LintReport, MemReport, ShowReport,
    # FactcheckReport, GapsReport), MemoryTerm.phases, Result.rank; the schemas allow unknown fields and accept any 2.x;
    # 2.1: Result.kind (registry results, kb.ask.facts), LintReport.versions and the front ends' config_kind values;
    # 2.2: Answer.log (a whole log read from its error blocks: kb.ask.logs)
)
SCHEMA_MAJOR = SCHEMA_VERSION.split(".")[0]

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
    rank: list[RankStep] = field(default_factory=list)  # how ``score`` was made (kb ask only), in order
    # entry: a curated entry; registry: a fact from the registry's release history (kb.ask.facts: a name renamed,
    # removed, added or deprecated), id "registry:<record id>", its sources the records' source lines
    kind: Literal["entry", "registry"] = "entry"


@dataclass
class RankStep:
    """One adjustment of kb.ask.rank that applied to a result (docs/retrieval.md lists them in order)."""

    name: str  # evidence | signature | named-parameter | name-in-title | config-finding | conditions | ...
    op: Literal["add", "scale"]  # added to the score, or multiplied it
    value: float


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
    phases: list[str] = field(default_factory=list)  # the phases it is alive in (GPU terms; empty: not known)


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
class LogBlock:
    """Lines of a pasted log an answer was built on (kb.ask.logs.Block)."""

    kind: Literal["traceback", "error", "summary"]
    start_line: int
    end_line: int
    text: str
    rank: int | None = None
    repeats: int = 1


@dataclass
class LogRead:
    """A whole log, read from the end for its error blocks: how much was read and what was used."""

    lines: int
    chars: int
    error_blocks: int  # error blocks found (a repeated one counted each time)
    used: list[LogBlock] = field(default_factory=list)
    failing_rank: int | None = None


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
    log: LogRead | None = None  # a whole log: what was read and the lines the answer used

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


# ---------------------------------------------------------------- the reports of the other commands
#
# Each has ``schema_version`` and ``kind`` (the command: lint | mem | show | factcheck | gaps) first in its
# JSON; ``to_dict()`` is the command's ``--json`` object. The fields without a default come first in the
# class; ``schema_version`` and ``kind`` have defaults so a report is built with the facts only.


class _Report:
    """What every report shares: ``to_dict()`` with ``schema_version`` and ``kind`` first."""

    def to_dict(self) -> dict[str, Any]:
        d = to_dict(self)
        return {"schema_version": d.pop("schema_version"), "kind": d.pop("kind"), **d}


@dataclass
class SeverityCounts:
    """How many findings of each severity."""

    error: int = 0
    warning: int = 0
    info: int = 0


@dataclass
class LintVersion:
    """A release ``kb lint`` judged a package at: the user's, or one it assumed (the front end's requirement)."""

    package: str
    version: str
    origin: Literal["given", "assumed"]
    reason: str  # in the report's language: "llamafactory 0.9.5 requires transformers<=5.6.0,>=4.55.0: ..."


@dataclass
class LintReport(_Report):
    """``kb lint``: what a config file really does, in the report's language."""

    lang: Lang
    file: str  # the name given (a path, or <stdin>)
    # deepspeed | accelerate | training_args | launch | unknown, or the front end a key: value file is written for:
    # llamafactory | axolotl | trl | swift (kb.doctor.dialect)
    config_kind: str
    config_format: str  # json | hjson | yaml | cmdline
    findings: list[Finding]  # in file order: line, severity, path, code
    counts: SeverityCounts
    versions: list[LintVersion] = field(default_factory=list)  # the releases judged at (empty: the newest recorded)
    schema_version: str = SCHEMA_VERSION
    kind: Literal["lint"] = "lint"


@dataclass
class SetupValue:
    """One ``kb mem`` setting echoed back: the option (kb.memory.setup.OPTIONS), its label, the value used."""

    name: str  # the option's name: model, gpus, stage, offload, micro_batch, ...
    label: str  # in the report's language
    value: str | bool | int | float | None  # None: not set (no --cpu-mem: host RAM not checked)
    text: str  # the value as a reader sees it, in the report's language (on / off, 开 / 关, "-" when not set)
    given: bool  # the user set it; false: the option's default


@dataclass
class DeepSpeedEstimate:
    """DeepSpeed's own model-state estimator for the same setup, shown for reference (not added to kb's figure)."""

    function: str  # estimate_zero2_model_states_mem_needs | estimate_zero3_model_states_mem_needs
    gpu_bytes: int
    cpu_bytes: int
    gpu_gib: float
    cpu_gib: float


@dataclass
class MemReport(_Report, Memory):
    """``kb mem``: the Memory an answer carries, plus the setup it was computed for and the explain data."""

    lang: Lang = "en"
    setup: list[SetupValue] = field(default_factory=list)  # every option, in the order of kb.memory.setup.OPTIONS
    shape: str | None = None  # the model shape used (a preset or a config.json); None: a bare parameter count
    params: int = 0
    trainable_params: int = 0
    terms: list[MemoryTerm] = field(default_factory=list)  # every GPU term of every phase (``gpu``: the peak's)
    fits_host: bool | None = None  # None: host RAM not given
    host_verdict: str = "unknown"  # fits | tight | does not fit | unknown
    deepspeed_estimator: DeepSpeedEstimate | None = None
    schema_version: str = SCHEMA_VERSION
    kind: Literal["mem"] = "mem"

    def setting(self, name: str) -> Any:
        """The value of one option of ``setup`` (None when the report has no such option)."""
        return next((v.value for v in self.setup if v.name == name), None)


@dataclass
class ShowReport(_Report):
    """``kb show``: one entry, as the same Result ``kb ask`` returns (everything in it: causes, all myths)."""

    lang: Lang
    result: Result
    schema_version: str = SCHEMA_VERSION
    kind: Literal["show"] = "show"


@dataclass
class NameCheck:
    """One parameter-like name of the text and the registry's verdict on it."""

    name: str
    verdict: Verdict
    message: str  # in the report's language
    registry_id: str | None
    suggestions: list[str]  # the nearest real names
    line: int  # the first line it appears on
    lines: list[int] = field(default_factory=list)  # every line it appears on
    reason: str | None = None  # does-not-exist: where it was judged; unverified: why kb cannot say


@dataclass
class FactcheckReport(_Report):
    """``kb factcheck``: every parameter-like name in a text, judged against the registry."""

    lang: Lang
    file: str
    names: list[NameCheck]  # in order of first appearance
    counts: dict[str, int]  # verdict -> how many names (only the verdicts that occur)
    truncated_at: int | None = None  # the text was longer: only its first N characters were checked
    schema_version: str = SCHEMA_VERSION
    kind: Literal["factcheck"] = "factcheck"


@dataclass
class GapGroup:
    """Bot questions close in meaning that the KB did not answer well."""

    count: int
    why: dict[str, int]  # unanswered | low_score | downvoted -> how many of the group's questions
    examples: dict[str, list[str]]  # language -> up to 3 of the questions
    closest_entries: list[str]  # the entries the answers came closest to
    downvote_reasons: dict[str, int]
    first_seen: float  # epoch seconds
    last_seen: float
    platforms: list[str]


@dataclass
class GapsReport(_Report):
    """``kb gaps``: the unanswered, low-score and down-voted bot questions, grouped by meaning."""

    since: float | None  # epoch seconds; None: everything in the store
    questions: int
    groups: list[GapGroup]  # largest first
    threshold: float | None = None  # the similarity that joins a group (None when there was nothing to group)
    schema_version: str = SCHEMA_VERSION
    kind: Literal["gaps"] = "gaps"


REPORTS: dict[str, type] = {
    "lint": LintReport,
    "mem": MemReport,
    "show": ShowReport,
    "factcheck": FactcheckReport,
    "gaps": GapsReport,
}


# ---------------------------------------------------------------- building reports from the core's values


def finding(f: Any, lang: str) -> Finding:
    """A ``kb.doctor.lint`` Finding (both languages, ``.text(lang)``) as the contract's Finding in ``lang`` (the
    English text where a rule has no Chinese one)."""
    msg, sug = f.text(lang)
    en_msg, en_sug = f.text("en")
    return Finding(f.code, f.severity, f.path, f.line, msg or en_msg, sug or en_sug, f.entry)


def lint_report(
    file: str,
    config_kind: str,
    config_format: str,
    findings: Iterable[Any],
    lang: str,
    versions: Iterable[Any] = (),
) -> LintReport:
    """``findings``: ``kb.doctor.lint`` Findings (judged in ``lang``) or the contract's own; ``versions``:
    ``kb.doctor.dialect.AssumedVersion``s."""
    fs = [f if isinstance(f, Finding) else finding(f, lang) for f in findings]
    counts = SeverityCounts(*(sum(f.severity == s for f in fs) for s in ("error", "warning", "info")))
    vs = [
        LintVersion(v.package, v.version, v.origin, v.reason_zh if lang == "zh" else v.reason)  # type: ignore[arg-type]
        for v in versions
    ]
    return LintReport(lang, file, config_kind, config_format, fs, counts, vs)  # type: ignore[arg-type]


def factcheck_report(file: str, verdicts: Iterable[Any], lang: str, truncated_at: int | None = None) -> FactcheckReport:
    """``verdicts``: ``kb.registry.factcheck.NameVerdict`` objects (already judged in ``lang``)."""
    names = [
        NameCheck(v.name, v.verdict, v.message, v.registry_id, list(v.suggestions), v.line, list(v.lines), v.reason)
        for v in verdicts
    ]
    order = typing.get_args(Verdict)
    counts = {k: n for k in order if (n := sum(x.verdict == k for x in names))}
    return FactcheckReport(lang, file, names, counts, truncated_at)  # type: ignore[arg-type]


def show_report(result: Result, lang: str) -> ShowReport:
    return ShowReport(lang, result)  # type: ignore[arg-type]


def to_dict(obj: Any) -> Any:
    """Dataclasses to plain JSON-ready values (None-valued optional fields are kept: the schema lists them)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


T = TypeVar("T")


def from_dict(cls: type[T], data: Any) -> T:
    """The typed value of a JSON object (``to_dict``'s output, or a newer minor version's): fields this version
    does not know are ignored, as the contract says readers must; a missing field takes its default."""
    return _from(cls, data)


def _from(tp: Any, data: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if data is None or tp is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        for a in args:
            if a is type(None):
                continue
            if dataclasses.is_dataclass(a) and isinstance(data, dict):
                return _from(a, data)
        return data  # a union of plain JSON types: the value as it is
    if origin is list:
        return [_from(args[0], x) for x in data]
    if origin is dict:
        return {k: _from(args[1], v) for k, v in data.items()}
    if dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise TypeError(f"{tp.__name__}: expected a JSON object, got {type(data).__name__}")
        hints = typing.get_type_hints(tp)
        known = {f.name: f for f in dataclasses.fields(tp)}
        missing = [
            n
            for n, f in known.items()
            if n not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            raise TypeError(f"{tp.__name__}: missing field {', '.join(missing)}")
        return tp(**{n: _from(hints[n], data[n]) for n in known if n in data})
    return data


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
        return {"type": simple[tp]}
    raise TypeError(f"no JSON Schema for {tp!r}")


# a reader of 2.0 reads every 2.x: a newer minor version only adds fields, which readers ignore
VERSION_PATTERN = rf"^{SCHEMA_MAJOR}\.\d+$"


def _class_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """Every field required (None-valued ones are printed too); other fields allowed (a newer minor version's)."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    if "schema_version" in names:  # the top-level objects print it first
        names = [
            "schema_version",
            *(["kind"] if "kind" in names else []),
            *(n for n in names if n not in ("schema_version", "kind")),
        ]
    props = {n: _type_schema(hints[n], defs) for n in names}
    if "schema_version" in props:
        props["schema_version"] = {"type": "string", "pattern": VERSION_PATTERN}
    doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    out: dict[str, Any] = {"type": "object", "properties": props, "required": names}
    if doc:
        out["description"] = doc
    return out


SCHEMAS: dict[str, tuple[type, str]] = {
    "answer": (
        Answer,
        "One object printed by `kb ask --json` (or one line of `--jsonl`): an Answer or an ErrorObject.",
    ),
    "lint": (LintReport, "The object printed by `kb lint --json`: a LintReport or an ErrorObject."),
    "mem": (MemReport, "The object printed by `kb mem --json`: a MemReport or an ErrorObject."),
    "show": (ShowReport, "The object printed by `kb show --json`: a ShowReport or an ErrorObject."),
    "factcheck": (FactcheckReport, "The object printed by `kb factcheck --json`: a FactcheckReport or an ErrorObject."),
    "gaps": (GapsReport, "The object printed by `kb gaps --json`: a GapsReport or an ErrorObject."),
}


def json_schema(name: str = "answer") -> dict[str, Any]:
    """The JSON Schema of what ``kb <name> --json`` prints: its answer or report, or an error object."""
    if name not in SCHEMAS:
        raise KeyError(f"no schema {name!r}; choose from {', '.join(SCHEMAS)}")
    cls, description = SCHEMAS[name]
    defs: dict[str, Any] = {}
    top = _type_schema(cls, defs)
    error = _type_schema(ErrorObject, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"kb {name}",
        "description": description,
        "anyOf": [top, error],
        "$defs": dict(sorted(defs.items())),
    }


def schema_file(name: str) -> str:
    """The file name of a schema under docs/: answer.schema.json, lint.schema.json, ..."""
    return f"{name}.schema.json"


def schema_text(name: str) -> str:
    import json

    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m kb.contract``: print or write the JSON Schemas (docs/*.schema.json)."""
    import argparse
    import sys
    from pathlib import Path

    ap = argparse.ArgumentParser(
        prog="python -m kb.contract",
        description="Print the JSON Schema of one command's --json output, or write every schema into a folder.",
    )
    ap.add_argument(
        "name", nargs="?", default="answer", choices=list(SCHEMAS), help="which schema to print (default: answer)"
    )
    ap.add_argument("--all", metavar="DIR", help="write every schema as DIR/<name>.schema.json")
    ap.add_argument("--check", metavar="DIR", help="exit 1 when a DIR/<name>.schema.json differs from the classes")
    a = ap.parse_args(argv)
    for folder in (a.all, a.check):
        if folder and not Path(folder).is_dir():
            ap.error(f"{folder}: no such folder")
    if a.all:
        for n in SCHEMAS:
            (Path(a.all) / schema_file(n)).write_text(schema_text(n), encoding="utf-8")
        return 0
    if a.check:
        stale = []
        for n in SCHEMAS:
            f = Path(a.check) / schema_file(n)
            if not f.is_file() or f.read_text(encoding="utf-8") != schema_text(n):
                stale.append(str(f))
        for f in stale:
            print(f"{f}: stale or missing; run python -m kb.contract --all {a.check}", file=sys.stderr)
        return 1 if stale else 0
    sys.stdout.write(schema_text(a.name))
    return 0


if __name__ == "__main__":  # python -m kb.contract --all docs/
    raise SystemExit(main())
