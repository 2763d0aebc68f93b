"""The size rules of the code (issue 18): no module over ~400 lines and no function over ~60
outside tests and benchmarks, so that each unit can be read in one sitting.

``KNOWN_OVERSIZED`` may list a unit over the limits with the size it may not exceed (a ratchet
for code taken over as it is); it is empty: every unit is within the limits."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("frontier", "workers", "dedup", "sandbox", "deploy", "freshness")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: Units over the limits, with the size they may not exceed.
KNOWN_OVERSIZED: dict[str, int] = {}


def oversized(path: str, source: str) -> dict[str, int]:
    """Units of ``source`` (a module at ``path``) over the limits: name -> lines."""
    found: dict[str, int] = {}
    lines = source.count("\n")
    if lines > MAX_MODULE_LINES:
        found[path] = lines
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found[f"{path}:{node.name}"] = length
    return found


def test_modules_and_functions_stay_small() -> None:
    found: dict[str, int] = {}
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            found.update(oversized(rel, file.read_text(encoding="utf-8")))
    new = {unit: n for unit, n in found.items() if unit not in KNOWN_OVERSIZED}
    assert not new, (f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a "
                     f"function: {new}")
    grown = {unit: n for unit, n in found.items()
             if unit in KNOWN_OVERSIZED and n > KNOWN_OVERSIZED[unit]}
    assert not grown, f"known oversized units grew (split them instead): {grown}"


def test_the_check_flags_a_long_function_and_module() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    long_function = f"def f():\n{body}\n"
    assert oversized("m.py", long_function) == {"m.py:f": MAX_FUNCTION_LINES + 1}
    long_module = "x = 1\n" * (MAX_MODULE_LINES + 1)
    assert oversized("m.py", long_module) == {"m.py": MAX_MODULE_LINES + 1}
    assert oversized("m.py", "def g():\n    return 1\n") == {}


def subpackage_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Subpackage of ``package`` -> the other subpackages its modules import (any import
    statement, at module level or inside a function)."""
    graph: dict[str, set[str]] = {}
    for file in sorted((root / package).glob("*/*.py")):
        sub = file.parent.name
        deps = graph.setdefault(sub, set())
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                parts = name.split(".")
                if len(parts) > 1 and parts[0] == package and parts[1] != sub:
                    deps.add(parts[1])
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path that ends where it starts, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, [*path, nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start, [start])
            if found:
                return found
    return None


def test_workers_subpackages_import_one_way() -> None:
    graph = subpackage_imports(ROOT, "workers")
    assert {"cli", "app", "cluster", "runtime", "pipeline", "fetch", "storage", "dns"} <= set(graph)
    assert find_cycle(graph) is None, f"import cycle between workers/ subpackages: {graph}"


def test_the_cycle_check_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"b"}}) is None
    # the real graph with the pipeline importing the runtime back (as it did) has a cycle
    graph = subpackage_imports(ROOT, "workers")
    graph["pipeline"].add("runtime")
    assert find_cycle(graph) is not None
