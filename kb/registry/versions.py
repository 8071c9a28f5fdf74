"""The user's package versions: read from a flag, pasted tool output, prose, or the current environment.

Core module: stdlib + ``packaging`` only (no registry, no torch import), so it is cheap to import.

Sources (the ``source`` of each pin; docs/versions.md shows a sample of each):

- ``flag``: ``--versions "deepspeed==0.14.4 transformers==4.46.3"`` (``parse_versions_arg``)
- ``pip-freeze``: a whole line ``name==version`` (``pkg @ URL``, ``-e ...`` and comments are skipped)
- ``pip-list``: the ``Package  Version`` table (header, dashes, rows)
- ``ds_report``: ``torch version .... 2.4.0+cu121``, ``deepspeed info .... 0.14.4, unknown, unknown``
- ``transformers-env``: ``- `transformers` version: 4.46.3``, ``- PyTorch version (GPU?): ...`` (4.x),
  ``- PyTorch version (accelerator?): ...`` (5.x), ``- Accelerate version``, ``- DeepSpeed version``
- ``accelerate-env``: ``- `Accelerate` version: 0.34.2``, ``- PyTorch version (GPU?): ...`` (older),
  ``- PyTorch version: ...`` (1.x)
- ``query``: a version named in prose, next to the package name: "transformers 4.46", "deepspeed v0.14.4",
  "ds 0.14", "accelerate==0.34", "transformers版本是4.46.3", "用的 deepspeed 0.15"
- ``environment``: importlib.metadata of the running interpreter (``versions_from_environment``)

Within one text, tool output beats prose; two sources that disagree are kept as a ``Conflict``. Prose
that names two different versions of one package ("transformers 4.46 or 4.47", "from 4.46 to 4.48")
gives nothing for that package. ``merge`` ranks whole ``Versions`` by origin: flag > attachment > query
text > environment.

Partial versions ("4.46", only from a flag or prose) mean "some 4.46.x": ``satisfies`` says whether some
(or, with ``strict=True``, every) release of the series meets a specifier, and ``pick_release`` maps the
series onto a recorded release as its newest member. Local labels (``+cu121``, ``+cpu``) are kept for
display and ignored for matching.

Packages: ``packages()``, those the registry records. Besides them, python, CUDA (torch's build), nvcc
(the toolkit) and NCCL are reported as ``facts`` when the text shows them; they are never package pins.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from kb.registry.order import same_release, version_key  # noqa: F401  (re-exported: the one reading of a version)


@functools.lru_cache(maxsize=4)
def _packages_in(kb_data: str) -> tuple[str, ...]:
    from kb import paths

    folder = paths.registry_dir()
    names = {m.group(1) for p in folder.glob("*.jsonl") if (m := _REGISTRY_FILE.match(p.name))}
    names |= {p.stem for p in (folder / "timeline").glob("*.json")}  # every minor release (kb/registry/timeline.py)
    return tuple(sorted(names))


_REGISTRY_FILE = re.compile(r"^([a-z][a-z0-9_]*)(?:-\d[^/]*)?\.jsonl$")  # deepspeed.jsonl, deepspeed-0.19.8.jsonl


def packages() -> tuple[str, ...]:
    """The packages kb reads versions of: those the registry records (data/registry/<package>[-<version>].jsonl),
    sorted. The registry builders are the one home of that list; this reads their output, not kb.registry.store."""
    return _packages_in(os.environ.get("KB_DATA", ""))  # kb.paths.data_dir() follows $KB_DATA


# other spellings users write, in a flag or in prose (pip normalises - _ . alike; "ds" is DeepSpeed's own short name)
ALIASES = {
    "ds": "deepspeed",
    "pytorch": "torch",
    "llama-factory": "llamafactory",  # the repository's name (hiyouga/LLaMA-Factory); PyPI's is llamafactory
    "swift": "ms-swift",  # the command and import name of PyPI's ms-swift
}
FACTS = ("python", "cuda", "nvcc", "nccl")
FACTS_IN_PROSE = ("python", "cuda", "nccl")  # "nvcc 12.4" in prose is rare; CUDA covers it
SOURCES = (
    "flag",
    "pip-freeze",
    "pip-list",
    "ds_report",
    "transformers-env",
    "accelerate-env",
    "query",
    "environment",
)
ORIGINS = ("flag", "attachment", "query", "environment")  # merge precedence, strongest first
REPORT_SOURCES = frozenset(SOURCES[1:6])  # tool output: beats prose in the same text

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# a version as written: 0.14.4, v0.14.4, 4.47.0.dev0, 2.4.0+cu121, 1.0.0rc1 (at least major.minor)
_VER = r"v?\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?(?:\.dev\d+)?(?:\+[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*)?"
_VER_RE = re.compile(rf"(?i)^{_VER}$")
MAX_PASTE_BYTES = 1_000_000  # kb env --from: a pip freeze of a big environment is ~20 kB
MAX_MAJOR = 99  # no package here has a bigger major: "2024.06" next to a name is a date, not a version


class VersionsError(ValueError):
    """A bad ``--versions`` value. ``str(e)`` is English; ``e.text(lang)`` gives either language."""

    def __init__(self, key: str, **fields: Any):
        self.key, self.fields = key, fields
        self.token = fields.get("token")
        super().__init__(self.text("en"))

    def text(self, lang: str = "en") -> str:
        from kb.i18n import t

        return t(lang, self.key, **self.fields)


@dataclass(frozen=True)
class Pin:
    """One package's (or fact's) version and where it was read."""

    name: str
    version: str  # as written, minus a leading "v": "2.4.0+cu121", "4.46"
    source: str  # one of SOURCES
    line: str = ""  # the text it was read from (stripped)
    line_no: int | None = None  # 1-based line in the text it came from
    origin: str = "query"  # one of ORIGINS: set by the caller (flag, attachment, query, environment)

    @property
    def public(self) -> str:
        """The version without a local label: what is matched against specifiers and releases."""
        return self.version.split("+", 1)[0]

    @property
    def partial(self) -> bool:
        """Fewer than three release numbers in a flag or prose ("4.46"): it means some 4.46.x."""
        return self.source in ("flag", "query") and len(version_key(self.public).release) < 3

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "public": self.public,
            "partial": self.partial,
            "source": self.source,
            "origin": self.origin,
            "line": self.line,
            "line_no": self.line_no,
        }


@dataclass(frozen=True)
class Conflict:
    """Two sources gave incompatible versions of one name; ``kept`` is the one used."""

    name: str
    kept: Pin
    dropped: Pin

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kept": self.kept.to_dict(), "dropped": self.dropped.to_dict()}


@dataclass
class Versions:
    """Package -> Pin (``packages()`` only), facts (python, cuda, nvcc, nccl), conflicts and ambiguous names."""

    pins: dict[str, Pin] = field(default_factory=dict)
    facts: dict[str, Pin] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)
    ambiguous: dict[str, list[Pin]] = field(default_factory=dict)  # prose named several versions: none used

    # mapping-like access to the package pins: versions["torch"] -> "2.4.0+cu121"
    def __getitem__(self, pkg: str) -> str:
        return self.pins[pkg].version

    def get(self, pkg: str, default: str | None = None) -> str | None:
        pin = self.pins.get(pkg)
        return pin.version if pin else default

    def __contains__(self, pkg: object) -> bool:
        return pkg in self.pins

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.pins))

    def __len__(self) -> int:
        return len(self.pins)

    def __bool__(self) -> bool:
        return bool(self.pins)

    def as_pins(self) -> dict[str, str]:
        """{package: public version}: what ``Registry.at`` takes."""
        return {p: self.pins[p].public for p in self}

    def to_dict(self) -> dict[str, Any]:
        return {
            "packages": {p: self.pins[p].to_dict() for p in self},
            "facts": {k: self.facts[k].to_dict() for k in FACTS if k in self.facts},
            "conflicts": [c.to_dict() for c in self.conflicts],
            "ambiguous": {k: [p.to_dict() for p in v] for k, v in sorted(self.ambiguous.items())},
        }

    # ------------------------------------------------------------ building

    def _add(self, pin: Pin) -> None:
        table = self.facts if pin.name in FACTS else self.pins
        have = table.get(pin.name)
        if have is None:
            table[pin.name] = pin
            return
        if _compatible(have.public, pin.public):
            # the same version, or a partial one ("4.46") and a release of it ("4.46.3"): the release refines it
            if _precision(pin) > _precision(have):
                table[pin.name] = pin
            return
        if _rank(pin) > _rank(have):
            table[pin.name] = pin
            self.conflicts.append(Conflict(pin.name, pin, have))
        else:
            self.conflicts.append(Conflict(pin.name, have, pin))


def _rank(pin: Pin) -> tuple[int, int]:
    """Origin first (flag > attachment > query > environment), then tool output over prose."""
    origin = len(ORIGINS) - ORIGINS.index(pin.origin) if pin.origin in ORIGINS else 0
    return origin, 1 if pin.source in REPORT_SOURCES or pin.source == "flag" else 0


def _precision(pin: Pin) -> int:
    return len(version_key(pin.public).release)


def _compatible(a: str, b: str) -> bool:
    """Equal, or one is a prefix of the other's release ("4.46" and "4.46.3")."""
    va, vb = version_key(a), version_key(b)
    if va == vb:
        return True
    ra, rb = va.release, vb.release
    short, long_ = (ra, rb) if len(ra) <= len(rb) else (rb, ra)
    return len(short) < len(long_) and long_[: len(short)] == short and (va.pre, va.dev) == (vb.pre, vb.dev)


