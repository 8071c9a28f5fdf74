"""`kb export`: the static site, rendered with Jinja2 from the entries and the registry, searched with Pagefind.

Layout (every page is ``<folder>/index.html``; links between pages are relative, so the site works under
any path prefix):

- ``/``: both languages; ``/en/``, ``/zh/``: home (search, areas with their entries, counts)
- ``/<lang>/<entry id>/``: one page per entry (``kb.ask.engine.site_path``, the ``path`` of an answer's result)
- ``/<lang>/params/``: every registry record, by package; ``/<lang>/params/<package>/<path>/``: a record
  that an entry uses
- ``/<lang>/names/``: names that do not exist; ``/<lang>/seed-thread/``: the seed thread's claims
- ``/static/``: CSS and JS; ``/pagefind-en/``, ``/pagefind-zh/``: the two search bundles

Deterministic: no timestamps, sorted iteration, and Pagefind's bundle is a function of the pages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sitegen.canon import BundleFormatError, canonicalize_bundle, vocabulary_json
from sitegen.labels import labels
from sitegen.model import LANGS, Model, SiteError, build_model, load_claims

HERE = Path(__file__).resolve().parent
MARKER = ".kb-site"  # a folder holding this file was written by kb export and may be replaced by it
INDEXED = ("entry", "param", "names", "seed")  # page kinds Pagefind indexes (home and the record index are lists)

# Search ranking, Pagefind's own controls (docs/site.md, "Ranking"; tuned on the entries' own queries with
# bench/site_search.py, never on tests/eval/heldout.yaml).
# WEIGHTS: data-pagefind-weight of what a page shows (0 to 10; plain text is 1, and headings without one get
# Pagefind's defaults, https://pagefind.app/docs/weighting/); section headings the site writes ("Symptoms",
# "Fixes") are not indexed at all, being the same on every entry.
WEIGHTS = {
    "entry_title": 7.0,  # the entry's h1: what the failure is
    "entry_summary": 2.0,
    "entry_symptoms": 3.0,  # how users describe the failure
    "entry_errors": 2.0,  # the error messages the entry's signatures match, as the library prints them
    "entry_fix_title": 5.0,  # h3
    "entry_text": 1.0,  # causes and what each fix does
    "entry_detail": 0.5,  # snippets, parameter tables, versions, sources: names and numbers, not the failure
    "entry_related": 0.5,  # other entries' titles
    "param_name": 10.0,  # a record's name, path and aliases: the exact name finds its page first
    "seed_claim": 0.5,  # the seed thread: one page quoting every claim
}
# RANKING: Pagefind's ranking options, given to every bundle by static/site.js (pagefind.options, mergeIndex).
# metaWeights: Pagefind adds to a page's score a boost for the query words found in its metadata fields, scaled by
# the field's weight (default 5 for the title, 1 for the others). An entry's title counts once (its h1 weight already
# ranks it: at 5, titles that share one common word won over the entries a question describes), its symptoms
# (data-pagefind-meta="symptoms") twice, its error messages once, the page kind not at all (a label, "entry" /
# "param"); a record page's names (data-pagefind-meta="names", only record pages have it) 5, so that a full
# parameter name finds its page ahead of an entry titled with that name. Measured with bench/site_search.py on the
# dev set (the entries' own queries), never tuned on tests/eval/heldout.yaml: docs/site.md, "Ranking".
RANKING: dict[str, Any] = {"metaWeights": {"title": 1.0, "symptoms": 2.0, "errors": 1.0, "names": 5.0, "kind": 0.0}}


@dataclass(frozen=True)
class Page:
    path: str  # site path of the folder, "/en/x/"
    template: str
    kind: str  # root | home | entry | param | params-index | names | seed
    lang: str
    context: dict[str, Any]


# ---------------------------------------------------------------- links


def code_url(source: dict[str, Any]) -> str | None:
    """The GitHub URL of a code source at its release tag and line(s): kb.present.links, shared with the bots."""
    from kb.present.links import code_url as _code_url

    return _code_url(source)


def record_source(rec: dict[str, Any]) -> dict[str, Any]:
    """A registry record's location as a code source (package, version, file, line)."""
    line = str(rec["source_line"]) if rec.get("source_line") else None
    return {
        "type": "code",
        "package": rec["package"],
        "version": rec["version"],
        "file": rec["source_file"],
        "line": line,
    }


