"""Curated entries: the pydantic schema and a loader that keeps YAML line numbers.

One YAML file per entry under ``data/entries/<id>.yaml``. The format is documented in
``docs/entry-format.md``; this module is its single source of truth.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from kb.lang import CJK_WIDE, HAS_CJK

AREAS = (
    "oom", "loading", "offload", "checkpoint", "precision", "config", "hang", "lora", "launch", "diagnose",
    "parallelism", "kernels", "rlhf", "frontends", "build",
)  # fmt: skip
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
CJK_RE = HAS_CJK
# YAML folding (">-") joins lines with a space; between two CJK characters that space is an artifact
_CJK = f"[{CJK_WIDE}]"
_FOLD_SPACE = re.compile(rf"(?<={_CJK})[ \t]*\n?[ \t]+(?={_CJK})|(?<={_CJK}) (?={_CJK})")


def unfold_cjk(s: str) -> str:
    return _FOLD_SPACE.sub("", s)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Text(_Model):
    """The same text in English and in Chinese."""

    en: str = Field(min_length=1)
    zh: str = Field(min_length=1)

    @field_validator("zh")
    @classmethod
    def _zh_is_chinese(cls, v: str) -> str:
        if not CJK_RE.search(v):
            raise ValueError("zh text contains no Chinese characters")
        return unfold_cjk(v)

    def get(self, lang: str) -> str:
        return self.zh if lang == "zh" else self.en


class TextList(_Model):
    """Several phrasings per language (symptoms, queries)."""

    en: list[str] = Field(min_length=1)
    zh: list[str] = Field(min_length=1)

    @field_validator("zh")
    @classmethod
    def _zh_is_chinese(cls, v: list[str]) -> list[str]:
        for s in v:
            if not CJK_RE.search(s):
                raise ValueError(f"zh phrasing has no Chinese characters: {s!r}")
        return v

    def all(self) -> list[tuple[str, str]]:
        return [("en", s) for s in self.en] + [("zh", s) for s in self.zh]


class Snippet(_Model):
    lang: Literal["json", "yaml", "python", "bash", "text"]
    code: str = Field(min_length=1)


class Fix(_Model):
    title: Text
    text: Text
    snippet: Snippet | None = None
    params: list[str] = []


MythVerdict = Literal["invented", "misplaced", "deprecated", "misused", "not-a-config-key"]


class MythName(_Model):
    """A name as a wrong claim used it, and what the registry must say about it.

    ``invented``: the registry knows no such name anywhere. ``misplaced``: the name exists, but
    not at ``at`` (where the claim put it). ``deprecated``: a deprecated alias or an accepted no-op.
    ``not-a-config-key``: real, but an API / method / kwarg / env var, not a config key.
    ``misused``: a real name whose effect the claim gets wrong.
    """

    name: str
    verdict: MythVerdict
    at: str | None = None  # the config path the claim put it under, e.g. "zero_optimization"


class Myth(_Model):
    claim: Text
    names: list[MythName] = []
    correction: Text


class Source(_Model):
    """Typed reference, as in OSV. code: file+line+package+version; docs/issue: URL;
    measurement: a file under data/measurements/ or a URL, plus what was measured."""

    type: Literal["code", "docs", "issue", "measurement"]
    url: str | None = None
    package: str | None = None
    version: str | None = None
    file: str | None = None
    line: str | None = None  # "113" or "382-386"
    note: str | None = None

    @model_validator(mode="after")
    def _typed(self) -> Source:
        if self.type == "code":
            missing = [k for k in ("package", "version", "file", "line") if not getattr(self, k)]
            if missing:
                raise ValueError(f"code source needs {', '.join(missing)}")
            if not re.fullmatch(r"\d+(-\d+)?", self.line or ""):
                raise ValueError(f"line must be N or N-M, got {self.line!r}")
        elif self.type in ("docs", "issue"):
            if not self.url or not self.url.startswith("https://"):
                raise ValueError(f"{self.type} source needs an https url")
        elif not (self.file or self.url) or not self.note:
            raise ValueError("measurement source needs a file or url and a note")
        return self


class External(_Model):
    """A name the text uses that is outside the registry (an NCCL / CUDA env var, a tool such as
    ``nvidia-smi``, another project's argument), with the source that documents it."""

    name: str = Field(min_length=1)
    source: Source


class Conditions(_Model):
    """What a user's config must look like for this entry to apply (used to boost/demote)."""

    zero_stage: list[int] | None = None
    offload_optimizer: list[Literal["none", "cpu", "nvme"]] | None = None
    offload_param: list[Literal["none", "cpu", "nvme"]] | None = None
    precision: list[Literal["bf16", "fp16", "fp32"]] | None = None
    method: list[Literal["full", "lora", "qlora"]] | None = None  # the fine-tuning method the entry is about
    when: list[Literal["start", "later", "eval", "save"]] | None = None  # the phase the failure happens in


SIGNATURE_FLAGS = re.I | re.S  # the flags kb.ask.retrieve compiles signatures with


class Signature(_Model):
    """A regex that detects a pasted error message, and real error lines it must match.

    ``examples`` are the text exactly as the library prints it (one concrete instance where the message
    has variable parts); each must be matched by ``re.search(pattern, example, re.I | re.S)``.
    """

    pattern: str = Field(min_length=1)
    examples: list[str] = Field(min_length=1)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v, SIGNATURE_FLAGS)
        except re.error as e:
            raise ValueError(f"signature {v!r} is not a valid regex: {e}") from None
        return v

    @field_validator("examples")
    @classmethod
    def _match(cls, v: list[str], info: ValidationInfo) -> list[str]:
        for i, ex in enumerate(v):
            if not ex.strip():
                raise ValueError(f"example {i} is empty: an example is an error line as the library prints it")
        pattern = info.data.get("pattern")
        if pattern is None:  # the pattern itself failed; that error is reported already
            return v
        rx = re.compile(pattern, SIGNATURE_FLAGS)
        for i, ex in enumerate(v):
            if not rx.search(ex):
                raise ValueError(f"signature {pattern!r} does not match its example {i}: {ex!r}")
        return v


