"""How `kb lint` does on real configs: tests/fixtures/real_configs/ (issue 21).

Lints every file of the manifest (tests/fixtures/real_configs/manifest.yaml) the way `kb lint` does (cli/main.py's
``lint``: ``parse_config`` then ``kb.doctor.judge.lint_file`` with the item's ``versions``, the repo's pins, given;
``--default-view`` gives none, so kb assumes what the file's front end requires) and prints, per dialect (or per rule code with ``--by rule``) and overall:

- on good files (shipped examples known to work at their pins): error-level findings (each one a false alarm by
  definition), warning-level findings, files that would exit 1 (an error) or 2 (kb cannot read them);
- on bad files (configs from bug threads, with the problem's path): whether a finding names the problem's path;
- crashes (an exception other than kb's clean ConfigError).

False warnings: tests/fixtures/real_configs/reviewed.yaml records, for each warning lint emits on a good file,
whether it is right or wrong (checked by hand against the code it refers to). The rate is wrong warnings over all
findings on good files; warnings with no review are listed as unreviewed.

    .venv/bin/python bench/lint_corpus.py [--json] [--by rule|dialect] [--default-view] [--check] [--heldout]

``--heldout`` lints the bug threads of ``heldout/`` instead (``manifest*.yaml`` there): sampled in session 3 by
readers who neither ran kb nor read its rules, after every rule was written; nothing was changed for them.

Exit 0 always (a benchmark prints figures); ``--check`` exits 1 when a target fails: no crash, no error-level
finding on a good file, every warning on good files reviewed, false warnings <= 2%.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "fixtures" / "real_configs"
MANIFEST = CORPUS / "manifest.yaml"
HELDOUT = CORPUS / "heldout"  # bug threads sampled after the rules were written; no rule was written from them
REVIEWED = CORPUS / "reviewed.yaml"
FALSE_WARNING_TARGET = 0.02


def load_manifest(path: Path = MANIFEST) -> list[dict[str, Any]]:
    """The items of a manifest, each with ``dir``, the folder its files are in."""
    return [{**i, "dir": path.parent} for i in yaml.safe_load(path.read_text(encoding="utf-8"))["items"]]


def load_heldout(folder: Path = HELDOUT) -> list[dict[str, Any]]:
    """The held-out bug threads: every ``manifest*.yaml`` of ``heldout/``."""
    return [i for p in sorted(folder.glob("manifest*.yaml")) for i in load_manifest(p)]


def load_reviewed(path: Path = REVIEWED) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(file, code, path) -> {verdict: right|wrong, why}."""
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return {(r["file"], r["code"], r["path"]): r for r in data.get("reviews", [])}


def names(finding_path: str, wanted: list[str]) -> bool:
    """A finding names the problem when its path is the problem's path or lies inside it."""
    return any(finding_path == w or finding_path.startswith(w + ".") for w in wanted)


def lint_item(item: dict[str, Any], registry, default_view: bool = False) -> dict[str, Any]:
    """Lint one manifest item as `kb lint` does; never raises."""
    from kb.doctor.configs import ConfigError, parse_config
    from kb.doctor.judge import lint_file
    from kb.registry.versions import parse_versions_arg

    out: dict[str, Any] = {"file": item["file"], "dialect": item["dialect"], "good": bool(item["good"])}
    folder = item.get("dir", CORPUS)
    text = (folder / item["file"]).read_text(encoding="utf-8")
    spec = None if default_view else item.get("versions")
    try:
        pins = parse_versions_arg(spec).as_pins() if spec else {}
        cfg = parse_config(text, item["file"])
    except ConfigError as e:
        out.update(status="config-error", error=str(e), findings=[], kind=None)
        return out
    except Exception as e:  # noqa: BLE001 - a crash is what the bench counts
        out.update(
            status="crash", error=f"{type(e).__name__}: {e}", trace=traceback.format_exc(), findings=[], kind=None
        )
        return out
    try:
        judged = lint_file(cfg, registry, pins)  # as `kb lint` does: its dialect, the versions its front end needs
        findings = list(judged.findings)
        if item.get("with"):  # `kb lint FILE --with OTHER`: what the two files of one thread get together
            from kb.doctor.judge import cross_findings

            other = parse_config((folder / item["with"]).read_text(encoding="utf-8"), item["with"])
            findings += cross_findings(cfg, other, registry, pins)
    except Exception as e:  # noqa: BLE001
        out.update(
            status="crash", error=f"{type(e).__name__}: {e}", trace=traceback.format_exc(), findings=[], kind=cfg.kind
        )
        return out
    out.update(
        status="ok",
        kind=judged.kind,
        versions=[v.to_dict() for v in judged.versions],
        findings=[
            {"code": f.code, "severity": f.severity, "path": f.path, "line": f.line, "message": f.message}
            for f in findings
        ],
    )
    if not item["good"]:
        wanted = [item["problem"]["path"], *item.get("also_paths", [])]
        out["named"] = any(names(f["path"], wanted) for f in out["findings"] if f["severity"] in ("error", "warning"))
        out["self_contained"] = item.get("self_contained", True)
    return out


