"""FR014 compiled-memo: a module method that the compiled code reaches
memoises on an attribute of ``self`` (``self._cache = (key, value)``,
``self.cache[key] = value``) and reads it back (``self._cache is not None``,
``key in self.cache``).  torch guards what the compiled code read (the None
check, the key's presence); the write inside the compiled call makes the
next call fail that guard, so it recompiles (huggingface/diffusers#13792,
d94ad81b87: AnyFlow's rope ``_freqs_cache``)."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Set, Tuple

from .._lazy import cst
from ..analysis.compile_sites import def_first_lines
from ..analysis.modules import (
    class_chain,
    compiled_function,
    compiled_reach,
    functions_reached,
    init_assignments,
    self_attr,
    walk_body,
)
from ..analysis.params import changed_in_place
from ..analysis.placement import block_of, torch_at_least, torch_expr
from ..analysis.purity import MUTATORS, Purity
from ..analysis.source import statement_target
from ..cst_edits import guard_statement
from ..findings import Edit, Finding, Safety
from ..trace.causes import KEYS, NONE_CHECK, TRUTH, CuresCause
from .base import Example, Rule

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
#: ``torch.compiler.is_compiling`` is public from torch 2.3; before it (and
#: for "any release from 2.1") ``torch._dynamo.is_compiling``, present from
#: 2.1 through 2.13 (deprecated in favour of the public one)
IS_COMPILING_SINCE = (2, 3)

NONE_KIND = "none"  # `self._cache is not None`, written `self._cache = ...`
KEY_KIND = "key"  # `key in self.cache`, written `self.cache[key] = ...`


# -- code that runs only when not compiling ----------------------------------------


def _compiling_call(model, node: ast.AST) -> bool:
    """``torch.compiler.is_compiling()``, ``torch._dynamo.is_compiling()``,
    a project helper named ``is_..._compiling()`` (transformers'
    ``is_torchdynamo_compiling``)."""
    if not isinstance(node, ast.Call) or node.args or node.keywords:
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name.startswith("is_") and name.endswith("compiling")


class _Shield:
    """Where a method's code runs only outside compiled code: under
    ``if not torch.compiler.is_compiling():``, after ``not is_compiling() and``,
    after ``if is_compiling(): return ...`` (also through a local
    ``is_compiling = torch.compiler.is_compiling()``)."""

    def __init__(self, model, source, fn: ast.AST) -> None:
        self.model, self.source, self.fn = model, source, fn
        self.flags: Set[str] = set()
        for node in walk_body(fn):
            if isinstance(node, ast.Assign) and _compiling_call(model, node.value):
                self.flags.update(t.id for t in node.targets if isinstance(t, ast.Name))

    def compiling(self, test: ast.AST) -> bool:
        """Is ``test`` true only while compiling?"""
        if _compiling_call(self.model, test) or (isinstance(test, ast.Name) and test.id in self.flags):
            return True
        return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(self.compiling(v) for v in test.values)

    def not_compiling(self, test: ast.AST) -> bool:
        """Is ``test`` true only outside compiled code?"""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and self.compiling(test.operand):
            return True
        return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(self.not_compiling(v) for v in test.values)

    def __call__(self, node: ast.AST) -> bool:
        """Does ``node`` run only outside compiled code?"""
        child = node
        for anc in self.source.ancestors(node):
            if isinstance(anc, (ast.If, ast.IfExp)):
                if _within(child, anc.body) and self.not_compiling(anc.test):
                    return True
                if _within(child, anc.orelse) and self.compiling(anc.test):
                    return True
            elif isinstance(anc, ast.BoolOp) and child in anc.values:
                before = anc.values[: anc.values.index(child)]
                shield = self.not_compiling if isinstance(anc.op, ast.And) else self.compiling
                if any(shield(v) for v in before):
                    return True
            for name in ("body", "orelse", "finalbody"):
                block = getattr(anc, name, None)
                if isinstance(block, list) and any(s is child for s in block):
                    for stmt in block[: next(i for i, s in enumerate(block) if s is child)]:
                        # `if is_compiling(): return f(x)` before: the rest runs eager only
                        if isinstance(stmt, ast.If) and not stmt.orelse and self.compiling(stmt.test) and isinstance(stmt.body[-1], (ast.Return, ast.Raise)):
                            return True
            if anc is self.fn:
                return False
            child = anc
        return False


def _within(child: ast.AST, part) -> bool:
    return any(child is s for s in part) if isinstance(part, list) else child is part


# -- the memo ---------------------------------------------------------------------


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _empty_dict(model, node: ast.AST) -> bool:
    if isinstance(node, ast.Dict):
        return not node.keys
    return isinstance(node, ast.Call) and not node.args and not node.keywords and "builtins.dict" in model.qualified_names(node.func)


def _memo_attrs(model, cls: ast.ClassDef) -> Dict[str, str]:
    """Attributes of ``cls`` every value given to which in ``__init__`` or
    the class body is ``None`` (a memo filled on first use: NONE_KIND) or
    an empty dict (a memo by key: KEY_KIND)."""
    values: Dict[str, List[ast.AST]] = {}
    for c in class_chain(model, cls):
        for stmt in c.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                values.setdefault(stmt.targets[0].id, []).append(stmt.value)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                values.setdefault(stmt.target.id, []).append(stmt.value)
            elif isinstance(stmt, _DEFS) and stmt.name == "__init__":
                for target, value in init_assignments(stmt):
                    name = self_attr(target)
                    if name is not None:
                        values.setdefault(name, []).append(value)
    out: Dict[str, str] = {}
    for name, found in values.items():
        if all(_is_none(v) for v in found):
            out[name] = NONE_KIND
        elif all(_empty_dict(model, v) for v in found):
            out[name] = KEY_KIND
    return out


def _gets(fn: ast.AST) -> Dict[str, str]:
    """Locals of ``fn`` bound to ``self.<attr>.get(...)`` (name -> attr): a
    dict memo read as ``t = self._cache.get(key)``, checked ``if t is None``."""
    out: Dict[str, str] = {}
    for node in walk_body(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get":
                attr = self_attr(value.func.value)
                if attr is not None:
                    out[node.targets[0].id] = attr
    return out


def _check(test: ast.AST, attr: str, kind: str, gets: Optional[Dict[str, str]] = None) -> Tuple[bool, bool]:
    """(reads the memo, true only on a hit) for an ``if`` test: a None check
    of ``self.<attr>`` (``is not None``: a hit), or a key's presence (``k in
    self.<attr>``: a hit; ``t is not None`` of a ``t = self.<attr>.get(k)``,
    ``gets``), alone or in an ``and`` chain."""
    conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
    reads = hit = False
    for part in conjuncts:
        for node in ast.walk(part):
            if not (isinstance(node, ast.Compare) and len(node.ops) == 1):
                continue
            left, op, right = node.left, node.ops[0], node.comparators[0]
            if kind == KEY_KIND and gets and isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, ast.Name) and gets.get(left.id) == attr and _is_none(right):
                reads = True
                hit = hit or (node is part and isinstance(op, ast.IsNot))
                continue
            if kind == NONE_KIND and isinstance(op, (ast.Is, ast.IsNot)):
                if (self_attr(left) == attr and _is_none(right)) or (self_attr(right) == attr and _is_none(left)):
                    reads = True
                    hit = hit or (node is part and isinstance(op, ast.IsNot))
            elif kind == KEY_KIND and isinstance(op, (ast.In, ast.NotIn)) and self_attr(right) == attr:
                reads = True
                hit = hit or (node is part and isinstance(op, ast.In))
    return reads, hit


class _Memo:
    """One memo attribute used by one reached method."""

    def __init__(self, owner: ast.ClassDef, method: str, fn: ast.AST, attr: str, kind: str) -> None:
        self.owner, self.method, self.fn, self.attr, self.kind = owner, method, fn, attr, kind
        #: the `if` statements whose test checks the memo (unshielded)
        self.checks: List[Tuple[ast.If, bool]] = []
        #: the statements that write it (unshielded)
        self.writes: List[ast.stmt] = []


def _write_of(stmt: ast.AST, attr: str, kind: str) -> Optional[bool]:
    """True: ``stmt`` writes the memo (``self.<attr> = v`` not None, or
    ``self.<attr>[k] = v``); False: it changes it otherwise (``= None``,
    ``del``, ``+=``, a store of the other form); None: neither."""
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
        targets = stmt.targets if isinstance(stmt, (ast.Assign, ast.Delete)) else [stmt.target]
        value = getattr(stmt, "value", None)
        for target in targets:
            if self_attr(target) == attr:
                whole = isinstance(stmt, (ast.Assign, ast.AnnAssign)) and value is not None and not _is_none(value)
                return kind == NONE_KIND and whole and len(targets) == 1
            if isinstance(target, ast.Subscript) and self_attr(target.value) == attr:
                return kind == KEY_KIND and isinstance(stmt, ast.Assign) and len(targets) == 1
    return None


def _in_place(source, node: ast.AST, kind: str) -> bool:
    """Does ``node`` (``self.<attr>``) change the object in place: an item
    stored into a None-initialised attribute (``self.k_cache[:, pos] = k``),
    an in-place tensor method (``.copy_()``, ``.index_copy_()``) or a
    container method, an augmented item (``self.counts[k] += 1``)?"""
    parent = source.parent(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        grand = source.parent(parent)
        if isinstance(grand, ast.AugAssign) and grand.target is parent:
            return True
        return kind == NONE_KIND and isinstance(parent.ctx, (ast.Store, ast.Del))
    if isinstance(parent, ast.Attribute) and isinstance(source.parent(parent), ast.Call) and source.parent(parent).func is parent:
        return parent.attr.endswith("_") and not parent.attr.startswith("_") or parent.attr in MUTATORS
    return False


# -- the rule ---------------------------------------------------------------------------


class CompiledMemo(Rule):
    code = "FR014"
    #: the trace causes its fix cures: the memo's None check, the key's
    #: presence, and an empty dict's truth (torch guards ``not
    #: self.loss.labels`` for ``device not in self.labels`` while the dict is
    #: empty: open_clip) where the guarded source is the memo the finding is
    #: about (its ``about``: ``.labels``, the attribute reached from any root)
    cures = (CuresCause(NONE_CHECK), CuresCause(KEYS), CuresCause(TRUTH, about=True))
    name = "compiled-memo"
    summary = "a memo attribute written inside compiled code"
    what_it_does = """
