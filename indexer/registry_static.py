"""A static reader of an unpacked release: names, types, defaults, docs, lines and deprecations read from the
source by ``ast`` alone. Nothing is imported, so any release of any package can be read with this Python, and
nothing is guessed: a value that is not a literal is recorded as the expression the source writes
(``default_is_expr``), and a name the reader cannot place is left out, never made up.

What it reads (indexer/registry_timeline.py says where to look per package):

* **fields of a class** (:meth:`Tree.class_fields`): dataclasses (``field(default=..., default_factory=...,
  metadata={"help": ...})``) and pydantic models, v1 and v2 (``Field(default, alias=..., description=...,
  validation_alias=AliasChoices(...), deprecated=..., json_schema_extra={...})``, ``Annotated[T, Field(...)]``,
  annotated defaults, ``Optional[...]``), with the fields of every base class and mixin defined inside the same
  package (imports, relative imports, star imports and lazy ``_import_structure`` tables are resolved inside the
  package). A base from another package is not copied: it is named (``transformers:TrainingArguments``) in
  :meth:`Tree.external_bases`.
* **pydantic config trees** (:meth:`Tree.walk_model`): a model's fields, and the fields of every model a field's
  type names, as dotted paths (a field's alias is the key a user writes, as pydantic reads it).
* **keys read from a config dict** (:class:`DictReads`): starting at a function or class that receives the user's
  dict, every ``d[K]``, ``d.get(K, default)``, ``K in d`` and every call that passes ``d`` (or a part of it) on
  to a function, a class or a pydantic model of the package (``Model(**d.get(K, {}))``), with the constants
  resolved from the modules that define them (``from .constants import *``).
* **argparse flags** (:meth:`Tree.argparse_flags`): the ``add_argument`` calls of a named function (or of a
  module's top level), with the option strings a parser class of the package adds (its ``add_argument`` /
  ``add_argument_group`` / ``_add_action`` overrides and its action classes' ``__init__``, read statement by
  statement: accelerate's ``--num-processes`` beside ``--num_processes``).
* **signatures** (:meth:`Tree.signature`): a function's or class's ``__init__`` parameters and their defaults.

Each name is an :class:`Item`: name, type as written, default (JSON text of a literal, else the expression text),
doc (the first sentence of its help / description / docstring), source file and line (relative to the release's
root, as in site-packages), aliases (pydantic's ``validation_alias``, else ``alias``; never
``serialization_alias``, which names a dump's key), and deprecation where the source states it: a field whose
help or metadata says it is deprecated, pydantic's ``deprecated=`` / DeepSpeed's ``json_schema_extra={"deprecated":
True, "new_param": ...}``, a validator of that field that says so, or a warning in the class's code such as
"`X` is deprecated ... use `Y` instead", with the name it says to write instead (:func:`replacement_in`; the
timeline keeps it only where it is a name of the same class in that release).
"""

from __future__ import annotations

import ast
import inspect
import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# bases that make a class a dataclass / model but are no one's parameters: never reported as "inherits"
FRAMEWORK_ROOTS = {
    "pydantic",
    "pydantic_core",
    "dataclasses",
    "typing",
    "typing_extensions",
    "abc",
    "enum",
    "builtins",
    "collections",
    "argparse",
}
_DEPRECATED_RX = re.compile(r"\bdeprecated\b", re.I)
# "`x` is deprecated", "--x has been deprecated", "'x' is now deprecated", "x is deprecated and will be removed"
_WARN_RX = re.compile(
    r"[`'\"]?(?:--)?([A-Za-z_][\w.]*)[`'\"]?\s+(?:argument\s+|parameter\s+|option\s+|field\s+|key\s+)?"
    r"(?:is|has\s+been|was|are|is\s+now|have\s+been)\s+deprecated",
    re.I,
)
# a name the text gives as the one to write instead: quoted (`y`, 'y', "y", --y inside), the quote closing right
# after it (so `attn: eager` or `--optim adafactor`, a value to set, is none), or bare before "instead" or the
# end of a clause ("use rl_beta instead", "use offload_optimizer instead"); a parenthesis may follow ("`y` (str)")
_NAME_AFTER = (
    r"(?:[`'\"](?:--)?(?P<q>[A-Za-z_]\w*)[`'\"]|(?:--)?(?P<u>[A-Za-z_]\w*))"
    r"(?=(?:\s*\([^)]*\))?(?:\s+instead\b|\s+is\s+preferred\b|\s*[.,;!)]|\s*$))"
)
# after words that can only name the new name ("renamed to", "in favor of"): any word not followed by a value
_NAME_NEXT = r"(?:[`'\"](?:--)?(?P<q>[A-Za-z_]\w*)[`'\"]|(?:--)?(?P<u>[A-Za-z_]\w*)(?![\w:=`'\"]))"
_RENAME_RXS = (
    re.compile(r"\bdeprecated\s+alias\s+(?:of|for)\s+" + _NAME_NEXT, re.I),  # "Deprecated alias of `y`"
    re.compile(r"\b(?:renamed\s+to|in\s+favou?r\s+of|replaced\s+(?:by|with))\s+" + _NAME_NEXT, re.I),
    re.compile(r"\bthe\s+use\s+of\s+" + _NAME_AFTER, re.I),  # "the use of `--y` is preferred"
    re.compile(r"\buse\s+" + _NAME_AFTER, re.I),  # "use `y` instead", "please use y instead"
)
_NO_LONGER_RX = re.compile(r"\bno longer (?:supported|used)\b", re.I)
_REMOVED_RX = re.compile(r"\b(?:has been|was|have been|is) removed\b|\bno longer supported\b", re.I)


@dataclass
class Item:
    """One name read from the source."""

    name: str
    kind: str = "field"
    type: str = ""
    default: str | None = None  # JSON text of a literal default; the expression text when default_is_expr
    default_is_expr: bool = False
    required: bool = False  # no default at all
    doc: str | None = None
    file: str = ""
    line: int = 0
    aliases: list[str] = field(default_factory=list)
    deprecated: str | None = None  # the source's words
    replacement: str | None = None
    declared_in: str | None = None  # the class whose body declares it
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


# ---------------------------------------------------------------- text helpers


