"""``kb check``: every entry is well-formed and every name in it is real.

Checks, per entry: the schema (pydantic, with YAML line numbers); every param id resolves in the
registry and is not deprecated/removed unless one of the entry's myths is about exactly that; every
key in a JSON config snippet exists in DeepSpeed's schema; every myth name has the verdict the
registry gives it; related ids exist; code sources point at a real file and line when that package
version is installed. Across entries: ids and aliases are unique.
"""

from __future__ import annotations

import importlib.metadata as md
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from kb.entries import EntryError, LoadedEntry, entry_files, load_entry_errors
from kb.registry import Registry

FREE_FORM = ("optimizer.params", "scheduler.params", "zero_optimization.leaf_module.classes")


@dataclass
class Problem:
    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line else self.file
        return f"{loc}: {self.field}: {self.message}" if self.field else f"{loc}: {self.message}"


def check_all(root: Path, registry: Registry) -> tuple[list[LoadedEntry], list[Problem]]:
    problems: list[Problem] = []
    loaded: list[LoadedEntry] = []
    for path in entry_files(root):
        le, errs = load_entry_errors(path)
        problems.extend(_from_error(e) for e in errs)
        if le is not None and not errs:
            loaded.append(le)
    ids: dict[str, LoadedEntry] = {}
    for le in loaded:
        for name in [le.entry.id, *le.entry.aliases]:
            if name in ids:
                problems.append(_p(le, ("id",), f"{name!r} is already used by {ids[name].path.name}"))
            ids[name] = le
    for le in loaded:
        problems.extend(check_entry(le, registry, set(ids)))
    return loaded, problems


def _from_error(e: EntryError) -> Problem:
    return Problem(str(e.path), e.line, e.field, e.message)


def _p(le: LoadedEntry, loc: tuple, msg: str) -> Problem:
    return Problem(str(le.path), le.line_of(*loc), ".".join(map(str, loc)), msg)


def check_entry(le: LoadedEntry, reg: Registry, known_ids: set[str]) -> list[Problem]:
    e = le.entry
    out: list[Problem] = []
    myth_names = {(n.name, n.verdict) for m in e.myths for n in m.names}
    about_deprecation = {n for n, v in myth_names if v == "deprecated"}

    def check_param(rid: str, loc: tuple) -> None:
        rec = reg.get(rid)
        if rec is None:
            lk = reg.resolve(rid.split(":", 1)[-1])
            hint = (
                f"; did you mean {lk.record['id']!r}?"
                if lk.record
                else (f"; did you mean {', '.join(lk.suggestions)}?" if lk.suggestions else "")
            )
            out.append(_p(le, loc, f"{rid!r} is not in the registry{hint}"))
            return
        if (rec["deprecated"] or rec["status"] == "removed") and rec["name"] not in about_deprecation:
            what = "removed" if rec["status"] == "removed" else "deprecated"
            repl = f" (use {rec['replacement']})" if rec.get("replacement") else ""
            out.append(_p(le, loc, f"{rid!r} is {what}{repl}; only an entry with a myth about it may use it"))

    for i, rid in enumerate(e.params):
        check_param(rid, ("params", i))
    for i, fix in enumerate(e.fixes):
        for j, rid in enumerate(fix.params):
            check_param(rid, ("fixes", i, "params", j))
        if fix.snippet and fix.snippet.lang == "json":
            out.extend(_check_json_snippet(le, reg, i, fix.snippet.code, {n for n, _ in myth_names}))

    for i, myth in enumerate(e.myths):
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
                out.append(
                    _p(
                        le,
                        ("myths", i, "names", j),
                        f"{mn.name!r}{where} is marked {mn.verdict} but the registry says {got}{rid}",
                    )
                )

    for i, rel in enumerate(e.related):
        if rel not in known_ids:
            out.append(_p(le, ("related", i), f"no entry with id {rel!r}"))

    for i, src in enumerate(e.sources):
        if src.type == "code":
            msg = _check_code_source(src.package or "", src.version or "", src.file or "", src.line or "")
            if msg:
                out.append(_p(le, ("sources", i), msg))
    return out


def _check_json_snippet(le: LoadedEntry, reg: Registry, i: int, code: str, myth_names: set[str]) -> list[Problem]:
    try:
        data = json.loads(code)
    except json.JSONDecodeError as e:
        return [_p(le, ("fixes", i, "snippet"), f"JSON snippet does not parse: {e}")]
    if not isinstance(data, dict):
        return []
    out: list[Problem] = []
    for path in _key_paths(data):
        if path.startswith(FREE_FORM) or path.rsplit(".", 1)[-1] in myth_names:
            continue
        if reg.get(f"deepspeed:{path}") is None:
            lk = reg.resolve(path, package="deepspeed")
            if lk.status not in ("exact", "alias"):
                hint = (
                    f" (did you mean {', '.join(lk.suggestions or [c['path'] for c in lk.candidates])}?)"
                    if (lk.suggestions or lk.candidates)
                    else ""
                )
                out.append(_p(le, ("fixes", i, "snippet"), f"snippet key {path!r} is not a DeepSpeed config key{hint}"))
    return out


def _key_paths(d: dict, prefix: str = "") -> list[str]:
    out = []
    for k, v in d.items():
        path = f"{prefix}{k}"
        out.append(path)
        if isinstance(v, dict) and not path.startswith(FREE_FORM):
            out.extend(_key_paths(v, path + "."))
    return out


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


def problems_json(problems: list[Problem]) -> str:
    return json.dumps([asdict(p) for p in problems], ensure_ascii=False, indent=2)
