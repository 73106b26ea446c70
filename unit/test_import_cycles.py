"""No import cycle among ``bootc_operator``'s modules.

Every import counts: at the top, under ``if TYPE_CHECKING:`` and inside functions.
A cycle hidden from the interpreter is still two modules that cannot be read or
changed apart (``registry.auth`` and ``registry.client`` were one until their
shared types moved to ``registry.types``). ``from pkg import name`` is an edge to
the submodule ``pkg.name`` when there is one, else to ``pkg`` itself; importing a
submodule is not counted as importing its package's ``__init__``."""

from __future__ import annotations

import ast
from pathlib import Path

import bootc_operator

PACKAGE_DIR = Path(bootc_operator.__file__).parent


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's own modules that module ``name`` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            edges.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    edges.add(f"{base}.{alias.name}")
                elif base in known:
                    edges.add(base)
    edges.discard(name)
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (``[a, b, ..., a]``), or None when it is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)) is not None:
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def import_graph(root: Path) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imported(name, path, known) for name, path in known.items()}


def test_bootc_operator_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE_DIR)
    assert "bootc_operator.registry.types" in graph["bootc_operator.registry.auth"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_a_cycle_under_type_checking_or_in_a_function_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import a\n")
    (pkg / "sub" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n"
    )
    (pkg / "sub" / "b.py").write_text("def f():\n    from pkg.sub import a\n")
    (pkg / "c.py").write_text("import pkg.sub\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub"] == {"pkg.sub.a"} and graph["pkg.c"] == {"pkg.sub"}
    assert find_cycle(graph) == ["pkg.sub.a", "pkg.sub.b", "pkg.sub.a"]
    (pkg / "sub" / "b.py").write_text("def f():\n    return 1\n")
    assert find_cycle(import_graph(pkg)) is None
