"""The ``kb`` command line. It parses and prints; the work lives in the modules it calls.

Imports of heavy modules stay inside the commands so that ``kb --help`` and ``kb ask`` start fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kb import paths

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


class KbError(click.ClickException):
    """A user-facing error: message on stderr, exit code 2."""

    exit_code = 2


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="kb", prog_name="kb")
def main() -> None:
    """kb: verified fixes for DeepSpeed / transformers / accelerate / PEFT training failures."""


def _registry():
    from kb.registry import Registry

    try:
        return Registry.load()
    except FileNotFoundError as e:
        raise KbError(str(e)) from None


def _emit_json(obj) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2))


# ---------------------------------------------------------------- check / show


@main.command()
@click.option("--entries", "entries_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Entry folder (default: data/entries).")
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
def check(entries_dir: Path | None, as_json: bool) -> None:
    """Validate every entry: schema, registry names, myths, sources. Exit 1 on any problem."""
    from kb.check import check_all, problems_json

    root = entries_dir or paths.entries_dir()
    if not root.is_dir():
        raise KbError(f"no entry folder at {root}")
    loaded, problems = check_all(root, _registry())
    if as_json:
        click.echo(problems_json(problems))
    else:
        for p in problems:
            click.echo(str(p), err=True)
        n_files = len(list(root.glob("*.yaml")))
        status = "ok" if not problems else f"{len(problems)} problem(s)"
        click.echo(f"checked {n_files} entries: {status}", err=bool(problems))
    sys.exit(1 if problems else 0)


@main.command()
@click.argument("entry_id")
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the entry as JSON.")
def show(entry_id: str, lang: str, as_json: bool) -> None:
    """Render one entry (by id or alias) in the terminal."""
    from kb.entries import EntryError, load_entries

    try:
        entries = {le.entry.id: le for le in load_entries(paths.entries_dir(), include_withdrawn=True)}
    except EntryError as e:
        raise KbError(str(e)) from None
    le = entries.get(entry_id) or next((x for x in entries.values() if entry_id in x.entry.aliases), None)
    if le is None:
        from rapidfuzz import process

        near = [m for m, _, _ in process.extract(entry_id, list(entries), limit=3)]
        raise KbError(f"no entry {entry_id!r}; nearest: {', '.join(near)}")
    if as_json:
        _emit_json(le.entry.model_dump(mode="json"))
        return
    from kb.render import render_entry

    render_entry(le.entry, _registry(), lang)


# ---------------------------------------------------------------- registry


@main.group()
def registry() -> None:
    """The parameter registry generated from the installed packages."""


@registry.command("build")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Output folder (default: data/registry).")
@click.option("--package", "packages", multiple=True,
              type=click.Choice(["deepspeed", "transformers", "accelerate", "peft", "torch"]),
              help="Only these packages (repeatable). Default: all.")
def registry_build(out: Path | None, packages: tuple[str, ...]) -> None:
    """Introspect the installed packages and write data/registry/*.jsonl (deterministic)."""
    try:
        from indexer.registry_build import build_registry
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise KbError(f"{e}. Install the registry extra: pip install -e '.[registry]'") from None
    try:
        manifest = build_registry(out or paths.registry_dir(), packages or None,
                                  progress=lambda p: click.echo(f"introspecting {p} ...", err=True))
    except ImportError as e:
        raise KbError(f"{e}. Install the registry extra: pip install -e '.[registry]'") from None
    for fname, info in manifest["files"].items():
        click.echo(f"{fname}: {info['records']} records")


@registry.command("lookup")
@click.argument("name")
@click.option("--context", default=None, help="Config path the name sits under, e.g. zero_optimization.")
@click.option("--json", "as_json", is_flag=True)
def registry_lookup(name: str, context: str | None, as_json: bool) -> None:
    """Is NAME real, and where does it live? Exit 1 when it is unknown."""
    reg = _registry()
    lk = reg.resolve(name, context=context)
    if as_json:
        d = lk.to_dict()
        d["record"] = lk.record
        _emit_json(d)
    else:
        click.echo(f"{name}: {lk.status}")
        for r in ([lk.record] if lk.record else []) + [c for c in lk.candidates if c is not lk.record]:
            dep = f"  deprecated -> {r['replacement']}{' (no-op)' if r['noop'] else ''}" if r["deprecated"] else ""
            click.echo(f"  {r['id']}  [{r['kind']}] type={r['type'] or '-'} default={r['default']}{dep}")
            click.echo(f"    {r['package']} {r['version']} {r['source_file']}:{r['source_line']}")
        if lk.suggestions:
            click.echo(f"  did you mean: {', '.join(lk.suggestions)}")
    sys.exit(1 if lk.status == "unknown" else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
