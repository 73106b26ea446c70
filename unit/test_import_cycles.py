"""No import cycle among the modules of ``bootc_operator``, ``hack``, ``e2e`` and ``unit``,
none among their rooms, and no upward arrow between the trees.

Every import counts: at the top, under ``if TYPE_CHECKING:`` and inside functions.
A cycle hidden from the interpreter is still two modules that cannot be read or
changed apart (``registry.auth`` and ``registry.client`` were one until their
shared types moved to ``registry.types``). ``from pkg import name`` is an edge to
the submodule ``pkg.name`` when there is one, else to ``pkg`` itself; importing a
submodule is not counted as importing its package's ``__init__``.

A room is a package (``bootc_operator.reconcilers.loops``, ``hack.testenv``), or a
module directly under a tree's root (``bootc_operator.cli``): rooms import each other
without a cycle either, so each can be read knowing only the rooms below it. The
trees stack ``unit``, ``e2e`` → ``hack`` → ``bootc_operator`` (:data:`TREE_ARROWS`):
the product imports no test kit, the kit no test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bootc_operator

PACKAGE_DIR = Path(bootc_operator.__file__).parent
REPO = PACKAGE_DIR.parent
TREES = ("bootc_operator", "hack", "e2e", "unit")
#: which trees each tree may import (besides itself)
TREE_ARROWS = {
    "bootc_operator": set(),
    "hack": {"bootc_operator"},
    "e2e": {"hack", "bootc_operator"},
    "unit": {"hack", "bootc_operator"},
}


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


def import_graph(*roots: Path) -> dict[str, set[str]]:
    known: dict[str, Path] = {}
    for root in roots:
        known.update(modules(root))
    return {name: imported(name, path, known) for name, path in known.items()}


def rooms(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
    """The arrows between rooms: a package, or a module right under a tree's root."""

    def room(name: str) -> str:
        pkg = name if name in packages else name.rpartition(".")[0]
        return pkg if "." in pkg else name

    arrows: dict[str, set[str]] = {}
    for name, edges in graph.items():
        for other in edges:
            if room(name) != room(other):
                arrows.setdefault(room(name), set()).add(room(other))
    return arrows


def packages_of(*roots: Path) -> set[str]:
    return {n for r in roots for n, p in modules(r).items() if p.name == "__init__.py"}


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    """``a -> b`` for every import of a tree that :data:`TREE_ARROWS` does not allow."""
    found = []
    for name, edges in sorted(graph.items()):
        tree = name.partition(".")[0]
        for other in sorted(edges):
            target = other.partition(".")[0]
            if target != tree and target not in TREE_ARROWS[tree]:
                found.append(f"{name} -> {other}")
    return found


TREE_ROOTS = tuple(REPO / tree for tree in TREES)


def test_no_import_cycle_in_any_tree() -> None:
    graph = import_graph(*TREE_ROOTS)
    assert "bootc_operator.registry.types" in graph["bootc_operator.registry.auth"]
    assert "hack.testenv.controller" in graph["hack.bench_queries"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_no_cycle_among_rooms() -> None:
    arrows = rooms(import_graph(*TREE_ROOTS), packages_of(*TREE_ROOTS))
    assert "bootc_operator.reconcilers" in arrows["bootc_operator.reconcilers.loops"]
    assert "bootc_operator.cli" in arrows
    cycle = find_cycle(arrows)
    assert cycle is None, "rooms import each other: " + " -> ".join(cycle or ())


def test_no_upward_arrow_between_trees() -> None:
    graph = import_graph(*TREE_ROOTS)
    assert any(e.startswith("bootc_operator.") for e in graph["hack.testenv.controller"])
    assert upward_arrows(graph) == []


def test_an_upward_arrow_and_a_cycle_of_rooms_are_found(tmp_path: Path) -> None:
    for tree in ("hack", "e2e"):
        (tmp_path / tree / "room").mkdir(parents=True)
        (tmp_path / tree / "__init__.py").write_text("")
        (tmp_path / tree / "room" / "__init__.py").write_text("")
    (tmp_path / "hack" / "room" / "a.py").write_text("from e2e.room import b\n")
    (tmp_path / "hack" / "room" / "c.py").write_text("import hack.d\n")
    (tmp_path / "hack" / "d.py").write_text("def f():\n    from hack.room import a\n")
    (tmp_path / "e2e" / "room" / "b.py").write_text("")
    roots = (tmp_path / "hack", tmp_path / "e2e")
    graph = import_graph(*roots)
    assert upward_arrows(graph) == ["hack.room.a -> e2e.room.b"]
    assert find_cycle(graph) is None  # no module cycle: a -/-> c; only the rooms cycle
    arrows = rooms(graph, packages_of(*roots))
    assert find_cycle(arrows) == ["hack.d", "hack.room", "hack.d"]


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
