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
check), and files that
mention a name the project index knows (cross-module facts) are always kept.
``tests/test_scale.py`` compares findings with and without the screen over the
golden inputs and the rules' examples.

A pass opts in by defining ``screen(self, facts) -> bool`` (True: keep), or by
an entry in :data:`BUILTIN_SCREENS` keyed by rule code.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Set

TORCH = "torch"

#: False: byte triggers only (tests compare findings with and without the screen)
ENABLED = os.environ.get("FIX_RECOMPILES_NO_SCREEN", "") in ("", "0")


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
        #: a call of such a callee passes ``**kwargs``
        self.compile_star_kwargs = False
        #: a float literal or a true division (``/``, ``/=``) somewhere
        self.float_syntax = False
        #: ``x.attr += ...`` or ``x.attr = <expression using x.attr>`` somewhere
        self.attribute_update = False

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
        calls: List[ast.Call] = []
        attrs: List[ast.Attribute] = []
        torch_aliases: Set[str] = set()
        imported: Set[str] = set()  # names bound by imports (other than torch aliases)
        stored: Set[str] = set()  # names bound any other way
        has_class_with_bases = False
        for node in ast.walk(tree):
            kind = type(node)
            if kind is ast.Attribute:
                if node.attr == "compile":  # type: ignore[attr-defined]
                    attrs.append(node)  # type: ignore[arg-type]
            elif kind is ast.Call:
                calls.append(node)  # type: ignore[arg-type]
            elif kind is ast.Constant:
                if type(node.value) is float:  # type: ignore[attr-defined]
                    self.float_syntax = True
            elif kind is ast.Div:
                self.float_syntax = True
            elif kind is ast.AugAssign:
                if isinstance(node.target, ast.Attribute):  # type: ignore[attr-defined]
                    self.attribute_update = True
            elif kind is ast.Assign:
                if not self.attribute_update:
                    for target in node.targets:  # type: ignore[attr-defined]
                        if isinstance(target, ast.Attribute) and any(
                            isinstance(sub, ast.Attribute) and sub.attr == target.attr for sub in ast.walk(node.value)  # type: ignore[attr-defined]
                        ):
                            self.attribute_update = True
            elif kind is ast.Name:
                if not isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                    stored.add(node.id)  # type: ignore[attr-defined]
            elif kind is ast.arg:
                stored.add(node.arg)  # type: ignore[attr-defined]
            elif kind is ast.ClassDef:
                if node.bases:  # type: ignore[attr-defined]
                    has_class_with_bases = True
            elif kind is ast.Import:
                for alias in node.names:  # type: ignore[attr-defined]
                    if alias.name == TORCH or alias.name.startswith(TORCH + "."):
                        self.imports_torch = True
                        if alias.asname is None or alias.name == TORCH:
                            torch_aliases.add(alias.asname or TORCH)
                            continue
                    imported.add(alias.asname or alias.name.split(".")[0])
            elif kind is ast.ImportFrom:
                module = node.module or ""  # type: ignore[attr-defined]
                from_torch = node.level == 0 and module == TORCH  # type: ignore[attr-defined]
                if node.level == 0 and (from_torch or module.startswith(TORCH + ".")):  # type: ignore[attr-defined]
                    self.imports_torch = True
                for alias in node.names:  # type: ignore[attr-defined]
                    if from_torch and alias.name in ("compile", "*"):
                        self.imports_compile = True
                        self.compile_aliases.add(alias.asname or "compile")
                    else:
                        imported.add(alias.asname or alias.name)
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

        self.compile_attribute = any(compile_callee(attr) for attr in attrs)
        for call in calls:
            if compile_callee(call.func):
                for kw in call.keywords:
                    if kw.arg is None:
                        self.compile_star_kwargs = True
                    else:
                        self.compile_keywords.add(kw.arg)
                        self.compile_keyword_values.setdefault(kw.arg, []).append(kw.value)

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
        are needed too (checked first: no parse for files lacking them; an
        unparsable file lacking them is reported by the engine's syntax check).
        """
        if b"compile" not in self.data or TORCH.encode() not in self.data:
            return False
        if self.ensure().parse_failed:
            return True
        return self.imports_torch and (self.compile_attribute or self.imports_compile)

    def compile_option(self, keyword: str) -> bool:
        """Could a compile site pass the option ``keyword`` explicitly?"""
        if not self.may_compile:
            return False
        return self.parse_failed or keyword in self.compile_keywords


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


def _needs_compile_site(facts: ScreenFacts) -> bool:
    # the rule only looks at compile sites of this module (ModuleAnalysis.compile_sites);
    # functions compiled in other modules are covered by the project index tokens
    return facts.may_compile


def _fr003(facts: ScreenFacts) -> bool:
    # float-args: a call of a function compiled here with an argument visibly a
    # float: a float literal, `/`, `float` (call or annotation), `math.*` or `random.*`
    if not facts.may_compile:
        return False
    return (
        facts.parse_failed
        or b"float" in facts.data
        or b"math" in facts.data
        or b"random" in facts.data
        or facts.float_syntax
    )


def _fr005(facts: ScreenFacts) -> bool:
    # unspec-int-attrs: a compiled module whose forward updates `self.attr`
    return facts.may_compile and (facts.parse_failed or facts.attribute_update)


#: screens for rules whose modules do not define ``screen`` themselves; each
#: mirrors the first condition of the rule's ``check`` (tests compare findings
#: with and without the screen on every golden input and rule example)
BUILTIN_SCREENS: Dict[str, Callable[[ScreenFacts], bool]] = {
    "FR001": _fr001,  # dynamic-shapes: `dynamic=` other than True/None
    "FR002": _fr002,  # graph-break: the marker comment
    "FR003": _fr003,  # float-args: calls of compiled functions with float arguments
    "FR004": _needs_compile_site,  # optimizer-scalars: returns [] without compile sites
    "FR005": _fr005,  # unspec-int-attrs: compiled modules updating an int attribute
    "FR006": _fr001,  # recompile-limit: `dynamic=False` sites only
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
    every rule runs when a project-index token occurs (another module's facts
    may apply here, which the per-rule screens do not know about).
    ``facts_of_data``: the facts of exactly these bytes, already computed
    (:meth:`ScreenFacts.from_tree`, by the project index's parse); used where
    they would have been computed."""
    if any(t in data for t in extra):
        return Screened(list(rules), True, None)
    facts: Optional[ScreenFacts] = None
    out: List = []
    for rule in rules:
        if not any(t in data for t in rule.triggers):
            continue
        screen = rule_screen(rule) if use_screens else None
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
    return Screened(out, False, facts)


def keep(data: bytes, rules: Sequence, extra: Sequence[bytes] = (), *, use_screens: bool = True) -> bool:
    """Should the engine parse this file with libcst?"""
    return bool(select(data, rules, extra, use_screens=use_screens).rules)