def first_sentence(text: str | None, limit: int = 300) -> str | None:
    """The first sentence of the first paragraph, whitespace collapsed (at most ``limit`` characters)."""
    if not text or not isinstance(text, str):
        return None
    para = inspect.cleandoc(text).strip().split("\n\n")[0]
    para = re.sub(r"\s+", " ", para).strip()
    m = re.search(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)[.!?](?=\s+[A-Z(`\[]|\s*$)", para)
    s = para[: m.end()] if m else para
    if len(s) > limit:
        s = s[: limit - 3].rstrip() + "..."
    return s or None


def sentence_with(text: str, rx: re.Pattern) -> str | None:
    """The sentence of ``text`` that matches ``rx`` (whitespace collapsed), for a deprecation message."""
    flat = re.sub(r"\s+", " ", text).strip()
    for s in re.split(r"(?<=[.!?])\s+(?=[A-Z`(\[])", flat):
        if rx.search(s):
            return s[:300]
    return None


def replacement_in(text: str | None, name: str) -> str | None:
    """The name a deprecation text says to write instead of ``name`` ("`x` is deprecated, use `y` instead",
    "Deprecated alias of `y`", "the use of `--y` is preferred", "in favor of `y`"), the earliest one the text
    states; None when it names a value to set, an expression or nothing. The caller checks that it is a name
    of the same class in that release (registry_timeline.merge)."""
    if not text:
        return None
    flat = re.sub(r"\s+", " ", text)
    best: tuple[int, str] | None = None
    for rx in _RENAME_RXS:
        for m in rx.finditer(flat):
            y = m.group("q") or m.group("u")
            if y and y != name and (best is None or m.start() < best[0]):
                best = (m.start(), y)
            break
    return best[1] if best else None


def json_text(value: Any) -> str:
    """A literal as JSON text, the way indexer/registry_build.py writes defaults (sorted keys; an integral float
    of 1e4 or more as an int: ``5e8`` -> ``500000000``), never shortened."""
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e4:
        value = int(value)
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)
    try:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


class NotLiteral(Exception):
    """The expression's value cannot be known without running the code."""


_NO_VALUE = object()


# ---------------------------------------------------------------- the source tree


@dataclass(frozen=True)
class Ref:
    """What a name is bound to: a class / function / value / module of the package, or an external name."""

    kind: str  # class | func | value | module | external
    module: str  # dotted module (for external: the module imported from)
    node: Any = None  # ast node (class / func / the value expression)
    name: str = ""

    @property
    def external_id(self) -> str:
        """``transformers:TrainingArguments`` for a class imported from another package."""
        return f"{self.module.split('.')[0]}:{self.name}"


class Tree:
    """The ``.py`` files of one package under ``root`` (``root/<package>/...``), parsed on demand."""

    def __init__(self, root: Path, package: str):
        self.root = Path(root)
        self.package = package
        self.files: dict[str, Path] = {}
        base = self.root / package
        for p in sorted(base.rglob("*.py")):
            rel = p.relative_to(self.root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if all(s.isidentifier() for s in parts):
                self.files[".".join(parts)] = p
        self._trees: dict[str, ast.Module | None] = {}
        self._ns: dict[str, tuple[dict[str, Ref], list[str]]] = {}
        # (module, name) -> every binding of a name that the module binds in alternatives (if / else, try / except)
        self._alternatives: dict[tuple[str, str], list[Ref]] = {}
        self.errors: list[str] = []

    # ---- files and modules

    def relfile(self, mod: str) -> str:
        return self.files[mod].relative_to(self.root).as_posix()

    def parse(self, mod: str) -> ast.Module | None:
        if mod not in self._trees:
            tree = None
            path = self.files.get(mod)
            if path is not None:
                try:
                    tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
                except (SyntaxError, ValueError) as e:
                    self.errors.append(f"{self.relfile(mod)}: not parsed ({type(e).__name__}: {e})")
            self._trees[mod] = tree
        return self._trees[mod]

    def is_package(self, mod: str) -> bool:
        return mod in self.files and self.files[mod].name == "__init__.py"

    def _absolute(self, mod: str, level: int, target: str | None) -> str:
        if level == 0:
            return target or ""
        parts = mod.split(".")
        if not self.is_package(mod):
            parts = parts[:-1]
        if level > 1:
            parts = parts[: len(parts) - (level - 1)]
        return ".".join([*parts, *([target] if target else [])])

    # ---- module namespaces

    def namespace(self, mod: str) -> tuple[dict[str, Ref], list[str]]:
        """The module's top-level names, and the modules it star-imports (in order)."""
        if mod in self._ns:
            return self._ns[mod]
        ns: dict[str, Ref] = {}
        stars: list[str] = []
        self._ns[mod] = (ns, stars)
        tree = self.parse(mod)
        if tree is None:
            return ns, stars

        def bind(name: str, ref: Ref, nested: bool) -> None:
            if nested and name in ns:
                # first binding of an if / try alternative wins; the others are kept as alternatives
                self._alternatives.setdefault((mod, name), [ns[name]]).append(ref)
                return
            ns[name] = ref

        def visit(stmts: list[ast.stmt], nested: bool) -> None:
            for node in stmts:
                if isinstance(node, ast.ClassDef):
                    bind(node.name, Ref("class", mod, node, node.name), nested)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    bind(node.name, Ref("func", mod, node, node.name), nested)
                elif isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            bind(t.id, Ref("value", mod, node.value, t.id), nested)
                    _lazy_table(node, mod)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                    bind(node.target.id, Ref("value", mod, node.value, node.target.id), nested)
                elif isinstance(node, ast.ImportFrom):
                    src = self._absolute(mod, node.level, node.module)
                    for a in node.names:
                        if a.name == "*":
                            stars.append(src)
                            continue
                        bind(a.asname or a.name, Ref("import", src, None, a.name), nested)
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.asname:
                            bind(a.asname, Ref("module", a.name, None, a.name), nested)
                        else:
                            top = a.name.split(".")[0]
                            bind(top, Ref("module", top, None, top), nested)
                elif isinstance(node, ast.If):
                    visit(node.body, True)
                    visit(node.orelse, True)
                elif isinstance(node, ast.Try):
                    visit(node.body, True)
                    for h in node.handlers:
                        visit(h.body, True)
                    visit(node.orelse, True)
                    visit(node.finalbody, True)
                elif isinstance(node, ast.With):
                    visit(node.body, nested)
                elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
                    _lazy_call(node.value, mod)

        def _lazy_names(value: ast.AST) -> list[str]:
            if isinstance(value, (ast.List, ast.Tuple)):
                return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            return []

        def _lazy_table(node: ast.Assign, mod: str) -> None:
            # transformers-style lazy modules: _import_structure = {"sub": ["A", "B"]}; _import_structure["x"] = [...]
            for t in node.targets:
                if isinstance(t, ast.Name) and t.id == "_import_structure" and isinstance(node.value, ast.Dict):
                    for k, v in zip(node.value.keys, node.value.values, strict=False):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            for n in _lazy_names(v):
                                bind(n, Ref("import", self._absolute(mod, 1, k.value), None, n), True)
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "_import_structure"
                    and isinstance(t.slice, ast.Constant)
                    and isinstance(t.slice.value, str)
                ):
                    for n in _lazy_names(node.value):
                        bind(n, Ref("import", self._absolute(mod, 1, t.slice.value), None, n), True)

        def _lazy_call(call: ast.Call, mod: str) -> None:
            f = call.func
            if (
                isinstance(f, ast.Attribute)
                and f.attr in ("extend", "append")
                and isinstance(f.value, ast.Subscript)
                and isinstance(f.value.value, ast.Name)
                and f.value.value.id == "_import_structure"
                and isinstance(f.value.slice, ast.Constant)
                and call.args
            ):
                names = _lazy_names(call.args[0]) if f.attr == "extend" else _lazy_names(ast.List(elts=call.args))
                for n in names:
                    bind(n, Ref("import", self._absolute(mod, 1, f.value.slice.value), None, n), True)

        visit(tree.body, False)
        return ns, stars

    def exported(self, mod: str) -> list[str]:
        """The names a package module exports: its imports, ``__all__`` and lazy ``_import_structure`` names."""
        ns, _ = self.namespace(mod)
        out = {n for n, r in ns.items() if r.kind in ("import", "class") and not n.startswith("_")}
        all_ref = ns.get("__all__")
        if all_ref is not None and all_ref.kind == "value":
            try:
                out |= {str(x) for x in self.literal(mod, all_ref.node)}
            except (NotLiteral, TypeError):
                pass
        return sorted(out)

    def in_package(self, mod: str) -> bool:
        return mod == self.package or mod.startswith(self.package + ".")

    def resolve(self, mod: str, name: str, _seen: frozenset = frozenset()) -> Ref | None:
        """What ``name`` is in module ``mod``: followed through imports inside the package."""
        key = (mod, name)
        if key in _seen or len(_seen) > 40:
            return None
        seen = _seen | {key}
        if not self.in_package(mod):
            return Ref("external", mod, None, name)
        if mod not in self.files:
            return None
        ns, stars = self.namespace(mod)
        ref = ns.get(name)
        if ref is None:
            for s in stars:
                if not self.in_package(s):
                    continue
                r = self.resolve(s, name, seen)
                if r is not None:
                    return r
            if f"{mod}.{name}" in self.files:
                return Ref("module", f"{mod}.{name}", None, name)
            ext = next((s for s in stars if not self.in_package(s)), None)
            return Ref("external", ext, None, name) if ext else None
        if ref.kind == "import":
            if not self.in_package(ref.module):
                return Ref("external", ref.module, None, ref.name)
            if ref.module in self.files:
                sub_ns, _ = self.namespace(ref.module)
                if ref.name in sub_ns or any(self.in_package(s) for s in self.namespace(ref.module)[1]):
                    r = self.resolve(ref.module, ref.name, seen)
                    if r is not None:
                        return r
            if f"{ref.module}.{ref.name}" in self.files:
                return Ref("module", f"{ref.module}.{ref.name}", None, ref.name)
            return self.resolve(ref.module, ref.name, seen) if ref.module in self.files else None
        if ref.kind == "module":
            if self.in_package(ref.module):
                return ref if ref.module in self.files else None
            return Ref("external", ref.module, None, "")
        if ref.kind == "value" and isinstance(ref.node, (ast.Name, ast.Attribute)):
            r = self.resolve_expr(mod, ref.node, seen)
            if r is not None and r.kind in ("class", "func", "module", "external"):
                return r
        return ref

    def resolve_expr(self, mod: str, node: ast.AST, _seen: frozenset = frozenset()) -> Ref | None:
        """A ``Name`` or dotted ``Attribute`` expression, resolved."""
        if isinstance(node, ast.Name):
            return self.resolve(mod, node.id, _seen)
        if isinstance(node, ast.Attribute):
            base = self.resolve_expr(mod, node.value, _seen)
            if base is None:
                return None
            if base.kind == "module":
                return self.resolve(base.module, node.attr, _seen)
            if base.kind == "external":
                return Ref("external", f"{base.module}.{base.name}".strip("."), None, node.attr)
            if base.kind == "class":
                for stmt in base.node.body:
                    if isinstance(stmt, ast.ClassDef) and stmt.name == node.attr:
                        return Ref("class", base.module, stmt, stmt.name)
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == node.attr:
                        return Ref("func", base.module, stmt, stmt.name)
                    if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == node.attr for t in stmt.targets
                    ):
                        return Ref("value", base.module, stmt.value, node.attr)
                    if (
                        isinstance(stmt, ast.AnnAssign)
                        and isinstance(stmt.target, ast.Name)
                        and stmt.target.id == node.attr
                        and stmt.value is not None
                    ):
                        return Ref("value", base.module, stmt.value, node.attr)
        return None

    def resolve_dotted(self, dotted: str) -> Ref | None:
        """``deepspeed.zero.Init`` from the package root: the longest module prefix, then attributes."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.files:
                ref: Ref | None = Ref("module", mod, None, parts[i - 1])
                for p in parts[i:]:
                    if ref is None:
                        return None
                    if ref.kind == "module":
                        ref = self.resolve(ref.module, p)
                    elif ref.kind == "class":
                        ref = self._class_member(ref, p)
                    else:
                        return None
                return ref
        return None

    def _class_member(self, ref: Ref, name: str) -> Ref | None:
        for stmt in ref.node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
                return Ref("func" if not isinstance(stmt, ast.ClassDef) else "class", ref.module, stmt, stmt.name)
        return None

    def find_classes(self, name: str, prefer: Iterable[str] = (), first: bool = False) -> list[Ref]:
        """Every class called ``name`` in the package, those in the modules of ``prefer`` (paths or dotted
        module prefixes) first, then by module name. ``first``: stop at the first preferred place that has
        one (the other modules are parsed only when none has it)."""
        prefs = list(prefer)
        if first:
            for p in prefs:
                for mod in sorted(self.files):
                    rel = self.relfile(mod)
                    if rel == p or rel.startswith(p.rstrip("/") + "/") or mod == p or mod.startswith(p + "."):
                        tree = self.parse(mod)
                        for node in tree.body if tree else []:
                            if isinstance(node, ast.ClassDef) and node.name == name:
                                return [Ref("class", mod, node, name)]
        found = []
        for mod in sorted(self.files):
            tree = self.parse(mod)
            if tree is None:
                continue
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and node.name == name:
                    found.append(Ref("class", mod, node, name))

        def rank(r: Ref) -> tuple[int, str]:
            rel = self.relfile(r.module)
            for i, p in enumerate(prefs):
                if rel == p or rel.startswith(p.rstrip("/") + "/") or r.module == p or r.module.startswith(p + "."):
                    return i, r.module
            return len(prefs), r.module

        return sorted(found, key=rank)

    # ---- literals

    def literal(self, mod: str, node: ast.AST, depth: int = 0) -> Any:
        """The value of a literal expression (constants, containers, arithmetic, names bound to literals,
        enum members, ``int(...)`` and int / float / str subclasses of the package); NotLiteral otherwise."""
        if depth > 12 or node is None:
            raise NotLiteral
        lit = lambda n: self.literal(mod, n, depth + 1)  # noqa: E731
        if isinstance(node, ast.Constant):
            if node.value is Ellipsis:
                raise NotLiteral
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            vals = [lit(e) for e in node.elts]
            return sorted(vals, key=repr) if isinstance(node, ast.Set) else vals
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise NotLiteral
            return {lit(k): lit(v) for k, v in zip(node.keys, node.values, strict=False)}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            v = lit(node.operand)
            return -v if isinstance(node.op, ast.USub) else (+v if isinstance(node.op, ast.UAdd) else not v)
        if isinstance(node, ast.BinOp):
            a, b = lit(node.left), lit(node.right)
            ops = {
                ast.Add: lambda: a + b,
                ast.Sub: lambda: a - b,
                ast.Mult: lambda: a * b,
                ast.Div: lambda: a / b,
                ast.FloorDiv: lambda: a // b,
                ast.Mod: lambda: a % b,
                ast.Pow: lambda: a**b if abs(b) < 100 else _raise(),
            }
            fn = ops.get(type(node.op))
            if fn is None:
                raise NotLiteral
            try:
                return fn()
            except Exception:  # noqa: BLE001
                raise NotLiteral from None
        if isinstance(node, ast.JoinedStr):
            raise NotLiteral
        if isinstance(node, (ast.Name, ast.Attribute)):
            ref = self.resolve_expr(mod, node)
            if ref is not None and ref.kind == "value":
                return self.literal(ref.module, ref.node, depth + 1)
            raise NotLiteral
        if isinstance(node, ast.Call) and not node.keywords and len(node.args) <= 2:
            fname = node.func.id if isinstance(node.func, ast.Name) else None
            conv = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "tuple": list, "dict": dict}
            target = conv.get(fname) if fname else None
            if target is None and isinstance(node.func, (ast.Name, ast.Attribute)):
                ref = self.resolve_expr(mod, node.func)
                if ref is not None and ref.kind == "class":
                    for b in ref.node.bases:  # an int / float / str subclass of the package (DeepSpeed's pp_int)
                        if isinstance(b, ast.Name) and b.id in ("int", "float", "str"):
                            target = conv[b.id]
            if target is None:
                raise NotLiteral
            if not node.args:
                return target()
            try:
                return target(lit(node.args[0]))
            except (TypeError, ValueError):
                raise NotLiteral from None
        raise NotLiteral

    def value_text(self, mod: str, node: ast.AST | None) -> tuple[str | None, bool]:
        """(JSON text of the literal, False) or (the expression as written, True)."""
        if node is None:
            return None, False
        try:
            return json_text(self.literal(mod, node)), False
        except NotLiteral:
            return ast.unparse(node), True

    def text(self, mod: str, node: ast.AST | None) -> str | None:
        """A string as the source writes it: a literal (concatenations folded), or an f-string with its
        ``{expressions}`` left as written."""
        if node is None:
            return None
        if isinstance(node, ast.JoinedStr):
            from indexer.registry_sites import joined_text

            return joined_text(node)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = self.text(mod, node.left), self.text(mod, node.right)
            return (a or "") + (b or "") if a is not None or b is not None else None
        try:
            v = self.literal(mod, node)
        except NotLiteral:
            return None
        return v if isinstance(v, str) else None

    # ---- classes

    def bases(self, ref: Ref) -> list[Ref]:
        out = []
        for b in ref.node.bases:
            expr = b.value if isinstance(b, ast.Subscript) else b
            if not isinstance(expr, (ast.Name, ast.Attribute)):
                continue
            r = self.resolve_expr(ref.module, expr)
            if r is None:
                r = Ref("external", "?", None, ast.unparse(expr))
            out.append(r)
        return out

    def mro(self, ref: Ref) -> list[Ref]:
        """The class and its in-package bases, in Python's (C3) order; external bases are left out."""

        def key(r: Ref) -> tuple[str, int]:
            return r.module, r.node.lineno

        def linear(r: Ref, depth: int) -> list[Ref]:
            if depth > 30:
                return [r]
            seqs = [linear(b, depth + 1) for b in self.bases(r) if b.kind == "class"]
            seqs.append([b for b in self.bases(r) if b.kind == "class"])
            out = [r]
            seqs = [list(s) for s in seqs if s]
            while seqs:
                for s in seqs:
                    head = s[0]
                    if not any(key(head) in {key(x) for x in t[1:]} for t in seqs):
                        break
                else:  # inconsistent hierarchy: fall back to depth-first order
                    head = seqs[0][0]
                out.append(head)
                seqs = [[x for x in s if key(x) != key(head)] for s in seqs]
                seqs = [s for s in seqs if s]
            seen, uniq = set(), []
            for r2 in out:
                if key(r2) not in seen:
                    seen.add(key(r2))
                    uniq.append(r2)
            return uniq

        return linear(ref, 0)

    def external_bases(self, ref: Ref) -> list[str]:
        """Bases from other packages over the class's in-package MRO (``transformers:TrainingArguments``), the
        frameworks (pydantic, dataclasses, typing, ...) left out."""
        out: list[str] = []

        def ext(b: Ref) -> str | None:
            if b.kind == "external" and b.module.split(".")[0] not in FRAMEWORK_ROOTS and b.module != "?":
                if b.name not in ("object", "Generic", "BaseModel", "ABC", "Enum"):
                    return b.external_id
            return None

        for r in self.mro(ref):
            for expr, b in zip(r.node.bases, self.bases(r), strict=False):
                eid = ext(b)
                if eid is None:
                    continue
                # a base the module picks at run time (`if USE_MCA: Base = mca.X  else: Base = transformers.X`):
                # every alternative, in source order, joined by " | "
                alts = self._alternatives.get((r.module, expr.id)) if isinstance(expr, ast.Name) else None
                if alts:
                    ids = []
                    for a in alts:
                        ar = (
                            self.resolve_expr(a.module, a.node) if a.kind == "value" else self.resolve(a.module, a.name)
                        )
                        aid = ext(ar) if ar is not None else None
                        if aid and aid not in ids:
                            ids.append(aid)
                    eid = " | ".join(ids) if ids else eid
                if eid not in out:
                    out.append(eid)
        return out

    def is_model(self, ref: Ref) -> bool:
        """A pydantic model: an external ``BaseModel`` (pydantic, pydantic.v1, a re-export) in its MRO."""
        for r in self.mro(ref):
            for b in self.bases(r):
                if b.kind == "external" and b.name == "BaseModel":
                    return True
        return False

    def own_fields(self, ref: Ref) -> list[Item]:
        """The fields the class body declares (annotated assignments), in order."""
        mod, cls = ref.module, ref.node
        out: list[Item] = []
        body = cls.body
        validators = self._validator_messages(ref)
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            ann = stmt.annotation
            ann_text = ann.value if isinstance(ann, ast.Constant) and isinstance(ann.value, str) else ast.unparse(ann)
            if name.startswith("_") or re.match(r"^(typing\.)?ClassVar\b", ann_text) or name == "model_config":
                continue
            item = Item(name=name, type=ann_text, file=self.relfile(mod), line=stmt.lineno, declared_in=cls.name)
            call = stmt.value if isinstance(stmt.value, ast.Call) else None
            fname = self._field_call(mod, call) if call is not None else None
            annotated_field = None
            if isinstance(ann, ast.Subscript) and _call_name_of(ann.value) == "Annotated":
                elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else []
                for e in elts[1:]:
                    if isinstance(e, ast.Call) and self._field_call(mod, e) == "Field":
                        annotated_field = e
            info: dict[str, Any] = {}
            if fname == "field":
                self._dataclass_field(mod, call, item, info)
            elif fname == "Field":
                self._pydantic_field(mod, call, item, info)
            elif stmt.value is None:
                item.required = True
            else:
                item.default, item.default_is_expr = self.value_text(mod, stmt.value)
            if annotated_field is not None:
                keep = (item.default, item.default_is_expr, item.required)
                self._pydantic_field(mod, annotated_field, item, info)
                if stmt.value is not None or annotated_field.args == []:
                    item.default, item.default_is_expr, item.required = keep
            # the attribute docstring (a string right after the field), DeepSpeed's style
            doc_text = info.get("doc")
            if doc_text is None and i + 1 < len(body):
                nxt = body[i + 1]
                if (
                    isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)
                ):
                    doc_text = nxt.value.value
                    info.setdefault("doc_full", doc_text)
            item.doc = first_sentence(doc_text)
            full = info.get("doc_full") or doc_text or ""
            if item.deprecated is None and full and _DEPRECATED_RX.search(full):
                item.deprecated = sentence_with(full, _DEPRECATED_RX)
                m = _DEPRECATED_RX.search(re.sub(r"\s+", " ", full))
                # the deprecation sentence and what follows it ("Deprecated. Use `y` instead.")
                tail = re.sub(r"\s+", " ", full)[max(0, m.start() - 200) : m.end() + 300] if m else ""
                item.replacement = item.replacement or replacement_in(tail, name)
            if item.deprecated is None and name in validators:
                item.deprecated = validators[name][0]
                item.replacement = item.replacement or replacement_in(validators[name][1], name)
            out.append(item)
        return out

    def _field_call(self, mod: str, call: ast.Call) -> str | None:
        """``field`` (dataclasses) or ``Field`` (pydantic, v1 or v2) for a call of one, under any name it is
        imported as (``from pydantic.v1 import Field as V1Field``); else the call's own name."""
        name = _call_name(call)
        if name in ("field", "Field") or not isinstance(call.func, (ast.Name, ast.Attribute)):
            return name
        r = self.resolve_expr(mod, call.func)
        if r is not None and r.kind == "external" and r.name in ("field", "Field"):
            root = r.module.split(".")[0]
            if (root, r.name) in (("dataclasses", "field"), ("pydantic", "Field")):
                return r.name
        return name

    def _dataclass_field(self, mod: str, call: ast.Call, item: Item, info: dict) -> None:
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        if "default" in kw:
            item.default, item.default_is_expr = self.value_text(mod, kw["default"])
        elif "default_factory" in kw:
            item.default, item.default_is_expr = self._factory(mod, kw["default_factory"])
        else:
            item.required = True
        md = kw.get("metadata")
        mdict: dict[str, ast.AST] = {}
        if isinstance(md, ast.Dict):
            mdict = {k.value: v for k, v in zip(md.keys, md.values, strict=False) if isinstance(k, ast.Constant)}
        elif md is not None:
            try:
                val = self.literal(mod, md)
                mdict = {k: ast.Constant(v) for k, v in val.items()} if isinstance(val, dict) else {}
            except NotLiteral:
                pass
        help_text = self.text(mod, mdict.get("help")) if "help" in mdict else None
        info["doc"] = help_text
        info["doc_full"] = help_text
        for k in ("aliases", "alias"):
            if k in mdict:
                try:
                    v = self.literal(mod, mdict[k])
                    item.aliases = sorted({*item.aliases, *([v] if isinstance(v, str) else v)})
                except (NotLiteral, TypeError):
                    pass
        if "choices" in mdict:
            try:
                item.extra["choices"] = self.literal(mod, mdict["choices"])
            except NotLiteral:
                pass
        if "deprecated" in mdict:
            try:
                v = self.literal(mod, mdict["deprecated"])
                if v:
                    item.deprecated = v if isinstance(v, str) else "deprecated (field metadata)"
            except NotLiteral:
                item.deprecated = ast.unparse(mdict["deprecated"])
        if kw.get("init") is not None and isinstance(kw["init"], ast.Constant) and kw["init"].value is False:
            item.extra["init"] = False

    def _pydantic_field(self, mod: str, call: ast.Call, item: Item, info: dict) -> None:
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        if call.args:
            a0 = call.args[0]
            if isinstance(a0, ast.Constant) and a0.value is Ellipsis:
                item.required = True
            else:
                item.default, item.default_is_expr = self.value_text(mod, a0)
        elif "default" in kw:
            d = kw["default"]
            if isinstance(d, ast.Constant) and d.value is Ellipsis:
                item.required = True
            else:
                item.default, item.default_is_expr = self.value_text(mod, d)
        elif "default_factory" in kw:
            item.default, item.default_is_expr = self._factory(mod, kw["default_factory"])
        else:
            item.required = True
        # the keys a user may write besides the field's name: pydantic validates by ``validation_alias`` where
        # one is given (a string, AliasChoices of strings / AliasPaths, an AliasPath of one key), else by
        # ``alias`` (v1 and v2); ``serialization_alias`` names the key of a dump only, never an input
        alias = self.text(mod, kw["alias"]) if "alias" in kw else None
        if alias:
            item.extra["alias"] = alias  # the key walk_model names the field by, as pydantic's field.alias
        if "validation_alias" in kw:
            names = self._alias_names(mod, kw["validation_alias"])
        else:
            names = [alias] if alias else []
        if names:
            item.aliases = sorted({*item.aliases, *names} - {item.name})
        extra = kw.get("json_schema_extra")
        ex: dict[str, ast.AST] = {}
        if isinstance(extra, ast.Dict):
            ex = {k.value: v for k, v in zip(extra.keys, extra.values, strict=False) if isinstance(k, ast.Constant)}
        # pydantic v1 (DeepSpeed 0.14): extra keyword arguments land in field_info.extra
        for k in ("deprecated", "new_param", "set_new_param", "deprecated_msg", "description"):
            if k in kw and k not in ex:
                ex[k] = kw[k]
        desc = self.text(mod, ex.get("description")) if "description" in ex else None
        info["doc"] = desc
        info["doc_full"] = desc
        if "deprecated" in ex:
            node = ex["deprecated"]
            try:
                v = self.literal(mod, node)
            except NotLiteral:
                v = ast.unparse(node)
            if v:
                new = self.text(mod, ex.get("new_param")) if "new_param" in ex else None
                msg = self.text(mod, ex.get("deprecated_msg")) if "deprecated_msg" in ex else None
                item.deprecated = (
                    v
                    if isinstance(v, str)
                    else (msg or ("deprecated" + (f", use {new} instead" if new else "")) + " (Field)")
                )
                item.replacement = new or None
                if "set_new_param" in ex:
                    try:
                        item.extra["set_new_param"] = self.literal(mod, ex["set_new_param"])
                    except NotLiteral:
                        pass
        for b in ("gt", "ge", "lt", "le"):
            if b in kw:
                try:
                    item.extra.setdefault("constraints", {})[b] = self.literal(mod, kw[b])
                except NotLiteral:
                    pass

    def _alias_names(self, mod: str, node: ast.AST) -> list[str]:
        """The input keys a ``validation_alias`` names: a string, ``AliasChoices(...)`` of strings and
        ``AliasPath``s, an ``AliasPath`` of one key (a longer path is a key inside another key: not a name)."""
        if isinstance(node, ast.Call) and _call_name(node) == "AliasChoices":
            return [n for a in node.args for n in self._alias_names(mod, a)]
        if isinstance(node, ast.Call) and _call_name(node) == "AliasPath":
            if len(node.args) == 1:
                s = self.text(mod, node.args[0])
                return [s] if s else []
            return []
        s = self.text(mod, node)
        return [s] if s else []

    def _factory(self, mod: str, node: ast.AST) -> tuple[str | None, bool]:
        """A default_factory's value: ``list`` -> ``[]``, ``lambda: [..]`` -> its literal, else the call text."""
        if isinstance(node, ast.Name) and node.id in ("list", "dict", "set", "tuple"):
            return json_text({"list": [], "dict": {}, "set": [], "tuple": []}[node.id]), False
        if isinstance(node, ast.Lambda):
            return self.value_text(mod, node.body)
        return ast.unparse(node) + "()", True

    def _validator_messages(self, ref: Ref) -> dict[str, tuple[str, str]]:
        """Fields whose pydantic validator says they are deprecated or no longer supported: (its sentence, the
        whole message, where a replacement may follow the sentence)."""
        out: dict[str, tuple[str, str]] = {}
        for stmt in ref.node.body:
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            fields: list[str] = []
            for d in stmt.decorator_list:
                if isinstance(d, ast.Call) and _call_name(d) in ("field_validator", "validator"):
                    fields += [a.value for a in d.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not fields:
                continue
            rx = re.compile(f"{_DEPRECATED_RX.pattern}|{_NO_LONGER_RX.pattern}", re.I)
            for s in self._strings(ref.module, stmt):
                if not rx.search(s):
                    continue
                for f in fields:
                    # the message must name the field: "`type: sharegpt` is deprecated" in the validator of
                    # `datasets` is about a value of it, not about the field
                    if re.search(rf"(?<![\w.]){re.escape(f)}(?!\w)", s):
                        out.setdefault(f, (sentence_with(s, rx) or s[:300], s[:600]))
        return out

    def _strings(self, mod: str, node: ast.AST) -> Iterator[str]:
        for n in ast.walk(node):
            if isinstance(n, ast.JoinedStr):
                t = self.text(mod, n)
                if t:
                    yield t
            elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
                t = self.text(mod, n)
                if t:
                    yield t
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                yield n.value

    def warned_deprecations(self, ref: Ref, names: Iterable[str]) -> dict[str, tuple[str, str | None]]:
        """Names the class's code warns about: "`X` is deprecated ... Use `Y` instead" -> {X: (message, Y)}."""
        wanted = set(names)
        out: dict[str, tuple[str, str | None]] = {}
        for r in self.mro(ref):
            for stmt in r.node.body:
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                texts = list(self._strings(r.module, stmt))
                for s in texts:
                    for m in _WARN_RX.finditer(s):
                        n = m.group(1).rsplit(".", 1)[-1]
                        # "using `EvaluationStrategy` for `eval_strategy` is deprecated": a way of setting the
                        # name (the object of a preposition) is deprecated, not the name
                        if re.search(r"\b(?:for|to|of|in|with|on)\s*$", s[max(0, m.start() - 8) : m.start()], re.I):
                            continue
                        if n in wanted and n not in out:
                            sent = (
                                sentence_with(s[m.start() :], re.compile(r"deprecated", re.I)) or s[m.start() :][:300]
                            )
                            out[n] = (sent, replacement_in(s[m.start() : m.end() + 300], n))
        return out

    def class_fields(self, ref: Ref) -> dict[str, Item]:
        """Every field of the class: its own and those of its in-package bases and mixins (a subclass's
        declaration wins), with the deprecations its code states."""
        fields: dict[str, Item] = {}
        for r in reversed(self.mro(ref)):
            for it in self.own_fields(r):
                fields[it.name] = it
        for name, (msg, new) in self.warned_deprecations(ref, fields).items():
            it = fields[name]
            # the warning wins over a help text that says "deprecated" without naming what replaces it
            if it.deprecated is None or (it.replacement is None and new):
                it.deprecated, it.replacement = msg, new
        # a class whose docstring says its fields are deprecated (axolotl's DeprecatedParameters)
        for r in self.mro(ref):
            doc = first_sentence(ast.get_docstring(r.node))
            if doc and _DEPRECATED_RX.search(doc):
                for it in fields.values():
                    if it.declared_in == r.node.name and it.deprecated is None:
                        it.deprecated = f"declared in {r.node.name}: {doc}"
        return fields

    # ---- pydantic trees

    def model_in(self, mod: str, ann: ast.AST) -> Ref | None:
        """The first pydantic model of the package that a field's annotation names (``Optional[X]``,
        ``X | None``, ``Union[X, bool]``), if any."""
        for n in ast.walk(ann):
            if isinstance(n, (ast.Name, ast.Attribute)):
                r = self.resolve_expr(mod, n)
                if r is not None and r.kind == "class" and self.is_model(r):
                    return r
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
                r = self.resolve(mod, n.value)
                if r is not None and r.kind == "class" and self.is_model(r):
                    return r
        return None

    def model_defaults(self, ref: Ref, depth: int = 0) -> dict[str, Any] | None:
        """The dump of a model built with no arguments (field name -> default), where every default is a
        literal or a sub-model's defaults; None otherwise."""
        if depth > 6:
            return None
        out: dict[str, Any] = {}
        for name, it in self.class_fields(ref).items():
            if it.required:
                return None
            if it.default_is_expr:
                sub = self._sub_model_default(ref, it, depth)
                if sub is _NO_VALUE:
                    return None
                out[name] = sub
            else:
                out[name] = json.loads(it.default) if it.default is not None else None
        return out

    def _sub_model_default(self, ref: Ref, it: Item, depth: int) -> Any:
        mod = self._module_of_class_named(ref, it.declared_in)
        ann = _parse_expr(it.type)
        sub = self.model_in(mod, ann) if ann is not None else None
        if sub is None:
            return _NO_VALUE
        text = (it.default or "").replace(" ", "")
        if text in (f"{sub.name}()", f"lambda:{sub.name}()", "{}"):
            d = self.model_defaults(sub, depth + 1)
            return d if d is not None else _NO_VALUE
        return _NO_VALUE

    def _module_of_class_named(self, ref: Ref, name: str | None) -> str:
        for r in self.mro(ref):
            if r.node.name == name:
                return r.module
        return ref.module

    def walk_model(self, ref: Ref, prefix: str, _seen: tuple = ()) -> list[tuple[str, Item, Ref | None]]:
        """(path, item, sub-model) for every field of the model and, below each field typed with a model, of
        that model: the dotted paths a user writes (a field's alias is its key, the name then an alias)."""
        out: list[tuple[str, Item, Ref | None]] = []
        key_self = (ref.module, ref.node.lineno)
        if key_self in _seen or len(_seen) > 12:
            return out
        for name, it in self.class_fields(ref).items():
            key = it.extra.get("alias") or name
            if key != name:
                it.aliases = sorted({*it.aliases, name} - {key})
                it.name = key
            path = f"{prefix}.{key}" if prefix else key
            mod = self._module_of_class_named(ref, it.declared_in)
            ann = _parse_expr(it.type)
            sub = self.model_in(mod, ann) if ann is not None else None
            if sub is not None and it.default_is_expr:
                d = self._sub_model_default(ref, it, 0)
                if d is not _NO_VALUE:
                    it.default, it.default_is_expr = json_text(d), False
            out.append((path, it, sub))
            if sub is not None:
                out += self.walk_model(sub, path, (*_seen, key_self))
        return out

    # ---- argparse

    def argparse_flags(self, mod: str, function: str | None) -> list[Item]:
        """The flags of the ``add_argument`` calls in function ``function`` of module ``mod`` (nested functions
        included; None: the module's own top-level code, ``if __name__ == "__main__":`` included)."""
        tree = self.parse(mod)
        if tree is None:
            raise LookupError(f"{mod}: not in this release")
        scope: list[ast.AST]
        if function is None:
            scope = [s for s in tree.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        else:
            fn = next(
                (
                    n
                    for n in ast.walk(tree)
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function
                ),
                None,
            )
            if fn is None:
                raise LookupError(f"{self.relfile(mod)}: no function {function}")
            scope = [fn]
        items: dict[str, Item] = {}
        # where each parser / argument group variable comes from: argparse's ArgumentParser or something else
        origins: dict[str, set[str]] = {}
        for top in scope:
            for node in ast.walk(top):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            origins.setdefault(t.id, set()).add(self._parser_origin(mod, node.value))

        # a parser variable that one of its assignments builds from an ArgumentParser subclass of the package
        # (accelerate's CustomArgumentParser): that class (its other assignments are parsers made elsewhere)
        parser_classes: dict[str, Ref] = {}
        for top in scope:
            for node in ast.walk(top):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    pc = self._parser_class(mod, node.value)
                    for t in node.targets:
                        if pc is not None and isinstance(t, ast.Name):
                            parser_classes.setdefault(t.id, pc)

        def container(receiver: ast.AST, depth: int = 0) -> Ref | None:
            """The package class of the parser or argument group add_argument is called on (None: argparse's)."""
            if not isinstance(receiver, ast.Name) or depth > 5:
                return None
            if receiver.id in parser_classes:
                return parser_classes[receiver.id]
            for o in sorted(origins.get(receiver.id, ())):
                if o.startswith("group:"):
                    parent = container(ast.Name(id=o[6:]), depth + 1)
                    if parent is not None:
                        return self._returned_class(parent, "add_argument_group")
            return None

        def plain(receiver: ast.AST, depth: int = 0) -> bool:
            """The receiver of add_argument is argparse's own parser (or a group of one)."""
            if not isinstance(receiver, ast.Name) or receiver.id not in origins or depth > 5:
                return False
            ok = True
            for o in origins[receiver.id]:
                if o.startswith("group:"):
                    ok = ok and plain(ast.Name(id=o[6:]), depth + 1)
                else:
                    ok = ok and o == "argparse"
            return ok

        for top in scope:
            for node in ast.walk(top):
                if not (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument"
                ):
                    continue
                opts = [self.text(mod, a) for a in node.args]
                opts = [o for o in opts if isinstance(o, str)]
                longs = [o for o in opts if o.startswith("--")]
                if not longs:
                    continue
                kw = {k.arg: k.value for k in node.keywords if k.arg}
                it = Item(name=longs[0], kind="cli_flag", file=self.relfile(mod), line=node.lineno)
                cont = container(node.func.value)
                spelled: list[str] = []
                if cont is not None:
                    for a, b, start in self._spelling_rules(mod, cont, kw.get("action")):
                        spelled += [o.replace(a, b) for o in opts if a in o[start:] and o.replace(a, b) != o]
                    if spelled:
                        it.extra["spellings_from"] = cont.name  # the option strings its parser adds (read from it)
                it.aliases = sorted((set(opts) | set(spelled)) - {longs[0]})
                if "type" in kw:
                    it.type = ast.unparse(kw["type"]).rsplit(".", 1)[-1]
                action = kw.get("action")
                act = self.text(mod, action) if action is not None else None
                if act in ("store_true", "store_false"):
                    it.type = it.type or "bool"
                if "default" in kw:
                    it.default, it.default_is_expr = self.value_text(mod, kw["default"])
                elif plain(node.func.value):
                    # argparse's own default for the action (a parser of the package may swap the actions)
                    it.default = {"store_true": "false", "store_false": "true"}.get(act or "", "null")
                    it.extra["default_from"] = "argparse"
                help_text = self.text(mod, kw.get("help")) if "help" in kw else None
                it.doc = first_sentence(help_text)
                if help_text and _DEPRECATED_RX.search(help_text):
                    it.deprecated = sentence_with(help_text, _DEPRECATED_RX)
                    it.replacement = replacement_in(help_text, it.name.lstrip("-"))
                if "choices" in kw:
                    try:
                        it.extra["choices"] = self.literal(mod, kw["choices"])
                    except NotLiteral:
                        it.extra["choices_expr"] = ast.unparse(kw["choices"])
                if "nargs" in kw:
                    try:
                        it.extra["nargs"] = self.literal(mod, kw["nargs"])
                    except NotLiteral:
                        it.extra["nargs"] = ast.unparse(kw["nargs"])
                if act:
                    it.extra["action"] = act
                elif action is not None:
                    it.extra["action"] = ast.unparse(action)
                items.setdefault(it.name, it)
        # argparse's own -h / --help, which every ArgumentParser made without add_help=False has
        for top in scope:
            for node in ast.walk(top):
                if isinstance(node, ast.Call) and (_call_name(node) or "").endswith("ArgumentParser"):
                    kw = {k.arg: k.value for k in node.keywords if k.arg}
                    off = isinstance(kw.get("add_help"), ast.Constant) and kw["add_help"].value is False
                    if not off and "--help" not in items:
                        it = Item(name="--help", kind="cli_flag", file=self.relfile(mod), line=node.lineno)
                        it.aliases, it.doc, it.extra["nargs"] = ["-h"], "show this help message and exit", 0
                        it.extra["argparse"] = True  # added by argparse itself, not by an add_argument call
                        items["--help"] = it
        return list(items.values())

    # ---- argparse: the option strings a parser class of the package adds

    def _argparse_subclass(self, ref: Ref, base: str) -> bool:
        """``ref`` (a class of the package) derives from argparse's ``base`` (through classes of the package)."""
        for r in self.mro(ref):
            for b in self.bases(r):
                if b.kind == "external" and b.module.split(".")[0] == "argparse" and b.name == base:
                    return True
        return False

    def _parser_class(self, mod: str, call: ast.Call) -> Ref | None:
        """The package class a call constructs when it is an ArgumentParser subclass."""
        r = self._class_called(mod, call)
        return r if r is not None and self._argparse_subclass(r, "ArgumentParser") else None

    def _class_called(self, mod: str, call: ast.Call) -> Ref | None:
        if isinstance(call.func, (ast.Name, ast.Attribute)):
            r = self.resolve_expr(mod, call.func)
            if r is not None and r.kind == "class":
                return r
        return None

    def _method_of(self, ref: Ref, name: str) -> Ref | None:
        for r in self.mro(ref):
            for s in r.node.body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name:
                    return Ref("func", r.module, s, name)
        return None

    def _returned_class(self, ref: Ref, method: str) -> Ref | None:
        """The package class whose instance ``ref.method`` returns (``return G(...)``, or ``g = G(...)`` then
        ``return g``); None where the method is argparse's own or returns something else."""
        m = self._method_of(ref, method)
        if m is None:
            return None
        built: dict[str, Ref] = {}
        for n in ast.walk(m.node):
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
                c = self._class_called(m.module, n.value)
                for t in n.targets:
                    if c is not None and isinstance(t, ast.Name):
                        built[t.id] = c
        for n in ast.walk(m.node):
            if isinstance(n, ast.Return) and n.value is not None:
                if isinstance(n.value, ast.Call):
                    return self._class_called(m.module, n.value)
                if isinstance(n.value, ast.Name) and n.value.id in built:
                    return built[n.value.id]
        return None

    def _action_value(self, mod: str, node: ast.AST | None) -> tuple[str, Any] | None:
        """An ``action=`` value: ("builtin", "store_true" / None) or ("class", a package Action class)."""
        if node is None:
            return ("builtin", None)
        text = self.text(mod, node)
        if text is not None:
            return ("builtin", text)
        r = self.resolve_expr(mod, node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        return ("class", r) if r is not None and r.kind == "class" else None

    def _spelling_rules(self, mod: str, cont: Ref, action: ast.AST | None) -> list[tuple[str, str, int]]:
        """What the package's parser / group class ``cont`` does to an ``add_argument(..., action=action)``:
        the action class it ends up with (its ``add_argument`` override, then its ``_add_action`` override, each
        read statement by statement), and that class's option-string rules: ``(a, b, start)`` for an
        ``__init__`` that adds ``option_string.replace(a, b)`` for every option string with ``a`` in
        ``option_string[start:]``. Empty where any step is not one this reader can follow."""
        state = self._action_value(mod, action)
        if state is None:
            return []
        m = self._method_of(cont, "add_argument")
        if m is not None:
            kwarg = m.node.args.kwarg.arg if m.node.args.kwarg else None
            if kwarg is None:
                return []
            state = self._run_add_argument(m, m.node.body, state, action is not None, kwarg)
            if state is None:
                return []
        m = self._method_of(cont, "_add_action")
        if m is not None:
            params = [a.arg for a in [*m.node.args.posonlyargs, *m.node.args.args]]
            if len(params) < 2:
                return []
            state = self._run_add_action(m, m.node.body, state, params[1])
            if state is None:
                return []
        if state[0] != "class":
            return []
        return self._option_string_rules(state[1])

    def _run_add_argument(self, m: Ref, body: list, state: Any, given: bool, kwarg: str) -> Any:
        """The action after an ``add_argument(self, *args, **kwargs)`` override's statements (None: a statement
        this reader cannot follow)."""

        def cond(test: ast.AST) -> bool | None:
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                c = cond(test.operand)
                return None if c is None else not c
            if isinstance(test, ast.BoolOp):
                vals = [cond(v) for v in test.values]
                if any(v is None for v in vals):
                    return None
                return all(vals) if isinstance(test.op, ast.And) else any(vals)
            if isinstance(test, ast.Compare) and len(test.ops) == 1:
                left, op, right = test.left, test.ops[0], test.comparators[0]
                if (
                    isinstance(op, (ast.In, ast.NotIn))
                    and isinstance(left, ast.Constant)
                    and left.value == "action"
                    and isinstance(right, ast.Name)
                    and right.id == kwarg
                ):
                    return given if isinstance(op, ast.In) else not given
                if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant) and _is_kw(left, kwarg):
                    same = state == ("builtin", right.value)
                    return same if isinstance(op, ast.Eq) else not same
            return None

        for stmt in body:
            if isinstance(stmt, ast.If):
                c = cond(stmt.test)
                if c is None:
                    return None
                before = state
                state = self._run_add_argument(m, stmt.body if c else stmt.orelse, state, given, kwarg)
                if state is None:
                    return None
                given = given or state != before
            elif isinstance(stmt, ast.Assign) and any(_is_kw(t, kwarg) for t in stmt.targets):
                state = self._action_value(m.module, stmt.value)
                if state is None:
                    return None
                given = True
            elif isinstance(stmt, (ast.Return, ast.Raise)):
                break
        return state

    def _run_add_action(self, m: Ref, body: list, state: Any, param: str) -> Any:
        """The action after an ``_add_action(self, action)`` override's ``isinstance`` tests and reassignments
        (None: a statement this reader cannot follow). argparse's own action classes are those of this Python's
        argparse (the registry of ``action=`` names)."""
        import argparse

        def is_instance(test: ast.AST) -> bool | None:
            if not (
                isinstance(test, ast.Call)
                and _call_name(test) == "isinstance"
                and len(test.args) == 2
                and isinstance(test.args[0], ast.Name)
                and test.args[0].id == param
                and isinstance(test.args[1], (ast.Name, ast.Attribute))
            ):
                return None
            r = self.resolve_expr(m.module, test.args[1])
            if r is None:
                return None
            argparse_class = r.kind == "external" and r.module.split(".")[0] == "argparse"
            if state[0] == "builtin":
                if r.kind == "class":
                    return False  # an action argparse made is no instance of a class of the package
                if not argparse_class:
                    return None
                cls = argparse.ArgumentParser()._registry_get("action", state[1], None)
                target = getattr(argparse, r.name, None)
                if not isinstance(cls, type) or not isinstance(target, type):
                    return None
                return issubclass(cls, target)
            ref = state[1]
            if r.kind == "class":
                return any(x.module == r.module and x.node is r.node for x in self.mro(ref))
            if argparse_class:
                return r.name == "Action" or self._argparse_subclass(ref, r.name)
            return None

        for stmt in body:
            if isinstance(stmt, ast.If):
                c = is_instance(stmt.test)
                if c is None:
                    return None
                state = self._run_add_action(m, stmt.body if c else stmt.orelse, state, param)
                if state is None:
                    return None
            elif (
                isinstance(stmt, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == param for t in stmt.targets)
                and isinstance(stmt.value, ast.Call)
            ):
                f = stmt.value.func
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and _call_name(f.value) == "super":
                    continue  # argparse's own _add_action: it adds the action as it is
                r = self._class_called(m.module, stmt.value)
                if r is None:
                    return None
                state = ("class", r)
            elif isinstance(stmt, (ast.Return, ast.Raise)):
                break
        return state

    def _option_string_rules(self, action: Ref) -> list[tuple[str, str, int]]:
        """``(a, b, start)`` of every ``for x in ...option_strings: ... if a in x[start:]: ... x.replace(a, b)`` in
        the ``__init__`` of the action class or of its bases in the package."""
        out: list[tuple[str, str, int]] = []

        def guard_of(t: ast.AST, var: str) -> tuple[str, int] | None:
            if not (
                isinstance(t, ast.Compare)
                and len(t.ops) == 1
                and isinstance(t.ops[0], ast.In)
                and isinstance(t.left, ast.Constant)
                and isinstance(t.left.value, str)
            ):
                return None
            c = t.comparators[0]
            if isinstance(c, ast.Name) and c.id == var:
                return t.left.value, 0
            if (
                isinstance(c, ast.Subscript)
                and isinstance(c.value, ast.Name)
                and c.value.id == var
                and isinstance(c.slice, ast.Slice)
                and c.slice.upper is None
                and c.slice.step is None
                and isinstance(c.slice.lower, ast.Constant)
                and isinstance(c.slice.lower.value, int)
            ):
                return t.left.value, c.slice.lower.value
            return None

        def visit(node: ast.AST, var: str | None, guard: dict[str, int]) -> None:
            if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                if "option_strings" in ast.unparse(node.iter):
                    for s in node.body:
                        visit(s, node.target.id, {})
                    return
            if isinstance(node, ast.If) and var is not None:
                g = guard_of(node.test, var)
                for s in node.body:
                    visit(s, var, {**guard, g[0]: g[1]} if g else guard)
                for s in node.orelse:
                    visit(s, var, guard)
                return
            if (
                var is not None
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "replace"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == var
                and len(node.args) == 2
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
            ):
                a, b = node.args[0].value, node.args[1].value
                rule = (a, b, guard.get(a, 0))
                if rule not in out:
                    out.append(rule)
            for child in ast.iter_child_nodes(node):
                visit(child, var, guard)

        for r in self.mro(action):
            init = next(
                (
                    s
                    for s in r.node.body
                    if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"
                ),
                None,
            )
            for s in init.body if init is not None else []:
                visit(s, None, {})
        return out

    def _parser_origin(self, mod: str, call: ast.Call) -> str:
        f = call.func
        if isinstance(f, ast.Attribute) and f.attr in ("add_argument_group", "add_mutually_exclusive_group"):
            return f"group:{f.value.id}" if isinstance(f.value, ast.Name) else "other"
        if (_call_name(call) or "") == "ArgumentParser":
            r = self.resolve_expr(mod, f)
            return (
                "argparse"
                if r is not None and r.kind == "external" and r.module.split(".")[0] == "argparse"
                else "other"
            )
        return "other"

    # ---- signatures

    def signature(self, ref: Ref) -> tuple[ast.AST, str, list[Item]]:
        """(the def node, its module, its parameters) of a function, or of a class's ``__init__`` (the first
        one along its in-package MRO); ``self`` / ``cls``, ``*args``, ``**kwargs`` and ``_private`` left out."""
        fn, mod = ref.node, ref.module
        if ref.kind == "class":
            fn = None
            for r in self.mro(ref):
                fn = next(
                    (
                        s
                        for s in r.node.body
                        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "__init__"
                    ),
                    None,
                )
                if fn is not None:
                    mod = r.module
                    break
            if fn is None:
                return ref.node, ref.module, []
        a = fn.args
        pos = [*a.posonlyargs, *a.args]
        defaults: list[ast.AST | None] = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
        params = list(zip(pos, defaults, strict=False)) + list(zip(a.kwonlyargs, a.kw_defaults, strict=False))
        out = []
        for arg, d in params:
            if arg.arg in ("self", "cls") or arg.arg.startswith("_"):
                continue
            it = Item(name=arg.arg, kind="kwarg", file=self.relfile(mod), line=fn.lineno)
            it.type = ast.unparse(arg.annotation) if arg.annotation is not None else ""
            if d is None:
                it.required = True
            else:
                it.default, it.default_is_expr = self.value_text(mod, d)
            out.append(it)
        return fn, mod, out

    def docstring(self, node: ast.AST) -> str | None:
        try:
            return first_sentence(ast.get_docstring(node))
        except TypeError:
            return None

    # ---- module constants

    def constants(self, mod: str) -> dict[str, Any]:
        """The module's top-level names bound to literals."""
        ns, _ = self.namespace(mod)
        out = {}
        for n, r in ns.items():
            if r.kind == "value":
                try:
                    out[n] = self.literal(r.module, r.node)
                except NotLiteral:
                    pass
        return out

    def subscript_keys(self, mod: str, variable: str) -> list[tuple[str, int]]:
        """(key, line) of every ``variable["key"]`` in the module, first occurrence each, in order."""
        tree = self.parse(mod)
        if tree is None:
            raise LookupError(f"{mod}: not in this release")
        seen: dict[str, int] = {}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id == variable
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                if node.slice.value not in seen or node.lineno < seen[node.slice.value]:
                    seen[node.slice.value] = node.lineno
        return sorted(seen.items(), key=lambda kv: kv[1])


def _raise() -> Any:
    raise NotLiteral


def _call_name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_kw(node: ast.AST, kwarg: str) -> bool:
    """``kwargs["action"]`` or ``kwargs.get("action")`` of the ``**kwargs`` parameter ``kwarg``."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == kwarg
        and isinstance(node.slice, ast.Constant)
    ):
        return node.slice.value == "action"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == kwarg
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "action"
    )


def _call_name(call: ast.Call | None) -> str | None:
    return _call_name_of(call.func) if call is not None else None


def _parse_expr(text: str) -> ast.AST | None:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


# ---------------------------------------------------------------- keys read from a config dict


@dataclass(frozen=True)
class _P:
    """A dict at this path of the user's config."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class _C:
    """A literal value, and where it was written."""

    value: Any
    file: str
    line: int


@dataclass(frozen=True)
class _E:
    """An expression whose value is not known, as written."""

    text: str


@dataclass(frozen=True)
class _D:
    """A dict built in the code: key -> the values (a frozenset) put there."""

    items: tuple[tuple[str, frozenset], ...]


@dataclass
class Read:
    path: tuple[str, ...]
    file: str
    line: int
    default: Any = None  # a _C or _E (or None: no default given)
    how: str = "read"  # read | contains


@dataclass
class ModelAt:
    path: tuple[str, ...]
    ref: Ref
    file: str
    line: int


class DictReads:
    """Every key a package reads from the config dict it is given, by following the dict through the code.

    ``DictReads(tree).run(ref, param)`` starts at a function or class (``DeepSpeedConfig``) whose parameter
    ``param`` receives the user's dict; it records reads (``d[K]``, ``d.get(K, default)``, ``K in d``) and the
    pydantic models built from a part of the dict (``Model(**d[K])``), and follows every call that passes the
    dict, a part of it, or a key on (functions, classes, methods on ``self``, keyword arguments), with the
    module constants resolved. Flow-insensitive within a function (a name holds every value assigned to it).
    A read is placed where its key is written: at the call site that passes the key to a generic getter such as
    ``get_scalar_param(d, KEY, DEFAULT)``."""

    GETTERS_MAX_DEPTH = 12

    def __init__(self, tree: Tree):
        self.t = tree
        self.reads: dict[tuple[str, ...], Read] = {}
        self.models: dict[tuple[str, ...], ModelAt] = {}
        self.removed: dict[tuple[str, ...], str | None] = {}  # keys whose presence raises (the message)
        self._memo: dict[Any, frozenset] = {}
        self._active: set[Any] = set()

    # public
    def run(self, ref: Ref, param: str) -> None:
        if ref.kind == "class":
            self._instantiate(ref, [], {param: frozenset({_P(())})}, 0, bind_by_name=True)
        else:
            self._call_function(ref.module, ref.node, {param: frozenset({_P(())})}, {}, None, 0)

    # ---- evaluation
    def _eval(self, node: ast.AST, ctx: dict) -> frozenset:
        env, mod = ctx["env"], ctx["mod"]
        if node is None:
            return frozenset()
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            if node.id in (ctx.get("local") or {}):
                ref = self._resolve(ctx, node)
                if ref is not None and ref.kind == "value":
                    return self._const(ref.module, ref.node)
            return self._const(mod, node)
        if isinstance(node, ast.Constant):
            return frozenset({_C(node.value, self.t.relfile(mod), node.lineno)})
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self" and ctx["self"] is not None:
                return ctx["self"].get(node.attr, frozenset())
            return self._const(mod, node)
        if isinstance(node, ast.Subscript):
            out = set()
            for base in self._eval(node.value, ctx):
                for k in self._keys(node.slice, ctx):
                    if isinstance(base, _P):
                        self._read(base.path + (k.value,), k, None, "read")
                        out.add(_P(base.path + (k.value,)))
                    elif isinstance(base, _D):
                        out |= dict(base.items).get(k.value, frozenset())
            return frozenset(out)
        if isinstance(node, ast.Call):
            return self._eval_call(node, ctx)
        if isinstance(node, (ast.BoolOp,)):
            return frozenset().union(*(self._eval(v, ctx) for v in node.values))
        if isinstance(node, ast.IfExp):
            return self._eval(node.body, ctx) | self._eval(node.orelse, ctx)
        if isinstance(node, ast.Dict):
            items = []
            for k, v in zip(node.keys, node.values, strict=False):
                if k is None:
                    continue
                for kc in self._keys(k, ctx):
                    items.append((kc.value, self._eval(v, ctx)))
            return frozenset({_D(tuple(sorted(items, key=lambda kv: kv[0])))}) if items else frozenset()
        if isinstance(node, ast.DictComp) and len(node.generators) == 1:
            g = node.generators[0]
            if isinstance(g.target, ast.Name):
                items = []
                for kc in self._iter_consts(g.iter, ctx):
                    sub = dict(ctx, env={**env, g.target.id: frozenset({kc})})
                    for kk in self._keys(node.key, sub):
                        items.append((kk.value, self._eval(node.value, sub)))
                if items:
                    return frozenset({_D(tuple(sorted(items, key=lambda kv: kv[0])))})
            return frozenset()
        if isinstance(node, ast.NamedExpr):
            return self._eval(node.value, ctx)
        if isinstance(node, (ast.List, ast.Tuple)):
            keys = [self._keys(e, ctx) for e in node.elts]
            if keys and all(len(k) == 1 for k in keys):
                return frozenset({_C(("__list__", tuple(k[0].value for k in keys)), self.t.relfile(mod), node.lineno)})
            try:
                return frozenset({_lit(self.t.literal(mod, node), self.t.relfile(mod), node.lineno)})
            except NotLiteral:
                return frozenset({_E(ast.unparse(node))})
        return frozenset({_E(ast.unparse(node))})

    def _const(self, mod: str, node: ast.AST) -> frozenset:
        try:
            v = self.t.literal(mod, node)
        except NotLiteral:
            return frozenset({_E(ast.unparse(node))})
        return frozenset({_lit(v, self.t.relfile(mod), node.lineno)})

    def _keys(self, node: ast.AST, ctx: dict) -> list[_C]:
        return sorted(
            (v for v in self._eval(node, ctx) if isinstance(v, _C) and isinstance(v.value, str)),
            key=lambda c: (c.value, c.file, c.line),
        )

    def _iter_consts(self, node: ast.AST, ctx: dict) -> list[_C]:
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for e in node.elts:
                out += self._keys(e, ctx)
            return out
        out = []
        for v in self._eval(node, ctx):  # a name bound to a literal list of keys
            if isinstance(v, _C) and isinstance(v.value, tuple) and v.value and v.value[0] == "__list__":
                out += [_C(x, v.file, v.line) for x in v.value[1]]
        return out

    def _read(self, path: tuple[str, ...], key: _C, default: Any, how: str) -> None:
        if not all(isinstance(p, str) for p in path):
            return
        r = self.reads.get(path)
        if r is None:
            self.reads[path] = Read(path, key.file, key.line, default, how)
        elif r.default is None and default is not None:
            r.default = default

    def _eval_call(self, node: ast.Call, ctx: dict) -> frozenset:
        f = node.func
        # d.get(K, default) / d.pop(K, default) / d.setdefault(K, default)
        if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault") and node.args:
            bases = self._eval(f.value, ctx)
            if any(isinstance(b, (_P, _D)) for b in bases):
                out = set()
                default = None
                if len(node.args) > 1:
                    dv = self._eval(node.args[1], ctx)
                    default = _pick_default(dv)
                    out |= {v for v in dv if isinstance(v, (_P, _D))}
                for b in bases:
                    for k in self._keys(node.args[0], ctx):
                        if isinstance(b, _P):
                            self._read(b.path + (k.value,), k, default, "read")
                            out.add(_P(b.path + (k.value,)))
                        elif isinstance(b, _D):
                            out |= dict(b.items).get(k.value, frozenset())
                return frozenset(out)
        if isinstance(f, ast.Attribute) and f.attr in ("keys", "items", "values", "copy") and not node.args:
            base = self._eval(f.value, ctx)
            return base if f.attr == "copy" else frozenset()
        name = _call_name_of(f)
        if name in ("copy", "deepcopy", "dict", "list") and node.args and len(node.args) == 1:
            return self._eval(node.args[0], ctx)
        if name in ("isinstance", "len", "print", "str", "int", "float", "bool", "hasattr", "getattr", "setattr"):
            for a in node.args:
                self._eval(a, ctx)
            return frozenset()
        # a call of the package: function, class, method on self
        target: Ref | None = None
        bound_self = None
        cls_ctx = ctx.get("cls")
        if (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id == "self"
            and cls_ctx is not None
        ):
            m = self._method(cls_ctx, f.attr)
            if m is not None:
                target, bound_self = m, ctx["self"]
        elif (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Call)
            and _call_name(f.value) == "super"
            and cls_ctx is not None
        ):
            m = self._method(cls_ctx, f.attr, skip_first=True)
            if m is not None:
                target, bound_self = m, ctx["self"]
        elif isinstance(f, (ast.Name, ast.Attribute)):
            r = self._resolve(ctx, f)
            if r is not None and r.kind in ("func", "class"):
                target = r
        argvals = [self._eval(a.value if isinstance(a, ast.Starred) else a, ctx) for a in node.args]
        kwvals = {k.arg: self._eval(k.value, ctx) for k in node.keywords if k.arg}
        starstar = [self._eval(k.value, ctx) for k in node.keywords if k.arg is None]
        opaque = frozenset({_E(ast.unparse(node))})  # a value the code computes: kept as written
        if target is None:
            return opaque
        if target.kind == "class":
            if self.t.is_model(target):
                for vals in starstar:
                    self._model_from(target, vals, node, ctx)
                return frozenset()
            return self._instantiate(target, argvals, kwvals, ctx["depth"] + 1)
        if bound_self is not None:
            if not (
                any(_has_dict(v) for v in [*argvals, *kwvals.values()])
                or any(_has_dict(v) for v in bound_self.values())
            ):
                return opaque
            binding = self._bind(target.node, argvals, kwvals, method=True)
            return self._call_function(target.module, target.node, binding, bound_self, cls_ctx, ctx["depth"] + 1)
        if not any(_has_dict(v) for v in [*argvals, *kwvals.values()]):
            return opaque
        binding = self._bind(target.node, argvals, kwvals, method=False)
        return self._call_function(target.module, target.node, binding, {}, None, ctx["depth"] + 1)

    def _model_from(self, model: Ref, vals: frozenset, node: ast.AST, ctx: dict) -> None:
        for v in sorted(vals, key=repr):
            if isinstance(v, _P):
                self._add_model(v.path, model, ctx, node)
            elif isinstance(v, _D):
                fields = self.t.class_fields(model)
                items = dict(v.items)
                for fname, it in fields.items():
                    key = it.extra.get("alias") or fname
                    for sub in sorted(items.get(key, frozenset()) | items.get(fname, frozenset()), key=repr):
                        if isinstance(sub, _P):
                            mod = self.t._module_of_class_named(model, it.declared_in)
                            ann = _parse_expr(it.type)
                            sm = self.t.model_in(mod, ann) if ann is not None else None
                            if sm is not None:
                                self._add_model(sub.path, sm, ctx, node)

    def _add_model(self, path: tuple[str, ...], model: Ref, ctx: dict, node: ast.AST) -> None:
        if path not in self.models:
            self.models[path] = ModelAt(path, model, self.t.relfile(ctx["mod"]), node.lineno)

    def _method(self, cls: Ref, name: str, skip_first: bool = False) -> Ref | None:
        chain = self.t.mro(cls)
        for r in chain[1:] if skip_first else chain:
            for s in r.node.body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name:
                    return Ref("func", r.module, s, name)
        return None

    def _bind(self, fn: ast.AST, argvals: list[frozenset], kwvals: dict[str, frozenset], method: bool) -> dict:
        a = fn.args
        pos = [p.arg for p in [*a.posonlyargs, *a.args]]
        if method and pos and pos[0] in ("self", "cls"):
            pos = pos[1:]
        out: dict[str, frozenset] = {}
        for name, v in zip(pos, argvals, strict=False):
            out[name] = v
        names = set(pos) | {p.arg for p in a.kwonlyargs}
        for k, v in kwvals.items():
            if k in names:
                out[k] = v
        return out

    def _instantiate(self, cls: Ref, argvals: list, kwvals: dict, depth: int, bind_by_name: bool = False) -> frozenset:
        init = self._method(cls, "__init__")
        if init is None:
            return frozenset()
        if not bind_by_name and not any(_has_dict(v) for v in [*argvals, *kwvals.values()]):
            return frozenset()
        self_env: dict[str, frozenset] = {}
        binding = self._bind(init.node, argvals, kwvals, method=True)
        self._call_function(init.module, init.node, binding, self_env, cls, depth)
        return frozenset()

    def _call_function(
        self, mod: str, fn: ast.AST, binding: dict, self_env: dict, cls: Ref | None, depth: int
    ) -> frozenset:
        if depth > self.GETTERS_MAX_DEPTH:
            return frozenset()
        key = (
            mod,
            fn.lineno,
            fn.name,
            tuple(sorted((k, tuple(sorted(map(repr, v)))) for k, v in binding.items())),
            tuple(sorted((k, tuple(sorted(map(repr, v)))) for k, v in self_env.items())),
        )
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            return frozenset()
        self._active.add(key)
        env: dict[str, frozenset] = {}
        a = fn.args
        pos = [*a.posonlyargs, *a.args]
        defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
        local: dict[str, tuple[str, str | None]] = {}
        for n in _walk_own(fn):
            if isinstance(n, ast.ImportFrom):
                src = self.t._absolute(mod, n.level, n.module)
                for al in n.names:
                    if al.name != "*":
                        local[al.asname or al.name] = (src, al.name)
            elif isinstance(n, ast.Import):
                for al in n.names:
                    local[al.asname or al.name.split(".")[0]] = (al.name if al.asname else al.name.split(".")[0], None)
        ctx = {"env": env, "mod": mod, "self": self_env, "cls": cls, "depth": depth, "local": local}
        for p, d in [*zip(pos, defaults, strict=False), *zip(a.kwonlyargs, a.kw_defaults, strict=False)]:
            if p.arg in binding:
                env[p.arg] = binding[p.arg]
            elif d is not None:
                env[p.arg] = self._eval(d, ctx)
        # assignments to a fixpoint (flow-insensitive), then one pass for reads and calls
        for _ in range(4):
            changed = False
            for node in _walk_own(fn):
                targets: list[ast.AST] = []
                value = None
                if isinstance(node, ast.Assign):
                    targets, value = node.targets, node.value
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                    targets, value = [node.target], node.value
                elif isinstance(node, ast.For):
                    if isinstance(node.target, ast.Name):
                        vals = frozenset(self._iter_consts(node.iter, ctx))
                        if vals and not vals <= env.get(node.target.id, frozenset()):
                            env[node.target.id] = env.get(node.target.id, frozenset()) | vals
                            changed = True
                    continue
                elif isinstance(node, ast.NamedExpr):
                    targets, value = [node.target], node.value
                else:
                    continue
                vals = None
                for t in targets:
                    if isinstance(t, ast.Name):
                        vals = self._eval(value, ctx) if vals is None else vals
                        if not vals <= env.get(t.id, frozenset()):
                            env[t.id] = env.get(t.id, frozenset()) | vals
                            changed = True
                    elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        vals = self._eval(value, ctx) if vals is None else vals
                        if not vals <= self_env.get(t.attr, frozenset()):
                            self_env[t.attr] = self_env.get(t.attr, frozenset()) | vals
                            changed = True
            if not changed:
                break
        returns: set = set()

        def contains(node: ast.Compare, c: dict) -> list[tuple[str, ...]]:
            cont = node.comparators[0]
            if isinstance(cont, ast.Call) and _call_name(cont) == "list" and cont.args:
                cont = cont.args[0]
            if isinstance(cont, ast.Call) and isinstance(cont.func, ast.Attribute) and cont.func.attr == "keys":
                cont = cont.func.value
            out = []
            for b in self._eval(cont, c):
                if isinstance(b, _P):
                    for k in self._keys(node.left, c):
                        self._read(b.path + (k.value,), k, None, "contains")
                        out.append(b.path + (k.value,))
            return out

        def visit(node: ast.AST, c: dict) -> None:
            nonlocal returns
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                return
            if isinstance(node, ast.For):
                unrolled = self._unroll(node, c)
                if unrolled is not None:
                    for b in unrolled:
                        sub = dict(c, env={**c["env"], **b})
                        for stmt in node.body:
                            visit(stmt, sub)
                    for stmt in node.orelse:
                        visit(stmt, c)
                    return
            if (
                isinstance(node, ast.If)
                and isinstance(node.test, ast.Compare)
                and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.In)
            ):
                paths = contains(node.test, c)
                # `if KEY in d: raise ...("... has been removed ...")`: the release rejects the key
                raise_ = next((n for n in node.body if isinstance(n, ast.Raise)), None)
                if paths and raise_ is not None and not node.orelse:
                    msg = self._message(raise_, c)
                    if msg and _REMOVED_RX.search(msg):
                        for p in paths:
                            self.removed.setdefault(p, msg)
            elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
                contains(node, c)
            elif isinstance(node, (ast.Call, ast.Subscript)):
                self._eval(node, c)
            if isinstance(node, ast.Return) and node.value is not None:
                returns |= self._eval(node.value, c)
            for child in ast.iter_child_nodes(node):
                visit(child, c)

        for stmt in fn.body:
            visit(stmt, ctx)
        result = frozenset(v for v in returns if isinstance(v, (_P, _D)))
        self._active.discard(key)
        self._memo[key] = result
        return result

    def _unroll(self, node: ast.For, ctx: dict) -> list[dict] | None:
        """The loop variable(s) per element of a loop over a literal list / tuple / dict (``.items()``,
        ``.keys()``), each element on its own: None when the loop is over something else."""
        it, target = node.iter, node.target
        method = None
        if (
            isinstance(it, ast.Call)
            and isinstance(it.func, ast.Attribute)
            and it.func.attr in ("items", "keys")
            and not it.args
        ):
            method, it = it.func.attr, it.func.value
        pairs: list[tuple[_C, _C | _E | None]] | None = None
        mod = ctx["mod"]
        node_dict, dmod = (it, mod) if isinstance(it, ast.Dict) else (None, mod)
        if (
            node_dict is None
            and isinstance(it, (ast.Name, ast.Attribute))
            and not (isinstance(it, ast.Name) and it.id in ctx["env"])
        ):
            ref = self._resolve(ctx, it)
            if ref is not None and ref.kind == "value":
                if isinstance(ref.node, ast.Dict):
                    node_dict, dmod = ref.node, ref.module
                elif isinstance(ref.node, (ast.List, ast.Tuple)):
                    it, mod = ref.node, ref.module
        if node_dict is not None:
            pairs = []
            for k, v in zip(node_dict.keys, node_dict.values, strict=False):
                try:
                    kv = self.t.literal(dmod, k)
                except NotLiteral:
                    return None
                text = self.t.text(dmod, v)
                pairs.append(
                    (
                        _C(kv, self.t.relfile(dmod), k.lineno),
                        _C(text, self.t.relfile(dmod), v.lineno) if text is not None else _E(ast.unparse(v)),
                    )
                )
        elif isinstance(it, (ast.List, ast.Tuple)) and method is None:
            pairs = []
            for e in it.elts:
                ks = self._keys(e, dict(ctx, mod=mod))
                if len(ks) != 1:
                    return None
                pairs.append((ks[0], None))
        if pairs is None:
            return None
        out = []
        for k, v in pairs:
            if isinstance(target, ast.Name):
                out.append({target.id: frozenset({k})})
            elif (
                isinstance(target, ast.Tuple)
                and len(target.elts) == 2
                and all(isinstance(e, ast.Name) for e in target.elts)
                and method == "items"
            ):
                out.append({target.elts[0].id: frozenset({k}), target.elts[1].id: frozenset({v} if v else set())})
            else:
                return None
        return out

    def _message(self, raise_: ast.Raise, ctx: dict) -> str | None:
        """The text a ``raise X(message)`` gives (a literal, an f-string, or a name bound to one)."""
        exc = raise_.exc
        if not isinstance(exc, ast.Call) or not exc.args:
            return None
        a = exc.args[0]
        for v in sorted(self._eval(a, ctx), key=repr):
            if isinstance(v, _C) and isinstance(v.value, str):
                return first_sentence(v.value) or v.value[:300]
        t = self.t.text(ctx["mod"], a)
        return first_sentence(t) if t else None

    def _resolve(self, ctx: dict, expr: ast.AST) -> Ref | None:
        """A name in a function: its local imports first, then the module's names."""
        local = ctx.get("local") or {}
        if isinstance(expr, ast.Name) and expr.id in local:
            mod, name = local[expr.id]
            return (
                self.t.resolve(mod, name) if name else (Ref("module", mod, None, mod) if mod in self.t.files else None)
            )
        if isinstance(expr, ast.Attribute):
            base = (
                self._resolve(ctx, expr.value) if isinstance(expr.value, ast.Name) and expr.value.id in local else None
            )
            if base is not None and base.kind == "module":
                return self.t.resolve(base.module, expr.attr)
        return self.t.resolve_expr(ctx["mod"], expr)


