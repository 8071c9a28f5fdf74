"""Every minor release, read statically: ``data/registry/timeline/<pkg>.json`` (docs/registry.md, "Every minor
release: the timeline").

``python -m indexer.registry_timeline [--package P] [--offline]``

For each package: the releases of its window (the last patch of every minor, ``WINDOWS``), each downloaded with
``pip download --no-deps`` (the wheel where there is one, else the sdist) into ``.cache/kb/dist/<pkg>/``
(git-ignored), unpacked (its ``.py`` files and its metadata) into ``.cache/kb/dist/unpacked/<pkg>-<version>/``,
read by :mod:`indexer.registry_static` (ast only: no release is imported), and merged into one timeline: every
name with the spans of releases that have it, its default per release where it changes, and its deprecation.

What is read per package is named in ``READERS`` (where to look, not what is in it): the names, types, defaults,
docs, lines and deprecations all come from the release's own source. A part that a release lacks is recorded in
the timeline's ``skipped`` for that release, never a crash and never a silent gap. The output is deterministic
(sorted keys, no dates): a rerun from the same downloads is byte-identical. ``--offline`` never calls pip: it
reads only what ``.cache/kb/dist/`` already holds. ``--check`` compares the committed timelines with the
import-built registry at its sampled releases: the names, their kinds and their aliases.

:func:`add_release` (``kb registry add PACKAGE==VERSION``) adds one release to a timeline: read the same way,
merged with the releases already there (:func:`records_at`), the file rewritten; :func:`release_diff` says what
changed against the release before it.
"""

from __future__ import annotations

import argparse
import ast
import email.parser
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from indexer.registry_static import DictReads, Item, Ref, Tree, default_text
from kb.registry.timeline import replacement_id

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / ".cache" / "kb" / "dist"
UNPACKED = DIST / "unpacked"
OUT = ROOT / "data" / "registry" / "timeline"
FORMAT = 1

# package -> its window: "import" (the import name), "minors" (first and last minor), "rule" ("minor", the
# default: the last patch of every minor in the range, a .postN counting as that patch; "all": every release in
# it), "extra" (releases read besides), "skip" (folders not unpacked) and "why" (the timeline's window line).
WINDOWS: dict[str, dict[str, Any]] = {
    "deepspeed": {
        "import": "deepspeed",
        "minors": ("0.14", "0.19"),
        "extra": ["0.14.4", "0.19.4"],  # releases data/registry/deepspeed.jsonl samples (the self-check compares them)
        "why": "0.14-0.19, the last patch of each minor (two years back: 0.14 is the last series on pydantic v1, "
        "2024) to the installed 0.19, and the registry's sampled 0.14.4 and 0.19.4",
    },
    "transformers": {
        "import": "transformers",
        "minors": ("4.46", "5.24"),
        "skip": ["transformers/models/"],  # 2,500 model files: none holds a name read here
        "why": "4.46-5.24, the last patch of each minor: from the last 4.x series that still has "
        "evaluation_strategy (October 2024) to the installed 5.24",
    },
    "accelerate": {
        "import": "accelerate",
        "minors": ("0.25", "1.15"),
        "why": "0.25-0.34 and 1.0-1.15, the last patch of each minor: from the series of December 2023 (multi-node "
        "launcher threads of 2024 still run 0.2x) to the installed 1.15",
    },
    "peft": {
        "import": "peft",
        "minors": ("0.13", "0.21"),
        "why": "0.13-0.21, the last patch of each minor: from the series of October 2024 to the installed 0.21",
    },
    "trl": {
        "import": "trl",
        "minors": ("0.12", "1.16"),
        "why": "0.12-1.16, the last patch of each minor: from 0.12.2, the first trl release of December 2024 "
        "(its wheel's files are dated 2024-12-06; 0.13.0's 2024-12-16), to 1.16",
    },
    "llamafactory": {
        "import": "llamafactory",
        "minors": ("0.9", "0.9"),
        "rule": "all",
        "extra": ["0.8.3"],
        "why": "every PyPI release of 0.9.x (0.9.0-0.9.5, the supported range) and 0.8.3, the last 0.8 release",
    },
    "axolotl": {
        "import": "axolotl",
        "minors": ("0.6", "0.19"),
        "why": "0.6-0.19, the last patch of each minor (a .postN counts as that patch): the supported range",
    },
    "ms-swift": {
        "import": "swift",
        "minors": ("3.0", "4.6"),
        "why": "3.0-4.6, the last patch of each minor (a .postN counts as that patch): the 3.x rewrite of the "
        "argument classes (swift/llm/argument/) to 4.6",
    },
}


# the packages whose Requires-Dist pins are recorded per release (a linter assumes what a front end requires): every
# package the registry records, the sampled libraries (the builders) and the timelines' own
def _pinned() -> frozenset[str]:
    from indexer.registry_build import BUILDERS

    return frozenset(BUILDERS) | frozenset(WINDOWS)


PINNED = _pinned()

Progress = Callable[[str], None]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- which releases


def _minor(v: Version) -> tuple[int, int]:
    return v.release[0], (v.release[1] if len(v.release) > 1 else 0)


def _parse_minor(s: str) -> tuple[int, int]:
    a, b = s.split(".")
    return int(a), int(b)


def select(pkg: str, versions: Iterable[str]) -> list[str]:
    """The releases of ``pkg``'s window among ``versions`` (oldest first): the last patch of each minor (PEP 440
    order, so 0.9.1.post1 is the last of 0.9.1's patches, before 0.9.2), or every release for rule "all"."""
    w = WINDOWS[pkg]
    lo, hi = (_parse_minor(s) for s in w["minors"])
    parsed: list[Version] = []
    for s in versions:
        try:
            v = Version(s)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease or v.local:
            continue
        parsed.append(v)
    inside = [v for v in parsed if lo <= _minor(v) <= hi]
    if w.get("rule") == "all":
        chosen = set(inside)
    else:
        last: dict[tuple[int, int], Version] = {}
        for v in inside:
            if _minor(v) not in last or v > last[_minor(v)]:
                last[_minor(v)] = v
        chosen = set(last.values())
    chosen |= {v for v in parsed if str(v) in w.get("extra", [])}
    return [str(v) for v in sorted(chosen)]