# ---------------------------------------------------------------- versions as text


def canonical_package(name: str) -> str | None:
    """deepspeed | transformers | accelerate | peft | torch for a name or alias (any case, - _ . alike)."""
    n = re.sub(r"[-_.]+", "-", name.strip().lower())
    n = ALIASES.get(n, n)
    return n if n in packages() else None


def clean_version(text: str) -> str | None:
    """The version in ``text`` as written (minus a leading v), or None when it is not a plausible version."""
    s = text.strip()
    if not _VER_RE.match(s):
        return None
    s = s[1:] if s[:1] in "vV" else s
    try:
        v = Version(s)
    except InvalidVersion:
        return None
    if v.release[0] > MAX_MAJOR:
        return None
    return s


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


# ---------------------------------------------------------------- the --versions flag


_SPLIT = re.compile(r"[\s,;]+")
_FLAG_TOKEN = re.compile(r"^([A-Za-z][A-Za-z0-9._-]*?)(==|=)(.+)$")


def parse_versions_arg(text: str) -> Versions:
    """``--versions``: tokens ``pkg==ver`` or ``pkg=ver``, separated by spaces, commas or semicolons.

    Package names: ``packages()`` or an alias (ds, pytorch), any case. Versions: at least major.minor
    ("4.46" means some 4.46.x), a local label allowed ("2.4.0+cu121"). A bare "pkg ver" pair is not
    accepted (a typo would silently split one token in two). Raises VersionsError naming the bad token.
    """
    out = Versions()
    tokens = [tok for tok in _SPLIT.split(text or "") if tok]
    if not tokens:
        raise VersionsError("versions.empty", accepted=_accepted())
    for tok in tokens:
        m = _FLAG_TOKEN.match(tok)
        if not m:
            raise VersionsError("versions.bad_token", token=tok, accepted=_accepted())
        pkg = canonical_package(m.group(1))
        if pkg is None:
            raise VersionsError("versions.unknown_package", token=tok, name=m.group(1), accepted=_accepted())
        ver = clean_version(m.group(3))
        if ver is None:
            raise VersionsError("versions.bad_version", token=tok, version=m.group(3))
        have = out.pins.get(pkg)
        if have is not None and have.version != ver:
            raise VersionsError("versions.twice", token=tok, name=pkg, first=have.version)
        out.pins[pkg] = Pin(pkg, ver, "flag", tok, None, "flag")
    return out


