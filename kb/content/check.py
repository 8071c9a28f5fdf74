"""``kb check``: every entry is well-formed and every name in it is real.

Every check is one function registered with ``@check`` in ``CHECKS``: a stable code (CHK001...), a
short name, a one-line summary, its scope (a file, one entry, or all entries together) and its own
cases: ``bad`` mutations of a real valid entry it must report and ``ok`` near misses it must not
(``EntryCase``; ``write_case`` puts one in a folder). ``tests/test_check.py`` runs every case; the
table of codes in docs/entry-format.md is generated from ``CHECKS`` (``python -m kb.content.check``).

Per entry: the schema (pydantic, with YAML line numbers); every param id resolves in the registry
and is not deprecated/removed unless one of the entry's myths is about exactly that; every key in a
JSON config snippet exists in DeepSpeed's schema; every myth name has the verdict the registry gives
it; related ids exist; code sources point at a real file and line when that package version is
installed. Across entries: ids and aliases are unique.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kb.ask.text import identifiers, looks_like_param
from kb.content.entries import Entry, EntryError, LoadedEntry, Source, entry_files, load_entry_errors
from kb.doctor.lint import FREE_FORM
from kb.registry.factcheck import OBJECT_PREFIXES, judge
from kb.registry.store import CONFIG_KINDS, Registry

BASE_ENTRY = "zero3-single-gpu-no-offload"  # the real, valid entry the cases mutate
SCOPES = ("file", "entry", "corpus")


@dataclass
class Problem:
    code: str
    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return (
            f"{loc}: {self.code} {self.field}: {self.message}" if self.field else f"{loc}: {self.code} {self.message}"
        )


# ---------------------------------------------------------------- the check registry


Edits = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class EntryCase:
    """Entry files to check together: the base entry with text replacements (each ``old`` must occur once),
    written as ``<file>.yaml``, plus ``extra`` files made the same way."""

    note: str
    edits: Edits = ()
    file: str = BASE_ENTRY
    extra: tuple[tuple[str, Edits], ...] = ()


@dataclass(frozen=True)
class Check:
    code: str
    name: str
    summary: str  # what it reports, one line (markdown)
    scope: str  # file | entry | corpus
    run: Callable[..., Iterable[Problem]] = field(repr=False)
    bad: tuple[EntryCase, ...] = ()
    ok: tuple[EntryCase, ...] = ()


CHECKS: dict[str, Check] = {}


def check(
    code: str, name: str, summary: str, *, scope: str, bad: list[EntryCase], ok: list[EntryCase]
) -> Callable[[Callable[..., Iterable[Problem]]], Callable[..., Iterable[Problem]]]:
    """Register the decorated generator as check ``code``.

    Its arguments by scope: file ``(path, loaded_or_None, schema_errors)``; entry ``(loaded, registry,
    known_ids)``; corpus ``(all_loaded)``. It yields Problems made with ``_p`` / ``_from_error``."""

    def register(fn: Callable[..., Iterable[Problem]]) -> Callable[..., Iterable[Problem]]:
        if code in CHECKS or scope not in SCOPES:
            raise ValueError(f"check {code}: registered twice or bad scope")
        CHECKS[code] = Check(code, name, summary, scope, fn, tuple(bad), tuple(ok))
        return fn

    return register


def write_case(case: EntryCase, folder: Path, base_text: str) -> Path:
    """Write a case's entry files into ``folder`` (created); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, edits in ((case.file, case.edits), *case.extra):
        text = base_text
        for old, new in edits:
            if text.count(old) != 1:
                raise ValueError(f"case {case.note!r}: {old!r} occurs {text.count(old)} times in the base entry")
            text = text.replace(old, new)
        (folder / f"{stem}.yaml").write_text(text, encoding="utf-8")
    return folder


def _from_error(code: str, e: EntryError) -> Problem:
    return Problem(code, str(e.path), e.line, e.field, e.message)


def _p(code: str, le: LoadedEntry, loc: tuple, msg: str) -> Problem:
    return Problem(code, str(le.path), le.line_of(*loc), ".".join(map(str, loc)), msg)


# ---------------------------------------------------------------- running them


def check_all(root: Path, registry: Registry) -> tuple[list[LoadedEntry], list[Problem]]:
    """Load and check every entry under ``root``: (the entries that loaded cleanly, problems by file and line)."""
    by_scope = {s: [CHECKS[c] for c in sorted(CHECKS) if CHECKS[c].scope == s] for s in SCOPES}
    problems: list[Problem] = []
    loaded: list[LoadedEntry] = []
    for path in entry_files(root):
        le, errs = load_entry_errors(path)
        for c in by_scope["file"]:
            problems.extend(c.run(path, le, errs))
        if le is not None and not errs:
            loaded.append(le)
    for c in by_scope["corpus"]:
        problems.extend(c.run(loaded))
    known = {name for le in loaded for name in [le.entry.id, *le.entry.aliases]}
    for le in loaded:
        for c in by_scope["entry"]:
            problems.extend(c.run(le, registry, known))
    problems.sort(key=lambda p: (p.file, p.line or 0))
    return loaded, problems