def root_of(path: str) -> str:
    """The relative prefix from a page folder back to the site root: "/en/x/" -> "../../"."""
    depth = len([p for p in path.strip("/").split("/") if p])
    return "../" * depth


def join_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


def other_lang(lang: str) -> str:
    return "zh" if lang == "en" else "en"


# ---------------------------------------------------------------- pages


def _display_default(rec: dict[str, Any]) -> str | None:
    d = rec.get("default")
    return None if d in (None, "null") else str(d)


_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _bounds(rec: dict[str, Any]) -> str | None:
    c = rec.get("constraints") or {}
    parts = [f"{sym} {c[k]}" for k, sym in _BOUNDS if k in c]
    parts += [f"{k} {c[k]}" for k in sorted(c) if k not in dict(_BOUNDS)]
    return ", ".join(parts) or None


def record_view(m: Model, rid: str) -> dict[str, Any]:
    """What a record's row or page shows (language-neutral; labels come from the template)."""
    rec = m.registry.get(rid) or {}
    src = record_source(rec)
    return {
        "id": rid,
        "rec": rec,
        "default": _display_default(rec),
        "bounds": _bounds(rec),
        "choices": [str(c) for c in rec.get("choices") or []],
        "source_url": code_url(src),
        "source_text": f"{rec.get('source_file')}:{rec.get('source_line')}"
        if rec.get("source_line")
        else rec.get("source_file"),
        "page": f"params/{m.paged[rid]}/" if rid in m.paged else None,
        "anchor": m.anchors.get(rid),
    }


def param_href(m: Model, lang: str, rid: str) -> str:
    """Site path of a record: its page, or its row on the parameter index."""
    if rid in m.paged:
        return f"/{lang}/params/{m.paged[rid]}/"
    if rid in m.anchors:
        return f"/{lang}/params/#{m.anchors[rid]}"
    return f"/{lang}/params/"