def run(default_view: bool = False, heldout: bool = False) -> dict[str, Any]:
    from kb.registry.store import default_registry

    registry = default_registry()
    items = load_heldout() if heldout else load_manifest()
    reviewed = load_reviewed()
    results = [lint_item(i, registry, default_view) for i in items]

    def blank() -> dict[str, Any]:
        return {
            "good_files": 0,
            "good_errors": 0,
            "good_warnings": 0,
            "good_infos": 0,
            "good_exit1": 0,
            "good_exit2": 0,
            "bad_files": 0,
            "bad_named": 0,
            "bad_self_contained": 0,
            "bad_self_contained_named": 0,
            "bad_exit2": 0,
            "crashes": 0,
            "wrong_warnings": 0,
            "right_warnings": 0,
            "unreviewed_warnings": 0,
        }

    by_dialect: dict[str, dict[str, Any]] = defaultdict(blank)
    by_rule: dict[str, Counter] = defaultdict(Counter)
    total = blank()
    false_alarms, wrong, unreviewed, crashes, misses = [], [], [], [], []
    for r in results:
        rows = (by_dialect[r["dialect"]], total)
        for row in rows:
            if r["status"] == "crash":
                row["crashes"] += 1
            if r["good"]:
                row["good_files"] += 1
                sev = Counter(f["severity"] for f in r["findings"])
                row["good_errors"] += sev["error"]
                row["good_warnings"] += sev["warning"]
                row["good_infos"] += sev["info"]
                row["good_exit1"] += bool(sev["error"])
                row["good_exit2"] += r["status"] == "config-error"
            else:
                row["bad_files"] += 1
                row["bad_named"] += bool(r.get("named"))
                row["bad_exit2"] += r["status"] == "config-error"
                if r.get("self_contained", True):
                    row["bad_self_contained"] += 1
                    row["bad_self_contained_named"] += bool(r.get("named"))
        if r["status"] == "crash":
            crashes.append({"file": r["file"], "error": r["error"]})
        for f in r["findings"]:
            side = "good" if r["good"] else "bad"
            by_rule[f["code"]][f"{side}_{f['severity']}"] += 1
            if not r["good"]:
                continue
            rec = {"file": r["file"], **f}
            if f["severity"] == "error":
                false_alarms.append(rec)
            elif f["severity"] == "warning":
                rev = reviewed.get((r["file"], f["code"], f["path"]))
                key = "unreviewed_warnings" if rev is None else f"{rev['verdict']}_warnings"
                for row in rows:
                    row[key] += 1
                by_rule[f["code"]][key] += 1
                if rev is None:
                    unreviewed.append(rec)
                elif rev["verdict"] == "wrong":
                    wrong.append({**rec, "why": rev.get("why", "")})
        if not r["good"] and not r.get("named"):
            misses.append(
                {
                    "file": r["file"],
                    "status": r["status"],
                    "kind": r.get("kind"),
                    "found": sorted({f"{f['code']}@{f['path']}" for f in r["findings"] if f["severity"] != "info"}),
                }
            )

    def rate(row: dict[str, Any]) -> float | None:
        n = row["good_errors"] + row["good_warnings"] + row["good_infos"]
        return round(row["wrong_warnings"] / n, 4) if n else None

    for row in (*by_dialect.values(), total):
        row["false_warning_rate"] = rate(row)
    targets = {
        "no_crash": total["crashes"] == 0,
        "no_error_on_good_files": total["good_errors"] == 0,
        "every_warning_reviewed": total["unreviewed_warnings"] == 0,
        "false_warnings_at_most_2pct": (total["false_warning_rate"] or 0.0) <= FALSE_WARNING_TARGET,
    }
    return {
        "view": "default" if default_view else "pins",
        "files": len(results),
        "overall": total,
        "by_dialect": dict(sorted(by_dialect.items())),
        "by_rule": {k: dict(v) for k, v in sorted(by_rule.items())},
        "false_alarms": false_alarms,
        "wrong_warnings": wrong,
        "unreviewed_warnings": unreviewed,
        "bad_files_missed": misses,
        "crashes": crashes,
        "targets": targets,
    }