def available_versions(pkg: str) -> list[str]:
    """The versions the package index lists (``pip index versions``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", pkg, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
    )
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise RuntimeError(f"pip index versions {pkg} failed: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return [s.strip() for s in m.group(1).split(",") if s.strip()]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def cached_file(pkg: str, version: str) -> Path | None:
    """The downloaded wheel (preferred) or sdist of ``pkg==version`` in the cache, if any."""
    folder = DIST / pkg
    if not folder.is_dir():
        return None
    wheels, sdists = [], []
    for p in sorted(folder.iterdir()):
        n = p.name
        if n.endswith(".whl"):
            name, ver = n.split("-")[:2]
        elif n.endswith((".tar.gz", ".zip")):
            stem = n[: -len(".tar.gz")] if n.endswith(".tar.gz") else n[: -len(".zip")]
            name, _, ver = stem.rpartition("-")
        else:
            continue
        if _norm(name) == _norm(pkg) and ver == version:
            (wheels if n.endswith(".whl") else sdists).append(p)
    return (wheels or sdists or [None])[0]


def cached_versions(pkg: str) -> list[str]:
    folder = DIST / pkg
    out = set()
    for p in sorted(folder.iterdir()) if folder.is_dir() else []:
        n = p.name
        if n.endswith(".whl"):
            out.add(n.split("-")[1])
        elif n.endswith(".tar.gz"):
            out.add(n[: -len(".tar.gz")].rpartition("-")[2])
    return sorted(out, key=Version)


def download(pkg: str, version: str) -> Path:
    """``pip download --no-deps pkg==version`` into the cache: the wheel where the index has one, else the sdist
    (pip prepares an sdist's metadata; DeepSpeed's setup.py needs torch, so without build isolation and with
    DS_BUILD_OPS=0, the way indexer/registry_releases.py installs it)."""
    have = cached_file(pkg, version)
    if have is not None:
        return have
    folder = DIST / pkg
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "DS_BUILD_OPS": "0"}
    errors = []
    for extra in (["--only-binary", ":all:"], ["--no-build-isolation"], []):
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--disable-pip-version-check", *extra]
        proc = subprocess.run([*cmd, "-d", str(folder), f"{pkg}=={version}"], capture_output=True, text=True, env=env)
        have = cached_file(pkg, version)
        if have is not None:
            return have
        errors.append((proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""])
    raise RuntimeError(f"pip download {pkg}=={version} failed: {errors[-1][0]}")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- unpack


_META_NAMES = ("METADATA", "PKG-INFO", "requires.txt")


def unpack(pkg: str, version: str, archive: Path) -> Path:
    """The release's ``.py`` files and metadata under ``.cache/kb/dist/unpacked/<pkg>-<version>/``, laid out as
    in site-packages (``<import name>/...``; an sdist's ``src/`` layout is flattened). Returns that folder."""
    dest = UNPACKED / f"{pkg}-{version}"
    done = dest / ".unpacked"
    stamp = json.dumps([archive.name, sorted(WINDOWS.get(pkg, {}).get("skip", ()))])
    if done.exists() and done.read_text() == stamp:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    imp = WINDOWS.get(pkg, {}).get("import", pkg)
    skip = tuple(WINDOWS.get(pkg, {}).get("skip", ()))
    members: list[tuple[str, bytes]] = []
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for n in z.namelist():
                if n.endswith(".py") and n.startswith(f"{imp}/"):
                    members.append((n, z.read(n)))
                elif re.fullmatch(r"[^/]+\.dist-info/METADATA", n):
                    members.append(("META/METADATA", z.read(n)))
    else:
        with tarfile.open(archive) as t:
            names = [m for m in t.getmembers() if m.isfile()]
            # the package folder: <top>/<imp>/__init__.py or <top>/src/<imp>/__init__.py (the shallowest)
            inits = sorted(
                (m.name for m in names if m.name.endswith(f"/{imp}/__init__.py")), key=lambda s: s.count("/")
            )
            if not inits:
                raise RuntimeError(f"{archive.name}: no {imp}/__init__.py in the sdist")
            base = inits[0][: -len(f"{imp}/__init__.py")]
            for m in names:
                if m.name.startswith(base + imp + "/") and m.name.endswith(".py"):
                    members.append((m.name[len(base) :], t.extractfile(m).read()))
                elif m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"):
                    members.append(("META/PKG-INFO", t.extractfile(m).read()))
                elif m.name.endswith(".egg-info/requires.txt") and m.name.count("/") <= 3:
                    members.append(("META/requires.txt", t.extractfile(m).read()))
    for rel, data in members:
        if skip and rel.startswith(skip):
            continue
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    done.write_text(stamp)
    return dest


# ---------------------------------------------------------------- Requires-Dist


def requirements(folder: Path) -> tuple[dict[str, str], str]:
    """Requires-Dist of the packages in PINNED: name -> specifier (``""``: any version), with the marker as the
    metadata writes it (``>=0.10.0,<=0.16.9; extra == "deepspeed"``) when only an extra or a platform asks for
    it; and where it was read from (METADATA, PKG-INFO or the sdist's egg-info requires.txt)."""
    lines: list[str] = []
    where = ""
    for name in ("METADATA", "PKG-INFO"):
        p = folder / "META" / name
        if p.exists():
            msg = email.parser.Parser().parsestr(p.read_text(encoding="utf-8", errors="replace"), headersonly=True)
            lines = list(msg.get_all("Requires-Dist") or [])
            where = name
            if lines:
                break
    if not lines and (folder / "META" / "requires.txt").exists():
        where = "requires.txt"
        section = ""
        for raw in (folder / "META" / "requires.txt").read_text(encoding="utf-8").splitlines():
            s = raw.strip()
            if not s or s.startswith("#"):
                continue
            if s.startswith("["):
                section = s.strip("[]")
                continue
            extra, _, marker = section.partition(":")
            marks = [f'extra == "{extra}"'] if extra else []
            if marker:
                marks.append(marker)
            lines.append(s + (f"; {' and '.join(marks)}" if marks else ""))
    found: dict[str, list[tuple[int, str]]] = {}
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        name = _norm(req.name).replace("_", "-")
        if name not in PINNED:
            continue
        spec = ",".join(sorted(str(s) for s in req.specifier))
        text = spec + (f"; {req.marker}" if req.marker else "")
        found.setdefault(name, []).append((1 if req.marker else 0, text))
    # the first requirement without a marker, in the metadata's order; else the first one with a marker
    out = {k: min(v, key=lambda mt: mt[0])[1] for k, v in sorted(found.items())}
    return out, where


# ---------------------------------------------------------------- reading one release

# A name read from one release: what the timeline keeps of it.
Rec = dict[str, Any]


class Release:
    """What one release gives: its names (id -> record) and what could not be read."""

    def __init__(self, pkg: str, version: str, tree: Tree):
        self.pkg, self.version, self.tree = pkg, version, tree
        self.names: dict[str, Rec] = {}
        self.skipped: list[str] = []

    def add(self, rid: str, kind: str, path: str, it: Item | None = None, **kw: Any) -> None:
        """Record ``<pkg>:<rid>`` (the first one of an id wins: the readers go from the most specific place)."""
        full = f"{self.pkg}:{rid}"
        if full in self.names:
            return
        rec: Rec = {
            "kind": kind,
            "name": kw.pop("name", None) or (it.name if it else path.rsplit(".", 1)[-1]),
            "path": path,
            "type": it.type if it else "",
            "doc": it.doc if it else None,
            "aliases": sorted(it.aliases) if it else [],
            "default": it.default if it else None,
            "default_is_expr": bool(it and it.default_is_expr),
            "deprecated": it.deprecated if it else None,
            "replacement": it.replacement if it else None,
            "file": it.file if it else "",
            "line": it.line if it else 0,
            "owners": None,
            "inherits": None,
        }
        rec.update(kw)
        self.names[full] = rec

    def skip(self, what: str) -> None:
        if what not in self.skipped:
            self.skipped.append(what)


def _find(rel: Release, name: str, prefer: Iterable[str]) -> Ref | None:
    found = rel.tree.find_classes(name, prefer, first=True)
    if not found:
        rel.skip(f"class {name}: not in this release")
        return None
    return found[0]


def _class_record(rel: Release, rid: str, ref: Ref, inherits: str | None, owners: list[str] | None = None) -> None:
    t = rel.tree
    it = Item(name=ref.name, kind="class", type="class", file=t.relfile(ref.module), line=ref.node.lineno)
    it.doc = t.docstring(ref.node)
    rel.add(rid, "class", rid, it, inherits=inherits, owners=owners)


def read_classes(
    rel: Release,
    classes: list[Ref],
    kind: str = "field",
    mode: str = "declared",
    prefix: dict[str, str] | None = None,
    owners: bool = False,
    class_records: bool = True,
) -> None:
    """The fields of the user-facing ``classes`` (each with its in-package bases and mixins).

    A field's id is ``<pkg>:<Class>.<field>``, where Class is, for ``mode="declared"``, the user-facing class
    whose body declares it (else the first user-facing classes that include the class declaring it); for
    ``mode="top"`` (the front ends), the first user-facing classes that include it, leaving out the mixins
    (user-facing classes with no base of their own that another user-facing class extends), so that a
    field of a mixin is named by the arguments class a user fills. ``owners``: every user-facing class that
    exposes it. ``prefix`` maps a class name to the id prefix used instead of it (accelerate's ``yaml``)."""
    t = rel.tree
    prefix = prefix or {}
    by_name: dict[str, Ref] = {}
    for c in classes:
        by_name.setdefault(c.name, c)
    mros = {n: t.mro(r) for n, r in by_name.items()}
    fields = {n: t.class_fields(r) for n, r in by_name.items()}

    def ancestors(n: str) -> set[str]:
        return {x.name for x in mros[n][1:]}

    def own_bases(r: Ref) -> bool:
        return any(
            (b.kind == "class" or (b.kind == "external" and b.module.split(".")[0] not in ("typing", "abc", "?")))
            and b.name not in ("object", "Generic", "ABC")
            for b in t.bases(r)
        )

    extended = {a for n in by_name for a in ancestors(n)}
    mixins = {n for n, r in by_name.items() if n in extended and not own_bases(r)}
    for n, r in sorted(by_name.items()):
        if class_records and n not in prefix:
            inh = t.external_bases(r)
            _class_record(rel, n, r, ", ".join(inh) if inh else None)
    # (field, declaring class) -> the user-facing classes that expose that declaration
    exposing: dict[tuple[str, str], set[str]] = {}
    for n, fs in fields.items():
        for f, it in fs.items():
            exposing.setdefault((f, it.declared_in or n), set()).add(n)
    for (f, decl), exp in sorted(exposing.items()):
        if mode == "declared" and decl in by_name and decl in exp:
            id_classes = [decl]
        else:
            pool = exp - mixins if mode == "top" and exp - mixins else exp
            id_classes = sorted(c for c in pool if not (ancestors(c) & (pool - {c})))
        for c in id_classes:
            it = fields[c][f]
            pre = prefix.get(c, c)
            rel.add(
                f"{pre}.{f}",
                kind,
                f"{pre}.{f}",
                it,
                owners=sorted(exp) if owners else None,
            )


def _exported_classes(rel: Release, init_module: str) -> list[Ref]:
    """The classes a package module exports (its imports, ``__all__``, lazy table), resolved in the package."""
    t = rel.tree
    if init_module not in t.files:
        return []
    out = []
    for n in t.exported(init_module):
        r = t.resolve(init_module, n)
        if r is not None and r.kind == "class":
            out.append(r)
    return out


def _is_dataclass(t: Tree, ref: Ref) -> bool:
    for r in t.mro(ref):
        for d in r.node.decorator_list:
            expr = d.func if isinstance(d, ast.Call) else d
            if ast.unparse(expr).rsplit(".", 1)[-1] == "dataclass":
                return True
    return False


# ---- deepspeed


DS_CONFIG = ("DeepSpeedConfig", "deepspeed/runtime/config.py", "config")  # class, where, the parameter given the dict
# DeepSpeed's Python API users call: dotted name (functions and classes; a module: its public functions)
DS_API = [
    "deepspeed.initialize",
    "deepspeed.zero.Init",
    "deepspeed.zero.GatheredParameters",
    "deepspeed.checkpointing.configure",
    "deepspeed.pipe.PipelineModule",
    "deepspeed.pipe.LayerSpec",
    "deepspeed.pipe.TiedLayerSpec",
    "deepspeed.moe.layer.MoE",
    "deepspeed.moe.utils",
]
# argparse CLIs: command -> (module, function; None: the module's top-level code)
DS_CLIS = {
    "deepspeed": ("deepspeed.launcher.runner", "parse_args"),
    "zero_to_fp32.py": ("deepspeed.utils.zero_to_fp32", None),
    "ds_to_universal.py": ("deepspeed.checkpoint.ds_to_universal", "parse_arguments"),
}


def read_deepspeed(rel: Release) -> None:
    t = rel.tree
    cls_name, where, param = DS_CONFIG
    ref = _find(rel, cls_name, [where])
    if ref is not None:
        dr = DictReads(t)
        dr.run(ref, param)
        model_paths = set(dr.models)
        model_items: list[tuple[str, Item, Ref | None]] = []
        for mpath in sorted(dr.models):
            m = dr.models[mpath]
            sec = ".".join(mpath)
            it = Item(name=mpath[-1], type=m.ref.name, file=t.relfile(m.ref.module), line=m.ref.node.lineno)
            it.doc = t.docstring(m.ref.node)
            if len(mpath) > 1 and mpath[:-1] not in model_paths:
                # a model under a section the code reads itself (timers.throughput): its key is a read
                rd = dr.reads.get(mpath)
                if rd is not None:
                    it.file, it.line = rd.file, rd.line
            rel.add(sec, "config_section", sec, it)
            model_items += t.walk_model(m.ref, sec)
        for path, it, sub in model_items:
            rel.add(path, "config_section" if sub is not None else "config_key", path, it, validated=True)
        for p, msg in sorted(dr.removed.items()):
            path = ".".join(p)
            if f"{rel.pkg}:{path}" in rel.names:
                rel.names[f"{rel.pkg}:{path}"]["removed"] = msg
            elif any(p[:i] in model_paths for i in range(1, len(p))):
                # a key the model no longer has, which the release rejects by name (MiCS in 0.19.8)
                rd = dr.reads.get(p)
                it = Item(name=p[-1], file=rd.file if rd else "", line=rd.line if rd else 0)
                rel.add(path, "config_key", path, it, removed=msg)
        for p in sorted(dr.reads):
            if any(p[:i] in model_paths for i in range(1, len(p) + 1)):
                continue  # a model validates this part of the config: its fields are the names
            rd = dr.reads[p]
            path = ".".join(p)
            children = any(q[: len(p)] == p and len(q) > len(p) for q in dr.reads) or any(
                m[: len(p)] == p and len(m) > len(p) for m in model_paths
            )
            d, is_expr = default_text(rd.default)
            typ = ""
            if d is not None and not is_expr:
                try:
                    v = json.loads(d)
                    typ = type(v).__name__ if v is not None and not isinstance(v, dict) else ""
                except ValueError:
                    pass
            it = Item(name=p[-1], type=typ, default=d, default_is_expr=is_expr, file=rd.file, line=rd.line)
            rel.add(
                path,
                "config_section" if children else "config_key",
                path,
                it,
                validated=False,
                removed=dr.removed.get(p),
            )
    for dotted in DS_API:
        read_api(rel, dotted, "deepspeed.")
    for command, (mod, fn) in DS_CLIS.items():
        read_cli(rel, command, mod, fn)


def read_api(rel: Release, dotted: str, strip: str) -> None:
    """A function's / class's parameters (``kwarg`` records), or every public function of a module."""
    t = rel.tree
    ref = t.resolve_dotted(dotted)
    if ref is None:
        rel.skip(f"{dotted}: not in this release")
        return
    if ref.kind == "module":
        tree = t.parse(ref.module)
        for node in tree.body if tree else []:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                read_api(rel, f"{dotted}.{node.name}", strip)
        return
    if ref.kind not in ("func", "class"):
        rel.skip(f"{dotted}: not a function or class in this release ({ref.kind})")
        return
    path = dotted.removeprefix(strip)
    fn, mod, params = t.signature(ref)
    it = Item(
        name=path.rsplit(".", 1)[-1],
        type=ref.kind if ref.kind == "class" else "function",
        file=t.relfile(ref.module),
        line=ref.node.lineno,
    )
    it.doc = t.docstring(ref.node) or (t.docstring(fn) if fn is not ref.node else None)
    rel.add(path, "class" if ref.kind == "class" else "function", path, it)
    for p in params:
        rel.add(f"{path}.{p.name}", "kwarg", f"{path}.{p.name}", p)


def read_cli(rel: Release, command: str, mod: str, fn: str | None) -> None:
    t = rel.tree
    if mod not in t.files:
        rel.skip(f"cli {command}: {mod.replace('.', '/')}.py not in this release")
        return
    try:
        flags = t.argparse_flags(mod, fn)
    except LookupError as e:
        rel.skip(f"cli {command}: {e}")
        return
    for it in flags:
        rel.add(
            f"cli/{command}/{it.name}",
            "cli_flag",
            f"{command} {it.name}",
            it,
            nargs=it.extra.get("nargs"),
            choices=it.extra.get("choices"),
            implicit="argparse" if it.extra.get("argparse") else None,
        )


# ---- transformers / accelerate / peft


def read_transformers(rel: Release) -> None:
    classes = []
    for name, where in (
        ("TrainingArguments", "transformers/training_args.py"),
        ("Seq2SeqTrainingArguments", "transformers/training_args_seq2seq.py"),
    ):
        ref = _find(rel, name, [where])
        if ref is not None:
            classes.append(ref)
    read_classes(rel, classes, "field", "declared")


def read_accelerate(rel: Release) -> None:
    t = rel.tree
    ref = _find(rel, "DeepSpeedPlugin", ["accelerate/utils/dataclasses.py"])
    if ref is not None:
        read_classes(rel, [ref], "field", "declared")
    ref = _find(rel, "ClusterConfig", ["accelerate/commands/config/config_args.py"])
    if ref is not None:
        read_classes(rel, [ref], "yaml_key", "declared", prefix={"ClusterConfig": "yaml"}, class_records=False)
    mod = "accelerate.commands.config.cluster"
    if mod in t.files:
        for key, line in t.subscript_keys(mod, "deepspeed_config"):
            it = Item(name=key, file=t.relfile(mod), line=line)
            rel.add(f"yaml/deepspeed_config.{key}", "yaml_key", f"deepspeed_config.{key}", it)
    else:
        rel.skip("yaml deepspeed_config keys: accelerate/commands/config/cluster.py not in this release")
    read_cli(rel, "accelerate launch", "accelerate.commands.launch", "launch_command_parser")


def read_peft(rel: Release) -> None:
    ref = _find(rel, "LoraConfig", ["peft/tuners/lora/config.py"])
    if ref is not None:
        read_classes(rel, [ref], "field", "declared")


# ---- trl and the front ends


def read_trl(rel: Release) -> None:
    """Every config dataclass of trl (a public ``*Config`` / ``*Arguments`` dataclass: the trainer configs,
    ``ModelConfig``, ``ScriptArguments``, ...), its own fields, its base from transformers as ``inherits``.
    An internal base (one that other configs extend and no ``__init__`` exports) is not read on its own:
    its fields are named by each config that extends it, with ``owners``."""
    t = rel.tree
    classes = []
    for mod in sorted(t.files):
        tree = t.parse(mod)
        if tree is None or ".tests" in mod or mod.startswith("trl.tests"):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and node.name.endswith(("Config", "Arguments"))
            ):
                ref = Ref("class", mod, node, node.name)
                if _is_dataclass(t, ref):
                    classes.append(ref)
    # an internal base (OnPolicyConfig, 0.29's BaseConfig): a config that another one extends and that no
    # __init__ of trl exports is not one a user fills; its fields are named by the configs that extend it
    exported = set().union(*(t.exported(m) for m in sorted(t.files) if t.is_package(m)))
    extended = {b.name for r in classes for b in t.mro(r)[1:]}
    classes = [r for r in classes if r.name in exported or r.name not in extended]
    # a class defined twice (a deprecated shim beside its new home): the one trl/__init__ exports first
    top = {r.name: r for r in _exported_classes(rel, "trl")}
    classes.sort(key=lambda r: (r.name, 0 if top.get(r.name) == r else 1, r.module))
    if not classes:
        rel.skip("trl config dataclasses: none found")
    seen: dict[str, Ref] = {}
    for r in classes:
        if r.name in seen:
            kept = seen[r.name]
            if set(t.class_fields(r)) != set(t.class_fields(kept)):
                rel.skip(
                    f"class {r.name} of {t.relfile(r.module)}: another class of that name "
                    f"({t.relfile(kept.module)}) is read under the id {r.name}"
                )
        else:
            seen[r.name] = r
    read_classes(rel, classes, "field", "declared", owners=True)
    read_trl_cli(rel)


