"""The layers, read from the code's own imports (every import, also those inside functions): no import cycle
anywhere, the core (kb/) never imports a surface (cli/, bot/, sitegen/) or the write side (indexer/)."""

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("kb", "cli", "bot", "sitegen", "indexer")
SURFACES_AND_WRITE_SIDE = ("cli", "bot", "sitegen", "indexer")


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [f"{base}.{a.name}" for a in node.names] + [base]
            for n in names:
                while n and n not in files:  # `from kb.ask import rank` names the module kb.ask.rank
                    n = n.rpartition(".")[0]
                if n and n != mod and not (files[n].name == "__init__.py" and mod.startswith(n + ".")):
                    graph[mod].add(n)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_anywhere():
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_core_imports_no_surface_and_no_write_side():
    graph = _graph()
    bad = {m: sorted(d for d in deps if d.split(".")[0] in SURFACES_AND_WRITE_SIDE) for m, deps in graph.items()}
    assert {m: d for m, d in bad.items() if m.split(".")[0] == "kb" and d} == {}
    assert any(d.startswith("kb.") for d in graph["cli.main"]), "the graph is read (the CLI imports the core)"