COLS = [
    ("good", "good_files"),
    ("err", "good_errors"),
    ("warn", "good_warnings"),
    ("exit1", "good_exit1"),
    ("exit2", "good_exit2"),
    ("wrongW", "wrong_warnings"),
    ("unrev", "unreviewed_warnings"),
    ("bad", "bad_files"),
    ("named", "bad_named"),
    ("self", "bad_self_contained"),
    ("selfNamed", "bad_self_contained_named"),
    ("crash", "crashes"),
]


def _table(rows: dict[str, dict[str, Any]], total: dict[str, Any]) -> str:
    head = f"{'dialect':<13}" + "".join(f"{c:>8}" for c, _ in COLS) + f"{'falseW%':>9}"
    lines = [head, "-" * len(head)]
    for name, row in [*rows.items(), ("ALL", total)]:
        r = row["false_warning_rate"]
        lines.append(
            f"{name:<13}" + "".join(f"{row[k]:>8}" for _, k in COLS) + f"{'-' if r is None else f'{100 * r:.1f}':>9}"
        )
    return "\n".join(lines)


def _rule_table(by_rule: dict[str, dict[str, int]]) -> str:
    cols = [
        "good_error",
        "good_warning",
        "good_info",
        "wrong_warnings",
        "unreviewed_warnings",
        "bad_error",
        "bad_warning",
    ]
    head = f"{'rule':<8}" + "".join(f"{c:>20}" for c in cols)
    lines = [head, "-" * len(head)]
    for code, c in by_rule.items():
        lines.append(f"{code:<8}" + "".join(f"{c.get(k, 0):>20}" for k in cols))
    return "\n".join(lines)


def render(rep: dict[str, Any], by: str) -> str:
    out = [f"kb lint on {rep['files']} real configs (view: {rep['view']})", ""]
    out.append(_rule_table(rep["by_rule"]) if by == "rule" else _table(rep["by_dialect"], rep["overall"]))
    out.append("")
    out.append("columns: good files; error / warning findings on them; good files exiting 1 / 2; wrong and unreviewed")
    out.append("warnings (reviewed.yaml); bad files; bad files where a finding names the problem's path; the same for")
    out.append("self-contained bad files; crashes; false warnings = wrong warnings / all findings on good files")
    for title, key, fmt in (
        (
            "error-level findings on good files (false alarms)",
            "false_alarms",
            lambda x: f"{x['file']}: {x['code']} {x['path']} (line {x['line']}): {x['message'][:160]}",
        ),
        (
            "wrong warnings on good files",
            "wrong_warnings",
            lambda x: f"{x['file']}: {x['code']} {x['path']}: {x['why']}",
        ),
        (
            "unreviewed warnings on good files",
            "unreviewed_warnings",
            lambda x: f"{x['file']}: {x['code']} {x['path']}: {x['message'][:120]}",
        ),
        (
            "bad files where no finding names the problem",
            "bad_files_missed",
            lambda x: f"{x['file']} [{x['status']}, kind {x['kind']}]: {', '.join(x['found']) or 'no finding'}",
        ),
        ("crashes", "crashes", lambda x: f"{x['file']}: {x['error']}"),
    ):
        out += ["", f"{title}: {len(rep[key])}"] + [f"  {fmt(x)}" for x in rep[key]]
    out += ["", "targets: " + ", ".join(f"{k}={'pass' if v else 'FAIL'}" for k, v in rep["targets"].items())]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--by", choices=["dialect", "rule"], default="dialect", help="breakdown of the table")
    ap.add_argument("--default-view", action="store_true", help="lint every file with kb's default view, not its pins")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target fails")
    ap.add_argument(
        "--heldout", action="store_true", help="the held-out bug threads of heldout/ (no rule was written from them)"
    )
    args = ap.parse_args(argv)
    rep = run(default_view=args.default_view, heldout=args.heldout)
    if args.json:
        print(json.dumps(rep, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render(rep, args.by))
    return 1 if args.check and not all(rep["targets"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
