"""The fast screen: can any selected pass find something in this file?

Three steps, cheapest first, each only for files the previous one kept:

1. bytes: every selected rule names byte strings (``Rule.triggers``) one of
   which a file must contain; a file with none of them is out.
2. per-rule byte/``ast`` screens: a rule may say more precisely what a file
   needs, from facts computed once with the stdlib ``ast`` (C parser, no name
   resolution): :class:`ScreenFacts`.
3. everything else goes to libcst + metadata (the engine).

The screen must never drop a file that would have findings, so it is
conservative: a rule without a screen keeps every file its triggers keep, a
file ``ast`` cannot parse is kept when it mentions ``torch`` and ``compile``
(libcst reports the error; other bad files get the engine's stdlib syntax
check), and a file that
mentions a name the project index knows (cross-module facts) is kept for the
rules that read the index when it may pass a float.
``tests/test_scale.py`` compares findings with and without the screen over the
golden inputs and the rules' examples.

A pass opts in by defining ``screen(self, facts) -> bool`` (True: keep), or by
an entry in :data:`BUILTIN_SCREENS` keyed by rule code.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from .optim_table import is_optimizer_name

TORCH = "torch"

#: False: byte triggers only (tests compare findings with and without the screen)
ENABLED = os.environ.get("FIX_RECOMPILES_NO_SCREEN", "") in ("", "0")


#: the word ``compile`` (``torch.compile``, ``re.compile``, ``compile(``, prose)
_COMPILE_WORD = re.compile(rb"compile\b")  # literal first: fast scan; the start is checked apart
#: an import that may bind the name ``compile`` (or ``*``): on one line, over
#: continuations, or in parentheses
_IMPORT_COMPILE = re.compile(rb"import\b(?:[^\n;\\(]|\\\r?\n|\\.)*?(?:\bcompile\b|\*)|import\s*\([^)]*(?:\bcompile\b|\*)")
#: modules whose ``compile`` is common and never torch's
_REGEX_MODULES = (b"re", b"regex")
#: a plain ``import a, b.c,`` prefix (no ``as``) before a module's name
_PLAIN_IMPORT_PREFIX = re.compile(rb"[ \t]*import[ \t]+(?:[\w.]+[ \t]*,[ \t]*)*\Z")


def compile_is_regex_only(data: bytes) -> bool:
    """Do the bytes show that every ``compile`` a compile site could use is
    ``re.compile`` / ``regex.compile``?  True only when every ``.compile``
    attribute is on the bare name ``re`` or ``regex``, each such name occurs
    nowhere else than in ``name.attr`` and in plain ``import`` lists (so it is
    the module, never rebound -- ``import torch as re`` is not plain), and no
    import may bind a name ``compile`` (or ``*``).  Then no torch.compile
    site, no ``model.compile()`` and no compiled function can be in the file,
    so it need not be parsed; anything unusual answers False (parse it)."""
    if _IMPORT_COMPILE.search(data) is not None:
        return False
    used = set()
    for match in _COMPILE_WORD.finditer(data):
        i = match.start()
        if i > 0 and (data[i - 1 : i].isalnum() or data[i - 1 : i] == b"_"):
            continue  # part of a longer name (`torch_compile`): not the word
        # what comes before the word, over spaces and line continuations
        newline = False
        while i > 0 and data[i - 1 : i] in b" \t\f\r\n\\":
            newline = newline or data[i - 1 : i] == b"\n"
            i -= 1
        if data[i - 1 : i] != b".":
            if newline and b"#" in data[data.rfind(b"\n", 0, i) + 1 : i]:
                return False  # `torch.  # comment` on the line before: maybe an attribute
            continue  # not an attribute: `compile(` (builtin, or imported: see above), prose
        dot = i - 1
        while dot > 0 and data[dot - 1 : dot] in b" \t\f\r\n\\":
            dot -= 1
        for name in _REGEX_MODULES:
            start = dot - len(name)
            if start >= 0 and data[start:dot] == name and (start == 0 or not (data[start - 1 : start].isalnum() or data[start - 1 : start] in b"_.")):
                used.add(name)
                break
        else:
            return False
    for name in used:
        at = data.find(name)
        while at >= 0:
            end = at + len(name)
            before, after = data[at - 1 : at] if at else b"", data[end : end + 1]
            whole = not before or not (before.isalnum() or before in (b"_", b"."))
            whole = whole and not (after.isalnum() or after == b"_")
            follow = end
            while data[follow : follow + 1] in (b" ", b"\t"):
                follow += 1  # `re . compile`
            if whole and data[follow : follow + 1] != b".":
                # the bare name, not `name.attr`: only a plain import may bind it
                line_start = data.rfind(b"\n", 0, at) + 1
                if _PLAIN_IMPORT_PREFIX.match(data, line_start, at) is None:
                    return False  # rebound, a parameter, a string, a comment ...: parse to be sure
            at = data.find(name, end)
    return True


def _word_byte(byte: int) -> bool:
    # ASCII letters, digits, `_`, and any non-ASCII byte (identifiers may use them)
    return byte >= 0x80 or byte == 0x5F or 0x30 <= byte <= 0x39 or 0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A


def mentions_any(data: bytes, names: Sequence[bytes]) -> bool:
    """Does one of ``names`` occur in the bytes as a whole word (not inside a
    longer name: ``f`` is not in ``def``)?  The project index's names of
    compiled functions, which a file must mention to call one."""
    size = len(data)
    for name in names:
        at = data.find(name)
        while at >= 0:
            end = at + len(name)
            if (at == 0 or not _word_byte(data[at - 1])) and (end >= size or not _word_byte(data[end])):
                return True
            at = data.find(name, end)
    return False


def mentions_compile(data: bytes) -> bool:
    """May the file hold a compile site or a compiled function?  Cheap byte
    tests: ``torch`` and ``compile`` both occur, and not only as ``re.compile``."""
    return b"compile" in data and TORCH.encode() in data and not compile_is_regex_only(data)


class ScreenFacts:
    """Facts about one file from the stdlib ``ast``, computed on first use
    (``ensure()``; the properties call it)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self._done = False
        self.parse_failed = False
        #: the module imports torch or a torch submodule (needed for any
        #: ``torch.compile`` qualified name and any nn.Module base)
        self.imports_torch = False
        #: ``from torch import compile`` / ``from torch import *`` somewhere
        self.imports_compile = False
        #: names bound by ``from torch import compile as X``
        self.compile_aliases: Set[str] = set()
        #: an attribute ``X.compile`` that may be torch.compile or Module.compile
        #: (X a torch alias, or anything but an imported name when the module
        #: defines a class with bases)
        self.compile_attribute = False
        #: keyword names passed to calls whose callee is such an attribute or a
        #: name bound to torch.compile (the compile option keywords)
        self.compile_keywords: Set[str] = set()
        #: keyword name -> the value expressions passed for it to such calls
        self.compile_keyword_values: Dict[str, List[ast.expr]] = {}
        #: a float literal or a true division (``/``, ``/=``) somewhere
        self.float_syntax = False
        #: last names (``f``, ``step``, ``model``) through which a compiled
        #: callable can be reached: the targets of ``x = torch.compile(...)``,
        #: functions decorated with it, ``x`` of ``x.compile()``
        self.compile_bindings: Set[str] = set()
        #: ``torch.compile(g)(x, ...)``: a compiled callable called in place
        self.compile_called_in_place = False
        #: compile calls pass ``**name`` (a name, so a visible options dict)
        self.compile_star_names: Set[str] = set()
        #: a call of a ``torch.optim`` class (not a scheduler), as imports resolve it
        self.optimizer_call = False
        #: a ``.step(...)`` call in code that may run compiled (a compiled
        #: function, a compiled module's ``forward``, what they call by name),
        #: or ``torch.compile(opt.step)``
        self.step_in_compiled = False
        #: a class body defines ``forward``
        self.forward_method = False
        #: names assigned an int literal (``self.n = 0``, ``n = 0`` in a class body)
        self.int_inits: Set[str] = set()
        #: names ``n`` changed as ``self.n += ...`` or ``self.n = <uses self.n>``
        self.self_attr_updates: Set[str] = set()
        #: last names of callees called with an argument that may be a Python
        #: float (:class:`_Numbers`, a superset of what FR003 proves a float)
        self.float_called: Set[str] = set()
        #: the analysis ran out of budget: any callee may get a float
        self.float_called_any = False
        #: ``from m import name as alias``: alias -> the names it stands for
        self.import_aliases: Dict[str, Set[str]] = {}

    def _compute(self) -> None:
        try:
            tree = ast.parse(self.data)
        except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError):
            self._done = True
            self.parse_failed = True
            return
        self.compute_from(tree)

    @classmethod
    def from_tree(cls, tree: ast.Module) -> "ScreenFacts":
        """The facts of an already parsed file, without its bytes (picklable
        and small; :func:`select` attaches the bytes again)."""
        facts = cls(b"")
        facts.compute_from(tree)
        return facts

    def compute_from(self, tree: ast.Module) -> None:
        self._done = True
        calls: List[Tuple[ast.Call, _Scope]] = []
        attrs: List[ast.Attribute] = []
        torch_aliases: Set[str] = set()
        imported: Set[str] = set()  # names bound by imports (other than torch aliases)
        stored: Set[str] = set()  # names bound any other way
        has_class_with_bases = False
        #: local name -> torch paths an import binds it to (all of them)
        torch_paths: Dict[str, Set[str]] = {}
        star_from_torch = False
        assigned: List[ast.AST] = []  # Assign / AnnAssign nodes (compile bindings, int inits)
        # `math` / `random` as imports bind them: calls through these may give floats
        numeric_modules: Set[str] = set()  # local names of the modules (`math`, `m`)
        numeric_functions: Set[str] = set()  # names imported from them (`cos`, `uniform`, `*`)
        decorated: List[Tuple[ast.AST, _Scope]] = []  # function definitions with decorators, and their scopes
        defs: Dict[str, List[_Scope]] = {}  # function name -> the scopes of the functions so named
        module_scope = _Scope(None)
        scopes: List[_Scope] = [module_scope]
        #: names declared `global` / `nonlocal` somewhere: looked up in every scope
        declared: Set[str] = set()
        # depth-first, with the scope (function, lambda, class) each node is in
        stack: List[Tuple[ast.AST, _Scope]] = [(tree, module_scope)]
        fields_of = _FIELDS
        ast_type = ast.AST
        while stack:
            node, scope = stack.pop()
            kind = type(node)
            inner = scope
            if kind is ast.Attribute:
                if node.attr == "compile":  # type: ignore[attr-defined]
                    attrs.append(node)  # type: ignore[arg-type]
            elif kind is ast.Name:
                if type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
                    stored.add(node.id)  # type: ignore[attr-defined]
                continue  # no children worth visiting
            elif kind is ast.Call:
                calls.append((node, scope))  # type: ignore[arg-type]
                func = node.func  # type: ignore[attr-defined]
                if type(func) is ast.Name:
                    scope.called.add(func.id)
                elif type(func) is ast.Attribute:
                    if func.attr == "step":
                        scope.step_call = True
                    elif _is_self(func.value):
                        scope.called.add(func.attr)
            elif kind is ast.Constant:
                if type(node.value) is float:  # type: ignore[attr-defined]
                    self.float_syntax = True
                continue
            elif kind is ast.BinOp:
                if type(node.op) is ast.Div:  # type: ignore[attr-defined]
                    self.float_syntax = True
            elif kind is ast.AugAssign:
                target = node.target  # type: ignore[attr-defined]
                if type(node.op) is ast.Div:  # type: ignore[attr-defined]
                    self.float_syntax = True
                if isinstance(target, ast.Name):
                    scope.bind(target.id, ("aug", node, scope))
                elif isinstance(target, ast.Attribute) and _is_self(target.value):
                    self.self_attr_updates.add(target.attr)
            elif kind is ast.Assign:
                assigned.append(node)
                for target in node.targets:  # type: ignore[attr-defined]
                    if isinstance(target, ast.Name):
                        scope.bind(target.id, ("assign", node.value, scope))  # type: ignore[attr-defined]
                    elif isinstance(target, ast.Attribute) and _is_self(target.value) and any(
                        isinstance(sub, ast.Attribute) and sub.attr == target.attr for sub in ast.walk(node.value)  # type: ignore[attr-defined]
                    ):
                        self.self_attr_updates.add(target.attr)
            elif kind is ast.AnnAssign:
                assigned.append(node)
                if isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
                    scope.bind(node.target.id, ("ann", node, scope))  # type: ignore[attr-defined]
            elif kind is ast.For or kind is ast.AsyncFor:
                if isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
                    scope.bind(node.target.id, ("for", node.iter, scope))  # type: ignore[attr-defined]
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                inner = _Scope(scope)  # its parameters and body (decorators too: a superset)
                scopes.append(inner)
                if node.decorator_list:  # type: ignore[attr-defined]
                    decorated.append((node, inner))
                defs.setdefault(node.name, []).append(inner)  # type: ignore[attr-defined]
            elif kind is ast.Lambda:
                inner = _Scope(scope)
                scopes.append(inner)
            elif kind is ast.arg:
                stored.add(node.arg)  # type: ignore[attr-defined]
                scope.bind(node.arg, ("param", node.annotation, scope))  # type: ignore[attr-defined]
            elif kind is ast.Global or kind is ast.Nonlocal:
                declared.update(node.names)  # type: ignore[attr-defined]
                continue
            elif kind is ast.ClassDef:
                if node.bases:  # type: ignore[attr-defined]
                    has_class_with_bases = True
                for stmt in node.body:  # type: ignore[attr-defined]
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == "forward":
                        self.forward_method = True
                inner = _Scope(scope)
                scopes.append(inner)
            elif kind is ast.Import:
                for alias in node.names:  # type: ignore[attr-defined]
                    if alias.name in _NUMERIC_MODULES:
                        numeric_modules.add(alias.asname or alias.name)
                    if alias.name == TORCH or alias.name.startswith(TORCH + "."):
                        self.imports_torch = True
                        local = alias.asname or TORCH
                        torch_paths.setdefault(local, set()).add(alias.name if alias.asname else TORCH)
                        if alias.asname is None or alias.name == TORCH:
                            torch_aliases.add(alias.asname or TORCH)
                            continue
                    imported.add(alias.asname or alias.name.split(".")[0])
                continue
            elif kind is ast.ImportFrom:
                module = node.module or ""  # type: ignore[attr-defined]
                from_torch = node.level == 0 and module == TORCH  # type: ignore[attr-defined]
                if node.level == 0 and (from_torch or module.startswith(TORCH + ".")):  # type: ignore[attr-defined]
                    self.imports_torch = True
                if node.level == 0 and module in _NUMERIC_MODULES:  # type: ignore[attr-defined]
                    numeric_functions.update(alias.asname or alias.name for alias in node.names)  # type: ignore[attr-defined]
                for alias in node.names:  # type: ignore[attr-defined]
                    if node.level == 0 and (from_torch or module.startswith(TORCH + ".")):  # type: ignore[attr-defined]
                        if alias.name == "*":
                            star_from_torch = True
                        else:
                            torch_paths.setdefault(alias.asname or alias.name, set()).add(f"{module}.{alias.name}")
                    if from_torch and alias.name in ("compile", "*"):
                        self.imports_compile = True
                        self.compile_aliases.add(alias.asname or "compile")
                    else:
                        imported.add(alias.asname or alias.name)
                    if alias.asname is not None:
                        self.import_aliases.setdefault(alias.asname, set()).add(alias.name)
                continue
            names = fields_of.get(kind)
            if names is None:
                names = fields_of[kind] = tuple(f for f in kind._fields if f not in _SKIP_FIELDS)
            for name in names:
                value = getattr(node, name, None)
                if type(value) is list:
                    for item in value:
                        if isinstance(item, ast_type):
                            stack.append((item, inner))
                elif isinstance(value, ast_type):
                    stack.append((value, inner))
        imported -= stored

        def compile_callee(func: ast.expr) -> bool:
            if isinstance(func, ast.Name):
                return func.id in self.compile_aliases
            if not (isinstance(func, ast.Attribute) and func.attr == "compile"):
                return False
            value = func.value
            if isinstance(value, ast.Name) and value.id in torch_aliases:
                return True  # torch.compile under any alias
            # model.compile(): needs an nn.Module subclass defined here; a name
            # bound only by an import (re, regex ...) is never a module instance
            return has_class_with_bases and not (isinstance(value, ast.Name) and value.id in imported)

        def is_compile_call(expr: ast.expr) -> bool:
            # torch.compile(...) / torch.compile(**kw)(fn): what a binding may hold
            if not isinstance(expr, ast.Call):
                return False
            if isinstance(expr.func, ast.Call):
                expr = expr.func
            return compile_callee(expr.func)

        self.compile_attribute = any(compile_callee(attr) for attr in attrs)
        numbers = _Numbers(scopes, declared, numeric_modules, numeric_functions)
        regions: List[_Scope] = []  # scopes of code that runs compiled

        def compiled_target(target: ast.expr) -> None:
            # what torch.compile(target) / target.compile() compiles: a function
            # by name, a method `self.f`, a module (its `forward`), `opt.step`
            if isinstance(target, ast.Attribute) and target.attr == "step":
                self.step_in_compiled = True
            name = target.id if isinstance(target, ast.Name) else target.attr if isinstance(target, ast.Attribute) else None
            if name is not None:
                regions.extend(defs.get(name, ()))
            regions.extend(defs.get("forward", ()))
        for call, scope in calls:
            func = call.func
            if any(not isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is not None for kw in call.keywords):
                last = _last_name(func)
                if last is not None:
                    if not self.float_called_any and last not in self.float_called:
                        values = [a for a in call.args if not isinstance(a, ast.Starred)] + [kw.value for kw in call.keywords if kw.arg is not None]
                        try:
                            if any(numbers.may_be_float(v, scope) for v in values):
                                self.float_called.add(last)
                        except _OutOfBudget:
                            self.float_called_any = True
                if isinstance(func, ast.Call) and compile_callee(func.func):
                    self.compile_called_in_place = True
                    if call.args and not isinstance(call.args[0], ast.Starred):
                        compiled_target(call.args[0])  # torch.compile(**kw)(fn)
            if compile_callee(func):
                if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id in torch_aliases):
                    last = _last_name(func.value)  # model.compile(): calls of `model`
                    if last is not None:
                        self.compile_bindings.add(last)
                    compiled_target(func.value)
                elif call.args and not isinstance(call.args[0], ast.Starred):
                    compiled_target(call.args[0])
                for kw in call.keywords:
                    if kw.arg is None:
                        if isinstance(kw.value, ast.Name):
                            self.compile_star_names.add(kw.value.id)
                    else:
                        self.compile_keywords.add(kw.arg)
                        self.compile_keyword_values.setdefault(kw.arg, []).append(kw.value)
            if not self.optimizer_call:
                self.optimizer_call = _is_optimizer_callee(func, torch_paths, star_from_torch)
        for node in assigned:
            value = node.value  # type: ignore[attr-defined]
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]  # type: ignore[attr-defined]
            if value is not None and is_compile_call(value):
                for target in targets:
                    last = _last_name(target)
                    if last is not None:
                        self.compile_bindings.add(last)
            if value is not None and _is_int_literal(value):
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.int_inits.add(target.id)
                    elif isinstance(target, ast.Attribute) and _is_self(target.value):
                        self.int_inits.add(target.attr)
        for fn, fn_scope in decorated:
            for dec in fn.decorator_list:  # type: ignore[attr-defined]
                if compile_callee(dec) or (isinstance(dec, ast.Call) and compile_callee(dec.func)):
                    self.compile_bindings.add(fn.name)  # type: ignore[attr-defined]
                    regions.append(fn_scope)
        # an optimizer step in compiled code (FR004's region): the compiled
        # functions, the `forward` of any compiled module, and what they call
        # by name, nested scopes included (children come after their parents)
        for inner in reversed(scopes):
            if inner.parent is not None:
                inner.parent.called |= inner.called
                inner.parent.step_call = inner.parent.step_call or inner.step_call
        seen_regions: Set[int] = set()
        while regions and not self.step_in_compiled:
            region = regions.pop()
            if id(region) in seen_regions:
                continue
            seen_regions.add(id(region))
            if region.step_call:
                self.step_in_compiled = True
            for name in region.called:
                regions.extend(defs.get(name, ()))

    def ensure(self) -> "ScreenFacts":
        """Compute the facts (once); call before reading the fields directly."""
        if not self._done:
            self._compute()
        return self

    @property
    def may_compile(self) -> bool:
        """Could :class:`~codemods.analysis.ModuleAnalysis` find a compile site?

        Every recognised form needs torch imported (qualified names resolve
        through imports only) and either an attribute named ``compile``
        (``torch.compile``, ``th.compile``, ``model.compile``) or
        ``from torch import compile``.  So the bytes ``torch`` and ``compile``
        are needed too, and not only as ``re.compile`` (:func:`mentions_compile`,
        checked first: no parse for files failing it; an unparsable file
        failing it is reported by the engine's checks).
        """
        if not self._done and not mentions_compile(self.data):
            return False
        if self.ensure().parse_failed:
            return True
        return self.imports_torch and (self.compile_attribute or self.imports_compile)

    def compile_option(self, keyword: str) -> bool:
        """Could a compile site pass the option ``keyword`` explicitly?"""
        if not self.may_compile:
            return False
        return self.parse_failed or keyword in self.compile_keywords