def _pick_default(vals: frozenset) -> Any:
    cs = sorted((v for v in vals if isinstance(v, _C)), key=lambda c: (repr(c.value), c.file, c.line))
    if cs:
        return cs[0]
    es = sorted((v for v in vals if isinstance(v, _E)), key=lambda e: e.text)
    if es:
        return es[0]
    return None  # a dict default (a section): none, as indexer/registry_build.py records it


def _lit(v: Any, file: str, line: int) -> _C:
    """A literal as a _C (a list of strings as a ("__list__", ...) tuple: keys to iterate over)."""
    if isinstance(v, list):
        if all(isinstance(x, str) for x in v):
            return _C(("__list__", tuple(v)), file, line)
        return _C(("__json__", json_text(v)), file, line)
    if isinstance(v, dict):
        return _C(("__dict__",), file, line)  # a section's default: none, as indexer/registry_build.py records it
    return _C(v, file, line)


def _has_dict(vals: frozenset) -> bool:
    return any(isinstance(v, (_P, _D)) for v in vals)


def _walk_own(fn: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function body, nested functions and classes left out."""
    stack = list(reversed(fn.body))
    while stack:
        node = stack.pop()
        yield node
        for child in reversed(list(ast.iter_child_nodes(node))):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            stack.append(child)


def default_text(d: Any) -> tuple[str | None, bool]:
    """A Read's default as (JSON text, False) or (expression text, True); (None, False) when none was given."""
    if isinstance(d, _C):
        v = d.value
        if isinstance(v, tuple) and v and v[0] == "__list__":
            return json_text(list(v[1])), False
        if isinstance(v, tuple) and v and v[0] == "__json__":
            return v[1], False
        if isinstance(v, tuple) and v and v[0] == "__dict__":
            return None, False
        return json_text(v), False
    if isinstance(d, _E):
        return d.text, True
    return None, False
