"""One fix, every front end: the accelerate / TrainingArguments spelling of the DeepSpeed keys a fix sets.

A fix is written as a ds_config snippet (``{"zero_optimization": {"stage": 3}}``). A user who configures
DeepSpeed through the accelerate YAML, ``accelerate launch`` flags, the accelerate Python API or
``TrainingArguments`` (HF Trainer, LLaMA-Factory YAML) needs the matching name there. Nothing here is a
table typed by hand: the pairs are the registry's ``mapping`` records (indexer/registry_frontends.py,
read from the accelerate / transformers source) and its ``auto_fill`` records (who replaces "auto").

Example: ``equivalents({"zero_optimization": {"stage": 3}}, registry, "accelerate_yaml")`` gives one
Equivalent with ``name="deepspeed_config.zero_stage"``, ``front_value=3`` and the accelerate source line
that maps it; with ``lang="en"`` / ``"zh"`` it gives the answer contract's per-front-end form instead.

Core module: imports only kb.* core modules.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, fields
from typing import Any

from kb.registry.store import CONFIG_KINDS, Registry

FRONT_ENDS = ("accelerate_yaml", "accelerate_launch", "accelerate_plugin", "training_args")
FAMILIES = {"accelerate": ("accelerate_yaml", "accelerate_launch", "accelerate_plugin")}
DS_CONFIG = "deepspeed"  # the ds_config JSON itself: the fix is already in the user's spelling
WHOLE_CONFIG = "*"  # mapping path of the front-end name that takes a whole ds_config
PACKAGE_OF = {
    "accelerate_yaml": "accelerate",
    "accelerate_launch": "accelerate",
    "accelerate_plugin": "accelerate",
    "training_args": "transformers",
}

LABELS = {
    "accelerate_yaml": ("accelerate config YAML", "accelerate 的 YAML 配置文件"),
    "accelerate_launch": ("accelerate launch command line", "accelerate launch 命令行参数"),
    "accelerate_plugin": ("accelerate Python API", "accelerate 的 Python 接口"),
    "training_args": ("TrainingArguments / LLaMA-Factory YAML", "TrainingArguments 或 LLaMA-Factory 的 YAML 配置"),
}

# sentences of the notes, English and Chinese side by side ({fields} are the same in both)
NOTES = {
    "file": (
        "Nothing in the {label} sets `{path}`: only a ds_config file can; point `{name}` at it ({source}).",
        "{label_zh}中没有对应 `{path}` 的设置，只能写进 ds_config 文件，再用 `{name}` 指向该文件（{source}）。",
    ),
    "none": (
        "Nothing in the {label} of {package} {version} sets `{path}`, and nothing there takes a ds_config file.",
        "{package} {version} 中，{label_zh}既没有对应 `{path}` 的设置，也没有能指定 ds_config 文件的参数。",
    ),
    "auto_fill": (
        'If the ds_config says "auto" for `{path}`, {package} fills it in ({source}).',
        '若 ds_config 里 `{path}` 写成 "auto"，{package} 会自动填上（{source}）。',
    ),
    "auto": (
        'transformers copies `{name}` into the ds_config where `{path}` is "auto" ({source}); keep "auto" there.',
        'ds_config 里 `{path}` 写成 "auto" 时，transformers 会用 `{name}` 的值填入（{source}），所以那里保留 "auto" 即可。',
    ),
    "must_match": (
        "An explicit ds_config value that differs from `{name}` stops training with a mismatch error.",
        "如果 ds_config 里写了与 `{name}` 不同的具体值，训练会因两者不一致而报错退出。",
    ),
    "must_match_if": (
        "An explicit ds_config value that differs from `{name}` is an error when `{cond}` holds.",
        "在 `{cond}` 成立时，ds_config 里与 `{name}` 不同的具体值会报错。",
    ),
    "computed": (
        'No field sets `{path}` directly: transformers computes it as `{expr}` when the ds_config says "auto" '
        "({source}); `{name}` is one of its inputs.",
        '没有字段能直接设置 `{path}`：ds_config 里写成 "auto" 时，transformers 按 `{expr}` 计算（{source}），'
        "`{name}` 是其中一项。",
    ),
    "when": (
        "accelerate writes it only when `{cond}` ({source}).",
        "只有在 `{cond}` 时 accelerate 才会写入该项（{source}）。",
    ),
    "values": (
        "`{path}: {value}` comes from `{name}` being one of {values} ({source}).",
        "`{path}: {value}` 对应 `{name}` 取 {values} 之一（{source}）。",
    ),
    "values_other": (
        "`{path}: {value}` comes from `{name}` set to anything other than {values} ({source}).",
        "`{path}: {value}` 对应 `{name}` 取 {values} 以外的值（{source}）。",
    ),
    "conflict": (
        "accelerate refuses `{name}` together with `deepspeed_config_file` ({source}): with a ds_config file, "
        "set `{path}` in that file instead.",
        "`{name}` 不能与 `deepspeed_config_file` 同时使用，accelerate 会报错（{source}）；已经用了 ds_config 文件时，"
        "请直接在文件里设置 `{path}`。",
    ),
    "conflicts": (
        "accelerate refuses {names} together with `deepspeed_config_file` ({source}): with a ds_config file, "
        "set those keys in that file instead.",
        "{names} 不能与 `deepspeed_config_file` 同时使用，accelerate 会报错（{source}）；已经用了 ds_config 文件时，"
        "请直接在文件里设置这些项。",
    ),
    "not_forwarded": (
        "{package} {version} accepts `{name}` but does not pass it on to DeepSpeed (no environment variable is set "
        "for it at launch); set `{path}` in a ds_config file and point `{file_name}` at it.",
        "{package} {version} 接受 `{name}`，但启动时并不会把它传给 DeepSpeed（没有设置对应的环境变量）；"
        "请在 ds_config 文件里设置 `{path}`，再用 `{file_name}` 指向该文件。",
    ),
    "requires": (
        "accelerate launch uses these flags only together with `{flag}` ({source}).",
        "这些 accelerate launch 参数只有同时加上 `{flag}` 才会生效（{source}）。",
    ),
    "yaml_form": (
        "The same fields in a LLaMA-Factory / HfArgumentParser YAML: {lines}.",
        "写在 LLaMA-Factory / HfArgumentParser 的 YAML 里是：{lines}。",
    ),
    "index": (
        "`{name}` is item {index_1} of `{path}` ({source}).",
        "`{name}` 对应 `{path}` 的第 {index_1} 项（{source}）。",
    ),
}


@dataclass
class Equivalent:
    """One DeepSpeed key of a fix, spelled for one front end (or why it has no spelling there)."""

    front_end: str  # accelerate_yaml | accelerate_launch | accelerate_plugin | training_args
    ds_path: str  # the DeepSpeed key the fix sets (canonical path)
    value: Any  # the fix's value for it
    name: str | None  # the front-end spelling (deepspeed_config.zero_stage, --zero_stage, ...); None: no equivalent
    front_value: Any = None  # the value to write there (None: no single value; see note)
    via: str = "none"  # direct | auto | computed | not_forwarded | file | none
    registry_id: str | None = None  # the registry record of the front-end name
    mapping_id: str | None = None  # the mapping record this comes from
    source: str | None = None  # file:line where the package maps the name to the DeepSpeed key
    package: str | None = None
    version: str | None = None
    aliases: list[str] = field(default_factory=list)  # other accepted spellings (--zero-stage)
    owner: str | None = None  # the Python object that takes the name (DeepSpeedPlugin, Accelerator, TrainingArguments)
    requires: str | None = None  # accelerate launch: the flag without which these flags do nothing (--use_deepspeed)
    snippet: str | None = None  # this one setting, rendered for the front end
    note: str | None = None
    note_zh: str | None = None
    parts: list[tuple[str, dict[str, Any]]] = field(default_factory=list, repr=False)  # the note's sentences

    def to_dict(self) -> dict[str, Any]:
        """Its fields but ``parts`` (values are JSON scalars, lists of strings or small dicts: a shallow
        copy is enough, and dataclasses.asdict's deep copy was most of the cost on the query path)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "parts"}
        d["aliases"] = list(self.aliases)
        return d


# ---------------------------------------------------------------- front-end detection

_WORDS: list[tuple[str, re.Pattern[str]]] = [
    ("accelerate_launch", re.compile(r"accelerate\s*launch|accelerate\s*(?:的)?\s*(?:启动命令|命令行|启动)", re.I)),
    (
        "accelerate_yaml",
        re.compile(
            r"accelerate\s*config|accelerate\s*(?:的)?\s*(?:ya?ml|配置)|default_config\.ya?ml|deepspeed_config_file",
            re.I,
        ),
    ),
    (
        "accelerate_plugin",
        re.compile(r"DeepSpeedPlugin|Accelerator\s*\(|accelerate\s*(?:的)?\s*(?:python|api|接口)", re.I),
    ),
    (
        "training_args",
        re.compile(
            r"TrainingArguments|(?<![A-Za-z])(?:hf\s*|hugging\s*face\s*|sft|seq2seq)?trainer(?![A-Za-z])"
            r"|llama[-_ ]?factory|llamafactory(?:-cli)?|训练参数",
            re.I,
        ),
    ),
]
_ACCELERATE = re.compile(r"(?<![A-Za-z])accelerate(?![A-Za-z])", re.I)


def detect_front_end(cfg_kind: str | None, query: str, cfg_data: dict | None = None) -> str | None:
    """The user's front end: from an attached config's kind (kb.doctor.configs.ParsedConfig.kind; ``cfg_data`` =
    its data, used for launch command lines), else from words in the query (English or Chinese).

    Returns one of FRONT_ENDS, ``"accelerate"`` (accelerate, not saying which of its front ends),
    ``"deepspeed"`` (the user's config is a ds_config: the fix is already in their spelling) or ``None``
    (unknown or mixed: show all)."""
    if cfg_kind == "deepspeed":
        return DS_CONFIG
    if cfg_kind == "accelerate":
        return "accelerate_yaml"
    if cfg_kind == "training_args":
        return "training_args"
    if cfg_kind == "launch" and isinstance(cfg_data, dict):
        if cfg_data.get("launcher") == "accelerate launch":
            return "accelerate_launch"
        if "deepspeed" in (cfg_data.get("script_args") or {}):
            return "training_args"  # an HF script given --deepspeed ds_config.json
    text = query or ""
    found = [fe for fe, pat in _WORDS if pat.search(text)]
    if len(found) == 1:
        return found[0]
    if found and all(fe in FAMILIES["accelerate"] for fe in found):
        return "accelerate"
    if not found and _ACCELERATE.search(text):
        return "accelerate"
    return None


def _selected(front_end: str | None) -> tuple[str, ...]:
    if front_end is None:
        return FRONT_ENDS
    if front_end == DS_CONFIG:
        return ()
    if front_end in FAMILIES:
        return FAMILIES[front_end]
    if front_end in FRONT_ENDS:
        return (front_end,)
    raise ValueError(
        f"unknown front end {front_end!r}; use one of {', '.join(FRONT_ENDS + tuple(FAMILIES) + (DS_CONFIG,))} or None"
    )


# ---------------------------------------------------------------- equivalents


def equivalents(
    snippet_config: dict, registry: Registry, front_end: str | None = None, lang: str | None = None
) -> list[Any]:
    """For every DeepSpeed key path the snippet sets, its spelling for ``front_end`` (None: every front end).

    Without ``lang``: a list of :class:`Equivalent`, one per (key, front end); order: the snippet's keys
    in order, then FRONT_ENDS order. A key the front end cannot set gets one Equivalent with ``name=None``
    and a note saying how to reach it (a ds_config file, "auto").

    With ``lang`` ("en" / "zh"): the answer contract's form, a list of ``kb.contract.Equivalent``, one
    per front end (see :func:`for_answer`)."""
    if lang is not None:
        return for_answer(snippet_config, registry, front_end, lang)
    return _per_key(snippet_config, registry, front_end)


def for_answer(snippet_config: dict, registry: Registry, front_end: str | None, lang: str) -> list[Any]:
    """``kb.contract.Equivalent`` per front end: the rendered snippet, the names (each key's Equivalent
    as a dict, without its notes) and the notes in ``lang``, each said once."""
    from kb import contract as C

    per_key = _per_key(snippet_config, registry, front_end)
    rendered = render_snippets(per_key)
    out = []
    for fe in FRONT_ENDS:
        items = [e for e in per_key if e.front_end == fe]
        if not items:
            continue
        notes: list[str] = []
        files: dict[tuple, list[str]] = {}  # "only through a ds_config file": one sentence for all such keys
        conflicts: list[dict] = []  # "refused together with deepspeed_config_file": one sentence too
        for e in items:
            for key, f in e.parts:
                if key == "file":
                    files.setdefault(tuple(sorted((k, v) for k, v in f.items() if k != "path")), []).append(f["path"])
                    continue
                if key == "conflict":
                    conflicts.append(f)
                    continue
                n = _fmt((key, f), lang)
                if n not in notes:
                    notes.append(n)
        sep = "`、`" if lang == "zh" else "`, `"
        notes[:0] = [_fmt(("file", {**dict(k), "path": sep.join(paths)}), lang) for k, paths in files.items()]
        if conflicts:
            names = ("、" if lang == "zh" else ", ").join(dict.fromkeys(f"`{c['name']}`" for c in conflicts))
            source = _sources([c["source"] for c in conflicts])
            notes.append(_fmt(_note("conflicts", names=names, source=source), lang))
        snippet = None
        if fe in rendered:
            snippet = C.Snippet(SNIPPET_LANG[fe], rendered[fe])
        if fe == "training_args" and "training_args_yaml" in rendered:
            lines = ("、" if lang == "zh" else ", ").join(f"`{x}`" for x in rendered["training_args_yaml"].splitlines())
            notes.append(_fmt(_note("yaml_form", lines=lines), lang))
        names = [{k: v for k, v in e.to_dict().items() if k not in ("note", "note_zh", "snippet")} for e in items]
        out.append(C.Equivalent(front_end=fe, snippet=snippet, names=names, notes=notes))
    return out


SNIPPET_LANG = {
    "accelerate_yaml": "yaml",
    "accelerate_launch": "bash",
    "accelerate_plugin": "python",
    "training_args": "python",
}


def _per_key(snippet_config: dict, registry: Registry, front_end: str | None) -> list[Equivalent]:
    if not isinstance(snippet_config, dict):
        raise TypeError("snippet_config must be a dict (a ds_config snippet)")
    fes = _selected(front_end)
    if not fes:
        return []
    maps, autos = _index(registry)
    known = {r["front_end"] for recs in maps.values() for r in recs}
    fes = tuple(f for f in fes if f in known)  # a registry without this front end's mappings cannot say "none"
    out: list[Equivalent] = []
    has_ds = "deepspeed" in registry.versions
    for path, value in _leaves(snippet_config):
        path = _canonical(path, registry)
        if has_ds and path not in maps and path not in autos and not _is_ds_key(path, registry):
            continue  # not a DeepSpeed key (a typo, or another tool's setting): nothing to translate
        for fe in fes:
            out += _for_front_end(fe, path, value, maps, autos, registry)
    return out


def render_snippets(equivs: list[Equivalent]) -> dict[str, str]:
    """The settings of ``equivs`` rendered per front end, ready to paste: ``accelerate_yaml`` (YAML block),
    ``accelerate_launch`` (one command line), ``accelerate_plugin`` (Python calls), ``training_args``
    (``TrainingArguments(...)``) and ``training_args_yaml`` (the same fields as YAML lines, as in a
    LLaMA-Factory config). Front ends with nothing to set are left out."""
    by_fe: dict[str, list[Equivalent]] = {}
    for e in equivs:
        if e.name is not None and e.front_value is not None and e.via in ("direct", "auto"):
            by_fe.setdefault(e.front_end, []).append(e)
    out: dict[str, str] = {}
    if "accelerate_yaml" in by_fe:
        out["accelerate_yaml"] = _yaml_block([(e.name, e.front_value) for e in by_fe["accelerate_yaml"]])
    if "accelerate_launch" in by_fe:
        items = by_fe["accelerate_launch"]
        gate = next((e.requires for e in items if e.requires), None)
        words = ["accelerate", "launch"] + ([gate] if gate else [])
        for e in items:
            words += [e.name, _flag_value(e.front_value)]
        out["accelerate_launch"] = " ".join(shlex.quote(w) if i > 1 else w for i, w in enumerate(words))
    if "accelerate_plugin" in by_fe:
        calls: dict[str, list[str]] = {}
        for e in by_fe["accelerate_plugin"]:
            calls.setdefault(e.owner or "DeepSpeedPlugin", []).append(f"{e.name}={e.front_value!r}")
        out["accelerate_plugin"] = "\n".join(f"{owner}({', '.join(args)})" for owner, args in calls.items())
    if "training_args" in by_fe:
        fields = _dedupe([(e.name, e.front_value) for e in by_fe["training_args"]])
        out["training_args"] = "TrainingArguments(" + ", ".join(f"{k}={v!r}" for k, v in fields) + ")"
        out["training_args_yaml"] = "\n".join(f"{k}: {_yaml_scalar(v)}" for k, v in fields)
    return out


# ---------------------------------------------------------------- internals


def _index(registry: Registry) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    cached = getattr(registry, "_frontend_index", None)
    if cached is not None:
        return cached
    maps: dict[str, list[dict]] = {}
    autos: dict[str, list[dict]] = {}
    # the records, plus any side index the loader keeps them in (Registry.auto_fill; a `mappings` one likewise)
    pool = list(registry.records)
    for side in ("auto_fill", "mappings"):
        for recs in (getattr(registry, side, None) or {}).values():
            pool += recs
    seen: set[str] = set()
    for r in pool:
        if r["id"] in seen:
            continue
        seen.add(r["id"])
        if r.get("status") in ("removed", "absent"):  # not in the release this view stands for
            continue
        if r.get("kind") == "mapping" and r.get("front_end") in FRONT_ENDS:
            maps.setdefault(r["path"], []).append(r)
        elif r.get("kind") == "auto_fill":
            autos.setdefault(r["path"], []).append(r)
    for recs in (*maps.values(), *autos.values()):
        recs.sort(key=lambda r: r["id"])
    try:
        registry._frontend_index = (maps, autos)  # type: ignore[attr-defined]
    except AttributeError:
        pass
    return maps, autos


def _leaves(cfg: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in cfg.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict):
            out += _leaves(v, path + ".")  # an empty section sets nothing
        else:
            out.append((path, v))
    return out


def _canonical(path: str, registry: Registry) -> str:
    """An alias spelling of a DeepSpeed key -> the key's canonical path."""
    recs = [r for r in registry.by_path.get(path, []) if r["package"] == "deepspeed" and r["kind"] in CONFIG_KINDS]
    return recs[0]["path"] if recs else path


def _is_ds_key(path: str, registry: Registry) -> bool:
    return registry.resolve(path, package="deepspeed").status in ("exact", "alias", "deprecated")


def _src(rec: dict) -> str:
    return f"{rec['source_file']}:{rec['source_line']}"


def _sources(sources: list[str]) -> str:
    """ "a.py:1517", "a.py:1509", "a.py:1511" -> "a.py:1509, 1511, 1517" (one file named once, lines in order)."""
    by_file: dict[str, list[int]] = {}
    for src in sources:
        file, _, line = src.rpartition(":")
        by_file.setdefault(file, []).append(int(line))
    return "; ".join(f"{f}:{', '.join(str(n) for n in sorted(set(ns)))}" for f, ns in by_file.items())


def _note(key: str, **f: Any) -> tuple[str, dict[str, Any]]:
    """One sentence of a note, kept as (template key, fields) so that the answer can merge and translate."""
    return key, f


def _fmt(part: tuple[str, dict[str, Any]], lang: str) -> str:
    key, f = part
    return NOTES[key][1 if lang == "zh" else 0].format(**f)


def _join(parts: list[tuple[str, dict[str, Any]]]) -> tuple[str | None, str | None]:
    if not parts:
        return None, None
    return " ".join(_fmt(p, "en") for p in parts), "".join(_fmt(p, "zh") for p in parts)


def _for_front_end(
    fe: str,
    path: str,
    value: Any,
    maps: dict[str, list[dict]],
    autos: dict[str, list[dict]],
    registry: Registry,
) -> list[Equivalent]:
    pkg = PACKAGE_OF[fe]
    label, label_zh = LABELS[fe]
    recs = [r for r in maps.get(path, []) if r["front_end"] == fe]
    file_rec = next((r for r in maps.get(WHOLE_CONFIG, []) if r["front_end"] == fe), None)
    usable = [
        r for r in recs if r["fill"] != "not_forwarded" and (r.get("transform") or {}).get("primary") is not False
    ]
    out: list[Equivalent] = []
    for r in usable:
        out.append(_equivalent(fe, path, value, r, registry))
    if usable:
        return out
    # no way to set it from this front end: say how to reach it
    notes: list[tuple[str, dict[str, Any]]] = []
    dropped = [r for r in recs if r["fill"] == "not_forwarded"]
    for r in dropped:
        notes.append(
            _note(
                "not_forwarded",
                package=r["package"],
                version=r["version"],
                name=r["front_name"],
                path=path,
                file_name=file_rec["front_name"] if file_rec else "deepspeed_config_file",
            )
        )
    if file_rec and not dropped:
        notes.append(
            _note("file", label=label, label_zh=label_zh, path=path, name=file_rec["front_name"], source=_src(file_rec))
        )
    elif not file_rec:
        version = registry.versions.get(pkg, "?")
        notes.append(_note("none", label=label, label_zh=label_zh, path=path, package=pkg, version=version))
    for a in autos.get(path, []):
        if a["package"] == pkg:
            notes.append(_note("auto_fill", package=pkg, path=path, source=_src(a)))
            break
    note, note_zh = _join(notes)
    rec = dropped[0] if dropped else file_rec
    return [
        Equivalent(
            front_end=fe,
            ds_path=path,
            value=value,
            name=None,
            via="not_forwarded" if dropped else ("file" if file_rec else "none"),
            registry_id=_known(rec.get("front_id"), registry) if rec else None,
            mapping_id=rec["id"] if rec else None,
            source=_src(rec) if rec else None,
            package=rec["package"] if rec else pkg,
            version=rec["version"] if rec else registry.versions.get(pkg),
            aliases=list(rec.get("aliases") or []) if rec else [],
            owner=rec.get("owner") if rec else None,
            note=note,
            note_zh=note_zh,
            parts=notes,
        )
    ]


def _known(rid: str | None, registry: Registry) -> str | None:
    """The front-end name's registry id, only when the registry really holds it."""
    return rid if rid and registry.get(rid) is not None else None


def _equivalent(fe: str, path: str, value: Any, r: dict, registry: Registry) -> Equivalent:
    t = r.get("transform") or {}
    name = r["front_name"]
    src = _src(r)
    notes: list[tuple[str, dict[str, Any]]] = []
    front_value: Any = value
    via = r["fill"]
    if "computed" in t:
        front_value, via = None, "computed"
        notes.append(_note("computed", path=path, expr=t["computed"], source=src, name=name))
    elif "values" in t:
        values = ", ".join(json.dumps(v) for v in t["values"])
        if value == t.get("ds_value", True):
            front_value = t["values"][0]
            notes.append(_note("values", path=path, value=_yaml_scalar(value), name=name, values=values, source=src))
        else:
            front_value = None
            notes.append(
                _note("values_other", path=path, value=_yaml_scalar(value), name=name, values=values, source=src)
            )
    elif "index" in t:
        i = t["index"]
        front_value = value[i] if isinstance(value, list) and len(value) > i else None
        notes.append(_note("index", name=name, index_1=i + 1, path=path, source=src))
    if value == "auto" and via != "computed":
        front_value = None  # "auto" is filled, not a value to copy
    if "when" in t and r["package"] == "accelerate":
        notes.append(_note("when", cond=t["when"], source=src))
    if via == "auto":
        notes.insert(0, _note("auto", name=name, path=path, source=src))
        mm = r.get("must_match")
        if mm is True:
            notes.append(_note("must_match", name=name))
        elif isinstance(mm, str) and mm:
            notes.append(_note("must_match_if", name=name, cond=mm))
    if r.get("conflict"):
        c = r["conflict"]
        notes.append(_note("conflict", name=name, path=path, source=f"{c['source_file']}:{c['source_line']}"))
    if r.get("requires"):
        q = r["requires"]
        notes.append(_note("requires", flag=q["flag"], source=f"{q['source_file']}:{q['source_line']}"))
    note, note_zh = _join(notes)
    e = Equivalent(
        front_end=fe,
        ds_path=path,
        value=value,
        name=name,
        front_value=front_value,
        via=via,
        registry_id=_known(r.get("front_id"), registry),
        mapping_id=r["id"],
        source=src,
        package=r["package"],
        version=r["version"],
        aliases=list(r.get("aliases") or []),
        owner=r.get("owner"),
        requires=(r.get("requires") or {}).get("flag"),
        note=note,
        note_zh=note_zh,
        parts=notes,
    )
    if front_value is not None and via in ("direct", "auto"):
        e.snippet = render_snippets([e]).get(fe)
    return e


def _dedupe(items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    seen: dict[str, Any] = {}
    for k, v in items:
        seen.setdefault(k, v)
    return list(seen.items())


_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "none", "~"}  # YAML would not read these as text


def _yaml_scalar(v: Any) -> str:
    if isinstance(v, str) and re.fullmatch(r"[A-Za-z_/][\w./-]*", v) and v.lower() not in _YAML_WORDS:
        return v
    return json.dumps(v)


def _flag_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"  # accelerate lower-cases these flag values into its env vars
    return str(v)


def _yaml_block(items: list[tuple[str, Any]]) -> str:
    """``deepspeed_config.zero_stage`` -> a ``deepspeed_config:`` block; top-level keys first."""
    top: list[tuple[str, Any]] = []
    blocks: dict[str, list[tuple[str, Any]]] = {}
    for name, v in _dedupe(items):
        if "." in name:
            head, _, tail = name.partition(".")
            blocks.setdefault(head, []).append((tail, v))
        else:
            top.append((name, v))
    lines = [f"{k}: {_yaml_scalar(v)}" for k, v in top]
    for head, kv in blocks.items():
        lines.append(f"{head}:")
        lines += [f"  {k}: {_yaml_scalar(v)}" for k, v in kv]
    return "\n".join(lines)
