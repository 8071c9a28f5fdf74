"""The registry over several releases (format 2): install, build and merge (``kb registry build --release``).

Three steps, each one a plain function:

1. :func:`install` puts one release (``pkg==version``) into its own folder,
   ``.cache/kb/registry/releases/<pkg>-<version>/``, with ``pip install --no-deps --target``, plus only those of
   its dependencies whose installed versions it refuses (an old transformers pins tokenizers and
   huggingface_hub ranges). torch stays the environment's own.
2. :func:`build_release` runs the ordinary builder (``indexer.registry_build``) in a subprocess with that
   folder first on ``PYTHONPATH`` and writes a format-1 file,
   ``.cache/kb/registry-releases/<pkg>-<version>.jsonl``, beside ``<pkg>-<version>.meta.json`` (how it
   was built, what the builder could not read, the renames the source states). The installed (newest)
   releases are built the same way, without a folder. When the release cannot be imported with this
   torch, the build falls back to reading its source by AST (:func:`_static_records`, ``built: static``).
3. :func:`merge` turns every per-release file of a package into one record per id (format 2, see
   docs/registry.md); :func:`write_registry` writes ``data/registry/<pkg>.jsonl`` and the manifest,
   byte-identical on rerun.

Nothing here types a parameter name: every record comes from the builder run against a real release.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.version import Version

from kb.registry.order import version_key

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "kb"
RELEASE_DIR = CACHE / "releases"
BUILD_DIR = CACHE / "registry-releases"
FORMAT = 2

# The recorded releases, oldest first; the last one of each package is the installed one (pyproject's
# `registry` extra). Why each one is here: docs/registry.md ("Which releases").
RELEASES: dict[str, list[str]] = {
    "deepspeed": ["0.14.4", "0.16.9", "0.18.9", "0.19.4", "0.19.8"],
    "transformers": ["4.46.3", "4.57.6", "5.24.0"],
    "accelerate": ["0.34.2", "1.6.0", "1.15.0"],
    "peft": ["0.13.2", "0.17.1", "0.21.2"],
    "torch": ["2.13.0"],
}

# A release that imports a package which changed incompatibly after it is built beside a release of that
# package from its own time (that release's folder goes on PYTHONPATH too). Each pair was found by the
# import failing with the installed package; the reason is in docs/registry.md.
COMPANIONS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("peft", "0.17.1"): [("transformers", "4.57.6")],  # imports transformers.HybridCache (gone in 5.x)
}

# fields that are not compared across releases: the release itself and the format-2 additions
_META_FIELDS = ("version", "releases", "history", "renamed_to", "renamed_from")

Progress = Callable[[str], None] | None


def parse_spec(spec: str) -> tuple[str, str]:
    """``deepspeed==0.14.4`` -> ("deepspeed", "0.14.4"); ValueError with a plain message otherwise."""
    m = re.fullmatch(r"\s*([A-Za-z][\w.-]*)\s*==\s*([0-9][\w.+-]*)\s*", spec)
    if not m:
        raise ValueError(f"--release {spec!r}: write it as PACKAGE==VERSION, e.g. deepspeed==0.14.4")
    pkg, ver = m.group(1).lower(), m.group(2)
    from indexer.registry_build import BUILDERS

    if pkg not in BUILDERS:
        raise ValueError(f"--release {spec!r}: no builder for {pkg}; choose from {', '.join(BUILDERS)}")
    try:
        Version(ver)
    except Exception:
        raise ValueError(f"--release {spec!r}: {ver!r} is not a version") from None
    return pkg, ver


def installed_version(pkg: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(pkg).split("+", 1)[0]
    except md.PackageNotFoundError:
        return None


# ---------------------------------------------------------------- 1. install


def release_dir(pkg: str, version: str) -> Path:
    return RELEASE_DIR / f"{pkg}-{version}"


def _pip(args: list[str], env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", *args]
    run_env = {**os.environ, "DS_BUILD_OPS": "0", **(env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=run_env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"pip {' '.join(args)} failed:\n{tail}")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dists(folder: Path) -> dict[str, tuple[str, Path]]:
    """The distributions installed in ``folder``: normalized name -> (version, METADATA path)."""
    out = {}
    for meta in sorted(folder.glob("*.dist-info/METADATA")):
        name = ver = None
        for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Name:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("Version:"):
                ver = line.split(":", 1)[1].strip()
            if name and ver:
                break
        if name and ver:
            out[_norm(name)] = (ver, meta)
    return out


def _requirements(meta: Path) -> list[Requirement]:
    out = []
    for line in meta.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                out.append(req)
    return out


def refused_dependencies(folder: Path) -> list[str]:
    """The requirements of the distributions in ``folder`` that neither the folder nor the environment
    satisfies (torch excepted: the registry is built against the environment's one torch)."""
    dists = _dists(folder)
    out = set()
    for _ver, meta in dists.values():
        for req in _requirements(meta):
            name = _norm(req.name)
            if name == "torch":
                continue
            have = dists[name][0] if name in dists else installed_version(name)
            if have is None or not req.specifier.contains(have, prereleases=True):
                out.add(f"{name}{req.specifier}")
    return sorted(out)


def install(pkg: str, version: str, progress: Progress = None) -> Path:
    """Install ``pkg==version`` into its own cache folder (reused when already there)."""
    folder = release_dir(pkg, version)
    if not any(folder.glob("*.dist-info")):
        if progress:
            progress(f"  installing {pkg}=={version} into {folder.relative_to(ROOT)}\n")
        tmp = folder.with_name(folder.name + ".tmp")
        if tmp.exists():
            import shutil

            shutil.rmtree(tmp)
        # --no-build-isolation: deepspeed's sdist imports torch in setup.py (DS_BUILD_OPS=0: no ops built)
        _pip(["--no-deps", "--no-build-isolation", "--no-compile", "--target", str(tmp), f"{pkg}=={version}"])
        tmp.rename(folder)
    tried: set[str] = set()
    while deps := [d for d in refused_dependencies(folder) if d not in tried]:
        if progress:
            progress(f"  {pkg}=={version} needs {', '.join(deps)} (not satisfied by the environment): adding\n")
        _pip(["--no-deps", "--no-compile", "--target", str(folder), *deps])
        tried.update(deps)
    return folder


# ---------------------------------------------------------------- 2. build one release


def release_file(pkg: str, version: str, out_dir: Path | None = None) -> Path:
    return (out_dir or BUILD_DIR) / f"{pkg}-{version}.jsonl"


def build_release(pkg: str, version: str, out_dir: Path | None = None, progress: Progress = None) -> dict:
    """Build one release's format-1 file in a subprocess; returns its meta (built, skipped, records)."""
    out_dir = out_dir or BUILD_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    newest = installed_version(pkg) == version
    path = [str(install(pkg, version, progress))] if not newest else []
    for cpkg, cver in COMPANIONS.get((pkg, version), []):
        path.append(str(install(cpkg, cver, progress)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*path, str(ROOT)]),
        "OMP_WAIT_POLICY": "PASSIVE",
        "DS_ACCELERATOR": "cpu",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.pop("PYTHONSAFEPATH", None)
    cmd = [sys.executable, "-m", "indexer.registry_releases", "build-one", pkg, version, str(out_dir)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-20:])
        raise RuntimeError(f"building {pkg}=={version} failed:\n{tail}")
    meta = json.loads((out_dir / f"{pkg}-{version}.meta.json").read_text())
    if progress:
        skipped = f", {len(meta['skipped'])} part(s) skipped" if meta["skipped"] else ""
        progress(f"  {pkg}=={version}: {meta['records']} records ({meta['built']}{skipped})\n")
    return meta