def _accepted() -> str:
    return ", ".join(packages()) + " (" + ", ".join(f"{a} = {p}" for a, p in ALIASES.items()) + ")"


# ---------------------------------------------------------------- pasted text


_FREEZE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)\s*(?:[;#].*)?$")
_LIST_HEADER = re.compile(r"^\s*Package\s+Version(?:\s+.*)?$")
_LIST_RULE = re.compile(r"^\s*-{3,}\s+-{3,}")
_LIST_ROW = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s+(\S+)(?:\s+.*)?$")
_DS = re.compile(r"^\s*(torch version|deepspeed info|torch cuda version|nvcc version)\s+\.{2,}\s+(\S.*?)\s*$")
_ENV_ITEM = re.compile(r"^\s*-\s+(.+?):\s*(.*?)\s*$")
_NCCL_DIST = re.compile(r"^nvidia-nccl-cu\d+$")
_CU_LABEL = re.compile(r"^cu(\d{2,3})$")

# "- key: value" lines of `transformers env` (4.x and 5.x) and `accelerate env`: key -> name read
_TF_KEYS = {
    "`transformers` version": "transformers",
    "Python version": "python",
    "Accelerate version": "accelerate",
    "DeepSpeed version": "deepspeed",
    "PyTorch version (GPU?)": "torch",  # transformers 4.x
    "PyTorch version (accelerator?)": "torch",  # transformers 5.x (and late 4.x)
}
_ACC_KEYS = {
    "`Accelerate` version": "accelerate",
    "Python version": "python",
    "PyTorch version (GPU?)": "torch",  # accelerate 0.x
    "PyTorch version": "torch",  # accelerate 1.x
}
# keys only one of the two tools prints: they say whose output a block is when its first line was cut off
_TF_ONLY = {
    "`transformers` version",
    "Huggingface_hub version",
    "Safetensors version",
    "Accelerate version",
    "DeepSpeed version",
    "PyTorch version (accelerator?)",
    "Tensorflow version (GPU?)",
}
_ACC_ONLY = {"`Accelerate` version", "Numpy version", "`accelerate` bash location", "System RAM", "PyTorch version"}

# a dotted ds_report line ("torch version .... 2.4.0", "cpu_adam ..... [NO] ..... [OKAY]"): never prose.
# env_report.py pads name + dots to a fixed width (max_dots 33 for the environment rows, 23 for op rows),
# which tells these rows apart from an ellipsis in prose
_DS_ANY = re.compile(r"^(\S.*?) (\.{2,}) ")
_DS_WIDTHS = (23 + 1, 33 + 1)
# prose: a package name (not part of a longer name such as sentence-transformers or torchvision), then a
# version joined by nothing, "==", "=", ":", "-", "v", "version (is)", "(的)版本(号)(是/为/:)", "用的"...
_JOIN = (
    r"(?:\s*(?:==|=|:|：)\s*"
    r"|\s*-(?=v?\d)"
    r"|\s+(?:version|ver\.?)(?:\s+is)?\s*[:=]?\s*"
    r"|\s*(?:的)?\s*版本(?:号)?\s*(?:是|为|[:：=])?\s*"
    r"|\s*)"
)
# right after a prose version: a second version for the same name makes it ambiguous
_MORE = re.compile(rf"(?i)\s*(?:->|→|=>|~|/|,|or|and|to|vs\.?|或|或者|到|和|还是|升级到|换成|->)\s*({_VER})\b")


@functools.lru_cache(maxsize=4)
def _prose_re(names: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(sorted([*names, *ALIASES, *FACTS_IN_PROSE], key=len, reverse=True))
    return re.compile(
        rf"(?i)(?<![A-Za-z0-9_\-.@])({alts})(?![A-Za-z_.])(?!-(?!v?\d)){_JOIN}({_VER})(?:\.[x*])?(?![A-Za-z0-9_+\-]|\.[A-Za-z0-9])"
    )


def versions_from_text(text: str, origin: str = "query") -> Versions:
    """Every version pasted or named in ``text``: tool output first, then prose (see the module doc).

    ``origin`` says where the text came from ("query" or "attachment") for ``merge``.
    """
    out = Versions()
    lines = _ANSI.sub("", text or "").splitlines()
    used: set[int] = set()  # lines read as tool output: not read again as prose
    for pin in _tool_output(lines, origin, used):
        out._add(pin)
    prose: dict[str, list[Pin]] = {}
    for n, line in enumerate(lines, 1):
        if n - 1 in used:
            continue
        for pin in _prose(line, n, origin):
            prose.setdefault(pin.name, []).append(pin)
    for name, pins in prose.items():
        distinct = {p.public for p in pins}
        if any(not _compatible(a, b) for a in distinct for b in distinct):
            out.ambiguous[name] = pins
            continue
        first: dict[str, Pin] = {}
        for pin in pins:  # one pin per version written: the first mention says where it was read
            first.setdefault(pin.version, pin)
        for pin in first.values():
            out._add(pin)
    return out


def _tool_output(lines: list[str], origin: str, used: set[int]) -> Iterator[Pin]:
    """Pins from tool output; every line recognised as tool output goes into ``used`` (not read as prose)."""
    i = 0
    while i < len(lines):
        line = lines[i]
        if _LIST_HEADER.match(line) and i + 1 < len(lines) and _LIST_RULE.match(lines[i + 1]):
            used.update((i, i + 1))
            j = i + 2
            # the table ends at the first line that is not "name version ..." (pip prints only valid versions)
            while j < len(lines) and (m := _LIST_ROW.match(lines[j])) and _is_version(m.group(2)):
                used.add(j)
                yield from _pins_for(m.group(1), m.group(2), "pip-list", lines[j], j + 1, origin)
                j += 1
            i = j
            continue
        if _ENV_ITEM.match(line):
            j = i
            block: list[tuple[int, str, str]] = []
            while j < len(lines):
                m = _ENV_ITEM.match(lines[j])
                if m:
                    if block and m.group(1) in ("`transformers` version", "`Accelerate` version"):
                        break  # the next tool's output starts here
                    block.append((j, m.group(1), m.group(2)))
                elif not (lines[j][:1] in ("\t", " ") and lines[j].strip()):  # not a continuation line
                    break
                j += 1
            yield from _env_block(block, lines, origin, used)
            i = max(j, i + 1)
            continue
        m = _DS.match(line)
        if m:
            used.add(i)
            key, value = m.group(1), m.group(2)
            name = {"torch version": "torch", "deepspeed info": "deepspeed", "torch cuda version": "cuda"}.get(
                key, "nvcc"
            )
            value = value.split(",", 1)[0] if key == "deepspeed info" else value
            if name == "nvcc":  # "nvcc version ..... 12.1"
                found = re.search(r"(\d+\.\d+(?:\.\d+)?)", value)
                value = found.group(1) if found else ""
            yield from _pins_for(name, value, "ds_report", line, i + 1, origin, raw_name=False)
        elif (d := _DS_ANY.match(line)) and len(d.group(1)) + 1 + len(d.group(2)) in _DS_WIDTHS:
            used.add(i)
        elif m := _FREEZE.match(line):
            pins = _pins_for(m.group(1), m.group(2), "pip-freeze", line, i + 1, origin)
            # pip prints full versions of these packages: "accelerate==0.34" alone on a line was typed (prose)
            if all(p.name in FACTS or len(version_key(p.version).release) >= 3 for p in pins):
                used.add(i)
                yield from pins
        i += 1


def _env_block(block: list[tuple[int, str, str]], lines: list[str], origin: str, used: set[int]) -> Iterator[Pin]:
    keys = {k for _, k, _ in block}
    tf, acc = bool(keys & _TF_ONLY), bool(keys & _ACC_ONLY)
    if tf == acc:  # neither (or both: a cut-and-mixed paste): whose output it is would be a guess
        return
    source, table = ("transformers-env", _TF_KEYS) if tf else ("accelerate-env", _ACC_KEYS)
    used.update(range(block[0][0], block[-1][0] + 1))
    for j, key, value in block:
        name = table.get(key)
        if name is None or not value:
            continue
        first = value.split()[0]  # "2.4.0+cu121 (True)", "1.0.1 (not in expected version range)"
        yield from _pins_for(name, first, source, lines[j], j + 1, origin, raw_name=False)


def _pins_for(
    name: str, value: str, source: str, line: str, line_no: int, origin: str, raw_name: bool = True
) -> list[Pin]:
    """The pin (and the facts) one line gives: our packages, nvidia-nccl-cuXX as the NCCL fact."""
    if raw_name:
        norm = re.sub(r"[-_.]+", "-", name.lower())
        if _NCCL_DIST.match(norm):
            ver = clean_version(value)
            return [Pin("nccl", ver, source, line.strip(), line_no, origin)] if ver else []
        pkg = norm if norm in packages() else None  # tool output spells the distribution: no aliases
    else:
        pkg = name
    ver = clean_version(value) if pkg else None
    if not pkg or not ver:
        return []
    pins = [Pin(pkg, ver, source, line.strip(), line_no, origin)]
    if pkg == "torch" and (cu := _cuda_of(ver)):
        pins.append(Pin("cuda", cu, source, line.strip(), line_no, origin))
    return pins


def _prose(line: str, n: int, origin: str) -> Iterator[Pin]:
    for m in _prose_re(packages()).finditer(line):
        raw = m.group(1).lower()
        name = raw if raw in FACTS else canonical_package(raw)
        ver = clean_version(m.group(2))
        if name is None or ver is None:
            continue
        where = _around(line, m.start(), m.end())
        yield Pin(name, ver, "query", where, n, origin)  # (a +cu121 in prose is not made a CUDA fact: the user's
        # "CUDA 12.4" next to it is usually the toolkit, and the two would look ambiguous)
        follow = _MORE.match(line, m.end())
        if follow and (v2 := clean_version(follow.group(1))):
            yield Pin(name, v2, "query", where, n, origin)  # "4.46 or 4.47", "4.46 to 4.48": two, so ambiguous


def _around(line: str, start: int, end: int, room: int = 80) -> str:
    """The line a prose version was read from, cut to ``room`` characters each side of it when it is long."""
    if len(line) <= 2 * room + (end - start):
        return line.strip()
    lo, hi = max(0, start - room), min(len(line), end + room)
    return ("…" if lo else "") + line[lo:hi].strip() + ("…" if hi < len(line) else "")


def _cuda_of(torch_version: str) -> str | None:
    """torch 2.4.0+cu121 was built with CUDA 12.1."""
    if "+" not in torch_version:
        return None
    cu = _CU_LABEL.match(torch_version.split("+", 1)[1])
    return f"{cu.group(1)[:-1]}.{cu.group(1)[-1]}" if cu else None


# ---------------------------------------------------------------- the running interpreter


def versions_from_environment() -> Versions:
    """The installed versions (importlib.metadata; nothing is imported), python, torch's CUDA, NCCL."""
    import importlib.metadata as md
    import platform

    out = Versions()
    for pkg in packages():
        try:
            ver = md.version(pkg)
        except md.PackageNotFoundError:
            continue
        cleaned = clean_version(ver)
        if cleaned:
            out.pins[pkg] = Pin(
                pkg, cleaned, "environment", f"importlib.metadata.version({pkg!r})", None, "environment"
            )
    py = platform.python_version()
    out.facts["python"] = Pin("python", py, "environment", "platform.python_version()", None, "environment")
    cuda = _torch_cuda(md)
    if cuda:
        out.facts["cuda"] = Pin("cuda", cuda, "environment", "torch/version.py: cuda", None, "environment")
    for dist in ("nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl-cu13"):
        try:
            ver = md.version(dist)
        except md.PackageNotFoundError:
            continue
        if cleaned := clean_version(ver):
            out.facts["nccl"] = Pin(
                "nccl", cleaned, "environment", f"importlib.metadata.version({dist!r})", None, "environment"
            )
            break
    return out


def _torch_cuda(md: Any) -> str | None:
    """torch.version.cuda without importing torch: read the assignment in torch/version.py."""
    try:
        path = md.distribution("torch").locate_file("torch/version.py")
        text = path.read_text(encoding="utf-8")
    except Exception:  # noqa: BLE001 - no torch, an odd install: the fact is simply unknown
        return None
    m = re.search(r"""^cuda(?:\s*:\s*[^=]+)?\s*=\s*['"]([\d.]+)['"]""", text, re.M)
    return m.group(1) if m else None


# ---------------------------------------------------------------- merging


def merge(*versions: Versions) -> Versions:
    """One Versions from several: per name the pin of the strongest origin wins (flag > attachment >
    query > environment; tool output > prose within an origin; the earlier argument on a tie).
    Incompatible pins that lose are kept in ``conflicts``; compatible ones ("4.46" and "4.46.3") are not
    conflicts."""
    out = Versions()
    for v in versions:
        out.conflicts.extend(v.conflicts)
        for name, pins in v.ambiguous.items():
            out.ambiguous.setdefault(name, []).extend(pins)
    pins = [p for v in versions for p in (*v.pins.values(), *v.facts.values())]
    order = sorted(range(len(pins)), key=lambda i: (tuple(-x for x in _rank(pins[i])), i))
    for i in order:
        out._add(pins[i])
    for name in list(out.ambiguous):
        if name in out.pins or name in out.facts:
            del out.ambiguous[name]  # another source settled it
    return out


def with_origin(versions: Versions, origin: str) -> Versions:
    """The same pins, marked as coming from ``origin`` (one of ORIGINS)."""
    if origin not in ORIGINS:
        raise ValueError(f"unknown origin {origin!r}: use {', '.join(ORIGINS)}")
    fix = lambda p: replace(p, origin=origin)  # noqa: E731
    return Versions(
        {k: fix(p) for k, p in versions.pins.items()},
        {k: fix(p) for k, p in versions.facts.items()},
        [Conflict(c.name, fix(c.kept), fix(c.dropped)) for c in versions.conflicts],
        {k: [fix(p) for p in v] for k, v in versions.ambiguous.items()},
    )


# ---------------------------------------------------------------- matching


def _series(version: str, partial: bool | None = None) -> tuple[Version, bool]:
    v = version_key(version)
    if partial is None:
        partial = len(v.release) < 3
    return v, partial


def satisfies(version: str | Pin, specifier: str | SpecifierSet, *, strict: bool = False) -> bool:
    """Does ``version`` meet ``specifier`` (">=0.14,<0.16"; "" matches everything)?

    Local labels are ignored ("2.4.0+cu121" is 2.4.0); pre-releases count as releases (4.47.0.dev0
    meets >=4.46). A partial version (fewer than three numbers, "4.46") stands for the series 4.46.x:
    it satisfies when some release of the series does (``strict=True``: when every release does). The
    series is tested at X.Y.0 ... X.Y.(k+1), k being the highest patch the specifier names in X.Y, which
    covers every boundary a specifier can draw inside the series. Raises ValueError on a bad specifier.
    """
    if isinstance(version, Pin):
        v, partial = _series(version.version, version.partial)
    else:
        v, partial = _series(version)
    try:
        spec = specifier if isinstance(specifier, SpecifierSet) else SpecifierSet(specifier or "")
    except InvalidSpecifier as e:
        raise ValueError(f"invalid version specifier {specifier!r}: {e}") from None
    if not partial:
        return spec.contains(v, prereleases=True)
    points = _series_points(v, spec)
    hits = [spec.contains(p, prereleases=True) for p in points]
    return all(hits) if strict else any(hits)


def _series_points(v: Version, spec: SpecifierSet) -> list[Version]:
    head = v.release
    top = 0
    for s in spec:
        ver = s.version.rstrip(".*")
        try:
            sv = version_key(ver)
        except InvalidVersion:
            continue
        if sv.release[: len(head)] == head and len(sv.release) > len(head):
            top = max(top, sv.release[len(head)])
    base = ".".join(map(str, head))
    return [Version(f"{base}.{k}") for k in range(top + 2)]


def pick_release(version: str | Pin, releases: Iterable[str]) -> str | None:
    """The recorded release a user's version maps to: the newest one at or below it (a partial version
    "4.46" counts as its newest 4.46.x); the oldest when the user's is older than all; None when there are none."""
    rel = sorted(releases, key=version_key)
    if not rel:
        return None
    if isinstance(version, Pin):
        v, partial = _series(version.version, version.partial)
    else:
        v, partial = _series(version)
    if partial:
        head = v.release
        below = [r for r in rel if version_key(r).release[: len(head)] <= head]
    else:
        below = [r for r in rel if version_key(r) <= v]
    return below[-1] if below else rel[0]