Finds a memo kept on an attribute of an `nn.Module` of the module that the
compiled code both reads and writes: the attribute is `None` (or an empty
dict) in `__init__` or the class body, and a method run by the compiled code
checks it in an `if` (`self._cache is not None`, `key in self.cache`) and
fills it (`self._cache = (key, value)`, `self.cache[key] = value`). The
method is the `forward` of a compiled instance (`torch.compile(model)`,
`model.compile()`), a compiled bound method (also `torch.compile(
self.training_forward)` in a base class: the subclasses' own methods), or a
method they reach (`self.method()`, a submodule's method, a submodule's
`forward` through `self.rope(...)`, also a submodule the caller may pass in
instead). Code under `not torch.compiler.is_compiling()` (or after
`if torch.compiler.is_compiling(): return ...`) runs eager only and counts
for nothing; nor does a method decorated with `@torch.compiler.disable`, nor
a memo filled only outside the compiled code.

Fixes the simple form: one `if` whose test is true on a hit and whose body
returns, every read of the memo inside that `if`, every write after it on a
line of its own. A dict memo in any other form (filled in the `if`, read
after it, as QwenImage's rope) whose every use is in that one method and is a
dict use (an item, `in`, `.get()`...) is read through a local dict instead:
`cache = {} if torch.compiler.is_compiling() else self.cache`. A dict memo
valid for the last value of another attribute (open_clip's `ClipLoss`:
`if self.prev_num_logits != num_logits or device not in self.labels:`
computes and writes both, `else:` reads) gets
`torch.compiler.is_compiling() or` on its check and its writes skipped while
compiling; always unsafe (the dict is keyed by one of the two: a stale entry
of another key), and reported with --unproven only where its writes depend
on a setting of the object (`if self.cache_labels:`). Either other fix is
safe when the memo's value is proven a pure function of its key (see Fix
safety), unsafe otherwise. Every other form is reported with the cure.

A module global works the same way (vllm-gaudi before 86bb66e7: `global
_CACHED_FSDPA_OP; if _CACHED_FSDPA_OP is None: _CACHED_FSDPA_OP = ...` in a
function the compiled code reaches, by name from a compiled function or
method): a local stands in for it, `op = None if
torch.compiler.is_compiling() else _OP` before its check, checked, assigned
and used in its place, and the global is written back only outside compiled
code. Fixed where the module binds it once, to None, that one function
declares it `global`, checks it in one `if` without `else` and writes it only
there, changes it nowhere in place, and no other function reads it; reported
with `--unproven` only where the module also calls the function outside
compiled code (an eager call may fill it first). Where the compiled code
reaches the function in a way the source does not show (a registry of
callables), `fix-recompiles run --fix` finds it from the trace's guard
(`TRACE`'s `global-memo-from-trace`).
"""
    why_it_recompiles = """
dynamo guards what the compiled code read: `self._freqs_cache is None` (a
None check), `not ___dict_contains('1_4_4', self.rope_cache)` (a key's
absence). The compiled call then writes the memo, so the next call fails that
guard and compiles the cache-hit branch: 2 graphs where 1 suffices, one more
for each new key of a dict memo (one per shape). Measured on torch 2.13
(CPU, counting backend): diffusers' AnyFlow rope (`_freqs_cache`, #13792)
and QwenImage rope (`rope_cache[rope_key]`, #12061), 2 graphs each; with the
memo skipped while compiling, 1.
"""
    example = """
    class RotaryPosEmbed(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim
            self._freqs_cache = None

        def _build_freqs(self, device):
            key = (device.type, str(device))
            if self._freqs_cache is not None and self._freqs_cache[0] == key:   # guarded
                return self._freqs_cache[1]
            freqs = make_freqs(self.dim, device)
            self._freqs_cache = (key, freqs)                                     # written in the graph
            return freqs

Fixed (diffusers' own cure, d94ad81b87):

            if not torch.compiler.is_compiling() and self._freqs_cache is not None and self._freqs_cache[0] == key:
                return self._freqs_cache[1]
            freqs = make_freqs(self.dim, device)
            if not torch.compiler.is_compiling():
                self._freqs_cache = (key, freqs)
            return freqs
"""
    fix_safety = """
Safe when proven, unsafe otherwise. Eager runs are unchanged
(`torch.compiler.is_compiling()` is False there, and `not False and test` is
`test`). Compiled calls no longer read or fill the memo: they compute the
value inside the graph on every call (the cost diffusers' own fixes of the
AnyFlow and QwenImage memos accepted) and return what a hit would have
returned when the value is a pure function of the key. The tool proves that
when the code computing the value (from the check to the write) reads only
what the key pins down (`(device.type, str(device))` pins `device`;
`f"{h}_{w}"` pins `h` and `w`), module constants, and attributes of `self`
that only `__init__` assigns (not parameters, buffers or submodules;
`self.x = self.x.to(device)` keeps the values); calls only `torch` functions
that draw no random numbers and change nothing in place, `math`, pure
builtins, and functions and methods of the file that are pure by the same
rules; a hit returns the value a miss goes on with; and nothing but the
memo's method reads the attribute (a reader elsewhere would find it unfilled
after compiled calls). Anything else is unsafe, and the finding says what
was not proven. `str()` and f-strings are taken to spell their values out
whole (true of devices, dtypes, numbers and shapes; not of a large tensor,
whose `str` is abbreviated). Not covered by the proof: code in other modules
that reads the memo attribute or changes an attribute the value is computed
from, or that calls the method and changes the result in place; in this
file a caller that changes the result in place (`freqs = self.rope(n);
freqs.mul_(2)`, `self.rope(n)[0] = 0` through a local) makes the fix
unsafe: with the memo every call returns the one cached tensor, so such a
change shows at the next call, without it a new one.
A module global is proven the same way, with no key: the check's body must
be a pure function of nothing (a table of torch ops on constants); a call of
another module or of a module-level object's method (`kernels.fsdpa()`) makes
the fix unsafe. Eager calls read, fill and use the global as before.
`torch.compiler.is_compiling()` is written for `--target-torch 2.3` and
later; for older targets (and none given) `torch._dynamo.is_compiling()`,
which exists from torch 2.1.
"""
    reads = "ast"
    triggers = (b"None", b"{}", b"dict(")
    valid = (
        # the memo is filled only outside the compiled code: a precompute step
        "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cache = None\n"
        "    def precompute(self, n):\n        self._cache = torch.arange(n)\n"
        "    def forward(self, x):\n        if self._cache is not None:\n            return x + self._cache\n        return x\n"
        "rope = Rope()\nrope.precompute(4)\nm = torch.compile(rope)\n",
        # already skipped while compiling
        "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = {}\n"
        "    def forward(self, x, n):\n        if not torch.compiler.is_compiling() and n in self.cache:\n            return x + self.cache[n]\n"
        "        t = torch.arange(n)\n        if not torch.compiler.is_compiling():\n            self.cache[n] = t\n        return x + t\n"
        "m = torch.compile(Rope())\n",
        # the module is not compiled
        "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cache = None\n"
        "    def forward(self, x):\n        if self._cache is not None:\n            return x + self._cache\n        self._cache = torch.ones(4)\n        return x + self._cache\nm = Rope()\n",
        # written in a method that runs eager
        "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._cache = None\n"
        "    @torch.compiler.disable\n    def _table(self):\n        if self._cache is None:\n            self._cache = torch.ones(4)\n        return self._cache\n"
        "    def forward(self, x):\n        return x + self._table()\nm = torch.compile(Rope())\n",
        # a KV cache allocated on first use and updated in place: state, not a memo
        "import torch\nclass Attn(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.k_cache = None\n"
        "    def forward(self, k, pos):\n        if self.k_cache is None:\n            self.k_cache = torch.zeros(16, 8)\n"
        "        self.k_cache[pos] = k\n        return self.k_cache\nm = torch.compile(Attn())\n",
        # a module global filled by a function no compiled code calls
        "import torch\n_TABLE = None\ndef table():\n    global _TABLE\n    if _TABLE is None:\n        _TABLE = torch.arange(8.0).cos()\n    return _TABLE\n"
        "@torch.compile\ndef step(x):\n    return x * 2\nt = table()\n",
    )
    invalid = (
        # a module global filled on first use by a function the compiled function calls (vllm-gaudi 86bb66e7's form)
        Example(
            "import torch\n_TABLE = None\ndef table():\n    global _TABLE\n    if _TABLE is None:\n        _TABLE = torch.arange(8.0).cos()\n    return _TABLE\n"
            "@torch.compile\ndef step(x):\n    return x * table()\n",
            "import torch\n_TABLE = None\ndef table():\n    global _TABLE\n    table_1 = None if torch._dynamo.is_compiling() else _TABLE\n    if table_1 is None:\n"
            "        table_1 = torch.arange(8.0).cos()\n        if not torch._dynamo.is_compiling():\n            _TABLE = table_1\n    return table_1\n"
            "@torch.compile\ndef step(x):\n    return x * table()\n",
        ),
        # a module global made by a module-level object's method: unsafe (not proven pure)
        Example(
            "import torch\nimport kernels\n_OP = None\ndef attend(x):\n    global _OP\n    if _OP is None:\n        _OP = kernels.make()\n    return _OP(x)\n"
            "class Block(torch.nn.Module):\n    def forward(self, x):\n        return attend(x)\nm = torch.compile(Block())\n",
            "import torch\nimport kernels\n_OP = None\ndef attend(x):\n    global _OP\n    op = None if torch._dynamo.is_compiling() else _OP\n    if op is None:\n"
            "        op = kernels.make()\n        if not torch._dynamo.is_compiling():\n            _OP = op\n    return op(x)\n"
            "class Block(torch.nn.Module):\n    def forward(self, x):\n        return attend(x)\nm = torch.compile(Block())\n",
            unsafe=True,
        ),
        # the tuple memo (diffusers' AnyFlow rope), in a method forward reaches
        Example(
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._freqs_cache = None\n"
            "    def _build_freqs(self, device):\n        key = str(device)\n"
            "        if self._freqs_cache is not None and self._freqs_cache[0] == key:\n            return self._freqs_cache[1]\n"
            "        freqs = torch.arange(4.0, device=device)\n        self._freqs_cache = (key, freqs)\n        return freqs\n"
            "    def forward(self, x):\n        return x * self._build_freqs(x.device)\nm = torch.compile(Rope())\n",
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._freqs_cache = None\n"
            "    def _build_freqs(self, device):\n        key = str(device)\n"
            "        if not torch._dynamo.is_compiling() and self._freqs_cache is not None and self._freqs_cache[0] == key:\n            return self._freqs_cache[1]\n"
            "        freqs = torch.arange(4.0, device=device)\n        if not torch._dynamo.is_compiling():\n            self._freqs_cache = (key, freqs)\n        return freqs\n"
            "    def forward(self, x):\n        return x * self._build_freqs(x.device)\nm = torch.compile(Rope())\n",
        ),
        # the same memo of a table drawn at random: not a pure function of the key, unsafe
        Example(
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._noise = None\n"
            "    def _table(self, device):\n        key = str(device)\n"
            "        if self._noise is not None and self._noise[0] == key:\n            return self._noise[1]\n"
            "        noise = torch.randn(4, device=device)\n        self._noise = (key, noise)\n        return noise\n"
            "    def forward(self, x):\n        return x * self._table(x.device)\nm = torch.compile(Rope())\n",
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self._noise = None\n"
            "    def _table(self, device):\n        key = str(device)\n"
            "        if not torch._dynamo.is_compiling() and self._noise is not None and self._noise[0] == key:\n            return self._noise[1]\n"
            "        noise = torch.randn(4, device=device)\n        if not torch._dynamo.is_compiling():\n            self._noise = (key, noise)\n        return noise\n"
            "    def forward(self, x):\n        return x * self._table(x.device)\nm = torch.compile(Rope())\n",
            unsafe=True,
        ),
        # the dict memo, keyed by a length; `import torch as T`
        Example(
            "import torch as T\nclass Pos(T.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = {}\n"
            "    def table(self, n):\n        if n in self.cache:\n            return self.cache[n]\n        t = T.arange(n)\n        self.cache[n] = t  # memo\n        return t\n"
            "    def forward(self, x):\n        return x + self.table(x.shape[0])\nm = Pos()\nm.compile()\n",
            "import torch as T\nclass Pos(T.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cache = {}\n"
            "    def table(self, n):\n        if not T._dynamo.is_compiling() and n in self.cache:\n            return self.cache[n]\n        t = T.arange(n)\n"
            "        if not T._dynamo.is_compiling():\n            self.cache[n] = t  # memo\n        return t\n"
            "    def forward(self, x):\n        return x + self.table(x.shape[0])\nm = Pos()\nm.compile()\n",
        ),
        # filled, then read after the `if` (QwenImage's rope): a local dict stands in
        Example(
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.rope_cache = {}\n"
            "    def forward(self, x, n):\n        key = f'{n}'\n        if key not in self.rope_cache:\n            self.rope_cache[key] = torch.arange(n)\n"
            "        return x + self.rope_cache[key]\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pos = Rope()\n"
            "    def forward(self, x):\n        return self.pos(x, 4)\nnet = torch.compile(Net())\n",
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.rope_cache = {}\n"
            "    def forward(self, x, n):\n        key = f'{n}'\n        rope_cache = {} if torch._dynamo.is_compiling() else self.rope_cache\n"
            "        if key not in rope_cache:\n            rope_cache[key] = torch.arange(n)\n"
            "        return x + rope_cache[key]\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.pos = Rope()\n"
            "    def forward(self, x):\n        return self.pos(x, 4)\nnet = torch.compile(Net())\n",
        ),
        # a dict valid for the last value of another attribute (open_clip's
        # ClipLoss), reached from `torch.compile(self.training_forward)` of a
        # base class through the subclass's own method: unsafe (a stale entry);
        # its writes depend on `self.cache_labels`, so only with --unproven
        Example(
            "import torch\nclass ClipLoss(torch.nn.Module):\n    def __init__(self, cache_labels=True):\n        super().__init__()\n"
            "        self.cache_labels = cache_labels\n        self.prev_num_logits = 0\n        self.labels = {}\n"
            "    def get_ground_truth(self, device, num_logits):\n"
            "        if self.prev_num_logits != num_logits or device not in self.labels:\n"
            "            labels = torch.arange(num_logits, device=device)\n            if self.cache_labels:\n"
            "                self.labels[device] = labels\n                self.prev_num_logits = num_logits\n"
            "        else:\n            labels = self.labels[device]\n        return labels\n"
            "    def forward(self, logits):\n        return torch.nn.functional.cross_entropy(logits, self.get_ground_truth(logits.device, logits.shape[0]))\n"
            "class Task(torch.nn.Module):\n    def compile(self):\n        self._compiled = torch.compile(self.training_forward)\n"
            "    def training_forward(self, logits):\n        raise NotImplementedError\n"
            "class CLIPTask(Task):\n    def __init__(self, loss=None):\n        super().__init__()\n        self.loss = loss if loss is not None else ClipLoss()\n"
            "    def training_forward(self, logits):\n        return self.loss(logits)\n",
            "import torch\nclass ClipLoss(torch.nn.Module):\n    def __init__(self, cache_labels=True):\n        super().__init__()\n"
            "        self.cache_labels = cache_labels\n        self.prev_num_logits = 0\n        self.labels = {}\n"
            "    def get_ground_truth(self, device, num_logits):\n"
            "        if torch._dynamo.is_compiling() or self.prev_num_logits != num_logits or device not in self.labels:\n"
            "            labels = torch.arange(num_logits, device=device)\n            if not torch._dynamo.is_compiling() and self.cache_labels:\n"
            "                self.labels[device] = labels\n                self.prev_num_logits = num_logits\n"
            "        else:\n            labels = self.labels[device]\n        return labels\n"
            "    def forward(self, logits):\n        return torch.nn.functional.cross_entropy(logits, self.get_ground_truth(logits.device, logits.shape[0]))\n"
            "class Task(torch.nn.Module):\n    def compile(self):\n        self._compiled = torch.compile(self.training_forward)\n"
            "    def training_forward(self, logits):\n        raise NotImplementedError\n"
            "class CLIPTask(Task):\n    def __init__(self, loss=None):\n        super().__init__()\n        self.loss = loss if loss is not None else ClipLoss()\n"
            "    def training_forward(self, logits):\n        return self.loss(logits)\n",
            unsafe=True,
            unproven=True,
        ),
        # the dict is also read by another method the compiled code runs: report only
        Example(
            "import torch\nclass Rope(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.rope_cache = {}\n"
            "    def fill(self, key, n):\n        if key not in self.rope_cache:\n            self.rope_cache[key] = torch.arange(n)\n"
            "    def forward(self, x, n):\n        key = f'{n}'\n        self.fill(key, n)\n        return x + self.rope_cache[key]\n"
            "net = torch.compile(Rope())\n"
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        findings: List[Finding] = []
        seen: Set[Tuple[int, str]] = set()
        # a compiled function (also through torch.vmap) reaches a memo only
        # through a module-level object (mujoco-torch's _CachedConst.get)
        reaches = [(site, compiled_reach(model, site, functions=_plain_memos(ctx))) for site in model.compile_sites]
        for site, reach in reaches:
            if reach is None or not reach.reached:
                continue
            cls, start, reached, feeds = reach.cls, reach.start, list(reach.reached), reach.feeds
            for memo, others in self._memos(model, source, reached):
                if (id(memo.owner), memo.attr) in seen:
                    continue
                seen.add((id(memo.owner), memo.attr))
                findings.append(self._finding(ctx, site, cls, start, memo, others, feeds, {id(r[2]) for r in reached}))
        if source.nodes(ast.Global):
            self._global_findings(ctx, reaches, findings)
        return findings

    def _global_findings(self, ctx, reaches, findings: List[Finding]) -> None:
        """A module global a function the compiled code reaches fills on
        first use (:class:`GlobalMemo`): the fix skips it while compiling.
        ``reaches``: (site, :func:`compiled_reach`) of each compile site."""
        model, source = ctx.model, ctx.source
        done: Set[Tuple[int, str]] = set()
        for site, reach in reaches:
            compiled_fn = compiled_function(model, site) if reach is None or reach.cls is None else None
            starts = [r[2] for r in reach.reached] if reach is not None else []
            if compiled_fn is not None and compiled_fn not in starts:
                starts.insert(0, compiled_fn)
            if not starts:
                continue
            start = reach.start if reach is not None else getattr(compiled_fn, "name", "?")
            feeds = tuple(reach.feeds) if reach is not None else tuple(def_first_lines(compiled_fn))
            reached = starts + functions_reached(model, starts)
            for fn in reached:
                for node in walk_body(fn):
                    if not (isinstance(node, ast.Global) and source.enclosing(node, _DEFS) is fn):
                        continue
                    for name in node.names:
                        if (id(fn), name) in done:
                            continue
                        check = next((n for n in walk_body(fn) if isinstance(n, ast.If) and _is_none_check(n.test, name)), None)
                        if check is None:
                            continue
                        done.add((id(fn), name))
                        findings.append(self._global_finding(ctx, site, start, fn, name, check, feeds, {id(f) for f in reached}))

    def _global_finding(self, ctx, site, start: str, fn: ast.AST, name: str, check: ast.If, feeds, reached: Set[int]) -> Finding:
        model, source = ctx.model, ctx.source
        where = f"`{fn.name}`" + ("" if fn.name == start else f", which the compiled `{start}` reaches")  # type: ignore[attr-defined]
        message = (
            f"`{name}` is a module global filled on first use inside compiled code ({where}, compiled on line {site.node.lineno}): "  # type: ignore[attr-defined]
            f"torch guards `{name} is None`, and the fill makes the next call fail that guard and recompile"
        )
        eager = next((c for c in source.nodes(ast.Call) if isinstance(c.func, ast.Name) and c.func.id == fn.name  # type: ignore[attr-defined]
                      and id(source.enclosing(c, _DEFS)) not in reached), None)
        proven = eager is None
        if eager is not None:
            message += f" (unless the call on line {eager.lineno}, which runs eagerly, fills it before the first compiled call)"  # type: ignore[attr-defined]
        memo, why = global_memo(source, model, check.lineno, name)
        if memo is None:
            return self.finding(
                ctx, check,
                message + f"; skip it while compiling: read it only under `not torch.compiler.is_compiling()` and compute the value otherwise (no automatic fix: {why})",
                feeds=feeds, proven=proven,
            )
        impure = global_memo_impure(source, model, memo)
        how = f"`{memo.local}` stands in for it, None while compiling, written back only outside compiled code"
        if impure is None:
            note = "safe: its value is a pure function of nothing, computed in the graph on every compiled call"
        else:
            note = f"unsafe: the value is then computed in the graph on every compiled call, the same only if it does not change between calls; not proven: {impure}"
        return self.finding(
            ctx, check,
            message + f"; skip it while compiling ({how}; {note})",
            edits=global_memo_edits(source, model, ctx.settings, memo),
            safety=Safety.SAFE if impure is None else Safety.UNSAFE,
            needs_torch=True,
            title=f"skip `{name}` while compiling",
            feeds=feeds,
            proven=proven,
        )

    def _memos(self, model, source, reached) -> List[Tuple[_Memo, List[ast.AST]]]:
        """Each memo a reached method both checks and writes outside any
        shield, with the other unshielded uses of its attribute in reached
        code (reads and changes beyond the check and the write)."""
        by_class: Dict[int, Dict[str, str]] = {}
        uses: Dict[Tuple[int, str], List[Tuple[ast.AST, ast.AST]]] = {}  # (class, attr) -> (node, method def)
        memos: List[_Memo] = []
        for owner, method, fn in reached:
            attrs = by_class.setdefault(id(owner), _memo_attrs(model, owner))
            if not attrs:
                continue
            shield = _Shield(model, source, fn)
            gets = _gets(fn)
            found: Dict[str, _Memo] = {}
            for node in walk_body(fn):
                attr = self_attr(node)
                if attr in attrs and source.enclosing(node, _SCOPES) is fn and not shield(node):
                    uses.setdefault((id(owner), attr), []).append((node, fn))  # type: ignore[index]
                if isinstance(node, ast.If) and source.enclosing(node, _SCOPES) is fn:
                    for attr, kind in attrs.items():
                        reads, hit = _check(node.test, attr, kind, gets)
                        if reads and not shield(node.test):
                            found.setdefault(attr, _Memo(owner, method, fn, attr, kind)).checks.append((node, hit))
                elif isinstance(node, ast.stmt) and source.enclosing(node, _SCOPES) is fn:
                    for attr, kind in attrs.items():
                        if _write_of(node, attr, kind) and not shield(node):
                            found.setdefault(attr, _Memo(owner, method, fn, attr, kind)).writes.append(node)
            memos.extend(m for m in found.values() if m.checks and m.writes)
        out = []
        for memo in memos:
            if any(_in_place(source, n, memo.kind) for n, _ in uses.get((id(memo.owner), memo.attr), [])):
                continue  # state updated in place (a KV cache allocated on first use), not a memo
            accounted = set()
            for check, _ in memo.checks:
                accounted.update(id(n) for n in ast.walk(check))
            for write in memo.writes:
                accounted.update(id(n) for n in ast.walk(write))
            others = [n for n, fn in uses.get((id(memo.owner), memo.attr), []) if id(n) not in accounted]
            out.append((memo, others))
        return out

    def _finding(self, ctx, site, cls, start, memo: _Memo, others: List[ast.AST], feeds, reached: Set[int] = frozenset()) -> Finding:
        source = ctx.source
        write = memo.writes[0]
        if cls is None:
            where = f"`{memo.owner.name}.{memo.method}`, which the compiled `{start}` reaches"
        elif memo.method == start and memo.owner is cls:
            where = f"the compiled `{start}` of `{cls.name}`"
        else:
            where = f"`{memo.owner.name}.{memo.method}`, which the compiled `{start}` of `{cls.name}` reaches"
        guard = f"`self.{memo.attr} is None`" if memo.kind == NONE_KIND else f"the key's presence in `self.{memo.attr}`"
        message = (
            f"`self.{memo.attr}` is a memo read and written inside compiled code ({where}, compiled on line {site.node.lineno}): "  # type: ignore[attr-defined]
            f"torch guards {guard}, and the write makes the next call fail that guard and recompile"
            + (" (once per new key)" if memo.kind == KEY_KIND else "")
        )
        warmer = _warmer_called(ctx.model, memo, reached)
        proven = warmer is None
        if warmer is not None:
            message += f" (unless `{warmer}`, which fills it and is called, ran before the first compiled call)"
        stale = _stale_form(source, memo, others)
        if stale is not None:
            return self._stale_finding(ctx, memo, message, stale, feeds, proven)
        why_not, local = self._form(source, memo, others)
        if local is not None:
            return self._local_dict_finding(ctx, site, memo, message, local, feeds, proven, _why_not_pure(ctx, memo, local))
        if why_not is not None:
            return self.finding(
                ctx,
                write,
                message + f"; skip the memo while compiling: read and write it only under `not torch.compiler.is_compiling()` "
                f"and compute the value directly otherwise (no automatic fix: {why_not})",
                feeds=feeds,
                proven=proven,
                about=(f".{memo.attr}",),
            )
        check = memo.checks[0][0]
        attrs, spelled = _is_compiling(ctx)
        edits = [Edit(source.target(check.test, "BaseExpression"), functools.partial(_guard_test, ctx.model, attrs))]
        edits += [Edit(statement_target(source, w), functools.partial(_guard_statement, ctx.model, attrs)) for w in memo.writes]
        return self._skip_finding(ctx, memo, message, f"`not {spelled}` on its check and its write", edits, feeds, proven, _why_not_pure(ctx, memo, None))

    def _stale_finding(self, ctx, memo: _Memo, message: str, stale: "_StaleForm", feeds, proven: bool) -> Finding:
        """A dict memo valid for the last value of another attribute
        (open_clip's ``ClipLoss.get_ground_truth``): while compiling, its
        check is true and its writes are skipped."""
        source = ctx.source
        attrs, spelled = _is_compiling(ctx)
        check = memo.checks[0][0]
        edits = [Edit(source.target(check.test, "BaseExpression"), functools.partial(_compiling_or, ctx.model, attrs))]
        gated: List[str] = []
        if stale.gate is not None:
            edits.append(Edit(source.target(stale.gate.test, "BaseExpression"), functools.partial(_guard_test, ctx.model, attrs)))
            gated = sorted({a for a in map(self_attr, ast.walk(stale.gate.test)) if a is not None})
        else:
            edits += [Edit(statement_target(source, w), functools.partial(_guard_statement, ctx.model, attrs)) for w in stale.writes]
        if gated:
            # the writes run only when a setting of the object holds (open_clip's
            # `cache_labels`, which its fix turns off for compiled tasks): no
            # evidence they run in compiled calls, reported with --unproven
            message += " (its writes run only when " + ", ".join(f"`self.{a}`" for a in gated) + " holds)"
            proven = False
        how = f"`{spelled} or` on its check, its writes of `self.{memo.attr}` and `self.{stale.prev}` only under `not {spelled}`"
        return self._skip_finding(ctx, memo, message, how, edits, feeds, proven, _why_not_pure_stale(ctx, memo, stale))

    def _local_dict_finding(self, ctx, site, memo: _Memo, message: str, local: "_LocalDict", feeds, proven: bool, impure: Optional[str]) -> Finding:
        """A dict memo in any other form (QwenImage's: filled in the ``if``,
        read after it): a local dict stands in for it, fresh while compiling."""
        source = ctx.source
        attrs, spelled = _is_compiling(ctx)
        binding = functools.partial(_local_binding, ctx.model, attrs, local.name, memo.attr)
        edits = [Edit(statement_target(source, local.before), binding)]
        edits += [Edit(source.target(use, "Attribute"), functools.partial(_to_name, local.name)) for use in local.uses]
        how = f"`{local.name} = {{}} if {spelled} else self.{memo.attr}` stands in for it in this method"
        return self._skip_finding(ctx, memo, message, how, edits, feeds, proven, impure)

    def _skip_finding(self, ctx, memo: _Memo, message: str, how: str, edits: List[Edit], feeds, proven: bool, impure: Optional[str]) -> Finding:
        """FR014's fix, at the memo's first write: skip the memo while compiling
        (``how``); safe when the memo's value is proven a pure function of
        its key (``impure`` None), unsafe otherwise (``impure`` says why)."""
        if impure is None:
            note = "safe: the value is a pure function of the key, computed in the graph on every compiled call"
        else:
            note = f"unsafe: the value is then computed in the graph on every compiled call, the same only if it is a pure function of the key; not proven: {impure}"
        return self.finding(
            ctx,
            memo.writes[0],
            message + f"; skip the memo while compiling ({how}; {note})",
            edits=edits,
            safety=Safety.SAFE if impure is None else Safety.UNSAFE,
            needs_torch=True,
            title=f"skip `self.{memo.attr}` while compiling",
            feeds=feeds,
            proven=proven,
            about=(f".{memo.attr}",),
        )

    def _form(self, source, memo: _Memo, others: List[ast.AST]) -> Tuple[Optional[str], Optional["_LocalDict"]]:
        """(why the memo is not in the simple form, or None; the local-dict
        rewrite when it is not but a dict memo can be read through a local)."""
        why_not = self._not_simple(source, memo, others)
        return why_not, _local_dict_form(source, memo, others) if why_not is not None else None

    @staticmethod
    def _not_simple(source, memo: _Memo, others: List[ast.AST]) -> Optional[str]:
        """Why the memo's form is not the one the fix proves equivalent, or
        None: one `if` true only on a hit whose body returns, every other
        use inside it, every write after it on a line of its own."""
        if len(memo.checks) != 1:
            return "the memo is checked in more than one `if`"
        check, hit = memo.checks[0]
        for node in others:
            if not any(a is check for a in source.ancestors(node)):
                return f"`self.{memo.attr}` is also used outside its check, on line {node.lineno}"  # type: ignore[attr-defined]
        if not hit or check.orelse or not isinstance(check.body[-1], ast.Return):
            return "its check is not an `if` taken on a hit that returns"
        if any(isinstance(n, (ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)) for n in ast.walk(check.test)):
            return "its check binds or awaits"
        for write in memo.writes:
            if write.lineno <= check.end_lineno or any(a is check for a in source.ancestors(write)):  # type: ignore[attr-defined,operator]
                return "a write is not after its check"
            block = block_of(source, write)
            if block is None or any(s is not write and s.lineno == write.lineno for s in getattr(block[0], block[1])):
                return "a write shares its line with another statement"
        return None


def _is_compiling(ctx) -> Tuple[Tuple[str, ...], str]:
    """(attributes under ``torch``, spelled) of the is-compiling test the
    target torch has: ``torch.compiler.is_compiling()`` from 2.3, else
    ``torch._dynamo.is_compiling()``."""
    attrs = ("compiler", "is_compiling") if torch_at_least(ctx.settings, IS_COMPILING_SINCE) else ("_dynamo", "is_compiling")
    return attrs, "torch." + ".".join(attrs) + "()"


def _not_compiling(model, attrs: Tuple[str, ...]) -> "cst.BaseExpression":
    return cst.UnaryOperation(operator=cst.Not(), expression=cst.Call(func=torch_expr(model, *attrs)))


def _guard_test(model, attrs: Tuple[str, ...], node: "cst.BaseExpression") -> "cst.BaseExpression":
    """``test`` -> ``not torch.compiler.is_compiling() and test`` (parenthesised
    when it binds looser than ``and``)."""
    right = node
    if isinstance(node, (cst.BooleanOperation, cst.IfExp, cst.Lambda)) and not node.lpar:
        if not (isinstance(node, cst.BooleanOperation) and isinstance(node.operator, cst.And)):
            right = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.BooleanOperation(left=_not_compiling(model, attrs), operator=cst.And(), right=right)


def _guard_statement(model, attrs: Tuple[str, ...], node: "cst.SimpleStatementLine") -> "cst.If":
    """``self._cache = v`` -> ``if not torch.compiler.is_compiling(): self._cache = v``."""
    return guard_statement(_not_compiling(model, attrs), node)


# -- a dict memo valid for the last value of another attribute ---------------------------
#
# open_clip's ``ClipLoss.get_ground_truth`` (before 3650e7bb)::
#
#     if self.prev_num_logits != num_logits or device not in self.labels:
#         labels = torch.arange(num_logits, device=device, dtype=torch.long)
#         if self.cache_labels:
#             self.labels[device] = labels
#             self.prev_num_logits = num_logits
#     else:
#         labels = self.labels[device]
#
# While compiling the check is made true (``torch.compiler.is_compiling() or
# ...``, which reads neither attribute: no guard on them) and the writes are
# skipped (nothing for the next call to fail); eager calls run as before.
# Unsafe even when the value is a pure function of both keys: the dict is
# keyed by one of them alone, so after another key changed the other
# attribute, a hit returns a value made for its old value (a stale entry),
# which the compiled call now computes afresh.


@dataclass
class _StaleForm:
    #: the other attribute the check compares (``prev_num_logits``)
    prev: str
    #: the dict's key (``device``) and what ``prev`` is compared with (``num_logits``)
    key: ast.AST
    prev_key: ast.AST
    #: the statements computing the value, before the writes
    region: List[ast.stmt]
    #: the writes of the memo and of ``prev``
    writes: List[ast.stmt]
    #: the ``if`` whose body is the writes (``if self.cache_labels:``), if any
    gate: Optional[ast.If]


def _stale_form(source, memo: _Memo, others: List[ast.AST]) -> Optional[_StaleForm]:
    """The form above, when it is exactly that: one check ``self.P != k2 or
    k not in self.M`` (either order) taken on a miss, an ``else`` that only
    reads ``v = self.M[k]``, a body that computes ``v`` and ends with the two
    writes ``self.M[k] = v`` and ``self.P = k2`` (or an ``if`` holding just
    them, whose test reads neither), and no other use of either attribute in
    the method."""
    if memo.kind != KEY_KIND or len(memo.checks) != 1 or len(memo.writes) != 1:
        return None
    check, hit = memo.checks[0]
    test = check.test
    if hit or not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) and len(test.values) == 2):
        return None
    key = prev = prev_key = None
    for part in test.values:
        if not (isinstance(part, ast.Compare) and len(part.ops) == 1):
            return None
        op, left, right = part.ops[0], part.left, part.comparators[0]
        if isinstance(op, ast.NotIn) and self_attr(right) == memo.attr:
            key = left
        elif isinstance(op, ast.NotEq):
            mine, other = (left, right) if self_attr(left) is not None else (right, left)
            if self_attr(mine) in (None, memo.attr) or self_attr(other) is not None:
                return None
            prev, prev_key = self_attr(mine), other
        else:
            return None
    if key is None or prev is None or len(check.orelse) != 1 or not check.body:
        return None
    read = check.orelse[0]
    if not (isinstance(read, ast.Assign) and len(read.targets) == 1 and isinstance(read.targets[0], ast.Name)):
        return None
    if not (isinstance(read.value, ast.Subscript) and self_attr(read.value.value) == memo.attr and _same(read.value.slice, key)):
        return None
    name, write, last = read.targets[0].id, memo.writes[0], check.body[-1]
    gate: Optional[ast.If] = None
    if isinstance(last, ast.If) and not last.orelse and any(w is write for w in last.body):
        gate, writes, region = last, list(last.body), list(check.body[:-1])
        if any(self_attr(n) in (memo.attr, prev) for n in ast.walk(last.test)):
            return None
    else:
        writes, region = list(check.body[-2:]), list(check.body[:-2])
    if len(writes) != 2 or not any(w is write for w in writes):
        return None
    other = next(w for w in writes if w is not write)
    if not (isinstance(write, ast.Assign) and _same(write.targets[0].slice, key) and isinstance(write.value, ast.Name) and write.value.id == name):  # type: ignore[attr-defined]
        return None
    if not (isinstance(other, ast.Assign) and len(other.targets) == 1 and self_attr(other.targets[0]) == prev and _same(other.value, prev_key)):
        return None
    for node in others:  # the memo's other uses: the hit's read only
        if not any(a is read for a in source.ancestors(node)):
            return None
    for node in walk_body(memo.fn):
        if self_attr(node) == prev and not any(a is test or a is other for a in source.ancestors(node)):
            return None
    if any(w.lineno == o.lineno for w in writes for o in writes if o is not w):
        return None  # each write on a line of its own (each is guarded)
    return _StaleForm(prev, key, prev_key, region, writes, gate)


def _compiling_or(model, attrs: Tuple[str, ...], node: "cst.BaseExpression") -> "cst.BaseExpression":
    """``test`` -> ``torch.compiler.is_compiling() or test`` (parenthesised
    when it binds looser than ``or``)."""
    right = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if isinstance(node, (cst.IfExp, cst.Lambda)) and not node.lpar else node
    return cst.BooleanOperation(left=cst.Call(func=torch_expr(model, *attrs)), operator=cst.Or(), right=right)


def _why_not_pure_stale(ctx, memo: _Memo, stale: _StaleForm) -> str:
    """Why the stale form's fix is unsafe: what purity does not prove, or
    else the stale entry another key leaves (above)."""
    source = ctx.source
    chain = class_chain(ctx.model, memo.owner)
    companion = _Memo(memo.owner, memo.method, memo.fn, stale.prev, memo.kind)
    why = _outside_readers(source, memo, chain) or _outside_readers(source, companion, chain) or _caller_changes_result(source, memo)
    write = memo.writes[0]
    why = why or Purity(ctx.model, source, chain).region(memo.fn, stale.region + [write], [stale.key, stale.prev_key], write)  # type: ignore[list-item]
    if why is not None:
        return why
    key, prev_key = ast.unparse(stale.key), ast.unparse(stale.prev_key)
    return (
        f"the dict is keyed by `{key}` alone: after a call with another `{key}` set `self.{stale.prev}`, a hit returns"
        f" a value made for an older `{prev_key}`, which a compiled call now computes afresh"
    )


# -- a dict memo in any form: a local dict that is fresh while compiling ----------------
#
# ``cache = {} if torch.compiler.is_compiling() else self.cache`` before the
# method's first use of ``self.cache``, and every use read through ``cache``:
# eager runs use the very same dict (every read, fill and hit as before);
# compiled calls start from an empty dict dynamo makes inside the graph, so
# they read no attribute (no guard on its keys) and write none (nothing for
# the next call to fail).  Measured on QwenImage's rope (diffusers #12061,
# benchmarks/recall/qwenimage_rope_cache_dict): 2 graphs -> 1, the same output.


@dataclass
class _LocalDict:
    name: str
    #: the statement of the method's body the binding goes before
    before: ast.stmt
    #: every ``self.<attr>`` of the method, each read through ``name`` instead
    uses: List[ast.Attribute]


#: methods of a dict that neither rebind nor let it escape
_DICT_METHODS = {"get", "keys", "values", "items", "setdefault", "pop", "update", "clear", "__contains__"}


def _dict_use(source, node: ast.Attribute) -> bool:
    """Is ``node`` (``self.<attr>``) used only as a dict in place: an item
    read, stored or deleted, a membership test, a dict method called?"""
    parent = source.parent(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return True
    if isinstance(parent, ast.Compare) and node in parent.comparators:
        i = parent.comparators.index(node)
        return isinstance(parent.ops[i], (ast.In, ast.NotIn))
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in _DICT_METHODS:
        call = source.parent(parent)
        return isinstance(call, ast.Call) and call.func is parent
    return False


def _local_dict_form(source, memo: _Memo, others: List[ast.AST]) -> Optional[_LocalDict]:
    """The local-dict rewrite of a dict memo, when every use of the attribute
    the compiled code makes is in the memo's own method, in its body (no
    nested function), and a dict use (:func:`_dict_use`)."""
    if memo.kind != KEY_KIND:
        return None
    fn = memo.fn
    if any(source.enclosing(n, _DEFS) is not fn for n in others):
        return None  # used by another method the compiled code runs
    uses = [n for n in walk_body(fn) if isinstance(n, ast.Attribute) and self_attr(n) == memo.attr]
    if not uses or any(source.enclosing(n, _SCOPES) is not fn or not _dict_use(source, n) for n in uses):
        return None
    body = fn.body  # type: ignore[attr-defined]
    first = min(uses, key=lambda n: (n.lineno, n.col_offset))
    before = next((s for s in body if s.lineno <= first.lineno <= s.end_lineno), None)  # type: ignore[operator]
    if before is None or block_of(source, before) is None:
        return None
    used = {n.id for n in walk_body(fn) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}  # type: ignore[attr-defined]
    name = memo.attr.lstrip("_") or "memo"
    k = 1
    while name in used or name == "self":
        name, k = f"{memo.attr.lstrip('_') or 'memo'}_{k}", k + 1
    return _LocalDict(name, before, sorted(uses, key=lambda n: (n.lineno, n.col_offset)))


def _local_binding(model, attrs: Tuple[str, ...], name: str, attr: str, node: "cst.CSTNode"):
    """Insert ``name = {} if torch.compiler.is_compiling() else self.<attr>`` before ``node``."""
    value = cst.IfExp(
        test=cst.Call(func=torch_expr(model, *attrs)),
        body=cst.Dict([]),
        orelse=cst.Attribute(value=cst.Name("self"), attr=cst.Name(attr)),
    )
    binding = cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=value)])
    return cst.FlattenSentinel([binding.with_changes(leading_lines=node.leading_lines), node.with_changes(leading_lines=())])


def _to_name(name: str, _node: "cst.CSTNode") -> "cst.Name":
    return cst.Name(name)


# -- the proof: the memo holds a pure function of its key ----------------------------
#
# Skipping the memo while compiling changes nothing a caller sees when the
# compiled call would have found in the memo exactly what it computes: the
# value stored is a pure function of the key (analysis/purity.py), the value
# a hit returns is the value a miss goes on with, and nothing but the memo's
# own method reads the attribute (a reader elsewhere would find it unfilled).


def _same(a: Optional[ast.AST], b: Optional[ast.AST]) -> bool:
    return a is not None and b is not None and ast.dump(a) == ast.dump(b)


def _why_not_pure(ctx, memo: _Memo, local: Optional["_LocalDict"]) -> Optional[str]:
    """Why skipping ``memo`` while compiling is not proven to keep every
    value (None: proven).  ``local`` is the local-dict form's rewrite, None
    for the guarded check and write."""
    source, fn = ctx.source, memo.fn
    if len(memo.writes) != 1:
        return "the memo is written more than once"
    write = memo.writes[0]
    if not isinstance(write, ast.Assign):
        return "the memo's write is not an assignment"
    value = write.value
    check = memo.checks[0][0] if len(memo.checks) == 1 else None
    if check is None:
        return "the memo is checked in more than one `if`"
    chain = class_chain(ctx.model, memo.owner)
    why = _outside_readers(source, memo, chain) or _caller_changes_result(source, memo)
    if why is not None:
        return why
    keys: List[ast.AST] = []
    if local is None:
        region, why = _after_hit(source, memo, check, write, value, keys)
    else:
        region, why = _miss_body(source, memo, check, write, value, keys)
    if why is not None:
        return why
    return Purity(ctx.model, source, chain).region(fn, region, keys, write)


def _after_hit(source, memo: _Memo, check: ast.If, write: ast.Assign, value: ast.AST, keys: List[ast.AST]):
    """The region of the simple form (a hit returns, a miss computes, writes
    and returns what it wrote), its keys filled into ``keys``."""
    block = block_of(source, check)
    body = getattr(block[0], block[1]) if block is not None else []
    if not any(s is write for s in body):
        return [], "the memo's write is not in its check's block"
    i, j = next(k for k, s in enumerate(body) if s is check), next(k for k, s in enumerate(body) if s is write)
    after = body[j + 1] if j + 1 < len(body) else None
    if len(check.body) != 1 or not isinstance(after, ast.Return):
        return [], "a hit does not return the memo's value alone, or the write is not followed by a return"
    hit, rest = check.body[0].value, after.value  # type: ignore[attr-defined]
    target = write.targets[0]
    if memo.kind == NONE_KIND:
        stored = value
        if isinstance(hit, ast.Subscript) and self_attr(hit.value) == memo.attr and isinstance(hit.slice, ast.Constant) and isinstance(value, ast.Tuple):
            at = hit.slice.value
            stored = value.elts[at] if isinstance(at, int) and 0 <= at < len(value.elts) else None
        elif self_attr(hit) != memo.attr:
            return [], "a hit returns more than the memo's value"
        if not _same(stored, rest):
            return [], "a hit returns another value than a miss"
        conjuncts = check.test.values if isinstance(check.test, ast.BoolOp) else [check.test]
        for part in conjuncts:
            if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], ast.IsNot) and self_attr(part.left) == memo.attr:
                continue  # the None check
            if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.ops[0], ast.Eq) and isinstance(value, ast.Tuple):
                sides = [part.left, part.comparators[0]]
                for mine, key in (sides, sides[::-1]):
                    if isinstance(mine, ast.Subscript) and self_attr(mine.value) == memo.attr and isinstance(mine.slice, ast.Constant):
                        at = mine.slice.value
                        if isinstance(at, int) and 0 <= at < len(value.elts) and _same(value.elts[at], key):
                            keys.append(key)
                            break
                else:
                    return [], "its check compares more than the stored key"
                continue
            return [], "its check tests more than the memo and its key"
    else:
        test = check.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)):
            return [], "its check tests more than the key's presence"
        key = test.left
        if not (isinstance(hit, ast.Subscript) and self_attr(hit.value) == memo.attr and _same(hit.slice, key)):
            return [], "a hit returns more than the memo's value"
        if not (isinstance(target, ast.Subscript) and _same(target.slice, key)) or not _same(value, rest):
            return [], "a miss stores another key or returns another value"
        keys.append(key)
    return body[i + 1 : j + 1], None


def _miss_body(source, memo: _Memo, check: ast.If, write: ast.Assign, value: ast.AST, keys: List[ast.AST]):
    """The region of a dict memo filled on a miss (``if k not in self.cache:
    ...; self.cache[k] = v`` then read as ``self.cache[k]``, or ``t =
    self.cache.get(k)``, ``if t is None: t = ...; self.cache[k] = t``)."""
    target = write.targets[0]
    if check.orelse or not check.body or check.body[-1] is not write or not isinstance(target, ast.Subscript):
        return [], "the memo's write does not end its check's body"
    key = target.slice
    test = check.test
    fetched: Optional[str] = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotIn) and self_attr(test.comparators[0]) == memo.attr:
        if not _same(test.left, key):
            return [], "its check and its write use different keys"
    elif isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is) and isinstance(test.left, ast.Name) and _is_none(test.comparators[0]):
        fetched = test.left.id
        if not (isinstance(value, ast.Name) and value.id == fetched):
            return [], "a miss stores another value than it goes on with"
    else:
        return [], "its check tests more than the key's absence"
    for node in walk_body(memo.fn):
        if self_attr(node) != memo.attr or any(n is write for n in source.ancestors(node)) or any(n is test for n in source.ancestors(node)):
            continue
        parent = source.parent(node)
        if fetched is not None and isinstance(parent, ast.Attribute) and parent.attr == "get":
            call = source.parent(parent)
            stmt = source.statement_of(node)
            if isinstance(call, ast.Call) and len(call.args) == 1 and _same(call.args[0], key) and isinstance(stmt, ast.Assign) and stmt.value is call and stmt.targets[0].id == fetched and stmt.lineno < check.lineno:  # type: ignore[attr-defined]
                continue
        if fetched is None and isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Load) and _same(parent.slice, key) and node.lineno > check.end_lineno:  # type: ignore[attr-defined,operator]
            continue
        return [], f"`self.{memo.attr}` is used otherwise on line {node.lineno}"  # type: ignore[attr-defined]
    keys.append(key)
    return list(check.body), None


def _outside_readers(source, memo: _Memo, chain: List[ast.ClassDef]) -> Optional[str]:
    """Why code other than the memo's method may read the memo: a use of
    ``.<attr>`` outside the method and the class's ``__init__`` (emptying it,
    ``.clear()`` or ``= None``, is no read)."""
    for node in source.nodes(ast.Attribute):
        if node.attr != memo.attr:  # type: ignore[attr-defined]
            continue
        owner = source.enclosing(node, _DEFS)
        if owner is memo.fn or (owner is not None and owner.name == "__init__" and any(c is source.enclosing(owner, (ast.ClassDef,)) for c in chain)):  # type: ignore[attr-defined]
            continue
        parent = source.parent(node)
        if isinstance(parent, ast.Attribute) and parent.attr == "clear":
            continue
        stmt = source.statement_of(node)
        if isinstance(stmt, ast.Assign) and any(t is node for t in stmt.targets) and (_is_none(stmt.value) or isinstance(stmt.value, ast.Dict) and not stmt.value.keys):
            continue
        return f"`.{memo.attr}` is used outside the memo's method, on line {node.lineno}"  # type: ignore[attr-defined]
    return None


def _memo_calls(source, memo: _Memo) -> List[ast.Call]:
    """The calls of the memo's method in the file: ``<x>.<method>(...)``; for
    a memo in ``forward``, the module calls ``self.<attr>(...)`` of an
    attribute some method assigns an instance of the class to."""
    if memo.method != "forward":
        return [c for c in source.nodes(ast.Call) if isinstance(c.func, ast.Attribute) and c.func.attr == memo.method]  # type: ignore[attr-defined]
    holders = {
        self_attr(t)
        for a in source.nodes(ast.Assign)
        if isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Name) and a.value.func.id == memo.owner.name  # type: ignore[attr-defined]
        for t in a.targets  # type: ignore[attr-defined]
    } - {None}
    return [c for c in source.nodes(ast.Call) if self_attr(c.func) in holders]  # type: ignore[attr-defined]


def _caller_changes_result(source, memo: _Memo) -> Optional[str]:
    """Why a caller may change the memo's value in place: with the memo every
    call returns the one cached tensor (a change shows at the next call),
    without it a new one.  The calls of the file only: the result changed by
    an in-place method on the call (``self.freqs(n).mul_(2)``) or through the
    local it is bound to (also by unpacking: ``cos, sin = self.rope(x)``)."""
    for call in _memo_calls(source, memo):
        parent = source.parent(call)
        if isinstance(parent, ast.Attribute) and (parent.attr in MUTATORS or (parent.attr.endswith("_") and not parent.attr.startswith("_"))):
            return f"a caller changes the returned value in place (line {call.lineno})"  # type: ignore[attr-defined]
        stmt = source.statement_of(call)
        if not (isinstance(stmt, ast.Assign) and stmt.value is call):
            continue
        names = [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
        owner = source.enclosing(call, _DEFS)
        for name in names:
            changed = changed_in_place(owner, name, MUTATORS) if owner is not None else None
            if changed is not None:
                return f"a caller changes the returned value in place (`{name}`, line {changed.lineno})"  # type: ignore[attr-defined]
    return None


def memo_proof_of_class(rule: "CompiledMemo", ctx, cls: ast.ClassDef) -> Iterable[Tuple[_Memo, Optional[str]]]:
    """Each memo of ``cls`` that FR014 could rewrite, with why its value is
    not proven a pure function of its key (None: proven), whether or not
    anything compiles the class: benchmarks/memo_audit.py's view of the proof
    on real code."""
    if not _memo_attrs(ctx.model, cls):
        return
    methods = [(cls, s.name, s) for s in cls.body if isinstance(s, _DEFS) and s.name != "__init__"]
    for memo, others in rule._memos(ctx.model, ctx.source, methods):
        why_not, local = rule._form(ctx.source, memo, others)
        if why_not is None or local is not None:
            yield memo, _why_not_pure(ctx, memo, local)


def _warmer_called(model, memo: _Memo, reached: Set[int]) -> Optional[str]:
    """``Cls.warm_all`` when another method of the memo's class calls the
    memo's method (on any object: ``inst.get(dtype, device)``) and the module
    calls that method: the memo can be filled eagerly before the first
    compiled call (mujoco-torch f234fb3 calls ``_CachedConst.warm_all`` from
    ``make_data``), so the write inside the compiled code may never run.
    None when no such warming is called."""
    warmers: List[str] = []
    for c in class_chain(model, memo.owner):
        for stmt in c.body:
            if isinstance(stmt, _DEFS) and stmt.name != memo.method and id(stmt) not in reached:
                if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == memo.method for n in walk_body(stmt)):
                    warmers.append(stmt.name)
    if not warmers:
        return None
    for call in model.source.nodes(ast.Call):
        func = call.func  # type: ignore[attr-defined]
        if isinstance(func, ast.Attribute) and func.attr in warmers:
            owner = model.source.enclosing(call, _DEFS)
            if owner is None or id(owner) not in reached:
                return f"{memo.owner.name}.{func.attr}"
    return None


def _plain_memos(ctx) -> bool:
    """Does the module bind, at module level, an instance of one of its
    classes that is not an nn.Module and keeps a memo attribute?  (Only
    then can a compiled function reach a memo of a plain object: the walk
    of what it calls is skipped otherwise.)"""
    held = ctx.cache.get("fr014_plain")
    if held is None:
        model = ctx.model
        held = False
        for stmt in model.tree.body:
            value = stmt.value if isinstance(stmt, ast.Assign) else None
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                cls = model.classes.get(value.func.id)
                if isinstance(cls, ast.ClassDef) and not model.is_module_class(cls) and _memo_attrs(model, cls):
                    held = True
                    break
        ctx.cache["fr014_plain"] = held
    return held


# -- a module global as the memo (the trace's cure) ------------------------------------
#
# vllm-gaudi before 86bb66e7 (PR #1715), in the attention function the
# regionally compiled layers call::
#
#     global _CACHED_FSDPA_OP
#     if _CACHED_FSDPA_OP is None:
#         HPUFusedSDPA = kernels.fsdpa()
#         _CACHED_FSDPA_OP = ModuleFusedSDPA(HPUFusedSDPA)
#     attn_output = _CACHED_FSDPA_OP(query, ...)
#
# The first compiled call is guarded on ``G['_CACHED_FSDPA_OP'] is None`` and
# fills it, so the next call compiles again.  A local stands in for the
# global, None while compiling (the global is then not read: no guard), and
# the value is written back only outside compiled code::
#
#     global _CACHED_FSDPA_OP
#     cached_fsdpa_op = None if torch.compiler.is_compiling() else _CACHED_FSDPA_OP
#     if cached_fsdpa_op is None:
#         HPUFusedSDPA = kernels.fsdpa()
#         cached_fsdpa_op = ModuleFusedSDPA(HPUFusedSDPA)
#         if not torch.compiler.is_compiling():
#             _CACHED_FSDPA_OP = cached_fsdpa_op
#     attn_output = cached_fsdpa_op(query, ...)
#
# Eager calls read, fill and use the global as before.  A compiled call
# builds the value on every call: the same only when the fill is a pure
# function of nothing (analysis/purity.py, with no key), so the fix is safe
# only then.  The static reach of such a function is rarely visible (here a
# transformers registry calls it), so the trace finds it: the guard's line is
# the check (codemods/trace/global_memo.py).


@dataclass
class GlobalMemo:
    """A module global filled on first use inside one function: its ``if
    <name> is None:`` check, the writes in that ``if``, every read of the
    name in the function, and the local that stands in for it."""

    fn: ast.AST
    name: str
    check: ast.If
    writes: List[ast.Assign]
    loads: List[ast.Name]
    local: str


def _is_none_check(test: ast.AST, name: str) -> bool:
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == name
        and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is) and _is_none(test.comparators[0])
    )


def _names_in(source, fn: ast.AST, name: str) -> List[ast.Name]:
    """Every ``name`` of ``fn``'s own scope (not of a nested function)."""
    return [n for n in walk_body(fn) if isinstance(n, ast.Name) and n.id == name and source.enclosing(n, _SCOPES) is fn]


def global_memo(source, model, line: int, name: str) -> Tuple[Optional[GlobalMemo], str]:
    """The global memo ``name`` whose None check is on ``line`` (the line
    the trace's guard names), or why the fix does not apply: the module
    binds it once, to None; one function declares it ``global``, checks it
    in one ``if <name> is None:`` without ``else`` and writes it only there,
    each write an assignment of its own line; nothing else in the module
    reads it (a reader elsewhere would find it unfilled by compiled calls);
    the module imports torch (the fix calls ``torch.compiler.is_compiling``)."""
    if model.torch_alias is None:
        return None, "the file does not import torch"
    fn = None
    for node in source.nodes(ast.Global):
        if name in node.names:  # type: ignore[attr-defined]
            owner = source.enclosing(node, _DEFS)
            if owner is None:
                continue
            if fn is not None and owner is not fn:
                return None, f"more than one function declares `global {name}`"
            fn = owner
    if fn is None:
        return None, f"no function declares `global {name}`"
    module_binds = [s for s in model.tree.body if isinstance(s, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == name for t in (s.targets if isinstance(s, ast.Assign) else [s.target]))]
    if len(module_binds) != 1 or not _is_none(module_binds[0].value):
        return None, f"the module does not bind `{name}` once, to None"
    checks = [n for n in walk_body(fn) if isinstance(n, ast.If) and _is_none_check(n.test, name) and source.enclosing(n, _SCOPES) is fn]
    if len(checks) != 1 or not (checks[0].lineno <= line <= checks[0].test.end_lineno):  # type: ignore[operator]
        return None, f"`{name}` is not checked in one `if {name} is None:` at line {line}"
    check = checks[0]
    if check.orelse:
        return None, "its check has an `else`"
    uses = _names_in(source, fn, name)
    writes: List[ast.Assign] = []
    loads: List[ast.Name] = []
    for node in uses:
        if isinstance(node.ctx, ast.Load):
            if node.lineno < check.lineno:
                return None, f"`{name}` is read before its check, on line {node.lineno}"
            if _in_place(source, node, NONE_KIND):
                return None, f"`{name}` is changed in place on line {node.lineno} (state kept across calls, not a memo)"
            loads.append(node)
            continue
        stmt = source.statement_of(node)
        if not (isinstance(node.ctx, ast.Store) and isinstance(stmt, ast.Assign) and stmt.targets == [node] and stmt in check.body):
            return None, f"`{name}` is changed on line {node.lineno} otherwise than by an assignment in its check"
        if any(s is not stmt and s.lineno == stmt.lineno for s in check.body):
            return None, "a write shares its line with another statement"
        writes.append(stmt)
    if not writes:
        return None, f"its check does not write `{name}`"
    for node in source.nodes(ast.Name):
        if node.id == name and source.enclosing(node, _SCOPES) not in (fn, None):  # type: ignore[attr-defined]
            other = source.enclosing(node, _SCOPES)
            return None, f"`{getattr(other, 'name', '?')}` reads `{name}` too, and would find it unfilled by compiled calls"
    used = {n.id for n in ast.walk(model.tree) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(model.tree) if isinstance(a, ast.arg)}
    stem = name.strip("_").lower() or "memo"
    local, k = stem, 1
    while local in used:
        local, k = f"{stem}_{k}", k + 1
    return GlobalMemo(fn, name, check, writes, sorted(loads, key=lambda n: (n.lineno, n.col_offset)), local), ""


def global_memo_impure(source, model, memo: GlobalMemo) -> Optional[str]:
    """Why the value the memo holds is not proven the same at every call (a
    pure function of nothing, computed by its check's body), or None."""
    if len(memo.writes) != 1:
        return "the memo is written more than once"
    write = memo.writes[0]
    region = memo.check.body[: memo.check.body.index(write) + 1]
    if write is not memo.check.body[-1]:
        return "its check goes on after the write"
    return Purity(model, source, []).region(memo.fn, region, [], write, memo_global=memo.name)


def global_memo_edits(source, model, settings, memo: GlobalMemo) -> List[Edit]:
    """The fix: the local bound before the check (None while compiling),
    read instead of the global, assigned instead of it, and written back to
    it only outside compiled code."""
    attrs = ("compiler", "is_compiling") if torch_at_least(settings, IS_COMPILING_SINCE) else ("_dynamo", "is_compiling")
    edits = [Edit(statement_target(source, memo.check), functools.partial(_global_binding, model, attrs, memo.local, memo.name))]
    edits += [Edit(source.target(n, "Name"), functools.partial(_to_name, memo.local)) for n in memo.loads]
    edits += [Edit(statement_target(source, w), functools.partial(_write_back, model, attrs, memo.local, memo.name)) for w in memo.writes]
    return edits


def _global_binding(model, attrs: Tuple[str, ...], local: str, name: str, node: "cst.CSTNode"):
    """Insert ``local = None if torch.compiler.is_compiling() else NAME`` before ``node``."""
    value = cst.IfExp(test=cst.Call(func=torch_expr(model, *attrs)), body=cst.Name("None"), orelse=cst.Name(name))
    binding = cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(local))], value=value)])
    return cst.FlattenSentinel([binding.with_changes(leading_lines=node.leading_lines), node.with_changes(leading_lines=())])


def _write_back(model, attrs: Tuple[str, ...], local: str, name: str, node: "cst.SimpleStatementLine"):
    """``NAME = value`` -> ``local = value`` and, outside compiled code only, ``NAME = local``."""
    assign = node.body[0]
    assigned = node.with_changes(body=[assign.with_changes(targets=[cst.AssignTarget(cst.Name(local))])])
    back = cst.SimpleStatementLine(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=cst.Name(local))])
    return cst.FlattenSentinel([assigned, guard_statement(_not_compiling(model, attrs), back)])