def _build_one(pkg: str, version: str, out_dir: Path) -> None:
    """Runs inside the subprocess: the release under test is the one Python imports."""
    import importlib.metadata as md

    from indexer import registry_build as rb

    got = md.version(pkg).split("+", 1)[0]
    if got != version:
        raise SystemExit(f"expected {pkg} {version} on the path, found {got}")
    rb.SKIPPED.clear()
    try:
        records = rb.BUILDERS[pkg]() + rb._hook_records(pkg)
        built = "import"
    except Exception as e:  # noqa: BLE001 - the release does not import with this torch: read its source
        rb.SKIPPED.append(f"import build: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        records = _static_records(pkg, version) + rb._hook_records(pkg)  # providers read source, each guarded
        built = "static"
    by_id: dict[str, dict] = {}
    for r in records:
        by_id.setdefault(r["id"], r)
    text = "".join(json.dumps(by_id[k], sort_keys=True, ensure_ascii=False) + "\n" for k in sorted(by_id))
    rb._atomic_write(release_file(pkg, version, out_dir), text)
    meta = {
        "package": pkg,
        "version": version,
        "built": built,
        "records": len(by_id),
        "skipped": sorted(set(rb.SKIPPED)),
        "renames": stated_renames(list(by_id.values()), rb._pkg_root(pkg)),
    }
    rb._atomic_write(out_dir / f"{pkg}-{version}.meta.json", json.dumps(meta, indent=2, sort_keys=True) + "\n")


# "`old` is deprecated ... use `new`" / "deprecated alias of `new`" as the package's own warnings say it
_RENAME_RX = [
    re.compile(r"`(\w+)` is deprecated\b[^`\n]{0,120}?\b[Uu]se `(\w+)`"),
    re.compile(r"`(\w+)` (?:is|was) renamed to `(\w+)`"),
]
_ALIAS_RX = re.compile(r"\b[Dd]eprecated alias (?:of|for) `(\w+)`")


def stated_renames(records: list[dict], site: Path) -> list[list]:
    """Renames the release's own source states, kept only where both spellings are recorded side by side
    (same parent path): ``[old_id, new_id, "file:line"]``, sorted."""
    siblings: dict[str, set[str]] = {}
    files: dict[str, set[str]] = {}
    for r in records:
        parent, _, name = r["id"].rpartition(".")
        if not parent or r["kind"] == "auto_fill":
            continue
        siblings.setdefault(parent, set()).add(name)
        files.setdefault(r["source_file"], set()).add(parent)
    out: set[tuple[str, str, str]] = set()
    for r in records:  # "Deprecated alias of `x`" in a record's own doc
        m = _ALIAS_RX.search(r.get("doc") or "")
        parent, _, name = r["id"].rpartition(".")
        if m and m.group(1) != name and m.group(1) in siblings.get(parent, ()):
            out.add((r["id"], f"{parent}.{m.group(1)}", f"{r['source_file']}:{r['source_line']}"))
    for rel, parents in sorted(files.items()):
        try:
            text = (site / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for rx in _RENAME_RX:
            for m in rx.finditer(text):
                old, new = m.group(1), m.group(2)
                line = text.count("\n", 0, m.start()) + 1
                for parent in parents:
                    if old != new and {old, new} <= siblings.get(parent, set()):
                        out.add((f"{parent}.{old}", f"{parent}.{new}", f"{rel}:{line}"))
    # a class kept under its old spelling by a module-level `Old = New` (transformers 5.x:
    # `PretrainedConfig = PreTrainedConfig`): the old name's records move to the new one
    classes = {r["id"]: r for r in records if r["kind"] == "class" and "." not in r["id"].split(":", 1)[1]}
    for rid, r in sorted(classes.items()):
        pkg, name = rid.split(":", 1)
        try:
            text = (site / r["source_file"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for m in re.finditer(rf"^(\w+) = {re.escape(name)}[ \t]*$", text, re.M):
            if m.group(1) != name:
                line = text.count("\n", 0, m.start()) + 1
                out.add((f"{pkg}:{m.group(1)}", rid, f"{r['source_file']}:{line}"))
    best: dict[str, tuple[str, str, str]] = {}
    for t in sorted(out):  # one stated target per old name: the first place the source says it
        best.setdefault(t[0], t)
    return [list(t) for t in sorted(best.values())]


# ---------------------------------------------------------------- static fallback


def _static_records(pkg: str, version: str) -> list[dict]:
    """What can be read from the release's source without importing it: the fields of its dataclasses
    and pydantic models named in the builder's tables, with their literal defaults. Marked ``static``."""
    from indexer import registry_build as rb

    site = rb._pkg_root_static(pkg)
    targets = rb.STATIC_CLASSES.get(pkg, {})
    out: list[dict] = []
    for path, (rel, cls_name) in sorted(targets.items()):
        file = site / rel
        if not file.exists():
            rb.SKIPPED.append(f"static: {rel} (not in this release)")
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        cls = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls_name), None)
        if cls is None:
            rb.SKIPPED.append(f"static: {rel}:{cls_name} (no such class in this release)")
            continue
        out.append(rb.class_record(pkg, version, path, ast.get_docstring(cls), rel, cls.lineno))
        for node in cls.body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            name = node.target.id
            if name.startswith("_"):
                continue
            default = _literal_default(node.value)
            out.append(
                rb._named(
                    pkg,
                    version,
                    "field",
                    f"{path}.{name}",
                    (rel, node.lineno),
                    name=name,
                    type=ast.unparse(node.annotation),
                    default=rb._default_repr(default) if default is not _NO_DEFAULT else None,
                )
            )
    return out


_NO_DEFAULT = object()


def _literal_default(node: ast.AST | None) -> Any:
    if node is None:
        return _NO_DEFAULT
    if isinstance(node, ast.Call) and node.args == [] and ast.unparse(node.func).endswith(("field", "Field")):
        for k in node.keywords:
            if k.arg == "default":
                node = k.value
                break
        else:
            return _NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return _NO_DEFAULT


# ---------------------------------------------------------------- 3. merge


def _ordinary(rec: dict) -> dict:
    return {k: v for k, v in rec.items() if k not in _META_FIELDS}


def _sibling(rid: str, name: str) -> str:
    return f"{rid.rpartition('.')[0]}.{name}" if "." in rid.split(":", 1)[1] else f"{rid.split(':', 1)[0]}:{name}"


def merge(per_release: dict[str, list[dict]], renames: Iterable[Iterable[str]] = ()) -> list[dict]:
    """``{release: [format-1 records]}`` of one package -> format-2 records, sorted by id.

    Base fields come from the newest release that has the id; ``history`` holds, per older release, only
    the fields whose value differs from the base; ``renamed_to`` comes from a release's own
    ``deprecated`` + ``replacement`` (a sibling name), or from ``renames`` (pairs the source states),
    newest statement first; ``renamed_from`` is its inverse.
    """
    order = sorted(per_release, key=version_key)
    by_id: dict[str, dict[str, dict]] = {}
    for rel in order:
        for r in per_release[rel]:
            by_id.setdefault(r["id"], {})[rel] = r
    stated: dict[str, str] = {}
    for old, new, *_ in renames:
        stated.setdefault(old, new)
    for rid in by_id:  # the members of a renamed class follow it (`Old.x` -> `New.x` when that exists)
        head, dot, rest = rid.partition(".")
        if dot and head in stated and rid not in stated and f"{stated[head]}.{rest}" in by_id:
            stated[rid] = f"{stated[head]}.{rest}"
    out: dict[str, dict] = {}
    for rid in sorted(by_id):
        recs = by_id[rid]
        rels = [v for v in order if v in recs]
        base = recs[rels[-1]]
        keys = sorted({k for r in recs.values() for k in _ordinary(r)})
        history: dict[str, dict] = {}
        for v in rels[:-1]:
            diff = {k: recs[v].get(k) for k in keys if recs[v].get(k) != base.get(k)}
            if diff:
                history[v] = dict(sorted(diff.items()))
        target = None
        for v in reversed(rels):  # what the newest release that says anything says
            r = recs[v]
            if r.get("deprecated") and r.get("replacement") and _sibling(rid, r["replacement"]) in by_id:
                target = _sibling(rid, r["replacement"])
                break
        target = target or stated.get(rid)
        if target == rid or target not in by_id:
            target = None
        out[rid] = {**base, "releases": rels, "history": history, "renamed_to": target, "renamed_from": []}
    for rid, rec in out.items():
        if rec["renamed_to"]:
            out[rec["renamed_to"]]["renamed_from"].append(rid)
    for rec in out.values():
        rec["renamed_from"] = sorted(rec["renamed_from"])
    return [out[k] for k in sorted(out)]


def read_release_files(pkg: str, build_dir: Path | None = None) -> tuple[dict[str, list[dict]], dict[str, dict]]:
    """Every built release of ``pkg`` in ``build_dir``: ({release: records}, {release: meta})."""
    build_dir = build_dir or BUILD_DIR
    recs: dict[str, list[dict]] = {}
    metas: dict[str, dict] = {}
    for p in sorted(build_dir.glob(f"{pkg}-*.jsonl")):
        ver = p.name[len(pkg) + 1 : -len(".jsonl")]
        try:
            Version(ver)
        except Exception:
            continue
        recs[ver] = [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
        mp = p.with_name(f"{pkg}-{ver}.meta.json")
        metas[ver] = (
            json.loads(mp.read_text())
            if mp.exists()
            else {"built": "import", "skipped": [], "renames": [], "records": len(recs[ver])}
        )
    return recs, metas


def write_registry(out_dir: Path, packages: Iterable[str], build_dir: Path | None = None) -> dict:
    """Merge the built releases of each package into ``out_dir/<pkg>.jsonl`` + manifest (format 2).
    Removes the format-1 ``<pkg>-<version>.jsonl`` files it replaces. Returns the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    mpath = out_dir / "manifest.json"
    manifest = json.loads(mpath.read_text()) if mpath.exists() else {}
    if manifest.get("format") != FORMAT:
        manifest = {"format": FORMAT, "packages": {}}
    from indexer.registry_build import _atomic_write

    for pkg in packages:
        recs, metas = read_release_files(pkg, build_dir)
        # releases recorded before but not (re)built now keep their committed records
        kept: list[list[str]] = []
        committed = out_dir / f"{pkg}.jsonl"
        info = manifest.get("packages", {}).get(pkg)
        if committed.exists() and info:
            old = read_format2(committed)
            restored = [v for v in info["releases"] if v not in recs]
            for v in restored:
                recs[v] = [r for r in (view_at(o, v) for o in old) if r is not None]
                metas[v] = {"built": info["built"][v], "skipped": info.get("skipped", {}).get(v, [])}
            if restored:  # the renames those releases stated are known only from the committed records
                kept = [[o["id"], o["renamed_to"]] for o in old if o.get("renamed_to")]
        if not recs:
            raise FileNotFoundError(f"no built release of {pkg} under {build_dir or BUILD_DIR}; build one first")
        renames = [r for v in sorted(metas, key=version_key, reverse=True) for r in metas[v].get("renames", [])] + kept
        merged = merge(recs, renames)
        text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in merged)
        _atomic_write(out_dir / f"{pkg}.jsonl", text)
        rels = sorted(recs, key=version_key)
        manifest["packages"][pkg] = {
            "releases": rels,
            "records": len(merged),
            "per_release": {v: len(recs[v]) for v in rels},
            "built": {v: metas[v]["built"] for v in rels},
            "skipped": {v: metas[v]["skipped"] for v in rels if metas[v]["skipped"]},
        }
        for old in out_dir.glob(f"{pkg}-*.jsonl"):  # the format-1 files this one replaces
            old.unlink()
    manifest["packages"] = dict(sorted(manifest["packages"].items()))
    _atomic_write(mpath, json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return manifest


def build_and_merge(
    specs: Iterable[tuple[str, str]] | None = None,
    out_dir: Path | None = None,
    build_dir: Path | None = None,
    progress: Progress = None,
) -> dict:
    """Build the given releases (default: every release of RELEASES) and merge their packages."""
    from kb.paths import registry_dir

    todo = list(specs) if specs is not None else [(p, v) for p, vs in RELEASES.items() for v in vs]
    for i, (pkg, ver) in enumerate(todo, 1):
        if progress:
            progress(f"[{i}/{len(todo)}] {pkg}=={ver}\n")
        build_release(pkg, ver, build_dir, progress)
    pkgs = sorted({p for p, _ in todo})
    return write_registry(out_dir or registry_dir(), pkgs, build_dir)


# ---------------------------------------------------------------- reading format 2 (for checks and docs)


def view_at(rec: dict, release: str) -> dict | None:
    """The format-1 record of a format-2 record in one of its releases (None when it lacks the name)."""
    if release not in rec["releases"]:
        return None
    base = _ordinary(rec)
    return {**base, **rec["history"].get(release, {}), "version": release}


def read_format2(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def change_figures(records: list[dict], releases: list[str]) -> list[dict]:
    """Per consecutive pair of releases: names added, removed, default changed, and renamed (the old
    spelling was there before, its ``renamed_to`` appears in the later release)."""
    by_id = {r["id"]: r for r in records}
    rows = []
    for a, b in zip(releases, releases[1:], strict=False):
        added = removed = default = renamed = 0
        for rec in records:
            ra, rb_ = view_at(rec, a), view_at(rec, b)
            if ra is None and rb_ is not None:
                added += 1
            elif ra is not None and rb_ is None:
                removed += 1
            elif ra is not None and rb_ is not None and ra.get("default") != rb_.get("default"):
                default += 1
            new = by_id.get(rec["renamed_to"] or "")
            if (
                ra is not None
                and new is not None
                and b in new["releases"]
                and (a not in new["releases"] or rb_ is None)
            ):
                renamed += 1
        rows.append(
            {"from": a, "to": b, "added": added, "removed": removed, "default_changed": default, "renamed": renamed}
        )
    return rows


def figures_table(registry: Path | None = None) -> str:
    """Markdown tables of record counts and changes per release (docs/registry.md quotes them)."""
    from kb.paths import registry_dir

    registry = registry or registry_dir()
    manifest = json.loads((registry / "manifest.json").read_text())
    lines = [
        "| package | release | built | records | added | removed | default changed | renamed |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for pkg, info in manifest["packages"].items():
        recs = read_format2(registry / f"{pkg}.jsonl")
        rows = {r["to"]: r for r in change_figures(recs, info["releases"])}
        for v in info["releases"]:
            r = rows.get(v)
            ch = f"{r['added']} | {r['removed']} | {r['default_changed']} | {r['renamed']}" if r else "- | - | - | -"
            lines.append(f"| {pkg} | {v} | {info['built'][v]} | {info['per_release'][v]} | {ch} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # python -m indexer.registry_releases build-one PKG VERSION OUT_DIR | figures
    if sys.argv[1:2] == ["build-one"]:
        _build_one(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
    elif sys.argv[1:2] == ["figures"]:
        sys.stdout.write(figures_table())
    else:
        raise SystemExit("usage: python -m indexer.registry_releases build-one PKG VERSION OUT_DIR | figures")