def read_trl_cli(rel: Release) -> None:
    """The subcommands of the ``trl`` command (``trl sft``, ``trl grpo``, ``trl vllm-serve``), each where its release
    defines it, as a ``script`` record ``trl:cli/trl/<name>``. Three forms over the window:

    * 0.12: ``trl/commands/cli.py``, the ``SUPPORTED_COMMANDS`` list that ``main`` checks;
    * 0.13-0.28: ``trl/cli.py``, the ``args.command == "<name>"`` branches of ``main`` (argparse subparsers);
    * 0.29 and 1.x: ``trl/cli/commands/__init__.py``, the commands ``get_commands()`` returns (``TrainingCommand("sft")``,
      or a command class whose ``__init__`` passes ``name="env"`` to its base)."""
    t = rel.tree
    found: list[tuple[str, str, int]] = []  # (name, module, line)
    if "trl.cli.commands" in t.files:
        tree = t.parse("trl.cli.commands")
        fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_commands"), None)
        for call in [n for n in ast.walk(fn) if isinstance(n, ast.Call)] if fn is not None else []:
            if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
                found.append((call.args[0].value, "trl.cli.commands", call.lineno))
            elif isinstance(call.func, ast.Name) and (named := _command_class_name(t, call.func.id)):
                found.append((named[0], named[1], named[2]))
    elif "trl.cli" in t.files:
        for node in ast.walk(t.parse("trl.cli")):
            if (
                isinstance(node, ast.Compare)
                and isinstance(node.left, ast.Attribute)
                and node.left.attr == "command"
                and len(node.comparators) == 1
                and isinstance(node.comparators[0], ast.Constant)
                and isinstance(node.comparators[0].value, str)
            ):
                found.append((node.comparators[0].value, "trl.cli", node.lineno))
    elif "trl.commands.cli" in t.files:
        for node in t.parse("trl.commands.cli").body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(x, ast.Name) and x.id == "SUPPORTED_COMMANDS" for x in node.targets)
                and isinstance(node.value, ast.List)
            ):
                found += [
                    (e.value, "trl.commands.cli", node.lineno) for e in node.value.elts if isinstance(e, ast.Constant)
                ]
    if not found:
        rel.skip("trl cli subcommands: none found")
    for name, mod, line in found:
        _subcommand(rel, "trl", name, t.relfile(mod), line)