def _sources(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for s in result["sources"]:
        url = code_url(s) if s["type"] == "code" else s.get("url")
        if s["type"] == "code":
            text = f"{s['package']} {s['version']} {s['file']}:{s['line']}"
        elif s["type"] == "measurement":
            text = s.get("file") or s.get("url") or ""
        else:
            text = s.get("url") or ""
        out.append({"type": s["type"], "url": url, "text": text, "note": s.get("note")})
    return out


def entry_context(m: Model, lang: str, eid: str) -> dict[str, Any]:
    le = m.entry(eid)
    e = le.entry
    r = m.results[lang][eid]
    reg_ids = {x.entry.id for x in m.entries}
    alias = {a: x.entry.id for x in m.entries for a in x.entry.aliases}
    myths = []
    for em, rm in zip(e.myths, r["myths"], strict=True):
        names = []
        for n in em.names:
            if n.verdict in ("invented", "misplaced", "deprecated", "not-a-config-key"):
                href = f"/{lang}/names/#{_row_anchor(m, n.name, n.verdict, n.at)}"
            else:
                rec = m.registry.resolve(n.name).record
                href = param_href(m, lang, rec["id"]) if rec else None
            names.append({"name": n.name, "verdict": n.verdict, "at": n.at, "href": href})
        myths.append({**rm, "names": names})
    related = []
    for rid in r["related"]:
        target = rid if rid in reg_ids else alias.get(rid)
        if target:
            related.append({"id": target, "title": m.results[lang][target]["title"], "path": f"/{lang}/{target}/"})
    facts = [
        {
            **p,
            "href": param_href(m, lang, p["id"]) if p.get("known", True) else None,
            "source_url": code_url(
                {
                    "package": p["package"],
                    "version": p["version"],
                    "file": p["source_file"],
                    "line": str(p["source_line"]) if p.get("source_line") else None,
                }
            ),
        }
        for p in r["param_facts"]
    ]
    fixes = [{**f, "param_links": [{"id": p, "href": param_href(m, lang, p)} for p in f["params"]]} for f in r["fixes"]]
    checked = {pkg: m.registry.versions[pkg] for pkg in m.packages[eid] if pkg in m.registry.versions}
    errors = list(dict.fromkeys(sig.examples[0].strip() for sig in e.signatures))
    return {
        "r": r,
        "e": e,
        "symptoms": e.symptoms.zh if lang == "zh" else e.symptoms.en,
        "errors": errors,
        "myths": myths,
        "related": related,
        "facts": facts,
        "fixes": fixes,
        "sources": _sources(r),
        "packages": m.packages[eid],
        "checked": checked,
        "title": r["title"],
        "withdrawn": e.withdrawn,
    }


def _row_anchor(m: Model, name: str, verdict: str, at: str | None) -> str:
    for row in m.names:
        if (row.name, row.verdict, row.at) == (name, verdict, at):
            return row.anchor
    return m.name_anchor.get(name, "")


def param_context(m: Model, lang: str, rid: str) -> dict[str, Any]:
    v = record_view(m, rid)
    rec = v["rec"]
    history = [
        {
            **record_view(m, rid),
            "rec": h,
            "default": _display_default(h),
            "source_url": code_url(record_source(h)),
            "source_text": f"{h['source_file']}:{h['source_line']}",
        }
        for h in m.registry.history(rid)
    ]
    used = [
        {"id": eid, "title": m.results[lang][eid]["title"], "path": f"/{lang}/{eid}/"} for eid in m.used_by.get(rid, [])
    ]
    myths = [
        {
            "entry": eid,
            "title": m.results[lang][eid]["title"],
            "path": f"/{lang}/{eid}/",
            "claim": m.results[lang][eid]["myths"][i]["claim"],
            "correction": m.results[lang][eid]["myths"][i]["correction"],
        }
        for eid, i in m.myth_refs.get(rid, [])
    ]
    replacement = None
    if rec.get("replacement"):
        parent = rec["path"].rsplit(".", 1)[0] if "." in rec["path"] else None
        lk = m.registry.resolve(rec["replacement"], context=parent)
        target = lk.record or (lk.candidates[0] if lk.candidates else None)
        replacement = {"name": rec["replacement"], "href": param_href(m, lang, target["id"]) if target else None}
    auto = [
        {
            "id": a["id"],
            "source_url": code_url(record_source(a)),
            "source_text": f"{a['source_file']}:{a['source_line']}",
        }
        for a in sorted(m.registry.auto_fill.get(rec.get("path", ""), []), key=lambda a: a["id"])
        if rec.get("package") == "deepspeed" and rec.get("kind") in ("config_key", "config_section")
    ]
    return {
        **v,
        "history": history,
        "used": used,
        "myths": myths,
        "replacement": replacement,
        "auto": auto,
        "title": rec.get("path") or rid,
    }


def index_context(m: Model, lang: str) -> dict[str, Any]:
    from kb.registry.store import PACKAGE_ORDER

    groups = []
    pkgs = sorted(m.registry.versions, key=lambda p: (PACKAGE_ORDER.get(p, 9), p))
    names = [r for r in m.registry.records if r["kind"] not in NOT_NAMES]
    for pkg in pkgs:
        recs = sorted((r for r in names if r["package"] == pkg), key=lambda r: (r["path"], r["id"]))
        groups.append(
            {"package": pkg, "version": m.registry.versions[pkg], "rows": [record_view(m, r["id"]) for r in recs]}
        )
    return {"groups": groups, "total": len(names)}


# registry records that are not names a user writes: code sites and front-end mappings (kb/registry/store.py)
NOT_NAMES = ("raise_site", "warn_site", "mapping")


def names_context(m: Model, lang: str) -> dict[str, Any]:
    rows = []
    for row in m.names:
        refs = []
        for eid, i in row.myths:
            my = m.results[lang][eid]["myths"][i]
            refs.append(
                {
                    "id": eid,
                    "title": m.results[lang][eid]["title"],
                    "path": f"/{lang}/{eid}/",
                    "claim": my["claim"],
                    "correction": my["correction"],
                }
            )
        instead = [{"id": rid, "href": param_href(m, lang, rid), "view": record_view(m, rid)} for rid in row.instead]
        rows.append({"row": row, "refs": refs, "instead": instead})
    return {"rows": rows}


def seed_context(m: Model, lang: str) -> dict[str, Any]:
    claims = []
    for c in m.claims:
        eid = c["entry"]
        claims.append(
            {
                "c": c,
                "text": c["claim"][lang],
                "entry": eid,
                "title": m.results[lang][eid]["title"],
                "path": f"/{lang}/{eid}/",
            }
        )
    counts = Counter(c["verdict"] for c in m.claims)
    return {"claims": claims, "counts": [(v, counts[v]) for v in ("right", "wrong", "partly", "depends") if counts[v]]}


def home_context(m: Model, lang: str) -> dict[str, Any]:
    areas = []
    for a in m.areas:
        items = [
            {"id": le.entry.id, "title": m.results[lang][le.entry.id]["title"], "path": f"/{lang}/{le.entry.id}/"}
            for le in m.entries
            if le.entry.area == a and le.entry.withdrawn is None
        ]
        if items:
            areas.append({"area": a, "list": items})
    withdrawn = [
        {"id": le.entry.id, "title": m.results[lang][le.entry.id]["title"], "path": f"/{lang}/{le.entry.id}/"}
        for le in m.entries
        if le.entry.withdrawn is not None
    ]
    live = sum(len(a["list"]) for a in areas)
    return {
        "areas": areas,
        "withdrawn_list": withdrawn,
        "n_entries": live,
        "n_areas": len(areas),
        "n_params": len(m.paged),
        "n_records": sum(r["kind"] not in NOT_NAMES for r in m.registry.records),
        "n_names": len(m.names),
        "n_claims": len(m.claims),
    }


def pages(m: Model) -> list[Page]:
    out = [Page("/", "root.html.j2", "root", "en", {})]
    for lang in m.langs:
        out.append(Page(f"/{lang}/", "home.html.j2", "home", lang, home_context(m, lang)))
        for le in m.entries:
            r = m.results[lang][le.entry.id]
            out.append(Page(r["path"], "entry.html.j2", "entry", lang, entry_context(m, lang, le.entry.id)))
        out.append(Page(f"/{lang}/params/", "params_index.html.j2", "params-index", lang, index_context(m, lang)))
        for rid, slug in m.paged.items():
            out.append(Page(f"/{lang}/params/{slug}/", "param.html.j2", "param", lang, param_context(m, lang, rid)))
        out.append(Page(f"/{lang}/names/", "names.html.j2", "names", lang, names_context(m, lang)))
        if m.claims:
            out.append(Page(f"/{lang}/seed-thread/", "seed.html.j2", "seed", lang, seed_context(m, lang)))
    return out


# ---------------------------------------------------------------- rendering


def _env():
    try:
        from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context, select_autoescape
    except ImportError:
        raise SiteError("jinja2 is not installed: pip install -e '.[site]'") from None

    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )

    @pass_context
    def href(ctx, target: str) -> str:
        """A site path ("/en/x/", "/en/params/#a") as a link relative to the page being rendered."""
        return ctx["root"] + target.lstrip("/")

    env.filters["href"] = href
    return env