class Withdrawn(_Model):
    date: dt.date
    reason: str


class Entry(_Model):
    id: str
    aliases: list[str] = []
    area: Literal[AREAS]  # type: ignore[valid-type]
    topics: list[str] = []
    title: Text
    summary: Text
    symptoms: TextList
    signatures: list[Signature] = []
    causes: list[Text] = Field(min_length=1)
    fixes: list[Fix] = Field(min_length=1)
    params: list[str] = []
    myths: list[Myth] = []
    external: list[External] = []
    conditions: Conditions | None = None
    applies_to: dict[str, str] = {}
    sources: list[Source] = Field(min_length=1)
    queries: TextList
    not_queries: list[str] = []
    related: list[str] = []
    published: dt.date
    modified: dt.date
    withdrawn: Withdrawn | None = None

    @field_validator("id")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not ID_RE.match(v):
            raise ValueError("id must be a lowercase slug (a-z, 0-9, single dashes)")
        return v

    @field_validator("applies_to")
    @classmethod
    def _specifiers(cls, v: dict[str, str]) -> dict[str, str]:
        for pkg, spec in v.items():
            try:
                SpecifierSet(spec)
            except InvalidSpecifier as e:
                raise ValueError(f"{pkg}: {e}") from None
        return v

    @model_validator(mode="after")
    def _queries(self) -> Entry:
        if len(self.queries.en) + len(self.queries.zh) < 4 or len(self.queries.zh) < 2:
            raise ValueError("queries: need at least 4, at least 2 of them in Chinese (and 1 in English)")
        return self

    def all_params(self) -> list[str]:
        """Entry-level params then fix params, de-duplicated, in order."""
        seen: dict[str, None] = dict.fromkeys(self.params)
        for f in self.fixes:
            seen.update(dict.fromkeys(f.params))
        return list(seen)


# ---------------------------------------------------------------- loading with line numbers


class EntryError(Exception):
    """A problem in one entry file, located by file, line and field."""

    def __init__(self, path: Path | str, line: int | None, field: str, message: str):
        self.path, self.line, self.field, self.message = Path(path), line, field, message
        loc = f"{self.path}:{line}" if line else str(self.path)
        super().__init__(f"{loc}: {field}: {message}" if field else f"{loc}: {message}")

    def to_dict(self) -> dict[str, Any]:
        return {"file": str(self.path), "line": self.line, "field": self.field, "message": self.message}


@dataclass
class LoadedEntry:
    entry: Entry
    path: Path
    node: yaml.Node = field(repr=False)

    def line_of(self, *loc: str | int) -> int | None:
        return node_line(self.node, loc)


def node_line(node: yaml.Node, loc: tuple[str | int, ...] | list[str | int]) -> int | None:
    """1-based line of the YAML node at ``loc`` (a pydantic-style path), or of its deepest parent."""
    line = node.start_mark.line + 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == str(part):
                    child = v
                    line = k.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


# libyaml's parser when PyYAML has it (the wheels do): 10x faster than the pure-Python one, same line marks
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml_file(path: Path) -> tuple[Any, yaml.Node]:
    """Parse YAML once into (data, node tree); raise EntryError with the line on syntax errors."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise EntryError(path, None, "", f"cannot read: {e}") from None
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()  # one parse: the node tree (for line numbers) ...
        data = loader.construct_document(node) if node is not None else None  # ... and the data built from it
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise EntryError(path, mark.line + 1 if mark else None, "", f"invalid YAML: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise EntryError(path, None, "", f"invalid YAML: {e}") from None
    finally:
        loader.dispose()
    if node is None:
        raise EntryError(path, 1, "", "file is empty")
    return data, node


def load_entry(path: Path) -> LoadedEntry:
    """Load and validate one entry file; the first problem raises EntryError (see load_entry_errors)."""
    loaded, errors = _load(path)
    if errors:
        raise errors[0]
    assert loaded is not None
    return loaded


def _load(path: Path) -> tuple[LoadedEntry | None, list[EntryError]]:
    try:
        data, node = parse_yaml_file(path)
    except EntryError as e:
        return None, [e]
    if not isinstance(data, dict):
        return None, [EntryError(path, 1, "", "top level must be a mapping")]
    try:
        entry = Entry.model_validate(data)
    except ValidationError as e:
        errs = []
        for err in e.errors():
            loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
            msg = err["msg"].removeprefix("Value error, ")
            errs.append(EntryError(path, node_line(node, loc), ".".join(map(str, loc)), msg))
        return None, errs
    loaded = LoadedEntry(entry, path, node)
    if path.stem != entry.id:
        return loaded, [
            EntryError(path, loaded.line_of("id"), "id", f"id {entry.id!r} must equal the file name {path.stem!r}")
        ]
    return loaded, []


def load_entry_errors(path: Path) -> tuple[LoadedEntry | None, list[EntryError]]:
    """All schema problems of one file (for ``kb check``)."""
    return _load(path)


def entry_files(root: Path) -> list[Path]:
    return sorted(root.glob("*.yaml"))


def load_entries(root: Path, include_withdrawn: bool = False) -> list[LoadedEntry]:
    """Load every entry under ``root``; raise the first EntryError."""
    out = [load_entry(p) for p in entry_files(root)]
    return [le for le in out if include_withdrawn or le.entry.withdrawn is None]