def _subcommand(rel: Release, prog: str, name: str, file: str, line: int, aliases: list[str] | None = None) -> None:
    """A subcommand of a front end's command as a ``script`` record ``<pkg>:cli/<prog>/<name>``."""
    doc = f"subcommand of the {prog} command ({prog} {name})"
    it = Item(name=f"{prog} {name}", kind="script", doc=doc, file=file, line=line, aliases=aliases or [])
    rel.add(f"cli/{prog}/{name}", "script", f"{prog} {name}", it)


def _command_class_name(t: Tree, cls: str) -> tuple[str, str, int] | None:
    """1.x: the ``name="..."`` a command class of ``trl/cli/commands/`` passes to its base in ``__init__``."""
    for mod in sorted(m for m in t.files if m.startswith("trl.cli.commands.")):
        tree = t.parse(mod)
        for node in tree.body if tree is not None else []:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
                    for kw in call.keywords:
                        if kw.arg == "name" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                            return kw.value.value, mod, kw.value.lineno
    return None


def _front_classes(rel: Release, inits: list[str], what: str) -> list[Ref]:
    t = rel.tree
    for init in inits:
        if init in t.files:
            out = [r for r in _exported_classes(rel, init) if _is_dataclass(rel.tree, r) or t.is_model(r)]
            if out:
                return out
    rel.skip(f"{what}: none of {', '.join(m.replace('.', '/') for m in inits)} in this release")
    return []


def read_llamafactory(rel: Release) -> None:
    classes = _front_classes(rel, ["llamafactory.hparams"], "hparams")
    read_classes(rel, classes, "field", "top", owners=True)


def read_axolotl(rel: Release) -> None:
    ref = _find(rel, "AxolotlInputConfig", ["axolotl/utils/schemas/config.py", "axolotl/utils/config/models/input/"])
    if ref is not None:
        read_classes(rel, [ref], "field", "top", owners=True)
    read_axolotl_cli(rel)


def read_axolotl_cli(rel: Release) -> None:
    """The subcommands of the ``axolotl`` command (``axolotl train``, ``axolotl merge-lora``): the functions of
    ``axolotl/cli/main.py`` decorated ``@cli.command(...)``, the commands it adds with ``cli.add_command(f)``, and
    (0.18 on) the built-in lazy commands of ``axolotl/cli/plugins.py``; named as click names them (the decorator's
    name, else the function's name with ``_`` as ``-``; click 8). Installed plugins can add commands through entry
    points, so a name missing here is not proof that a user's ``axolotl X`` fails."""
    t = rel.tree
    mod = "axolotl.cli.main"
    tree = t.parse(mod) if mod in t.files else None
    if tree is None:
        rel.skip("axolotl cli subcommands: no axolotl/cli/main.py in this release")
        return
    found: list[tuple[str, str, int]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (name := _click_command_name(node, "cli")):
            found.append((name, mod, node.lineno))
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "add_command"
            and node.value.args
            and isinstance(node.value.args[0], ast.Name)
        ):
            where = _click_function(t, node.value.args[0].id)
            if where is not None:
                found.append(where)
            else:
                rel.skip(f"axolotl cli: add_command({node.value.args[0].id}): its definition not found")
    # 0.18 and later: built-in commands that load lazily, a dict of name -> PluginCommand in axolotl/cli/plugins.py
    # (installed plugins add more through entry points, which no release file lists)
    plugins = t.parse("axolotl.cli.plugins") if "axolotl.cli.plugins" in t.files else None
    for node in plugins.body if plugins is not None else []:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=True):
                if (
                    isinstance(k, ast.Constant)
                    and isinstance(k.value, str)
                    and isinstance(v, ast.Call)
                    and isinstance(v.func, ast.Name)
                    and v.func.id == "PluginCommand"
                ):
                    found.append((k.value, "axolotl.cli.plugins", k.lineno))
    for name, where, line in found:
        _subcommand(rel, "axolotl", name, t.relfile(where), line)