def check_entry(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> list[Problem]:
    """The per-entry checks of one loaded entry."""
    return [p for code in sorted(CHECKS) if CHECKS[code].scope == "entry" for p in CHECKS[code].run(le, reg, known_ids)]


def check_json(problems: list[Problem], unchecked: list[Unchecked], touched: list[Any] = ()) -> str:  # type: ignore[assignment]
    """``kb check --json``: the problems, the code sources CHK008 could not check, and the entries whose parameters
    the newest recorded releases changed (``touched_by_release``; info, not problems)."""
    return json.dumps(
        {
            "problems": [asdict(p) for p in problems],
            "unchecked": [asdict(u) for u in unchecked],
            "touched": [asdict(t) for t in touched],
        },
        ensure_ascii=False,
        indent=2,
    )


# ---------------------------------------------------------------- the checks, in code order


_SNIPPET_STAGE = '"stage": 3,'  # a line of the base entry's JSON snippet
_FIX0_PARAM = "      - deepspeed:zero_optimization.offload_param.device\n"  # a line of its first fix's params


def _fix0_id(key: str) -> str:
    """A params line linking a zero_optimization key added to the base entry's snippet (CHK011)."""
    return f"      - deepspeed:zero_optimization.{key}\n"


_FIRST_MYTH_NAMES = '    names: []\n    correction:\n      en: "With one GPU'


def _first_myth(names: str) -> Edits:
    return ((_FIRST_MYTH_NAMES, f'    names:\n      - {names}\n    correction:\n      en: "With one GPU'),)


_COPY = (("copy-entry", (("id: zero3-single-gpu-no-offload", "id: copy-entry"),)),)


@check(
    "CHK001",
    "schema",
    "the file is not a valid entry: YAML syntax, not a mapping, a missing / unknown / ill-typed key, "
    "`zh` text without Chinese",
    scope="file",
    bad=[
        EntryCase("an unknown key", (("area: oom", "area: oom\nseverity: high"),)),
        EntryCase(
            "a zh title in English",
            (
                (
                    '  zh: "单卡 ZeRO-3 不开 offload 等于没省显存：7B 全参微调光 model states 就要 ~113 GiB"',
                    '  zh: "ZeRO-3 on one GPU without offload saves nothing"',
                ),
            ),
        ),
        EntryCase("YAML syntax", (("area: oom", "area: [oom"),)),
    ],
    ok=[
        EntryCase("the shipped entry"),
        EntryCase("one topic fewer", (("topics: [oom_model_states, zero3_single_gpu]", "topics: [oom_model_states]"),)),
    ],
)
def chk001(path: Path, le: LoadedEntry | None, errs: list[EntryError]) -> Iterable[Problem]:
    if le is None:  # a loaded entry's only error is its id (CHK009)
        yield from (_from_error("CHK001", e) for e in errs)


@check(
    "CHK002",
    "duplicate-id",
    "an id or alias already used by another entry",
    scope="corpus",
    bad=[
        EntryCase(
            "alias is another entry's id",
            extra=(
                (
                    "copy-entry",
                    (
                        ("id: zero3-single-gpu-no-offload", "id: copy-entry"),
                        ("aliases: []", "aliases: [zero3-single-gpu-no-offload]"),
                    ),
                ),
            ),
        )
    ],
    ok=[
        EntryCase(
            "an unused alias",
            extra=(
                (
                    "copy-entry",
                    (("id: zero3-single-gpu-no-offload", "id: copy-entry"), ("aliases: []", "aliases: [old-copy]")),
                ),
            ),
        )
    ],
)
def chk002(loaded: list[LoadedEntry]) -> Iterable[Problem]:
    ids: dict[str, LoadedEntry] = {}
    for le in loaded:
        for name in [le.entry.id, *le.entry.aliases]:
            if name in ids:
                yield _p("CHK002", le, ("id",), f"{name!r} is already used by {ids[name].path.name}")
            ids[name] = le


def _param_locs(e: Entry) -> list[tuple[str, tuple]]:
    """Each of ``Entry.all_params()`` with where it is first written (entry params, then fix params)."""
    out = []
    for rid in e.all_params():
        if rid in e.params:
            out.append((rid, ("params", e.params.index(rid))))
        else:
            i = next(i for i, f in enumerate(e.fixes) if rid in f.params)
            out.append((rid, ("fixes", i, "params", e.fixes[i].params.index(rid))))
    return out


_ENTRY_PARAM = "\nparams:\n  - deepspeed:zero_optimization.stage\n"


@check(
    "CHK003",
    "unknown-param",
    "a param id (entry or fix `params`) that is not in the registry (with the nearest real ones)",
    scope="entry",
    bad=[EntryCase("invented id", ((_ENTRY_PARAM, "\nparams:\n  - deepspeed:zero_force_opt_offload\n"),))],
    ok=[EntryCase("real id", ((_ENTRY_PARAM, "\nparams:\n  - deepspeed:zero_optimization.overlap_comm\n"),))],
)
def chk003(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    for rid, loc in _param_locs(le.entry):
        if reg.get(rid) is None:
            lk = reg.resolve(rid.split(":", 1)[-1])
            hint = (
                f"; did you mean {lk.record['id']!r}?"
                if lk.record
                else (f"; did you mean {', '.join(lk.suggestions)}?" if lk.suggestions else "")
            )
            yield _p("CHK003", le, loc, f"{rid!r} is not in the registry{hint}")


_APPLIES = 'applies_to:\n  deepspeed: ">=0.4.2"\n'


@check(
    "CHK004",
    "deprecated-param",
    "a deprecated or removed param id that the entry may not use: it has no myth about that name, does not "
    "also list the id it was renamed to, and its `applies_to` admits no recorded release where the id is live",
    scope="entry",
    bad=[
        EntryCase("deprecated id", ((_ENTRY_PARAM, "\nparams:\n  - deepspeed:zero_optimization.cpu_offload\n"),)),
        EntryCase(
            "removed id, applies_to only to releases without it",
            (
                (_ENTRY_PARAM, "\nparams:\n  - transformers:TrainingArguments.group_by_length\n"),
                (_APPLIES, _APPLIES + '  transformers: ">=5.0"\n'),
            ),
        ),
    ],
    ok=[
        EntryCase(
            "deprecated id with a myth about it",
            ((_ENTRY_PARAM, "\nparams:\n  - deepspeed:zero_optimization.cpu_offload\n"),)
            + _first_myth("{name: cpu_offload, verdict: deprecated}"),
        ),
        EntryCase(
            "renamed id listed with its new spelling",
            (
                (
                    _ENTRY_PARAM,
                    "\nparams:\n  - deepspeed:zero_optimization.cpu_offload\n"
                    "  - deepspeed:zero_optimization.offload_optimizer\n",
                ),
            ),
        ),
        EntryCase(
            "removed id, live in a release applies_to admits",
            (
                (_ENTRY_PARAM, "\nparams:\n  - transformers:TrainingArguments.group_by_length\n"),
                (_APPLIES, _APPLIES + '  transformers: "<5"\n'),
            ),
        ),
    ],
)
def chk004(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    about = {n.name for m in le.entry.myths for n in m.names if n.verdict == "deprecated"}
    listed = set(le.entry.all_params())
    for rid, loc in _param_locs(le.entry):
        rec = reg.get(rid)
        if not rec or not (rec["deprecated"] or rec["status"] == "removed") or rec["name"] in about:
            continue
        if any(s["id"] != rid and s["id"] in listed for s in reg.spellings(rid)):
            continue  # (b) the answer shows both spellings, each with its releases
        if _live_release(reg, rid, le.entry.applies_to.get(rec["package"], "")):
            continue  # (c) correct for a release the entry applies to
        what = "removed" if rec["status"] == "removed" else "deprecated"
        repl = f" (use {rec['replacement']})" if rec.get("replacement") else ""
        yield _p(
            "CHK004",
            le,
            loc,
            f"{rid!r} is {what}{repl} in every release the entry applies to; only an entry with a myth about it, "
            "or that also lists its new spelling, may use it",
        )


def _live_release(reg: Registry, rid: str, spec: str) -> str | None:
    """The newest recorded release, admitted by ``spec`` (an applies_to specifier; empty: any), in which the
    record is neither deprecated nor removed; None when there is none."""
    from packaging.specifiers import SpecifierSet

    admits = SpecifierSet(spec or "")
    live = [h["version"] for h in reg.history(rid) if not h.get("deprecated") and h.get("status") != "removed"]
    return next((v for v in reversed(live) if admits.contains(v, prereleases=True)), None)


def _json_snippets(e: Entry) -> Iterable[tuple[int, Any]]:
    """(fix index, parsed JSON or the JSONDecodeError) of each json snippet."""
    for i, fix in enumerate(e.fixes):
        if fix.snippet and fix.snippet.lang == "json":
            try:
                yield i, json.loads(fix.snippet.code)
            except json.JSONDecodeError as err:
                yield i, err


@check(
    "CHK005",
    "snippet-key",
    'a key in a `json` fix snippet that is not a DeepSpeed config path (`"auto"` values are fine; names a myth '
    "is about are allowed)",
    scope="entry",
    bad=[EntryCase("misplaced nvme_path", ((_SNIPPET_STAGE, '"stage": 3, "nvme_path": "/nvme",'),))],
    ok=[
        EntryCase(
            "a real key",
            (
                (_SNIPPET_STAGE, '"stage": 3, "overlap_comm": true,'),
                (_FIX0_PARAM, _FIX0_PARAM + _fix0_id("overlap_comm")),
            ),
        )
    ],
)
def chk005(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    myth_names = {n.name for m in le.entry.myths for n in m.names}
    for i, data in _json_snippets(le.entry):
        if not isinstance(data, dict):
            continue
        for path in _key_paths(data):
            if path.startswith(FREE_FORM) or path.rsplit(".", 1)[-1] in myth_names:
                continue
            if reg.get(f"deepspeed:{path}") is not None:
                continue
            lk = reg.resolve(path, package="deepspeed")
            if lk.status not in ("exact", "alias"):
                near = lk.suggestions or [c["path"] for c in lk.candidates]
                hint = f" (did you mean {', '.join(near)}?)" if near else ""
                yield _p(
                    "CHK005", le, ("fixes", i, "snippet"), f"snippet key {path!r} is not a DeepSpeed config key{hint}"
                )


def _key_paths(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        path = f"{prefix}{k}"
        out.append(path)
        if isinstance(v, dict) and not path.startswith(FREE_FORM):
            out.extend(_key_paths(v, path + "."))
    return out


@check(
    "CHK006",
    "myth-verdict",
    "a myth name whose verdict (`invented`, `misplaced`, `deprecated`, `not-a-config-key`, `misused`) the registry "
    "contradicts",
    scope="entry",
    bad=[
        EntryCase("a real key called invented", _first_myth("{name: zero_force_ds_cpu_optimizer, verdict: invented}"))
    ],
    ok=[EntryCase("an invented key called invented", _first_myth("{name: zero_force_opt_offload, verdict: invented}"))],
)
def chk006(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    for i, myth in enumerate(le.entry.myths):
        for j, mn in enumerate(myth.names):
            lk = reg.resolve(mn.name, context=mn.at)
            got = lk.status
            ok = {
                "invented": got == "unknown",
                "misplaced": got == "misplaced",
                "deprecated": got in ("deprecated", "removed")
                or any(
                    r.get("noop") or r.get("deprecated") for r in [*([lk.record] if lk.record else []), *lk.candidates]
                ),
                "not-a-config-key": got == "not-a-config-key",
                "misused": got in ("exact", "alias", "not-a-config-key"),
            }[mn.verdict]
            if not ok:
                where = f" under {mn.at!r}" if mn.at else ""
                rid = f" ({lk.record['id']})" if lk.record else ""
                yield _p(
                    "CHK006",
                    le,
                    ("myths", i, "names", j),
                    f"{mn.name!r}{where} is marked {mn.verdict} but the registry says {got}{rid}",
                )


@check(
    "CHK007",
    "related-missing",
    "a `related` id that no entry has (as id or alias)",
    scope="entry",
    bad=[EntryCase("no such entry", (("related: []", "related: [no-such-entry]"),))],
    ok=[EntryCase("an entry beside it", (("related: []", "related: [copy-entry]"),), extra=_COPY)],
)
def chk007(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    for i, rel in enumerate(le.entry.related):
        if rel not in known_ids:
            yield _p("CHK007", le, ("related", i), f"no entry with id {rel!r}")


@check(
    "CHK008",
    "code-source",
    "a code source (of the entry or of an `external` name) whose file does not exist, or whose line is past the "
    "end, in the installed package version (checked only when that exact version is installed; the sources it "
    "cannot check are listed with the reason by `unchecked_code_sources`: info, not a problem)",
    scope="entry",
    bad=[
        EntryCase("line past the end", (("line: 4016-4050", 'line: "999999"'),)),
        EntryCase(
            "no such file", (("file: deepspeed/runtime/zero/stage3.py", "file: deepspeed/runtime/zero/stage4.py"),)
        ),
    ],
    ok=[
        EntryCase("one line", (("line: 4016-4050", 'line: "4016"'),)),
        EntryCase(
            "a version not installed",
            (
                ("line: 4016-4050", 'line: "999999"'),
                (
                    "version: 0.19.8\n    file: deepspeed/runtime/zero/stage3.py",
                    "version: 0.0.1\n    file: deepspeed/runtime/zero/stage3.py",
                ),
            ),
        ),
    ],
)
def chk008(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    for loc, src in _code_sources(le):
        msg, _unchecked = _check_code_source(src.package or "", src.version or "", src.file or "", src.line or "")
        if msg:
            yield _p("CHK008", le, loc, msg)


def _code_sources(le: LoadedEntry) -> Iterable[tuple[tuple, Source]]:
    """(location, source) of every code source of the entry and of its ``external`` names."""
    located = [(("sources", i), s) for i, s in enumerate(le.entry.sources)]
    located += [(("external", i, "source"), x.source) for i, x in enumerate(le.entry.external)]
    return [(loc, src) for loc, src in located if src.type == "code"]


@functools.cache  # CHK008 and unchecked_code_sources ask about the same sources; many cite one file
def _check_code_source(package: str, version: str, file: str, line: str) -> tuple[str | None, str | None]:
    """(problem, why it was not checked). When that exact package version is installed, the file must exist
    and have that line; otherwise the source is not checked, and the second says why."""
    try:
        installed = md.version(package).split("+")[0]
    except md.PackageNotFoundError:
        return None, f"{package} is not installed"
    if installed != version:
        return None, f"{package} {installed} is installed, not {version}"
    dist = md.distribution(package)
    path = Path(str(dist.locate_file(file)))
    if not path.is_file():
        return f"code source {file!r} does not exist in {package} {version}", None
    last = int(line.split("-")[-1])
    n = sum(1 for _ in path.open(encoding="utf-8", errors="replace"))
    if last > n:
        return f"code source {file}:{line} is past the end of the file ({n} lines) in {package} {version}", None
    return None, None


@dataclass(frozen=True)
class Unchecked:
    """A code source CHK008 could not check (its package, or that version of it, is not installed): info for
    ``kb check``, not a problem."""

    file: str  # the entry file
    line: int | None
    field: str  # sources.0, external.2.source
    entry: str  # the entry id
    source: str  # package version file:line, as cited
    reason: str  # "trl is not installed", "deepspeed 0.19.8 is installed, not 0.16.9"

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return f"{loc}: CHK008 info {self.field}: not checked: {self.source} ({self.reason})"


def unchecked_code_sources(loaded: list[LoadedEntry]) -> list[Unchecked]:
    """Every code source of ``loaded`` that CHK008 does not check, with the reason, in file and line order."""
    out = []
    for le in loaded:
        for loc, src in _code_sources(le):
            _msg, why = _check_code_source(src.package or "", src.version or "", src.file or "", src.line or "")
            if why:
                cited = f"{src.package} {src.version} {src.file}:{src.line}"
                out.append(Unchecked(str(le.path), le.line_of(*loc), ".".join(map(str, loc)), le.entry.id, cited, why))
    return sorted(out, key=lambda u: (u.file, u.line or 0))


def unchecked_summary(unchecked: list[Unchecked], most: int = 5) -> list[str]:
    """One line per reason for ``kb check``: how many code sources were not checked, and in which entries."""
    by_reason: dict[str, list[Unchecked]] = {}
    for u in unchecked:
        by_reason.setdefault(u.reason, []).append(u)
    lines = []
    for why, us in sorted(by_reason.items()):
        ids = sorted({u.entry for u in us})
        more = f" (+{len(ids) - most} more)" if len(ids) > most else ""
        lines.append(
            f"CHK008 info: {len(us)} code source(s) not checked ({why}), in {len(ids)} "
            f"{'entry' if len(ids) == 1 else 'entries'}: {', '.join(ids[:most])}{more}"
        )
    return lines


@check(
    "CHK009",
    "id-file-name",
    "the `id` differs from the file name (`data/entries/<id>.yaml`)",
    scope="file",
    bad=[EntryCase("renamed file", file="zero3-single-gpu")],
    ok=[
        EntryCase(
            "id renamed with its file",
            (("id: zero3-single-gpu-no-offload", "id: zero3-single-gpu"),),
            file="zero3-single-gpu",
        )
    ],
)
def chk009(path: Path, le: LoadedEntry | None, errs: list[EntryError]) -> Iterable[Problem]:
    if le is not None and path.stem != le.entry.id:
        yield Problem(
            "CHK009",
            str(path),
            le.line_of("id"),
            "id",
            f"id {le.entry.id!r} must equal the file name {path.stem!r}",
        )


@check(
    "CHK010",
    "snippet-json",
    "a `json` fix snippet that does not parse",
    scope="entry",
    bad=[EntryCase("a doubled comma", ((_SNIPPET_STAGE, '"stage": 3,,'),))],
    ok=[
        EntryCase(
            'an "auto" value',
            (
                (_SNIPPET_STAGE, '"stage": 3, "reduce_bucket_size": "auto",'),
                (_FIX0_PARAM, _FIX0_PARAM + _fix0_id("reduce_bucket_size")),
            ),
        )
    ],
)
def chk010(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    for i, data in _json_snippets(le.entry):
        if isinstance(data, json.JSONDecodeError):
            yield _p("CHK010", le, ("fixes", i, "snippet"), f"JSON snippet does not parse: {data}")


# ---------------------------------------------------------------- CHK011: every shown name is linked
#
# The name finder: what the fact-check finds in prose (``kb.ask.text.identifiers`` + ``looks_like_param``),
# plus a name written alone in inline backticks, plus the names of snippets (JSON / YAML key paths,
# python kwargs and calls, bash flags and ``NAME=`` assignments). File names, paths, URLs and a few
# abbreviations ("e.g") are never names. Each name must be linked: a registry record listed in that
# fix's ``params`` or the entry's, a name of one of the entry's myths, or an ``external`` declaration.

_FILE_EXT = re.compile(
    r"\.(?:py|json|jsonl|ya?ml|sh|txt|md|bin|pt|pth|safetensors|cfg|toml|log|cpp|cu|h|so|o|whl|gz|tar|zip|csv|lock"
    r"|pickle|pkl|html?|org|com|io|ai)$",
    re.I,
)
_NOT_NAMES = frozenset({"e.g", "i.e", "etc", "vs", "a.k.a", "major.minor"})
# code on these is Python's own (json.load, re.fullmatch, dict.get): not a name the registry or an entry links
_STDLIB = frozenset(
    "json re os sys shutil glob argparse itertools functools binascii math time subprocess pathlib collections "
    "typing dict list str int float set tuple bytes object type logging random copy pickle io gc weakref".split()
)
_DUNDER = re.compile(r"(?<![\w.])__\w+__")
_PY_WORDS = frozenset({"True", "False", "None", "self", "cls", "print", "len", "dict", "list", "int", "str", "float"})
_BACKTICK = re.compile(r"`([^`\n]+)`")
_QUOTED = re.compile(r'"[^"\n]*"')  # a quoted message: inline code marks in it are the message's own text
_BIG_NUMBER = re.compile(r"\d{3,}")  # global_step1000, checkpoint-2000: a value (a step, a size), not a name
_ONE_NAME = re.compile(r"(?:--?|\.)?[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?", re.ASCII)
_COMMAND = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:-[A-Za-z][A-Za-z0-9_]*)+", re.ASCII)  # nvidia-smi
_URL = re.compile(r"https?://\S+|www\.\S+|\b(?:[\w-]+\.)+(?:org|com|io|ai|dev|net)/\S*")  # pytorch.org/memory_viz
# a path: absolute, home- or dot-relative, or two slashes or more (deepspeed/runtime/zero/stage3.py)
_PATH = re.compile(
    r"(?<![\w:])(?:~|\.{1,2})?/[\w.\-/~*]+|\b[\w.\-~]+(?:/[\w.\-~*]+){2,}|\$\{?[A-Za-z_]\w*\}?/[\w.\-/~*]*"
)
# a format field of a quoted message template ("- ds {key}={ds_val} vs hf {hf_key}={hf_val}")
_FORMAT_FIELD = re.compile(r"\{[A-Za-z_]\w*\}")
# a name a python snippet reads as a value (an argument, an index, an iterable, a right-hand side) without
# defining, calling or importing it: the reader's own variable (adapter_dir, train_loader, ds_config)
_PY_VALUE_USE = r"(?:(?<=[(\[,=:])|(?<=[(\[,=:] )|(?<=\bin )|(?<=\breturn ))"
_KWARG = re.compile(r"(?<![\w.\"'])([A-Za-z_]\w*)=(?![=\s])", re.ASCII)
_ENV_SET = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)=", re.ASCII)
_PY_LOCAL = re.compile(
    r"^\s*([A-Za-z_]\w*)\s*(?::[^=\n]+)?=(?!=)|\bfor\s+([A-Za-z_]\w*)\s*(?:,\s*([A-Za-z_]\w*)\s*)?in\b"
    r"|\bdef\s+([A-Za-z_]\w*)|\bas\s+([A-Za-z_]\w*)|\bclass\s+([A-Za-z_]\w*)|\blambda\s+([A-Za-z_]\w*)"
    r"|^\s*([A-Za-z_]\w*)\s*,\s*([A-Za-z_]\w*)\s*=",
    re.M | re.ASCII,
)
_PY_DEF_ARGS = re.compile(r"\bdef\s+\w+\s*\(([^)]*)\)", re.ASCII)


def python_locals(code: str) -> set[str]:
    """Names a python snippet defines itself: assigned, loop and ``as`` variables, functions, classes, parameters."""
    out = {g for m in _PY_LOCAL.finditer(code) for g in m.groups() if g}
    for m in _PY_DEF_ARGS.finditer(code):
        out.update(a.split("=")[0].split(":")[0].strip().lstrip("*") for a in m.group(1).split(",") if a.strip())
    return out - {""}


_PY_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+\(?([^)\n#]+)\)?|^\s*import\s+([\w., ]+)", re.M | re.ASCII)


@dataclass(frozen=True)
class ShownName:
    """A code-like name found in one shown text field."""

    name: str
    loc: tuple  # the field it is in: ("summary", "en"), ("fixes", 0, "snippet"), ...
    how: str  # prose | backtick | json | yaml | python | bash (json/yaml: name is the key path)
    fix: int | None  # the fix it belongs to, if any
    section: bool = False  # a json/yaml key whose value is a mapping
    local: bool = False  # python: a dotted name on a variable the snippet defines
    callee: str | None = None  # python kwarg: the function it is passed to ("" when kb cannot tell)


def shown_texts(e: Entry) -> list[tuple[tuple, int | None, str, str]]:
    """Every text an answer shows: (field, fix index or None, kind, text); kind is prose or a snippet language."""
    out: list[tuple[tuple, int | None, str, str]] = []
    for lang in ("en", "zh"):
        out.append((("title", lang), None, "prose", e.title.get(lang)))
        out.append((("summary", lang), None, "prose", e.summary.get(lang)))
        out.extend(((("causes", i, lang), None, "prose", c.get(lang)) for i, c in enumerate(e.causes)))
        for i, f in enumerate(e.fixes):
            out.append((("fixes", i, "title", lang), i, "prose", f.title.get(lang)))
            out.append((("fixes", i, "text", lang), i, "prose", f.text.get(lang)))
        for i, m in enumerate(e.myths):
            out.append((("myths", i, "claim", lang), None, "prose", m.claim.get(lang)))
            out.append((("myths", i, "correction", lang), None, "prose", m.correction.get(lang)))
    for i, f in enumerate(e.fixes):
        if f.snippet:
            kind = f.snippet.lang if f.snippet.lang != "text" else "prose"
            out.append((("fixes", i, "snippet"), i, kind, f.snippet.code))
    return out


def _strip_noise(text: str) -> str:
    return _FORMAT_FIELD.sub(" ", _DUNDER.sub(" ", _PATH.sub(" ", _URL.sub(" ", text))))


_RESULT_ATTR = re.compile(r"\)\.([A-Za-z_]\w*)", re.ASCII)
_SHELL_ASSIGN = re.compile(r"^[ \t]*([A-Za-z_]\w*)=(?:\$\([^\n]*\)|\S*)[ \t]*(?:#.*)?$", re.M | re.ASCII)


def shell_variables(code: str) -> set[str]:
    """Variables a bash snippet sets for itself: assigned alone on a line, not exported, and read back as
    ``$NAME`` (``CKPT=output/checkpoint-2000`` ... ``ls $CKPT``); an ``export`` or ``NAME=1 cmd`` is an
    environment variable for a program, and stays a name."""
    return {n for n in (m.group(1) for m in _SHELL_ASSIGN.finditer(code)) if re.search(rf"\$\{{?{n}\b", code)}


def python_inputs(code: str) -> set[str]:
    """Bare names a python snippet only reads as values, never defines, calls, imports or uses as an object:
    the reader's own variables (``PeftModel.from_pretrained(base, adapter_dir)``)."""
    body = _PY_IMPORT.sub(" ", _strip_noise(code))
    body = re.sub(r"#[^\n]*", " ", body)
    defined = python_locals(code)
    out = set()
    for n in set(re.findall(r"(?<![\w.])[a-z_][a-z0-9_]*(?![\w])", body, re.ASCII)) - defined:
        uses = list(re.finditer(rf"(?<![\w.]){n}(?!\w)", body))
        if uses and all(
            re.search(_PY_VALUE_USE + r"$", body[: u.start()]) and re.match(r"\s*(?:[,)\]:]|$|\n)", body[u.end() :])
            for u in uses
        ):
            out.add(n)
    return out


def _is_name(n: str) -> bool:
    """Not a file name, an abbreviation, a Python builtin, code on a stdlib module, or a name pattern (``DS_BUILD_``)."""
    return (
        bool(n)
        and n not in _NOT_NAMES
        and n not in _PY_WORDS
        and not _FILE_EXT.search(n)
        and not n.endswith("_")
        and not _BIG_NUMBER.search(n)
        and not ("." in n and n.split(".", 1)[0] in _STDLIB)
    )


def _prose_names(text: str) -> list[tuple[str, str]]:
    """(name, how) in free text: the fact-check's finder, plus a name alone in inline backticks."""
    out: dict[str, str] = {}
    clean = _strip_noise(text)
    for n in identifiers(clean):
        if looks_like_param(n) and _is_name(n):
            out.setdefault(n, "prose")
    for m in _BACKTICK.finditer(_QUOTED.sub(" ", clean)):  # "`Accelerate` default config:" is what a tool prints
        inner = m.group(1).strip()
        if _ONE_NAME.fullmatch(inner) or _COMMAND.fullmatch(inner):
            n = inner.removesuffix("()")
            if _is_name(n.lstrip(".-")) and not n[:1].isdigit():
                out.setdefault(n, "backtick")
    return list(out.items())


def _snippet_names(kind: str, code: str, loc: tuple, fix: int) -> list[ShownName]:
    """The names of one snippet: key paths of JSON / YAML, kwargs, calls, imports, flags, env assignments."""
    if kind in ("json", "yaml"):
        try:
            data = json.loads(code) if kind == "json" else yaml.safe_load(code)
        except (json.JSONDecodeError, yaml.YAMLError):
            return []  # CHK010 reports a JSON snippet that does not parse
        if not isinstance(data, dict):
            return []
        return [ShownName(p, loc, kind, fix, section) for p, section in _key_paths_sections(data)]
    out: dict[str, ShownName] = {}
    if kind == "python":
        local = python_locals(code)
        for m in _PY_IMPORT.finditer(code):
            if m.group(1):  # from M import a, b: the imported names, qualified (M itself is a module)
                for part in m.group(2).split(","):
                    n = part.split(" as ")[0].strip()
                    if n and n != "*":
                        out.setdefault(n, ShownName(f"{m.group(1)}.{n}", loc, kind, fix))
                        local.discard(n)
        body = _PY_IMPORT.sub(" ", code)
        local |= python_inputs(code)
        for m in _RESULT_ATTR.finditer(body):  # x.get_slice(k).get_shape(): code on a call's result
            n = m.group(1)
            if _is_name(n) and f"().{n}" not in out:
                out[f"().{n}"] = ShownName(f"().{n}", loc, kind, fix, local=True)
        for m in _KWARG.finditer(body):
            n = m.group(1)
            if _is_name(n) and n not in local and n not in out:
                out[n] = ShownName(n, loc, kind, fix, callee=_callee(body, m.start()))
        for n in identifiers(_strip_noise(body)):
            head = n.split(".", 1)[0]
            if not _is_name(n) or n in local or n in out or f"().{n}" in out or n in _OWNER:
                continue  # model_engine, training_args: a conventional name of the reader's object
            if "." in n and head in local:
                out[n] = ShownName(n, loc, kind, fix, local=True)
            elif looks_like_param(n):
                out[n] = ShownName(n, loc, kind, fix)
        for m in _KWARG.finditer(body):
            n = m.group(1)
            if _is_name(n) and n not in local and n not in out:
                out[n] = ShownName(n, loc, kind, fix, callee=_callee(body, m.start()))
    else:  # bash
        clean = _strip_noise(code)
        own = shell_variables(code)
        for n in [*identifiers(clean), *(m.group(1) for m in _ENV_SET.finditer(clean))]:
            if looks_like_param(n) and _is_name(n) and n not in out and n not in own:
                out[n] = ShownName(n, loc, kind, fix)
    return list(out.values())


def _callee(code: str, pos: int) -> str:
    """The name of the call whose parentheses enclose ``pos`` (``LoraConfig`` in ``LoraConfig(r=8)``), or ""."""
    depth = 0
    for i in range(pos - 1, -1, -1):
        c = code[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                if c != "(":
                    return ""
                m = re.search(r"([A-Za-z_][\w.]*)\s*$", code[:i])
                return m.group(1) if m else ""
            depth -= 1
    return ""


def _key_paths_sections(d: dict, prefix: str = "") -> list[tuple[str, bool]]:
    out = []
    for k, v in d.items():
        path = f"{prefix}{k}"
        out.append((path, isinstance(v, dict)))
        if isinstance(v, dict) and not path.startswith(FREE_FORM):
            out.extend(_key_paths_sections(v, path + "."))
    return out


def shown_names(e: Entry) -> list[ShownName]:
    """Every code-like name in the entry's shown text, once per field. A name the entry's own python snippets
    define (``ds_config = {...}``) is the entry's variable: left out, and code on it is code on an object."""
    local = {
        n
        for f in e.fixes
        if f.snippet and f.snippet.lang == "python"
        for n in python_locals(f.snippet.code) | python_inputs(f.snippet.code)
    }
    out: list[ShownName] = []
    for loc, fix, kind, text in shown_texts(e):
        if kind == "prose":
            for n, how in _prose_names(text):
                if n.lstrip(".") in local:
                    continue
                out.append(ShownName(n, loc, how, fix, local=n.split(".", 1)[0] in local and "." in n))
        else:
            out.extend(_snippet_names(kind, text, loc, fix))
    return out


_API_KINDS = ("method", "function", "class", "field")
_NOT_LINKABLE = ("raise_site", "warn_site", "auto_fill")
# the class whose method code on a conventional object name most likely calls
_OWNER = {
    "model": ("PreTrainedModel.", "GenerationMixin.", "PeftModel.", "nn.Module."),
    "trainer": ("Trainer.",),
    "engine": ("DeepSpeedEngine.",),
    "model_engine": ("DeepSpeedEngine.",),
    "accelerator": ("Accelerator.",),
    "peft_model": ("PeftModel.", "BaseTuner."),
    "args": ("TrainingArguments.",),
    "training_args": ("TrainingArguments.",),
    "config": ("PretrainedConfig.", "LlamaConfig.", "LoraConfig."),
}


def _owner_rank(head: str, rec: dict[str, Any]) -> int:
    owners = _OWNER.get(head, ())
    return next((i for i, o in enumerate(owners) if rec["path"].startswith(o)), len(owners))


_KIND_ORDER = {
    "config_key": 0,
    "config_section": 0,
    "yaml_key": 1,
    "class": 1,
    "function": 1,
    "method": 1,
    "field": 2,
    "env": 2,
    "cli_flag": 3,
    "script": 3,
    "kwarg": 4,
}
_PKG_ORDER = {"deepspeed": 0, "transformers": 1, "accelerate": 2, "peft": 3, "torch": 4}


def _api_order(rec: dict[str, Any]) -> tuple:
    return (_KIND_ORDER.get(rec["kind"], 9), _PKG_ORDER.get(rec["package"], 9), rec["id"])


@dataclass
class Link:
    """What one shown name needs: ``ids`` to list (the first is proposed), or an ``external`` declaration."""

    name: ShownName
    ids: list[str]  # registry records the name means, best first ([] when the registry has none)
    reason: str  # unlisted | unknown | misplaced

    @property
    def target(self) -> tuple:
        """The ``params`` list to add to: the fix's when the name is in a fix, else the entry's."""
        return ("fixes", self.name.fix, "params") if self.name.fix is not None else ("params",)


def _spellings(rec: dict[str, Any]) -> set[str]:
    out = {s.lstrip("-") for s in [rec["name"], *rec["aliases"]]}
    if rec["kind"] == "script":  # zero_to_fp32 is the script zero_to_fp32.py
        out |= {s.removesuffix(".py") for s in out}
    return out


def _means(sn: ShownName, rec: dict[str, Any]) -> bool:
    """Does this record spell the shown name (by path, dotted suffix, or name)?"""
    n = sn.name.lstrip("-.")
    path = rec["path"]
    if sn.how in ("json", "yaml"):
        if n in FREE_FORM:  # optimizer.params: the free-form block of its section, linked by the section's records
            parent = n.rsplit(".", 1)[0]
            return path == parent or path.startswith(parent + ".")
        return path == n or path.endswith("." + n) or (sn.section and path.startswith(n + "."))
    if "." in n:
        tail = n.split(".", 1)[1]
        if path == n or path.endswith("." + n) or n.endswith("." + path) or path == tail:
            return True
        head = n.split(".", 1)[0]
        if sn.local or head in OBJECT_PREFIXES or not head.islower() or "_" not in head:
            return n.rsplit(".", 1)[1] in _spellings(rec) and rec["kind"] in _API_KINDS
        return False
    return n in _spellings(rec) or path == n


def _records_for(sn: ShownName, reg: Registry) -> tuple[list[dict[str, Any]], str]:
    """The records a shown name can mean, best first, and the registry's status."""
    n = sn.name
    if sn.how == "json":
        rec = reg.get(f"deepspeed:{n}")
        if rec is None:
            lk = reg.resolve(n, package="deepspeed")
            return ([lk.record] if lk.record else []), lk.status
        return [rec], "exact"
    if sn.how == "yaml":
        lk = reg.resolve(n)
        if lk.record is None and "." in n:
            lk = reg.resolve(n.rsplit(".", 1)[1])
        recs = [r for r in [lk.record, *lk.candidates] if r]
        return list({r["id"]: r for r in recs}.values()), lk.status
    head = n.lstrip("-.").split(".", 1)[0]
    if "." in n and not n.startswith("."):
        config = [r for r in reg.by_path.get(n, []) if r["kind"] in CONFIG_KINDS]
        if config:  # a config path first: optimizer.params is DeepSpeed's, not code on an optimizer
            return config, "exact"
        if (
            head in reg.versions
        ):  # deepspeed.zero.Init: a path in that package (torch.bfloat16 is not nn.Module.bfloat16)
            tail = n.split(".", 1)[1]
            recs = [
                r
                for r in reg.records
                if r["package"] == head
                and r["kind"] not in _NOT_LINKABLE
                and (r["path"] == tail or ("." in tail and r["path"].endswith("." + tail)))
            ]
            return recs, ("not-a-config-key" if recs else "unknown")
        if sn.local or head in OBJECT_PREFIXES:  # code on an object: its attribute, among APIs
            recs = [r for r in reg.by_name.get(n.rsplit(".", 1)[1], []) if r["kind"] in _API_KINDS]
            if n.startswith("()."):  # a call's result: its methods, not a config class's fields
                recs = [r for r in recs if r["kind"] in ("method", "function")]
            if head in _OWNER:  # model.eval is PreTrainedModel's, not DeepSpeedEngine's
                recs = [r for r in recs if r["path"].startswith(_OWNER[head])]
            elif not sn.local:  # optimizer.step, tokenizer.save_pretrained: an object kb has no class for
                recs = []
            recs.sort(key=lambda r: (_owner_rank(head, r), _api_order(r)))
            return recs, ("not-a-config-key" if recs else "outside")
        if not any(r["kind"] in (*CONFIG_KINDS, "class") for r in reg.by_name.get(head, [])):
            return [], "outside"  # code on a variable kb cannot see (loss.item, logits.float)
    if sn.callee is not None:  # a kwarg: the callee's own parameter, when kb knows the callee
        fn = sn.callee.rsplit(".", 1)[-1]
        own = [
            r
            for r in reg.by_name.get(n, [])
            if r["kind"] in ("kwarg", "field")
            and r["path"].rsplit(".", 1)[0].rsplit(".", 1)[-1] in (fn, "__init__")
            and (r["path"].rsplit(".", 1)[0].endswith(fn) or r["path"].rsplit(".", 2)[-3:-2] == [fn])
        ]
        if own:
            return own, "exact"
        # a keyword kb has no record of for that call (torch.cat(dim=0), add_argument(type=int)): another
        # function's parameter of the same name would be a wrong link
        return [], "outside"
    v = judge(n.lstrip(".") if n.startswith(".") else n, reg)
    if n.startswith(".") and v is None:
        recs = [r for r in reg.by_name.get(n[1:], []) if r["kind"] not in CONFIG_KINDS]
        return recs, ("not-a-config-key" if recs else "outside")
    if v is None:
        return [], "outside"  # not something the registry can judge (an unknown CamelCase class, ...)
    if v.registry_id is None:
        if v.verdict == "misplaced":
            return [], "misplaced"
        return [], "unknown"
    first = reg.get(v.registry_id)
    leaf = n.lstrip("-").rsplit(".", 1)[-1]
    same = [r for r in reg.by_name.get(leaf, []) if r["id"] != v.registry_id]
    if n.startswith("--"):
        same += [r for r in reg.by_name.get(n, []) if r["id"] != v.registry_id]
        flags = [r for r in [first, *same] if r and r["kind"] in ("cli_flag", "field")]
        rest = [r for r in [first, *same] if r and r["kind"] not in ("cli_flag", "field")]
        return list({r["id"]: r for r in [*flags, *rest]}.values()), v.verdict
    return [r for r in [first, *sorted(same, key=_api_order)] if r], v.verdict


def _may_mean(name: str, r: dict[str, Any]) -> bool:
    """Can a shown name mean record ``r``? A front end's argument read only from its timeline (a field of an
    argument class) is meant by a bare name or by a name that says whose it is (``trl.GRPOConfig``,
    ``GRPOConfig.beta``), never by an attribute of an unrelated object (``tokenizer.add_tokens``, ``z.offload_optimizer``)."""
    if not r.get("from_timeline"):
        return True
    bare = name.lstrip("-.")
    if "." not in bare:
        return True
    head = bare.split(".", 1)[0]
    return head == r["package"] or head == r["path"].split(".", 1)[0] or head in (r.get("owners") or [])


def entry_links(e: Entry, reg: Registry) -> list[Link]:
    """The shown names of one entry that are not linked, with what would link them."""
    myth_names = {mn.name for m in e.myths for mn in m.names}
    external = {x.name for x in e.external}
    entry_recs = [r for r in (reg.get(rid) for rid in e.params) if r]
    fix_recs = [[r for r in (reg.get(rid) for rid in f.params) if r] for f in e.fixes]
    out: list[Link] = []
    for sn in shown_names(e):
        n = sn.name
        bare = n.lstrip("-.")
        pkg_head, _, in_pkg = bare.partition(".")
        if n in external or bare in external or bare.rsplit(".", 1)[-1] in myth_names or bare in myth_names:
            continue
        if in_pkg and pkg_head in reg.versions and in_pkg in external:
            continue  # trl.DPOTrainer, declared as DPOTrainer: the package-qualified spelling of an external name
        # a fix's text links through that fix's params or the entry's; the entry's own text (title, summary,
        # causes, myths) through any of them, since the answer shows them all as its verified names
        listed = entry_recs + (fix_recs[sn.fix] if sn.fix is not None else [r for f in fix_recs for r in f])
        if any(_means(sn, r) for r in listed):
            continue
        recs, status = _records_for(sn, reg)
        if status == "outside" and not recs:
            continue
        if sn.how == "json" and not recs:
            continue  # CHK005 reports a key that is not a DeepSpeed config key; FREE_FORM keys are data
        recs = [r for r in recs if r["kind"] not in _NOT_LINKABLE and _may_mean(n, r)]
        if not recs and status in ("not-a-config-key", "exact", "outside"):
            continue
        if recs:
            recs = [r for r in recs if _means(sn, r)] or recs
            # a current record first (not deprecated, not removed in the newest release), then a parameter of a
            # function the entry links already, over a same-named one elsewhere
            parents = {r["path"] for r in listed}
            recs.sort(
                key=lambda r: (
                    r.get("status") == "removed",
                    bool(r.get("deprecated")),
                    r["path"].rsplit(".", 1)[0] not in parents,
                )
            )

            out.append(Link(sn, [r["id"] for r in recs], "unlisted"))
        else:
            out.append(Link(sn, [], "misplaced" if status == "misplaced" else "unknown"))
    return out


def _field(loc: tuple) -> str:
    return ".".join(map(str, loc))


def _link_message(lk: Link) -> str:
    n, where = lk.name.name, "the fix's" if lk.name.fix is not None else "the entry's"
    what = {"json": "JSON key", "yaml": "YAML key"}.get(lk.name.how, "name")
    if lk.ids:
        more = f" (or one of {', '.join(lk.ids[1:4])})" if len(lk.ids) > 1 else ""
        return f"{what} {n!r} is not linked: add {lk.ids[0]}{more} to {where} params"
    if lk.reason == "misplaced":
        return f"{what} {n!r} is not where the registry has it: fix the name, or make it a myth name"
    return (
        f"{what} {n!r} is not in the registry: declare it in external: with a source, make it a myth name, "
        "or fix the name"
    )


_CHK011_BASE = "4·L = 0.49 GiB. The cost moves"


@check(
    "CHK011",
    "unlinked-name",
    "a code-like name in shown text (title, summary, causes, fixes and their snippets, myths; en and zh) that "
    "is not a registry id in `params` (that fix's or the entry's; any fix's for the entry's own text), a myth "
    "name, or an `external` name",
    scope="entry",
    bad=[
        EntryCase(
            "a name the fix does not list",
            ((_CHK011_BASE, "4·L = 0.49 GiB. Lower stage3_max_live_parameters. The cost moves"),),
        ),
        EntryCase(
            "a snippet key path not listed",
            ((_SNIPPET_STAGE, '"stage": 3, "overlap_comm": true,'),),
        ),
        EntryCase(
            "an env var nobody declared", ((_CHK011_BASE, "4·L = 0.49 GiB. Set NCCL_P2P_DISABLE=1. The cost moves"),)
        ),
        EntryCase(
            "a name in backticks in Chinese",
            (("GPU 只剩 4·L ≈ 0.49 GiB。", "GPU 只剩 4·L ≈ 0.49 GiB（见 `nvidia-smi`）。"),),
        ),
        EntryCase(
            "a word in backticks outside a quoted message",
            ((_CHK011_BASE, "4·L = 0.49 GiB; `Accelerate` prints its default config. The cost moves"),),
        ),
        EntryCase("a step tag without its number", ((_CHK011_BASE, "4·L = 0.49 GiB in global_step. The cost moves"),)),
    ],
    ok=[
        EntryCase(
            "a name the entry lists",
            (
                (_CHK011_BASE, "4·L = 0.49 GiB. Lower stage3_max_live_parameters. The cost moves"),
                (
                    _ENTRY_PARAM,
                    "\nparams:\n  - deepspeed:zero_optimization.stage3_max_live_parameters\n"
                    "  - deepspeed:zero_optimization.stage\n",
                ),
            ),
        ),
        EntryCase(
            "an env var declared external",
            (
                (_CHK011_BASE, "4·L = 0.49 GiB. Set NCCL_P2P_DISABLE=1. The cost moves"),
                (
                    "\nconditions:",
                    "\nexternal:\n  - name: NCCL_P2P_DISABLE\n    source: {type: docs, url: "
                    '"https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"}\nconditions:',
                ),
            ),
        ),
        EntryCase(
            "inline code inside a quoted message",
            ((_CHK011_BASE, '4·L = 0.49 GiB; accelerate env prints "- `Accelerate` default config:". The cost moves'),),
        ),
        EntryCase(
            "values, not names: a step tag, a path under a shell variable, a message's format field",
            (
                (
                    _CHK011_BASE,
                    '4·L = 0.49 GiB, saved as global_step1000 under $CKPT/run_a, logged as "ds {ds_val}". The cost moves',
                ),
            ),
        ),
        EntryCase(
            "ordinary words, a path and a file name",
            (
                (
                    _CHK011_BASE,
                    "4·L = 0.49 GiB, e.g. see deepspeed/runtime/zero/stage3.py or ds_config.json. The cost moves",
                ),
            ),
        ),
    ],
)
def chk011(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    seen: set[tuple[str, str]] = set()
    for lk in entry_links(le.entry, reg):
        key = (lk.name.name, _field(lk.name.loc))
        if key in seen:
            continue
        seen.add(key)
        yield _p("CHK011", le, lk.name.loc, _link_message(lk))


# ---------------------------------------------------------------- kb check --fix: proposing (and writing) links


def propose_links(loaded: list[LoadedEntry], reg: Registry) -> list[dict[str, Any]]:
    """For each entry with unlinked names: the registry ids to add to which ``params`` list, and the names to
    declare in ``external``. One dict per entry: ``{"file", "add": {field: [ids]}, "external": [names],
    "misplaced": [names], "names": {id_or_name: [fields]}}``."""
    out = []
    for le in loaded:
        add: dict[str, list[str]] = {}
        ext: list[str] = []
        misplaced: list[str] = []
        where: dict[str, list[str]] = {}
        alts: dict[str, list[str]] = {}
        for lk in entry_links(le.entry, reg):
            if lk.ids:
                tgt = _field(lk.target)
                rid = lk.ids[0]
                if rid not in add.setdefault(tgt, []):
                    add[tgt].append(rid)
                key = rid
                if len(lk.ids) > 1:
                    alts[rid] = lk.ids[1:4]
            else:
                key = lk.name.name
                (misplaced if lk.reason == "misplaced" else ext).append(key) if key not in ext + misplaced else None
            fields = where.setdefault(key, [])
            if _field(lk.name.loc) not in fields:
                fields.append(_field(lk.name.loc))
        if add or ext or misplaced:
            out.append(
                {
                    "file": str(le.path),
                    "add": add,
                    "alternatives": alts,
                    "external": ext,
                    "misplaced": misplaced,
                    "fields": where,
                }
            )
    return out


def insert_params(path: Path, add: dict[str, list[str]]) -> bool:
    """Add registry ids to ``params`` lists in an entry file in place, keeping its formatting: a new
    ``- id`` line after the list's last item, a flow list rewritten on its line, or a new ``params:`` block
    at the end of the mapping. The result must load and list every id; otherwise nothing is written (False)."""
    from kb.content.entries import load_entry_errors, parse_yaml_file

    text = path.read_text(encoding="utf-8")
    _, root = parse_yaml_file(path)
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # (start line, lines replaced, new lines)
    for fld, ids in add.items():
        loc = [int(p) if p.isdigit() else p for p in fld.split(".")]
        mapping = _node_at(root, loc[:-1])
        if not isinstance(mapping, yaml.MappingNode) or not mapping.value:
            return False
        value = next((v for k, v in mapping.value if k.value == "params"), None)
        key_col = mapping.value[0][0].start_mark.column
        if value is None:  # no params key: a new block after the mapping's last value
            end = _block_end(lines, mapping.value[-1][0].start_mark.line, key_col)
            pad = " " * key_col
            edits.append((end, 0, [f"{pad}params:\n", *(f"{pad}  - {i}\n" for i in ids)]))
        elif isinstance(value, yaml.SequenceNode) and value.flow_style:
            ln = value.start_mark.line
            if value.end_mark.line != ln:
                return False
            items = [v.value for v in value.value] + list(ids)
            line = lines[ln]
            new = line[: value.start_mark.column] + "[" + ", ".join(items) + "]" + line[value.end_mark.column :]
            edits.append((ln, 1, [new]))
        elif isinstance(value, yaml.SequenceNode) and value.value:
            item = value.value[-1]
            col = item.start_mark.column - 2
            edits.append((_block_end(lines, item.start_mark.line, col), 0, [f"{' ' * col}- {i}\n" for i in ids]))
        else:
            return False
    for start, n, new in sorted(edits, key=lambda e: e[0], reverse=True):
        lines[start : start + n] = new
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / path.name
        tmp.write_text("".join(lines), encoding="utf-8")
        le, errs = load_entry_errors(tmp)
        ok = le is not None and not errs
        if ok:
            for fld, ids in add.items():
                loc = [int(p) if p.isdigit() else p for p in fld.split(".")]
                have = le.entry.params if loc == ["params"] else le.entry.fixes[loc[1]].params
                ok = ok and all(i in have for i in ids)
        if ok:
            path.write_text("".join(lines), encoding="utf-8")
        return ok


def _block_end(lines: list[str], start: int, col: int) -> int:
    """The line index after the block that starts at ``start``: the next non-blank line indented less than
    ``col`` + 1 (a sibling key or the parent's next item), before any blank lines."""
    i = start + 1
    while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip(" ")) > col):
        i += 1
    while i - 1 > start and not lines[i - 1].strip():
        i -= 1
    return i


def _node_at(node: yaml.Node, loc: list) -> yaml.Node | None:
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return None
        if node is None:
            return None
    return node


# ---------------------------------------------------------------- the docs table


CHECKS_BEGIN = (
    "<!-- checks:begin (generated from kb.content.check.CHECKS by `python -m kb.content.check`; do not edit) -->"
)
CHECKS_END = "<!-- checks:end -->"


def checks_markdown() -> str:
    """The table of check codes in docs/entry-format.md, generated from CHECKS."""
    rows = ["| code | name | scope | reports |", "|---|---|---|---|"]
    for code in sorted(CHECKS):
        c = CHECKS[code]
        rows.append(f"| {c.code} | `{c.name}` | {c.scope} | {c.summary} |")
    return "\n".join(rows)


@check(
    "CHK012",
    "vector-cache",
    "a unit of the entry (title, summary, symptom, fix title, myth, signature) whose vector the shipped files "
    "`data/embeddings/<embedder>/` lack; when the shipped entries are checked, each entry's own file "
    "`<entry id>.npy` there must exist and hold exactly its units' vectors, and a file of a deleted or withdrawn "
    "entry, or any other file, is reported. `kb build --save-vectors` brings the files in step",
    scope="corpus",
    bad=[
        EntryCase(
            "a symptom the cache has no vector for",
            edits=(
                (
                    "    - zero3 does not reduce GPU memory at all on one GPU\n",
                    "    - zero3 does not reduce GPU memory at all on one GPU, even with a tiny model\n",
                ),
            ),
        )
    ],
    ok=[EntryCase("the entry as shipped")],
)
def chk012(loaded: list[LoadedEntry]) -> Iterable[Problem]:
    from kb.index.units import EMBEDDER_FILE, VECTOR_SUFFIX, entry_units, shipped_vectors
    from kb.paths import data_dir, entries_dir

    def shown(p: Path) -> str:  # data/embeddings/... as the user sees the repository
        try:
            return str(p.relative_to(data_dir().parent))
        except ValueError:
            return str(p)

    fix = "run `kb build --save-vectors` and commit data/embeddings/"
    found, others = shipped_vectors()
    folders = [f for f in found if f.embedder is not None]
    shipped = entries_dir().resolve()
    whole = bool(loaded) and all(le.path.resolve().parent == shipped for le in loaded)
    known = {} if whole else {vf.path: {h for got in vf.files.values() if got for h in got} for vf in folders}
    for le in loaded:
        if le.entry.withdrawn is not None:  # not indexed, so no vectors
            continue
        units = [u for u in entry_units(le.entry) if u.dense]
        for vf in folders:
            if not whole:  # entries elsewhere (a draft, a renamed copy): any shipped file may hold a unit's vector
                missing = [u for u in units if u.hash not in known[vf.path]]
                if missing:
                    kinds = ", ".join(sorted({u.kind for u in missing}))
                    where = shown(vf.path) + "/"
                    yield _p(
                        "CHK012", le, ("id",), f"{len(missing)} unit(s) ({kinds}) have no vector in {where}: {fix}"
                    )
                continue
            path = shown(vf.path / f"{le.entry.id}{VECTOR_SUFFIX}")
            got = vf.files.get(le.entry.id, {})
            if le.entry.id not in vf.files:
                yield _p("CHK012", le, ("id",), f"no vector file {path} for {vf.embedder}: {fix}")
            elif got is None:
                yield _p("CHK012", le, ("id",), f"{path} is not a readable vector file: {fix}")
            else:
                missing = [u for u in units if u.hash not in got]
                if missing:
                    kinds = ", ".join(sorted({u.kind for u in missing}))
                    yield _p("CHK012", le, ("id",), f"{len(missing)} unit(s) ({kinds}) have no vector in {path}: {fix}")
                stale = len(set(got) - {u.hash for u in units})
                if stale:
                    yield _p("CHK012", le, ("id",), f"{path} holds {stale} vector(s) no unit of the entry uses: {fix}")
    if not whole:
        return
    withdrawn = {le.entry.id for le in loaded if le.entry.withdrawn is not None}
    live = {le.entry.id for le in loaded} - withdrawn
    for vf in folders:
        for eid in sorted(set(vf.files) - live):
            if eid in withdrawn:
                why = "is withdrawn (not indexed)"
            elif (shipped / f"{eid}.yaml").exists():
                continue  # the entry did not load: its own problems say why; the build keeps its file
            else:
                why = f"has no file {shown(shipped / f'{eid}.yaml')}"
            yield Problem(
                "CHK012", shown(vf.path / f"{eid}{VECTOR_SUFFIX}"), None, "vectors", f"entry {eid!r} {why}: {fix}"
            )
    for vf in found:
        if vf.embedder is None:
            yield Problem(
                "CHK012", shown(vf.path), None, "vectors", f"no {EMBEDDER_FILE} saying whose vectors these are"
            )
        for p in vf.other:
            yield Problem(
                "CHK012", shown(p), None, "vectors", f"not a vector file (<entry id>{VECTOR_SUFFIX}): delete it"
            )
    for p in others:
        what = "the single-file cache of before the per-entry files" if p.suffix == ".npz" else "not an embedder folder"
        yield Problem("CHK012", shown(p), None, "vectors", f"{what}: delete it")


if __name__ == "__main__":
    print(checks_markdown())


# ---------------------------------------------------------------- what a new release touches (kb registry add)


@dataclass(frozen=True)
class Touched:
    """An entry that names a parameter the newest recorded release of its package changed: info for ``kb check``,
    the list a reviewer reads after ``kb registry add`` (a curated KB rots when its libraries move)."""

    file: str
    entry: str
    param: str  # the registry id the entry names
    package: str
    release: str  # the release that changed it
    change: str  # added | removed | default | deprecated, with the detail

    def __str__(self) -> str:
        return (
            f"{self.file}: CHK-release info {self.entry}: {self.param}: {self.change} in {self.package} {self.release}"
        )


def touched_by_release(
    loaded: list[LoadedEntry], registry: Registry, releases: dict[str, str] | None = None
) -> list[Touched]:
    """The entries whose parameters changed in ``releases`` (package -> release; default: the newest release of
    every package a timeline records), from the timelines' events (kb/registry/timeline.py)."""
    base = registry._default_view()
    wanted = releases or {p: tl.newest for p, tl in base.timelines.items()}
    out: list[Touched] = []
    for le in loaded:
        e = le.entry
        ids = list(dict.fromkeys([*e.params, *(p for f in e.fixes for p in f.params)]))
        for rid in ids:
            pkg = rid.split(":", 1)[0]
            tl = base.timelines.get(pkg)
            rel = wanted.get(pkg)
            if tl is None or rel is None or rid not in tl.names:
                continue
            for ev in tl.history(rid):
                if ev["release"] != rel or ev["event"] == "present":
                    continue
                detail = {
                    "added": "added",
                    "removed": f"removed (last in {ev.get('last')})",
                    "default": f"default is now {ev.get('default')}",
                    "deprecated": f"deprecated: {ev.get('message')}",
                }[ev["event"]]
                out.append(Touched(str(le.path), e.id, rid, pkg, rel, detail))
    return sorted(out, key=lambda t: (t.file, t.param))


def touched_summary(touched: list[Touched], most: int = 5) -> list[str]:
    """One line per package release for ``kb check``: how many entries name parameters it changed (``--json`` lists
    every one)."""
    by: dict[tuple[str, str], list[Touched]] = {}
    for t in touched:
        by.setdefault((t.package, t.release), []).append(t)
    lines = []
    for (pkg, rel), ts in sorted(by.items()):
        ids = sorted({t.entry for t in ts})
        params = sorted({t.param.split(":", 1)[1] for t in ts})
        more = f" (+{len(ids) - most} more)" if len(ids) > most else ""
        lines.append(
            f"release info: {pkg} {rel} changed {len(params)} parameter(s) named by {len(ids)} "
            f"{'entry' if len(ids) == 1 else 'entries'} ({', '.join(params[:most])}): {', '.join(ids[:most])}{more}; "
            "re-read them (kb check --json lists each)"
        )
    return lines