def render(m: Model, base_url: str = "", docs_url: str = "") -> tuple[dict[str, bytes], Counter]:
    """Every file of the site (path relative to the site root -> bytes) and the page count by kind."""
    env = _env()
    files: dict[str, bytes] = {}
    kinds: Counter = Counter()
    built = set(m.langs)
    page_paths = set()
    all_pages = pages(m)
    for p in all_pages:
        page_paths.add(p.path)
    for p in all_pages:
        lb = labels(p.lang)
        alt = None
        if p.kind != "root" and p.path.startswith(f"/{p.lang}/"):
            cand = f"/{other_lang(p.lang)}/" + p.path[len(p.lang) + 2 :]
            if cand in page_paths:
                alt = cand
        ctx = {
            "lang": p.lang,
            "lb": lb,
            "olb": labels(other_lang(p.lang)),
            "root": root_of(p.path),
            "path": p.path,
            "kind": p.kind,
            "alt": alt,
            "langs": [lg for lg in LANGS if lg in built],
            # the same bundle order on every page, so both languages' pages give the same results
            "bundles": " ".join(lg for lg in LANGS if lg in built),
            "canonical": join_url(base_url, p.path) if base_url else None,
            "alt_canonical": join_url(base_url, alt) if base_url and alt else None,
            "docs_url": docs_url.rstrip("/"),
            "search_labels": _search_labels(p.lang, m),
            "indexed": p.kind in INDEXED,
            "pw": WEIGHTS,
            "has_seed": bool(m.claims),
            **p.context,
        }
        html = env.get_template(p.template).render(ctx)
        files[p.path.lstrip("/") + "index.html"] = html.encode("utf-8")
        kinds[p.kind] += 1
    for name in sorted(os.listdir(HERE / "static")):
        files[f"static/{name}"] = (HERE / "static" / name).read_bytes()
    return files, kinds