def _click_command_name(fn: ast.FunctionDef, group: str | None) -> str | None:
    """The name click gives ``fn`` when a ``@<group>.command(...)`` (or ``@click.command(...)`` with group None)
    decorates it."""
    for d in fn.decorator_list:
        call = d if isinstance(d, ast.Call) else None
        func = call.func if call is not None else d
        if not (isinstance(func, ast.Attribute) and func.attr == "command" and isinstance(func.value, ast.Name)):
            continue
        if group is not None and func.value.id != group or group is None and func.value.id != "click":
            continue
        for a in [
            *(call.args[:1] if call else []),
            *(k.value for k in (call.keywords if call else []) if k.arg == "name"),
        ]:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                return a.value
        return fn.name.lower().replace("_", "-")
    return None


def _click_function(t: Tree, name: str) -> tuple[str, str, int] | None:
    """A ``@click.command`` function named ``name`` anywhere in the package: (its click name, module, line)."""
    for mod in sorted(t.files):
        tree = t.parse(mod)
        for node in tree.body if tree is not None else []:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                cname = _click_command_name(node, None)
                if cname:
                    return cname, mod, node.lineno
    return None


def read_swift(rel: Release) -> None:
    classes = _front_classes(rel, ["swift.llm.argument", "swift.arguments"], "argument classes")
    read_classes(rel, classes, "field", "top", owners=True)
    read_swift_cli(rel)


