"""Project-wide facts gathered in one cheap pass before files are processed.

Passes that need to know about other modules (e.g. a function compiled in
``kernels.py`` and called in ``train.py``) read them from the
:class:`ProjectIndex` in ``ctx.project``.  The index must stay picklable (it is
sent to worker processes) and cheap to build.

The pass: read each file's bytes; skip those without ``b"compile"``; parse the
rest with the stdlib :mod:`ast` (much faster than libcst) and collect the
module-level functions compiled by a decorator (``@torch.compile``,
``@torch.compile(...)``) or by ``name = torch.compile(fn, ...)`` at module
level, each with a per-parameter summary (:func:`codemods.floats.summarize_function`).
Module names come from the file's path: the chain of folders holding an
``__init__.py`` plus the file's stem, rooted at the first folder without one.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .floats import FunctionSummary, resolve_ast, summarize_function, torch_aliases

ModuleKey = Tuple[str, str]  # (root folder, dotted module name)


@dataclass
class ProjectIndex:
    #: extra byte strings that make the prefilter keep a file (per path), e.g.
    #: names of compiled functions defined in other modules
    tokens: Dict[str, Tuple[bytes, ...]] = field(default_factory=dict)
    #: path -> (root, dotted module name) for every file of the run
    modules: Dict[str, ModuleKey] = field(default_factory=dict)
    #: (root, module) -> {function name: summary} for module-level compiled functions
    compiled: Dict[ModuleKey, Dict[str, FunctionSummary]] = field(default_factory=dict)

    def prefilter_tokens(self, path: str) -> Tuple[bytes, ...]:
        return self.tokens.get(path, ())

    def resolve(self, path: str, qualified: str) -> Optional[Tuple[ModuleKey, FunctionSummary]]:
        """The compiled function that ``qualified`` (a libcst qualified name as
        seen in ``path``: ``kernels.f``, ``.kernels.f``, ``pkg.kernels.f``) names."""
        me = self.modules.get(path)
        if me is None or "." not in qualified:
            return None
        root, dotted = me
        if qualified.startswith("."):
            level = len(qualified) - len(qualified.lstrip("."))
            package = dotted.split(".")
            if not os.path.basename(path).startswith("__init__."):
                package = package[:-1]
            if level - 1 > len(package):
                return None
            base = package[: len(package) - (level - 1)]
            qualified = ".".join(base + [qualified.lstrip(".")])
            candidates_roots = [root]
        else:
            # a script's own folder is on sys.path when it runs; so is the root
            candidates_roots = [root, os.path.dirname(os.path.abspath(path))]
        module, _, name = qualified.rpartition(".")
        for candidate_root in candidates_roots:
            functions = self.compiled.get((candidate_root, module))
            if functions and name in functions:
                return (candidate_root, module), functions[name]
        # unique match anywhere in the run
        matches = [(key, fns[name]) for key, fns in sorted(self.compiled.items()) if key[1] == module and name in fns]
        return matches[0] if len(matches) == 1 else None


def module_key(path: str, _cache: Optional[Dict[str, bool]] = None) -> ModuleKey:
    """(root, dotted name) of a file: ``pkg/sub/mod.py`` with ``__init__.py`` in
    ``pkg`` and ``sub`` -> (parent of pkg, "pkg.sub.mod")."""
    cache = _cache if _cache is not None else {}

    def is_package(folder: str) -> bool:
        if folder not in cache:
            cache[folder] = os.path.isfile(os.path.join(folder, "__init__.py"))
        return cache[folder]

    full = os.path.abspath(path)
    folder, filename = os.path.split(full)
    stem = filename[:-3] if filename.endswith(".py") else filename
    parts = [] if stem == "__init__" else [stem]
    while is_package(folder) and os.path.dirname(folder) != folder:
        parts.insert(0, os.path.basename(folder))
        folder = os.path.dirname(folder)
    return folder, ".".join(parts)


def _is_compile(expr: ast.AST, aliases: Dict[str, str]) -> bool:
    if isinstance(expr, ast.Call):
        expr = expr.func
    return resolve_ast(expr, aliases) == "torch.compile"


def compiled_functions(tree: ast.Module) -> Dict[str, FunctionSummary]:
    """Module-level functions compiled by decorator or ``name = torch.compile(fn)``."""
    aliases = torch_aliases(tree)
    if not any(v == "torch" or v == "torch.compile" for v in aliases.values()):
        return {}
    defs: Dict[str, ast.FunctionDef] = {}
    out: Dict[str, FunctionSummary] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            defs[stmt.name] = stmt
            if any(_is_compile(d, aliases) for d in stmt.decorator_list):
                out[stmt.name] = summarize_function(stmt, aliases)
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            if isinstance(value, ast.Call) and _is_compile(value.func, aliases) and value.args and isinstance(value.args[0], ast.Name):
                fn = defs.get(value.args[0].id)
                if fn is not None:
                    out[stmt.targets[0].id] = summarize_function(fn, aliases)
    return out


def build_project_index(files: Sequence[str], settings) -> ProjectIndex:
    """One cheap pass over ``files``; unreadable or unparsable files are skipped
    here (the engine reports them)."""
    index = ProjectIndex()
    cache: Dict[str, bool] = {}
    for path in files:
        index.modules[path] = module_key(path, cache)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if b"compile" not in data:
            continue
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        functions = compiled_functions(tree)
        if functions:
            index.compiled[index.modules[path]] = functions
    names: List[bytes] = sorted({name.encode() for fns in index.compiled.values() for name in fns})
    if names:
        tokens = tuple(names)
        for path in files:
            index.tokens[path] = tokens
    return index