def _search_labels(lang: str, m: Model) -> dict[str, Any]:
    """What the search script shows around Pagefind's results, in the page's language."""
    lb = labels(lang)
    keys = (
        "results_count",
        "results_none",
        "results_more",
        "search_loading",
        "search_unavailable",
        "filter_area",
        "filter_library",
        "filter_language",
        "filter_kind",
        "filters",
    )
    out: dict[str, Any] = {k: lb[k] for k in keys}
    out["ranking"] = RANKING
    out["order"] = {"area": list(m.areas), "language": list(LANGS), "kind": ["entry", "param", "names", "seed"]}
    out["values"] = {
        "area": {a: lb[f"area_{a}"] for a in m.areas},
        "language": {lg: labels(lg)["lang_name"] for lg in LANGS},
        "kind": {k: lb[f"kind_{k}"] for k in ("entry", "param", "names", "seed")},
    }
    return out


# ---------------------------------------------------------------- writing, indexing


def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SiteError(f"{out} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise SiteError(f"{out} is not empty and was not written by kb export; give an empty or new folder")
        for child in sorted(out.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_files(out: Path, files: dict[str, bytes]) -> None:
    _prepare(out)
    (out / MARKER).write_text(
        "written by kb export; the whole folder is replaced on the next export\n", encoding="utf-8"
    )
    (out / ".nojekyll").write_text("", encoding="utf-8")  # GitHub Pages: serve the files as they are
    for rel in sorted(files):
        p = out / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(files[rel])


def index_site(out: Path, langs: tuple[str, ...] = LANGS) -> float:
    """Run Pagefind once per language (``/pagefind-<lang>/``); return the seconds it took."""
    t0 = time.perf_counter()
    for lang in langs:
        shutil.rmtree(out / f"pagefind-{lang}", ignore_errors=True)
        cmd = [
            sys.executable,
            "-m",
            "pagefind",
            "--site",
            str(out),
            "--glob",
            f"{lang}/**/*.html",
            "--output-subdir",
            f"pagefind-{lang}",
            "--silent",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SiteError(f"pagefind failed: {e}") from None
        if proc.returncode != 0:
            msg = (proc.stderr or proc.stdout).strip()
            if "No module named pagefind" in msg:
                msg = "pagefind is not installed: pip install -e '.[site]'"
            raise SiteError(f"pagefind failed for {lang}: {msg}")
        try:
            canonicalize_bundle(out / f"pagefind-{lang}")  # Pagefind writes its filters in hash-map order
            if lang == "zh":
                (out / "static" / "zh-words.json").write_text(vocabulary_json(out / "pagefind-zh"), encoding="utf-8")
        except (BundleFormatError, OSError, KeyError) as e:
            raise SiteError(f"pagefind bundle for {lang}: {e}") from None
    return time.perf_counter() - t0


def build_site(
    out: Path,
    base_url: str = "",
    langs: tuple[str, ...] = LANGS,
    entries_root: Path | None = None,
    registry_root: Path | None = None,
    claims_path: Path | None = None,
    docs_url: str = "",
    index: bool = True,
) -> dict[str, Any]:
    """Build the whole site into ``out`` (replacing an earlier export there); return ``export_report``."""
    from kb import paths
    from kb.content.entries import EntryError, load_entries
    from kb.registry.store import Registry

    if base_url and not base_url.startswith(("http://", "https://")):
        raise SiteError(f"--base-url must start with http:// or https://, got {base_url!r}")
    langs = tuple(lg for lg in LANGS if lg in langs)
    if not langs:
        raise SiteError("no language to build: use en, zh or both")
    t0 = time.perf_counter()
    root = entries_root or paths.entries_dir()
    try:
        entries = load_entries(root, include_withdrawn=True)
    except EntryError as e:
        raise SiteError(f"{e} (run `kb check`)") from None
    try:
        registry = Registry.load(registry_root)
    except FileNotFoundError as e:
        raise SiteError(str(e)) from None
    if claims_path is None:
        claims_path = paths.entries_dir().parent / "seed-claims.yaml" if entries_root is None else None
    model = build_model(entries, registry, load_claims(claims_path), langs)
    files, kinds = render(model, base_url=base_url, docs_url=docs_url)
    write_files(out, files)
    render_s = time.perf_counter() - t0
    pagefind_s = index_site(out, langs) if index else 0.0
    return export_report(out, kinds, render_s, pagefind_s, langs)


def export_report(
    out: Path, kinds: Counter | dict[str, int], render_s: float, pagefind_s: float, langs: tuple[str, ...] = LANGS
) -> dict[str, Any]:
    """Pages by kind, files and bytes on disk, and the seconds spent rendering and indexing."""
    n_files = 0
    n_bytes = 0
    for p in sorted(out.rglob("*")):
        if p.is_file():
            n_files += 1
            n_bytes += p.stat().st_size
    return {
        "out": str(out),
        "langs": list(langs),
        "pages": dict(sorted(kinds.items())),
        "pages_total": sum(kinds.values()),
        "files": n_files,
        "bytes": n_bytes,
        "seconds": {"render": round(render_s, 3), "pagefind": round(pagefind_s, 3)},
    }


def report_text(rep: dict[str, Any]) -> str:
    """`kb export`'s plain-text report."""
    kinds = ", ".join(f"{k} {n}" for k, n in rep["pages"].items())
    return (
        f"site written to {rep['out']} ({', '.join(rep['langs'])})\n"
        f"  pages: {rep['pages_total']} ({kinds})\n"
        f"  files: {rep['files']}, {rep['bytes'] / 1e6:.1f} MB\n"
        f"  seconds: render {rep['seconds']['render']:.2f}, pagefind {rep['seconds']['pagefind']:.2f}\n"
    )
