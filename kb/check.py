"""``kb check``: every entry is well-formed and every name in it is real.

Every check is one function registered with ``@check`` in ``CHECKS``: a stable code (CHK001...), a
short name, a one-line summary, its scope (a file, one entry, or all entries together) and its own
cases: ``bad`` mutations of a real valid entry it must report and ``ok`` near misses it must not
(``EntryCase``; ``write_case`` puts one in a folder). ``tests/test_check.py`` runs every case; the
table of codes in docs/entry-format.md is generated from ``CHECKS`` (``python -m kb.check``).

Per entry: the schema (pydantic, with YAML line numbers); every param id resolves in the registry
and is not deprecated/removed unless one of the entry's myths is about exactly that; every key in a
JSON config snippet exists in DeepSpeed's schema; every myth name has the verdict the registry gives
it; related ids exist; code sources point at a real file and line when that package version is
installed. Across entries: ids and aliases are unique.
"""

from __future__ import annotations

import importlib.metadata as md
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kb.entries import Entry, EntryError, LoadedEntry, entry_files, load_entry_errors
from kb.lint import FREE_FORM
from kb.registry import Registry

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


def problems_json(problems: list[Problem]) -> str:
    return json.dumps([asdict(p) for p in problems], ensure_ascii=False, indent=2)


# ---------------------------------------------------------------- the checks, in code order


_SNIPPET_STAGE = '"stage": 3,'  # a line of the base entry's JSON snippet
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


@check(
    "CHK004",
    "deprecated-param",
    "a deprecated or removed param id in an entry that has no myth about that name",
    scope="entry",
    bad=[EntryCase("deprecated id", ((_ENTRY_PARAM, "\nparams:\n  - deepspeed:zero_optimization.cpu_offload\n"),))],
    ok=[
        EntryCase(
            "deprecated id with a myth about it",
            ((_ENTRY_PARAM, "\nparams:\n  - deepspeed:zero_optimization.cpu_offload\n"),)
            + _first_myth("{name: cpu_offload, verdict: deprecated}"),
        )
    ],
)
def chk004(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    about = {n.name for m in le.entry.myths for n in m.names if n.verdict == "deprecated"}
    for rid, loc in _param_locs(le.entry):
        rec = reg.get(rid)
        if rec and (rec["deprecated"] or rec["status"] == "removed") and rec["name"] not in about:
            what = "removed" if rec["status"] == "removed" else "deprecated"
            repl = f" (use {rec['replacement']})" if rec.get("replacement") else ""
            yield _p("CHK004", le, loc, f"{rid!r} is {what}{repl}; only an entry with a myth about it may use it")


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
    ok=[EntryCase("a real key", ((_SNIPPET_STAGE, '"stage": 3, "overlap_comm": true,'),))],
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
    "a code source whose file does not exist, or whose line is past the end, in the installed package version "
    "(checked only when that exact version is installed)",
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
    for i, src in enumerate(le.entry.sources):
        if src.type == "code":
            msg = _check_code_source(src.package or "", src.version or "", src.file or "", src.line or "")
            if msg:
                yield _p("CHK008", le, ("sources", i), msg)


def _check_code_source(package: str, version: str, file: str, line: str) -> str | None:
    """When that exact package version is installed, the file must exist and have that line."""
    try:
        installed = md.version(package).split("+")[0]
    except md.PackageNotFoundError:
        return None
    if installed != version:
        return None
    dist = md.distribution(package)
    path = Path(str(dist.locate_file(file)))
    if not path.is_file():
        return f"code source {file!r} does not exist in {package} {version}"
    last = int(line.split("-")[-1])
    n = sum(1 for _ in path.open(encoding="utf-8", errors="replace"))
    if last > n:
        return f"code source {file}:{line} is past the end of the file ({n} lines) in {package} {version}"
    return None


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
    ok=[EntryCase('an "auto" value', ((_SNIPPET_STAGE, '"stage": 3, "reduce_bucket_size": "auto",'),))],
)
def chk010(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> Iterable[Problem]:
    for i, data in _json_snippets(le.entry):
        if isinstance(data, json.JSONDecodeError):
            yield _p("CHK010", le, ("fixes", i, "snippet"), f"JSON snippet does not parse: {data}")


# ---------------------------------------------------------------- the docs table


CHECKS_BEGIN = "<!-- checks:begin (generated from kb.check.CHECKS by `python -m kb.check`; do not edit) -->"
CHECKS_END = "<!-- checks:end -->"


def checks_markdown() -> str:
    """The table of check codes in docs/entry-format.md, generated from CHECKS."""
    rows = ["| code | name | scope | reports |", "|---|---|---|---|"]
    for code in sorted(CHECKS):
        c = CHECKS[code]
        rows.append(f"| {c.code} | `{c.name}` | {c.scope} | {c.summary} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(checks_markdown())
