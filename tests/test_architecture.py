"""The layout is the architecture (README, "Architecture"): each folder of
``codemods/`` is a layer, and a module imports only from its own layer or the
layers below it.  A module that reaches up is listed in ``KNOWN_UPWARD`` with
the reason; the list must be exact, so fixing one means deleting its line.
Module-level imports form no cycle, and every module says its role in a
docstring."""

from __future__ import annotations

import ast
import os
from typing import Dict, Iterator, Set, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "codemods")

#: lowest first: the shared vocabulary, the model of the source, the causes a
#: trace names (a vocabulary the rules declare against), the rules, the run,
#: the trace's reading and plans, the modes
LAYERS = {
    "codemods": 0,  # findings.py, cst_edits.py, _lazy.py
    "codemods.analysis": 1,
    "codemods.trace.causes": 1,
    "codemods.transforms": 2,
    "codemods.pipeline": 3,
    "codemods.trace": 4,
    "codemods.modes": 5,
}

#: (importer, imported) pairs that reach up a layer, each with why it is still so
KNOWN_UPWARD: Set[Tuple[str, str]] = set()


def _modules() -> Iterator[Tuple[str, str]]:
    for folder, subfolders, names in os.walk(PACKAGE):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                yield (rel[: -len(".__init__")] if rel.endswith(".__init__") else rel), path


def _layer(module: str) -> int:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def _imports(module: str, path: str) -> Iterator[Tuple[str, bool]]:
    """(imported module, at module level) for every import of the package."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
    top = set(id(n) for n in tree.body)
    known = {m for m, _ in _modules()}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if sub in known else target), id(node) in top


def _graph() -> Dict[str, Set[Tuple[str, bool]]]:
    return {module: set(_imports(module, path)) for module, path in _modules()}


def test_no_module_reaches_up_a_layer():
    upward = {
        (module, target)
        for module, targets in _graph().items()
        for target, _top in targets
        if target.startswith("codemods") and _layer(target) > _layer(module)
    }
    assert upward == KNOWN_UPWARD


def test_module_level_imports_form_no_cycle():
    graph = {m: {t for t, top in ts if top and t != m} for m, ts in _graph().items()}
    state: Dict[str, int] = {}

    def visit(node: str, path: Tuple[str, ...]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            assert state.get(nxt) != 1, " -> ".join(path + (node, nxt))
            if nxt not in state:
                visit(nxt, path + (node,))
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, ())


def test_every_module_says_its_role():
    for module, path in _modules():
        doc = ast.get_docstring(ast.parse(open(path, encoding="utf-8").read()))
        assert doc and doc.strip(), f"{module}: no docstring"