def _last_name(expr: ast.expr) -> Optional[str]:
    """``f`` for ``f``, ``step`` for ``self.opt.step``; None for other expressions."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def _is_self(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Name) and expr.id == "self"


def _is_int_literal(expr: ast.expr) -> bool:
    # what FR005 counts as an int initial value: 3, -1, +2, int(...)
    while isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        expr = expr.operand
    if isinstance(expr, ast.Constant):
        return type(expr.value) is int
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "int"


_NUMERIC_MODULES = ("math", "random")
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
_AUG_ARITHMETIC = _ARITHMETIC
#: the marker of a name met again while it is being resolved (``t = t * 0.9``)
_CYCLE = "cycle"
_FLOAT = frozenset({"float"})
_INT = frozenset({"int"})
_NUMBER = frozenset({"float", "int"})
_NONE: frozenset = frozenset()
_CYCLE_ONLY = frozenset({_CYCLE})


class _OutOfBudget(Exception):
    pass


class _Scope:
    """A function, lambda or class body (or the module) and the names bound in it."""

    __slots__ = ("parent", "bindings", "called", "step_call")

    def __init__(self, parent: Optional["_Scope"]) -> None:
        self.parent = parent
        #: name -> (kind, node, scope) for each binding of it here
        self.bindings: Dict[str, List[tuple]] = {}
        #: names called here or in nested scopes: ``f(...)``, ``self.f(...)``
        self.called: Set[str] = set()
        #: a ``<x>.step(...)`` call here or in a nested scope
        self.step_call = False

    def bind(self, name: str, binding: tuple) -> None:
        found = self.bindings.get(name)
        if found is None:
            self.bindings[name] = [binding]
        else:
            found.append(binding)


#: per AST node type, the fields the screen's walk descends into
_FIELDS: Dict[type, Tuple[str, ...]] = {}
#: expression contexts and operators: nothing below them
_SKIP_FIELDS = frozenset({"ctx", "op", "ops"})


class _Numbers:
    """Which Python number kinds ("float", "int", :data:`_CYCLE`) an expression
    may have: the stdlib-``ast`` mirror of FR003's ``float_reason`` (libcst,
    scope-aware), kept a superset of it so the screen never drops a finding.

    A name's kinds are the union over its bindings in the scope it is used in
    and in every enclosing scope (libcst takes the innermost scope binding it
    only), or over every binding in the module for a name declared ``global``
    or ``nonlocal`` anywhere; libcst also needs every binding of a name to be
    a number, which can only make it find fewer floats than this."""

    def __init__(self, scopes: List[_Scope], declared: Set[str], numeric_modules: Set[str], numeric_functions: Set[str]) -> None:
        #: every scope of the module
        self.scopes = scopes
        self.declared = declared
        #: names the imports bind to the modules ``math`` / ``random``, and to
        #: names imported from them: ``math.cos()`` / ``cos()`` may be a float
        self.numeric_modules = numeric_modules
        self.numeric_functions = numeric_functions
        self.memo: Dict[Tuple[int, str], frozenset] = {}
        self.budget = 20000
        self._everywhere: Optional[Dict[str, List[tuple]]] = None

    def may_be_float(self, expr: ast.expr, scope: _Scope) -> bool:
        return "float" in self.kinds(expr, scope, frozenset())

    def _bindings(self, name: str, scope: _Scope) -> List[tuple]:
        if name in self.declared:
            if self._everywhere is None:
                self._everywhere = {}
                for cur in self.scopes:
                    for key, found in cur.bindings.items():
                        self._everywhere.setdefault(key, []).extend(found)
            return self._everywhere.get(name, [])
        out: List[tuple] = []
        cur: Optional[_Scope] = scope
        while cur is not None:
            found = cur.bindings.get(name)
            if found:
                out.extend(found)
            cur = cur.parent
        return out

    def kinds(self, expr: ast.expr, scope: _Scope, seen: frozenset) -> frozenset:
        self.budget -= 1
        if self.budget < 0:
            raise _OutOfBudget
        kind = type(expr)
        if kind is ast.Constant:
            value_type = type(expr.value)  # type: ignore[attr-defined]
            return _FLOAT if value_type is float else _INT if value_type is int else _NONE
        if kind is ast.UnaryOp:
            if isinstance(expr.op, (ast.USub, ast.UAdd)):  # type: ignore[attr-defined]
                return self.kinds(expr.operand, scope, seen)  # type: ignore[attr-defined]
            return _NONE
        if kind is ast.BinOp:
            if not isinstance(expr.op, _ARITHMETIC):  # type: ignore[attr-defined]
                return _NONE
            left = self.kinds(expr.left, scope, seen)  # type: ignore[attr-defined]
            if not left:
                return _NONE
            right = self.kinds(expr.right, scope, seen)  # type: ignore[attr-defined]
            if not right:
                return _NONE
            both = left | right
            out = set()
            if isinstance(expr.op, ast.Div) or "float" in both:  # type: ignore[attr-defined]
                out.add("float")
            if not isinstance(expr.op, ast.Div):  # type: ignore[attr-defined]
                if "int" in left and "int" in right:
                    out.add("int")
                if _CYCLE in both:
                    out.add(_CYCLE)
            return frozenset(out)
        if kind is ast.Call:
            return self._call(expr, scope, seen)  # type: ignore[arg-type]
        if kind is ast.Name:
            key = (id(scope), expr.id)  # type: ignore[attr-defined]
            if key in seen:
                return _CYCLE_ONLY
            if not seen and key in self.memo:
                return self.memo[key]
            out_kinds: Set[str] = set()
            inner = seen | {key}
            for binding in self._bindings(expr.id, scope):  # type: ignore[attr-defined]
                out_kinds |= self._binding(binding, inner)
            result = frozenset(out_kinds)
            if not seen:
                self.memo[key] = result
            return result
        return _NONE

    def _call(self, expr: ast.Call, scope: _Scope, seen: frozenset) -> frozenset:
        func = expr.func
        last = _last_name(func)
        if last == "float":
            return _FLOAT
        if last in ("int", "len"):
            return _INT
        if last in ("round", "abs", "max", "min"):
            out: Set[str] = set()
            for arg in expr.args:
                out |= self.kinds(arg, scope, seen) if not isinstance(arg, ast.Starred) else _NUMBER
            return frozenset(out | (_INT if last == "round" else _NONE))
        if isinstance(func, ast.Name):
            if func.id in self.numeric_functions or "*" in self.numeric_functions:
                return _NUMBER  # a name imported from math / random
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.numeric_modules:
            return _NUMBER  # math.cos(...), random.uniform(...)
        return _NONE

    def _binding(self, binding: tuple, seen: frozenset) -> frozenset:
        kind, node, scope = binding
        if kind == "assign":
            return self.kinds(node, scope, seen)
        if kind == "param":
            return _FLOAT if _names(node, "float") else _INT if _names(node, "int") else _NONE
        if kind == "ann":
            if _names(node.annotation, "float"):
                return _FLOAT
            return self.kinds(node.value, scope, seen) if node.value is not None else _NONE
        if kind == "aug":
            if not isinstance(node.op, _AUG_ARITHMETIC):
                return _NONE
            value = self.kinds(node.value, scope, seen)
            if not value:
                return _NONE
            if "float" in value or isinstance(node.op, ast.Div):
                return frozenset({"float", "int", _CYCLE})
            return frozenset({"int", _CYCLE})
        if kind == "for":
            if isinstance(node, ast.Call) and _last_name(node.func) == "range":
                return _INT
            if isinstance(node, (ast.List, ast.Tuple)):
                out: Set[str] = set()
                for element in node.elts:
                    out |= self.kinds(element, scope, seen) if not isinstance(element, ast.Starred) else _NUMBER
                return frozenset(out)
            return _NONE
        return _NONE


def _names(annotation: Optional[ast.expr], name: str) -> bool:
    """The annotation is ``name`` (or ``builtins.name``, or ends in it)."""
    if annotation is None:
        return False
    return _last_name(annotation) == name




def _is_optimizer_callee(func: ast.expr, torch_paths: Dict[str, Set[str]], star_from_torch: bool) -> bool:
    """Could ``func`` name a ``torch.optim`` optimizer class, as the module's
    imports resolve it (every import of a name counts)?"""
    parts: List[str] = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return False
    if not parts and star_from_torch and func.id[:1].isupper():
        return True  # `from torch.optim import *`: any class name may be one
    tail = ".".join(reversed(parts))
    for base in torch_paths.get(func.id, ()):
        path = f"{base}.{tail}" if tail else base
        if is_optimizer_name(path):  # the name FR004 resolves through libcst
            return True
    return False


_GRAPH_BREAK_MARKER = re.compile(rb"#[ \t]*fix-recompiles:[ \t]*graph-break")


def _fr001(facts: ScreenFacts) -> bool:
    # FR001 reports compile sites that pass `dynamic=` explicitly with a value
    # other than the literals True / None
    if b"dynamic" not in facts.data or not facts.compile_option("dynamic"):
        return False
    if facts.parse_failed:
        return True
    return any(not _is_true_or_none(value) for value in facts.compile_keyword_values.get("dynamic", ()))


def _is_true_or_none(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and (value.value is True or value.value is None)


def _fr002(facts: ScreenFacts) -> bool:
    # FR002 rewrites `# fix-recompiles: graph-break` comment lines
    return _GRAPH_BREAK_MARKER.search(facts.data) is not None


def _may_pass_float(facts: ScreenFacts) -> bool:
    # an argument visibly a float: a float literal, `/`, `float` (call or
    # annotation), `math.*` or `random.*`
    data = facts.data
    return b"float" in data or b"math" in data or b"random" in data or facts.ensure().parse_failed or facts.float_syntax


def _fr003(facts: ScreenFacts) -> bool:
    # float-args: a call of a function compiled here (through a name it is
    # bound to, or in place) with an argument visibly a float
    if not facts.may_compile:
        return False
    if facts.parse_failed:
        return True
    if facts.compile_called_in_place:
        return _may_pass_float(facts)
    return facts.float_called_any or not facts.compile_bindings.isdisjoint(facts.float_called)


def fr003_cross_module(facts: ScreenFacts, names: Sequence[bytes] = ()) -> bool:
    """float-args through the project index: a file that calls a function the
    index lists as compiled in another module (``names``, the index's tokens)
    with an argument that may be a float."""
    if facts.ensure().parse_failed or facts.float_called_any:
        return True
    called = set(facts.float_called)
    for local in facts.float_called:
        called |= facts.import_aliases.get(local, set())  # `from kernels import smooth as sm; sm(...)`
    return any(name.decode() in called for name in names)


def _fr004(facts: ScreenFacts) -> bool:
    # optimizer-scalars: a `torch.optim` optimizer built here, stepped in a
    # compiled region (`opt.step()` in compiled code, `torch.compile(opt.step)`)
    if not facts.may_compile:
        return False
    return facts.parse_failed or (facts.optimizer_call and facts.step_in_compiled)


def _fr005(facts: ScreenFacts) -> bool:
    # unspec-int-attrs: a compiled module whose forward updates `self.n`,
    # initialised to an int
    if not facts.may_compile:
        return False
    return facts.parse_failed or (facts.forward_method and not facts.int_inits.isdisjoint(facts.self_attr_updates))


#: screens for rules whose modules do not define ``screen`` themselves; each
#: mirrors the first condition of the rule's ``check`` (tests compare findings
#: with and without the screen on every golden input and rule example)
BUILTIN_SCREENS: Dict[str, Callable[[ScreenFacts], bool]] = {
    "FR001": _fr001,  # dynamic-shapes: `dynamic=` other than True/None
    "FR002": _fr002,  # graph-break: the marker comment
    "FR003": _fr003,  # float-args: calls of compiled functions with float arguments
    "FR004": _fr004,  # optimizer-scalars: a torch.optim optimizer stepped in a compiled region
    "FR005": _fr005,  # unspec-int-attrs: compiled modules updating an int attribute
    "FR006": _fr001,  # recompile-limit: `dynamic=False` sites only
}


#: rules that read the project index (``ctx.project``), with the screen for a
#: file that names something the index lists; for other rules such a file is
#: screened as usual (they never look at other modules)
CROSS_MODULE_SCREENS: Dict[str, Callable[[ScreenFacts, Sequence[bytes]], bool]] = {
    "FR003": fr003_cross_module,  # float-args: floats passed to functions compiled elsewhere
}


def rule_screen(rule) -> Optional[Callable[[ScreenFacts], bool]]:
    own = getattr(rule, "screen", None)
    if callable(own):
        return own
    return BUILTIN_SCREENS.get(rule.code)


class Screened(NamedTuple):
    #: the rules that may find something in the file, in ``rules`` order
    rules: List
    #: True when a token of the project index occurs in the file
    cross_module: bool
    #: the ``ast`` facts, when a screen needed them (else None)
    facts: Optional[ScreenFacts]

    @property
    def parsed_ok(self) -> bool:
        """The stdlib parser accepted the file (so it has no syntax error)."""
        return self.facts is not None and self.facts._done and not self.facts.parse_failed


def select(data: bytes, rules: Sequence, extra: Sequence[bytes] = (), *, use_screens: bool = True, facts_of_data: Optional[ScreenFacts] = None) -> Screened:
    """Which of ``rules`` the engine must run on this file (none: no libcst).

    A rule runs when one of its triggers occurs and its screen keeps the file;
    when a project-index token occurs, the rules that read the index
    (:data:`CROSS_MODULE_SCREENS`) run if their cross-module screen keeps the
    file, whatever their triggers (another module's facts may apply here).
    ``facts_of_data``: the facts of exactly these bytes, already computed
    (:meth:`ScreenFacts.from_tree`, by the project index's parse); used where
    they would have been computed."""
    cross = bool(extra) and mentions_any(data, extra)
    facts: Optional[ScreenFacts] = None
    out: List = []
    for rule in rules:
        triggered = any(t in data for t in rule.triggers)
        if cross and rule.code in CROSS_MODULE_SCREENS:
            # another module's compiled function, or (triggers and screen) this module's
            cross_screen, own = CROSS_MODULE_SCREENS[rule.code], rule_screen(rule)
            screen = (
                (lambda f, c=cross_screen, o=own, t=triggered: c(f, extra) or (t and (o is None or o(f))))  # type: ignore[misc]
                if use_screens
                else None
            )
        elif triggered:
            screen = rule_screen(rule) if use_screens else None
        else:
            continue
        if screen is None:
            out.append(rule)
            continue
        if facts is None:
            facts = ScreenFacts(data)
            if facts_of_data is not None:
                facts = facts_of_data
                facts.data = data
        if screen(facts):
            out.append(rule)
    return Screened(out, cross, facts)


def keep(data: bytes, rules: Sequence, extra: Sequence[bytes] = (), *, use_screens: bool = True) -> bool:
    """Should the engine parse this file with libcst?"""
    return bool(select(data, rules, extra, use_screens=use_screens).rules)