def read_swift_cli(rel: Release) -> None:
    """The subcommands of the ``swift`` command (``swift sft``, ``swift rlhf``, ``swift rollout``): the keys of
    ``ROUTE_MAPPING`` in ``swift/cli/main.py``, each a ``script`` record ``ms-swift:cli/swift/<name>``. Where the file
    also accepts the underscore spelling (3.x: ``ROUTE_MAPPING.update({k.replace('-', '_'): ...})``; 4.x:
    ``argv[0].replace('_', '-')``), ``merge_lora`` is an alias of ``merge-lora``."""
    t = rel.tree
    mod = "swift.cli.main"
    tree = t.parse(mod) if mod in t.files else None
    found: list[tuple[str, int]] = []
    for node in tree.body if tree is not None else []:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if isinstance(target, ast.Name) and target.id == "ROUTE_MAPPING" and isinstance(node.value, ast.Dict):
            found = [
                (k.value, k.lineno) for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
    if not found:
        rel.skip("swift cli subcommands: no ROUTE_MAPPING in swift/cli/main.py")
        return
    src = t.files[mod].read_text(encoding="utf-8")
    underscore = "replace('-', '_')" in src or "replace('_', '-')" in src
    for name, line in found:
        aliases = [f"swift {name.replace('-', '_')}"] if underscore and "-" in name else []
        _subcommand(rel, "swift", name, t.relfile(mod), line, aliases)


READERS: dict[str, Callable[[Release], None]] = {
    "deepspeed": read_deepspeed,
    "transformers": read_transformers,
    "accelerate": read_accelerate,
    "peft": read_peft,
    "trl": read_trl,
    "llamafactory": read_llamafactory,
    "axolotl": read_axolotl,
    "ms-swift": read_swift,
}


def read_release(pkg: str, version: str, folder: Path) -> Release:
    tree = Tree(folder, WINDOWS[pkg]["import"])
    rel = Release(pkg, version, tree)
    READERS[pkg](rel)
    for e in tree.errors:
        rel.skip(e)
    return rel


# ---------------------------------------------------------------- merging releases into a timeline


def _spans(present: list[bool], releases: list[str]) -> list[list[str]]:
    out, start = [], None
    for i, p in enumerate(present):
        if p and start is None:
            start = i
        if not p and start is not None:
            out.append([releases[start], releases[i - 1]])
            start = None
    if start is not None:
        out.append([releases[start], releases[-1]])
    return out


def merge(pkg: str, releases: list[str], per_release: dict[str, dict[str, Rec]]) -> dict[str, dict]:
    """One entry per id over ``releases`` (oldest first): its spans, its defaults where they change, the
    release where it became deprecated, and its other fields from the newest release that has it."""
    ids = sorted({i for names in per_release.values() for i in names})
    out: dict[str, dict] = {}
    # release -> (id, name, aliases, owners) of its names: where a stated replacement is looked up
    cands = {
        r: [(k, v["name"], v["aliases"], v.get("owners") or ()) for k, v in sorted(per_release[r].items())]
        for r in releases
    }
    for rid in ids:
        present = [rid in per_release[r] for r in releases]
        have = [r for r in releases if rid in per_release[r]]
        newest = per_release[have[-1]][rid]
        defaults: dict[str, str | None] = {}
        exprs: list[str] = []
        deprecated: dict[str, str | None] = {}
        last_d: Any = object()
        last_dep: Any = None
        removed: dict[str, str | None] = {}
        last_rem: Any = None
        validated: dict[str, bool] = {}
        last_val: Any = None
        replacement: dict[str, str | None] = {}
        last_rep: Any = None
        aliases: dict[str, list[str]] = {}
        last_al: Any = None
        owners: set[str] = set()
        for r in have:
            rec = per_release[r][rid]
            # a replacement the release's source states, where it names a name of the same class in that release
            rep = None
            if rec.get("replacement"):
                cid = replacement_id(rid, rec.get("owners") or (), rec["replacement"], cands[r])
                rep = per_release[r][cid]["name"] if cid else None
            if rep != last_rep:
                replacement[r] = rep
            last_rep = rep
            if rec["aliases"] != last_al:
                aliases[r] = rec["aliases"]
            last_al = rec["aliases"]
            if rec["default"] != last_d:
                defaults[r] = rec["default"]
                if rec["default_is_expr"]:
                    exprs.append(r)
                last_d = rec["default"]
            dep = rec["deprecated"]
            if bool(dep) != bool(last_dep):
                deprecated[r] = dep or None
            last_dep = dep
            val = bool(rec.get("validated"))
            if val != last_val:
                validated[r] = val
            last_val = val
            rem = rec.get("removed")
            if bool(rem) != bool(last_rem):
                removed[r] = rem or None
            last_rem = rem
            owners |= set(rec.get("owners") or [])
        entry = {
            "kind": newest["kind"],
            "name": newest["name"],
            "path": newest["path"],
            "spans": _spans(present, releases),
            "type": newest["type"],
            "doc": newest["doc"],
            "aliases": newest["aliases"],
            "inherits": newest["inherits"],
            "defaults": defaults,
            "deprecated": deprecated,
            "source": f"{newest['file']}:{newest['line']}",
            "source_release": have[-1],
        }
        if exprs:
            entry["default_is_expression"] = exprs  # the default there is the expression the source writes
        if removed:
            entry["removed"] = removed  # release -> the error the release raises for it (None: accepted again)
        if any(validated.values()):
            entry["validated"] = validated  # release -> whether a pydantic model validates it (where it changes)
        if any(replacement.values()):
            entry["replacement"] = replacement  # release -> the name the source says to write instead
        if len(aliases) > 1:
            entry["aliases_by_release"] = aliases  # release -> its aliases, where they change (aliases: the newest's)
        if owners or newest.get("owners") is not None:
            entry["owners"] = sorted(owners)
        for k in ("nargs", "choices", "implicit"):
            if newest.get(k) is not None:
                entry[k] = newest[k]
        out[rid] = entry
    return out


def dumps(timeline: dict) -> str:
    """The timeline as JSON text: sorted keys, one name per line (compact, and a diff shows one name per
    changed line). Byte-identical for the same input."""
    head = {k: v for k, v in timeline.items() if k != "names"}
    lines = ["{"]
    for k in sorted(head):
        lines.append(f"{json.dumps(k)}: {json.dumps(head[k], sort_keys=True, ensure_ascii=False)},")
    lines.append('"names": {')
    names = timeline["names"]
    keys = sorted(names)
    for i, k in enumerate(keys):
        sep = "," if i < len(keys) - 1 else ""
        lines.append(
            f"{json.dumps(k, ensure_ascii=False)}: {json.dumps(names[k], sort_keys=True, ensure_ascii=False)}{sep}"
        )
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def releases_of(pkg: str, offline: bool) -> list[str]:
    if offline:
        return select(pkg, cached_versions(pkg))
    return select(pkg, available_versions(pkg))


def build(pkg: str, offline: bool = False, progress: Progress = _say, out_dir: Path = OUT) -> dict:
    """The timeline of ``pkg``: every release of its window, downloaded (unless offline), unpacked, read, and the
    releases ``kb registry add`` added to the committed timeline (its ``added``) besides."""
    added: list[str] = []
    if (out_dir / f"{pkg}.json").exists():
        added = list(json.loads((out_dir / f"{pkg}.json").read_text(encoding="utf-8")).get("added") or [])
    releases = sorted(set(releases_of(pkg, offline)) | set(added), key=Version)
    added = sorted(set(releases) - set(select(pkg, releases)), key=Version)
    read: dict[str, dict] = {}
    requires: dict[str, dict] = {}
    skipped: dict[str, list[str]] = {}
    per_release: dict[str, dict[str, Rec]] = {}
    for i, v in enumerate(releases, 1):
        archive = cached_file(pkg, v) if offline else download(pkg, v)
        if archive is None:
            raise RuntimeError(f"{pkg} {v}: not in {DIST / pkg} (run without --offline to download it)")
        folder = unpack(pkg, v, archive)
        rel = read_release(pkg, v, folder)
        reqs, where = requirements(folder)
        read[v] = {"file": archive.name, "sha256": sha256(archive), "how": "static", "metadata": where or None}
        requires[v] = reqs
        if rel.skipped:
            skipped[v] = sorted(rel.skipped)
        per_release[v] = rel.names
        progress(
            f"timeline {pkg} {v} ({i}/{len(releases)}): {len(rel.names)} names, {len(rel.skipped)} skipped, {archive.name}"
        )
    out = {
        "format": FORMAT,
        "package": pkg,
        "window": WINDOWS[pkg]["why"],
        "releases": releases,
        "read": read,
        "requires": requires,
        "skipped": skipped,
        "names": merge(pkg, releases, per_release),
    }
    if added:
        out["added"] = added  # releases besides the window's rule (kb registry add): a rebuild keeps them
    return out


def write(pkg: str, timeline: dict, out_dir: Path = OUT) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{pkg}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(dumps(timeline), encoding="utf-8")
    os.replace(tmp, path)
    return path


def load(pkg: str, out_dir: Path = OUT) -> dict:
    return json.loads((out_dir / f"{pkg}.json").read_text(encoding="utf-8"))


def present_at(entry: dict, release: str, releases: list[str]) -> bool:
    """The name exists in ``release`` (one of the timeline's releases)."""
    i = releases.index(release)
    return any(releases.index(a) <= i <= releases.index(b) for a, b in entry["spans"])


# ---------------------------------------------------------------- the self-check: the sampled releases


CHECK_KINDS = ("config_key", "config_section", "field", "cli_flag", "yaml_key")
REGISTRY = ROOT / "data" / "registry"


def namespace(rid: str, kind: str) -> str:
    """The family of names an id belongs to: a class (``TrainingArguments``), a CLI (``cli/deepspeed``),
    accelerate's YAML (``yaml``, ``yaml/deepspeed_config``) or the DeepSpeed config (``config``)."""
    local = rid.split(":", 1)[1]
    if kind == "cli_flag":
        return local.rsplit("/", 1)[0]
    if kind in ("config_key", "config_section"):
        return "config"
    if kind == "yaml_key":
        return local.split(".", 1)[0]
    return local.split(".", 1)[0]


def check(pkg: str, timeline: dict | None = None, registry_dir: Path = REGISTRY) -> dict:
    """The timeline's names at the releases the import-built registry records, against the registry's
    config_key / config_section / field / cli_flag / yaml_key records of the same releases (the families
    of names the timeline reads). Returns {release: {"registry", "timeline", "missing", "added", "kind"}}
    and, under "out_of_scope", the registry's families the timeline does not read."""
    tl = timeline or load(pkg)
    path = registry_dir / f"{pkg}.jsonl"
    if not path.exists():
        return {}
    reg = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    reg = [r for r in reg if r["kind"] in CHECK_KINDS]
    tl_names = {k: v for k, v in tl["names"].items() if v["kind"] in CHECK_KINDS}
    families = {namespace(k, v["kind"]) for k, v in tl_names.items()}
    out: dict[str, Any] = {"out_of_scope": sorted({namespace(r["id"], r["kind"]) for r in reg} - families)}
    for release in sorted({x for r in reg for x in r["releases"]}, key=Version):
        if release not in tl["releases"]:
            out[release] = {"not_in_timeline": True}
            continue
        r_ids = {
            r["id"]: r["kind"] for r in reg if release in r["releases"] and namespace(r["id"], r["kind"]) in families
        }
        t_ids = {k: v["kind"] for k, v in tl_names.items() if present_at(v, release, tl["releases"])}
        both = set(r_ids) & set(t_ids)
        r_al = {
            r["id"]: sorted(_at(r, release, "aliases") or [])
            for r in reg
            if r["id"] in both and release in r["releases"]
        }
        t_al = {i: aliases_at(tl_names[i], release, tl["releases"]) for i in both}
        out[release] = {
            "registry": len(r_ids),
            "timeline": len(t_ids),
            "agree": len(both),
            "missing": sorted(set(r_ids) - set(t_ids)),
            "added": sorted(set(t_ids) - set(r_ids)),
            "kind": sorted(f"{i}: {r_ids[i]} / {t_ids[i]}" for i in both if r_ids[i] != t_ids[i]),
            # the names both have, and those whose aliases differ ("id: registry [...] / timeline [...]")
            "with_aliases": sum(1 for i in both if r_al[i] or t_al[i]),
            "aliases": sorted(
                f"{i}: registry {json.dumps(r_al[i])} / timeline {json.dumps(t_al[i])}"
                for i in both
                if r_al[i] != t_al[i]
            ),
        }
    return out


def _at(rec: dict, release: str, key: str) -> Any:
    """A format-2 registry record's ``key`` as ``release`` has it (its history applied)."""
    h = (rec.get("history") or {}).get(release) or {}
    return h[key] if key in h else rec.get(key)


def aliases_at(entry: dict, release: str, releases: list[str]) -> list[str]:
    """A timeline entry's aliases at ``release`` (``aliases_by_release`` where they change, else ``aliases``)."""
    by = entry.get("aliases_by_release")
    if not by:
        return sorted(entry.get("aliases") or [])
    return sorted(_state_at(by, release, releases) or [])


# Why a name differs between the static read and the import-built registry at a sampled release: the
# categories the self-check accepts (docs/registry.md, "Every minor release: the timeline", says why each
# one is right). explain() computes the category from the two records; a difference it cannot place is
# reported as unexplained (tests/test_registry_timeline.py requires there be none).
EXPLAINED = {
    "deepspeed-branch": "a key DeepSpeed's config code reads on a branch, or at a depth, that the import "
    "build's trace (DeepSpeedConfig run on an empty config, then on each top-level key given {} or "
    '{"enabled": true}) does not reach',
    "deepspeed-model": "a field of a pydantic model that the config code builds from part of the user's dict "
    "but that the import build's DS_SECTION_MODELS does not list",
    "deepspeed-removed": 'a key the release rejects by name (its code raises "... has been removed" for it), '
    "which the model no longer has",
    "deepspeed-section": "a key the import build records as a leaf where the static read finds keys below it",
    "argparse-help": "argparse's own -h/--help, which the import build has only where it builds the real parser "
    "object (it reads zero_to_fp32.py and ds_to_universal.py from their add_argument calls, without it)",
}


def explain(pkg: str, release: str, rid: str, direction: str, tl: dict, reg_kind: str | None = None) -> str | None:
    """The EXPLAINED category of one difference at ``release``: ``direction`` "added" (only the timeline has
    the name), "missing" (only the registry) or "kind" (both, with another kind); None: unexplained."""
    entry = tl["names"].get(rid)
    if entry is None or direction == "missing":
        return None
    if direction == "added" and entry["kind"] == "cli_flag" and entry.get("implicit") == "argparse":
        return "argparse-help"
    if pkg != "deepspeed":
        return None
    if direction == "kind":
        below = [
            k for k, v in tl["names"].items() if k.startswith(rid + ".") and present_at(v, release, tl["releases"])
        ]
        if reg_kind == "config_key" and entry["kind"] == "config_section" and below:
            return "deepspeed-section"
        return None
    if entry["kind"] not in ("config_key", "config_section"):
        return None
    rels = tl["releases"]
    state = _state_at(entry.get("removed") or {}, release, rels)
    if state and not _state_at(entry.get("validated") or {}, release, rels) and "." in rid.split(":", 1)[1]:
        return "deepspeed-removed"
    if _state_at(entry.get("validated") or {}, release, rels):
        return "deepspeed-model"
    return "deepspeed-branch"


def _state_at(changes: dict[str, Any], release: str, releases: list[str]) -> Any:
    """The value of a release -> value change map at ``release`` (None before its first change)."""
    state = None
    for r, v in sorted(changes.items(), key=lambda kv: releases.index(kv[0])):
        if releases.index(r) <= releases.index(release):
            state = v
    return state


def explained_check(pkg: str, result: dict, tl: dict | None = None) -> dict[str, dict[str, list[str]]]:
    """The differences of :func:`check` per release, grouped by EXPLAINED category ("unexplained" for the rest)."""
    tl = tl or load(pkg)
    out: dict[str, dict[str, list[str]]] = {}
    for release, r in result.items():
        if release == "out_of_scope" or r.get("not_in_timeline"):
            continue
        groups: dict[str, list[str]] = {}
        for direction in ("missing", "added"):
            for rid in r[direction]:
                cat = explain(pkg, release, rid, direction, tl) or "unexplained"
                groups.setdefault(cat, []).append(f"{direction} {rid}")
        for line in r["kind"]:
            rid, kinds = line.split(": ", 1)
            cat = explain(pkg, release, rid, "kind", tl, kinds.split(" / ")[0]) or "unexplained"
            groups.setdefault(cat, []).append(f"kind {line}")
        for line in r.get("aliases", []):  # no category explains a difference of aliases
            groups.setdefault("unexplained", []).append(f"aliases {line}")
        out[release] = groups
    return out


def check_report(pkg: str, result: dict) -> str:
    lines = []
    if result.get("out_of_scope"):
        lines.append(f"{pkg}: registry families the timeline does not read: {', '.join(result['out_of_scope'])}")
    for release, r in result.items():
        if release == "out_of_scope":
            continue
        if r.get("not_in_timeline"):
            lines.append(f"{pkg} {release}: not a timeline release")
            continue
        lines.append(
            f"{pkg} {release}: registry {r['registry']}, timeline {r['timeline']}, both {r['agree']}, "
            f"missing {len(r['missing'])}, added {len(r['added'])}, kind differs {len(r['kind'])}, "
            f"aliases: {r['with_aliases']} with, {len(r['aliases'])} differ"
        )
    for release, groups in explained_check(pkg, result).items():
        for cat, items in sorted(groups.items()):
            lines.append(f"  {pkg} {release} {cat} ({len(items)}): {EXPLAINED.get(cat, 'NOT EXPLAINED')}")
            for i in items:
                lines.append(f"    {i}")
    return "\n".join(lines)


# ---------------------------------------------------------------- one more release: kb registry add


class AddError(ValueError):
    """A release that cannot be added (unknown package, no such release, nothing readable); nothing was written."""


def records_at(timeline: dict) -> dict[str, dict[str, Rec]]:
    """Each release's records as :func:`merge` was given them, rebuilt from a merged timeline: the change maps
    (defaults, deprecated, removed, validated, replacement, aliases) read back per release, the other fields
    those of the newest release (what merge keeps of the others). Merging them again gives the same names."""
    rels = timeline["releases"]
    out: dict[str, dict[str, Rec]] = {r: {} for r in rels}
    for rid, e in timeline["names"].items():
        f, _, line = e["source"].rpartition(":")
        exprs = set(e.get("default_is_expression") or [])
        for a, b in e["spans"]:
            for r in rels[rels.index(a) : rels.index(b) + 1]:
                d_rel = _change_at(e["defaults"], r, rels)
                rec: Rec = {
                    "kind": e["kind"],
                    "name": e["name"],
                    "path": e["path"],
                    "type": e["type"],
                    "doc": e["doc"],
                    "aliases": aliases_at(e, r, rels),
                    "default": e["defaults"][d_rel] if d_rel else None,
                    "default_is_expr": d_rel in exprs,
                    "deprecated": _state_at(e["deprecated"], r, rels),
                    "replacement": _state_at(e.get("replacement") or {}, r, rels),
                    "file": f,
                    "line": int(line) if line.isdigit() else 0,
                    "owners": e.get("owners"),
                    "inherits": e["inherits"],
                }
                if "validated" in e:
                    rec["validated"] = bool(_state_at(e["validated"], r, rels))
                if "removed" in e:
                    rec["removed"] = _state_at(e["removed"], r, rels)
                for k in ("nargs", "choices", "implicit"):
                    if k in e:
                        rec[k] = e[k]
                out[r][rid] = rec
    return out


def _change_at(changes: dict[str, Any], release: str, releases: list[str]) -> str | None:
    """The release of the last change at or before ``release`` in a release -> value map."""
    best = None
    for r in changes:
        if releases.index(r) <= releases.index(release) and (best is None or releases.index(r) > releases.index(best)):
            best = r
    return best


def _read_one(pkg: str, version: str, folder: Path | None, offline: bool) -> tuple[Release, dict, dict]:
    """The release read: (Release, its ``read`` line, its Requires-Dist pins); AddError when it cannot be."""
    if folder is None:
        archive = cached_file(pkg, version)
        if archive is None and offline:
            raise AddError(f"{pkg} {version}: not in {DIST / pkg} (run without --offline to download it)")
        if archive is None:
            try:
                archive = download(pkg, version)
            except RuntimeError as e:
                raise AddError(
                    f"{pkg}=={version}: no such release on the package index, or it cannot be downloaded ({e})"
                ) from None
        try:
            folder = unpack(pkg, version, archive)
        except (RuntimeError, OSError, zipfile.BadZipFile, tarfile.TarError) as e:
            raise AddError(f"{pkg} {version}: {archive.name} cannot be unpacked: {e}") from None
        read = {"file": archive.name, "sha256": sha256(archive), "how": "static"}
    else:
        read = {"file": Path(folder).name, "sha256": _tree_sha256(Path(folder)), "how": "static"}
    imp = WINDOWS[pkg]["import"]
    if not (Path(folder) / imp).is_dir():
        raise AddError(f"{pkg} {version}: no {imp}/ package in {folder}")
    rel = read_release(pkg, version, Path(folder))
    if not rel.names:
        why = "; ".join(sorted(rel.skipped)[:3]) or "no name found"
        raise AddError(f"{pkg} {version}: nothing could be read ({why})")
    reqs, where = requirements(Path(folder))
    read["metadata"] = where or None
    return rel, read, reqs


def _tree_sha256(folder: Path) -> str:
    """A digest of an unpacked folder's files (paths and contents, in order): a release given as a folder."""
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def add_release(
    pkg: str,
    version: str,
    write: bool = True,
    *,
    folder: Path | None = None,
    out_dir: Path = OUT,
    offline: bool = False,
    progress: Progress = _say,
) -> dict:
    """Add ``pkg==version`` to ``pkg``'s timeline: downloaded into the cache (pip), unpacked, read statically,
    inserted in version order and merged with the releases already there (:func:`records_at`: the same names a
    full rebuild with that release gives), the file rewritten (:func:`dumps`: byte-identical for the same
    input) unless ``write`` is False. ``folder``: an unpacked release (``<import name>/...``) to read instead of
    downloading one. A release already in the timeline is not read again.

    Returns {"package", "version", "status" ("added" | "present" | "dry-run"), "written" (the path, or None),
    "read" (the file read and its sha256), "names" (how many the release has), "releases", "previous" / "next"
    (its neighbours in the timeline, or None), "diff" (:func:`release_diff` from the previous release, or None),
    "next_diff" (from it to the next release, or None), "timeline" (the new timeline dict)}. AddError (nothing written) for an unknown package or version, a release that cannot be
    downloaded, unpacked or read."""
    if pkg not in WINDOWS:
        raise AddError(f"{pkg}: no timeline for this package (one of: {', '.join(sorted(WINDOWS))})")
    try:
        v = Version(version)
    except InvalidVersion:
        raise AddError(f"{pkg}=={version}: not a version (PEP 440)") from None
    version = str(v)
    path = out_dir / f"{pkg}.json"
    if not path.exists():
        raise AddError(
            f"{path}: no timeline for {pkg} yet (build it: python -m indexer.registry_timeline --package {pkg})"
        )
    tl = json.loads(path.read_text(encoding="utf-8"))
    if version in tl["releases"]:
        return _result(pkg, version, "present", None, tl, None)
    rel, read, reqs = _read_one(pkg, version, folder, offline)
    progress(f"timeline {pkg} {version}: {len(rel.names)} names, {len(rel.skipped)} skipped, {read['file']}")
    per_release = records_at(tl)
    per_release[version] = rel.names
    releases = sorted([*tl["releases"], version], key=Version)
    new = dict(tl)
    new["releases"] = releases
    new["read"] = {**tl["read"], version: read}
    new["requires"] = {**tl["requires"], version: reqs}
    new["skipped"] = dict(tl["skipped"])
    if rel.skipped:
        new["skipped"][version] = sorted(rel.skipped)
    # releases the window's rule would not choose among these (an older patch, a minor past the window): kept by
    # rebuilds through "added"
    added = sorted(set(releases) - set(select(pkg, releases)), key=Version)
    if added:
        new["added"] = added
    new["names"] = merge(pkg, releases, per_release)
    written = None
    if write:
        written = _write_file(pkg, new, out_dir)
    return _result(pkg, version, "added" if write else "dry-run", written, new, read)


def _result(pkg: str, version: str, status: str, written: Path | None, tl: dict, read: dict | None) -> dict:
    rels = tl["releases"]
    i = rels.index(version)
    prev = rels[i - 1] if i > 0 else None
    nxt = rels[i + 1] if i + 1 < len(rels) else None
    return {
        "package": pkg,
        "version": version,
        "status": status,
        "written": str(written) if written else None,
        "read": read or tl["read"].get(version),
        "names": sum(1 for e in tl["names"].values() if present_at(e, version, rels)),
        "releases": len(rels),
        "previous": prev,
        "next": nxt,
        # what changed from the release before it; and, where it sits before another release, from it to that one
        # (that release's changes are now counted from this one)
        "diff": release_diff(tl, prev, version) if prev else None,
        "next_diff": release_diff(tl, version, nxt) if nxt else None,
        "timeline": tl,
    }


def release_diff(timeline: dict, old: str, new: str) -> dict[str, Any]:
    """What changed from release ``old`` to release ``new`` of ``timeline`` (ids sorted): names ``added`` and
    ``removed``; ``renamed`` (old id -> new id: a replacement the source states from ``new`` on, the old name
    kept, or a name gone whose release ``old`` named its replacement); ``defaults`` changed; newly
    ``deprecated``."""
    from kb.registry.timeline import timeline_from_dict

    t = timeline_from_dict(timeline)
    out: dict[str, Any] = {
        "from": old,
        "to": new,
        "added": [],
        "removed": [],
        "renamed": [],
        "defaults": [],
        "deprecated": [],
    }
    for rid in sorted(t.names):
        now, before = bool(t.present(rid, new)), bool(t.present(rid, old))
        if now and not before:
            out["added"].append(rid)
        elif before and not now:
            out["removed"].append(rid)
            new_id = t.replacement_id(rid, old)
            if new_id and t.present(new_id, new):
                out["renamed"].append(
                    {"from": rid, "to": new_id, "stated_in": _stated_in(t, rid, old), "old_kept": False}
                )
        elif now and before:
            new_id = t.replacement_id(rid, new)
            if new_id and new_id != t.replacement_id(rid, old):
                out["renamed"].append({"from": rid, "to": new_id, "stated_in": new, "old_kept": True})
            k1, d1 = t.default_at(rid, old)
            k2, d2 = t.default_at(rid, new)
            if k1 and k2 and d1 != d2:
                out["defaults"].append({"id": rid, "from": d1, "to": d2})
            msg = t.deprecated_at(rid, new)
            if msg is not None and t.deprecated_at(rid, old) is None:
                out["deprecated"].append({"id": rid, "message": msg})
    return out


def _stated_in(t: Any, rid: str, release: str) -> str:
    """The release from which the replacement in force at ``release`` is stated (its last change at or before)."""
    i = t.releases.index(release)
    starts = [r for r in t.names[rid].replacement if t.releases.index(r) <= i]
    return max(starts, key=t.releases.index) if starts else release


def touched_entries(result: dict, entries_root: Path) -> list[dict[str, str]]:
    """The entries under ``entries_root`` that name a parameter the added release changed
    (kb.content.check.touched_by_release at that release; and at the next release of the timeline where the
    release went in before it, since that one's changes are now counted from it), for a reviewer to re-read."""
    from dataclasses import asdict

    from kb.content.check import touched_by_release
    from kb.content.entries import load_entries
    from kb.registry.store import Registry
    from kb.registry.timeline import timeline_from_dict

    pkg = result["package"]
    tl = timeline_from_dict(result["timeline"], f"{pkg} timeline", pkg)
    registry = Registry([], timelines={pkg: tl})
    loaded = load_entries(entries_root)
    out: list[dict[str, str]] = []
    for rel in [result["version"], *([result["next"]] if result.get("next_diff") else [])]:
        out += [asdict(t) for t in touched_by_release(loaded, registry, {pkg: rel})]
    return out


def add_report(result: dict, touched: list[dict[str, str]] | None, most: int = 40) -> str:
    """``kb registry add``'s text: what was read, where it went, the changes, the entries to re-read."""
    pkg, v = result["package"], result["version"]
    lines = []
    head = {
        "added": f"added to {result['written']}",
        "dry-run": "dry run: nothing written",
        "present": "already in the timeline: nothing read, nothing written",
    }[result["status"]]
    read = result.get("read") or {}
    lines.append(f"{pkg} {v}: {head}")
    lines.append(
        f"  {result['names']} names, read statically from {read.get('file', '?')}; the timeline has "
        f"{result['releases']} releases"
        + (f" ({result['previous']} before it" if result["previous"] else " (the oldest")
        + (f", {result['next']} after it)" if result["next"] else ", the newest)")
    )
    for key in ("diff", "next_diff"):
        d = result.get(key)
        if not d:
            continue
        lines.append(f"{pkg} {d['from']} -> {d['to']}:")
        groups = [
            ("added", [i for i in d["added"]]),
            ("removed", [i for i in d["removed"]]),
            (
                "renamed",
                [
                    f"{r['from']} -> {r['to']} (stated in {r['stated_in']}; "
                    + ("the old name still accepted)" if r["old_kept"] else "the old name gone)")
                    for r in d["renamed"]
                ],
            ),
            ("default changed", [f"{x['id']}: {x['from']} -> {x['to']}" for x in d["defaults"]]),
            ("newly deprecated", [f"{x['id']}: {x['message']}" for x in d["deprecated"]]),
        ]
        if not any(items for _, items in groups):
            lines.append("  no name added, removed, renamed, re-defaulted or deprecated")
        for label, items in groups:
            if not items:
                continue
            lines.append(f"  {label} ({len(items)}):")
            lines += [f"    {i}" for i in items[:most]]
            if len(items) > most:
                lines.append(f"    ... and {len(items) - most} more (--json lists every one)")
    if touched is not None:
        if touched:
            lines.append(f"entries to re-read ({len(touched)}):")
            lines += [f"  {t['file']}: {t['entry']}: {t['param']}: {t['change']} in {t['release']}" for t in touched]
        else:
            lines.append("entries to re-read: none names a parameter this release changed")
    return "\n".join(lines) + "\n"


_write_file = write


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m indexer.registry_timeline", description=__doc__.split("\n\n")[0])
    ap.add_argument("--package", action="append", choices=sorted(WINDOWS), help="this package only (repeatable)")
    ap.add_argument("--offline", action="store_true", help="never call pip: read only what .cache/kb/dist holds")
    ap.add_argument("--check", action="store_true", help="only compare the committed timelines with data/registry")
    args = ap.parse_args(argv)
    pkgs = args.package or list(WINDOWS)
    for pkg in pkgs:
        if not args.check:
            tl = build(pkg, offline=args.offline)
            p = write(pkg, tl)
            _say(
                f"timeline {pkg}: {len(tl['names'])} names over {len(tl['releases'])} releases -> {p.relative_to(ROOT)}"
            )
        if (REGISTRY / f"{pkg}.jsonl").exists():
            print(check_report(pkg, check(pkg)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
