"""FR023 string-argument: a ``str`` passed to a compiled function, changing
between calls.  torch guards a string by its value and never makes it
dynamic, so every new string is a graph (nari-labs/dia before 5f57172d: the
prompt passed to the compiled ``_prepare_generation``, encoded inside it)."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Set, Tuple

from ..analysis.compile_sites import def_first_lines
from ..analysis.params import binds_self, parameter_defaults, passed_argument
from ..analysis.variation import number_varies
from ..findings import Finding
from ..trace.causes import CONSTANT, CuresCause
from .base import Example, Rule

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _annotated_str(annotation: Optional[ast.AST]) -> bool:
    """``str``, ``"str"``, ``str | None``, ``Optional[str]``: a string or
    nothing (``str | torch.Tensor``, a tensor at some calls, is not)."""
    members = _union_members(annotation) if annotation is not None else []
    kinds = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None) and not (isinstance(m, ast.Name) and m.id == "None")]
    return bool(kinds) and all((isinstance(m, ast.Name) and m.id == "str") or (isinstance(m, ast.Constant) and m.value == "str") for m in kinds)


def _union_members(annotation: ast.AST) -> List[ast.AST]:
    """The members of ``a | b``, ``Optional[a]``, ``Union[a, b]``; else the annotation itself."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _union_members(annotation.left) + _union_members(annotation.right)
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, (ast.Name, ast.Attribute)):
        name = annotation.value.id if isinstance(annotation.value, ast.Name) else annotation.value.attr
        if name == "Optional":
            return _union_members(annotation.slice)
        if name == "Union":
            parts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            return [m for p in parts for m in _union_members(p)]
    return [annotation]


def string_parameters(fn: ast.AST) -> List[str]:
    """The parameters of ``fn`` a string is passed for: annotated ``str``
    (also ``Optional[str]``, ``str | None``), or whose default is a string."""
    args = fn.args  # type: ignore[attr-defined]
    defaults = parameter_defaults(fn)
    out: List[str] = []
    for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs):
        default = defaults.get(a.arg)
        if _annotated_str(a.annotation) or (isinstance(default, ast.Constant) and isinstance(default.value, str)):
            out.append(a.arg)
    return out


def _reads(fn: ast.AST, name: str) -> bool:
    """Does the body of ``fn`` read ``name`` (a guard needs a read)?"""
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for stmt in fn.body for n in ast.walk(stmt))  # type: ignore[attr-defined]


def _readers(model, fn: ast.AST, param: str, depth: int = 3) -> List[ast.AST]:
    """``fn`` and the functions of the module it passes ``param`` on to
    (``self._prepare_text_input(text)``), up to ``depth`` calls deep: each
    may be a frame of its own that guards the string (a graph break at the
    call), which the trace's guard names."""
    out: List[ast.AST] = [fn]
    todo = [(fn, param, 0)]
    while todo:
        here, name, level = todo.pop()
        if level >= depth:
            continue
        for call in (n for stmt in here.body for n in ast.walk(stmt) if isinstance(n, ast.Call)):  # type: ignore[attr-defined]
            callee = model.called_def(call.func)
            if not isinstance(callee, _DEFS) or any(callee is f for f in out):
                continue
            bound = isinstance(call.func, ast.Attribute)
            for p in list(a.arg for a in callee.args.posonlyargs + callee.args.args + callee.args.kwonlyargs):
                value = passed_argument(call, callee, p, bound)
                if isinstance(value, ast.Name) and value.id == name:
                    out.append(callee)
                    todo.append((callee, p, level + 1))
                    break
    return out


class StringArgs(Rule):
    code = "FR023"
    #: the trace's guard on the string's value (`text == '[S1] ...'`); the
    #: trace cures it where a function compiled code calls reads the string
    #: (disable-string-from-trace), a rewrite this rule cannot prove
    cures = (CuresCause(CONSTANT, strings_only=True),)
    name = "string-argument"
    summary = "a str passed to a compiled function that changes between calls"
    what_it_does = """
Finds calls of compiled functions (every compile form the module shows)
that pass a `str` for a parameter annotated `str` (or `Optional[str]`, `str |
None`; not a union with another type, `str | torch.Tensor`, a tensor at some
calls) or whose default is a string, which the compiled function reads.
A default finding where the source shows the string changing between calls
(rebuilt in a loop around the call, or a parameter of the function holding
the call, which is called with changing values: `for text in prompts:
model.generate(text)` -> `self._prepare_generation(text)`, followed up to
three functions out); with `--unproven` otherwise. Report only.
"""
    why_it_recompiles = """
Dynamo treats a string as a constant: code that reads one (`text.encode()`,
an f-string, `mode == "fast"`) guards its value, and no `dynamic=` setting
makes a string symbolic. Every new string is a graph, until the recompile
limit (then the function runs eagerly). Measured on torch 2.13 (CPU,
counting backend): nari-labs/dia before 5f57172d, four prompts through the
compiled `_prepare_generation`, 5 graphs; the prompt encoded outside and the
tokens passed as a tensor, 1.
"""
    example = """
    self._prepare_generation = torch.compile(self._prepare_generation, dynamic=True)

    def _prepare_generation(self, text: str):
        tokens = self._prepare_text_input(text)     # text.encode(...): one graph per prompt
        ...

    for text in prompts:
        model.generate(text)                        # -> self._prepare_generation(text)

Cured by hand (dia 5f57172d): encode eagerly, pass the tensor:

    def _prepare_generation(self, text_tokens: torch.Tensor):
        ...

    self._prepare_generation(self._encode_text(text))
"""
    fix_safety = """
No automatic fix from the source: the cure moves the string work out of the
compiled code (encode, tokenize or format eagerly and pass tensors), which
changes the function's signature. `run --fix` cures it from the trace where a
function the compiled code calls reads the string (`@torch.compiler.disable`
on it, disable-string-from-trace: safe where it hit the recompile limit).
A string that takes few values (a mode) is bounded: one graph each.
"""
    report_only = True
    reads = "ast"
    valid = (
        # the string is the same at every call
        "import torch\n@torch.compile\ndef f(x, mode: str):\n    return x.relu() if mode == 'relu' else x\nfor _ in range(3):\n    f(torch.ones(2), 'relu')\nf(torch.ones(3), 'relu')\n",
        # a str parameter the compiled function never reads
        "import torch\n@torch.compile\ndef f(x, name: str = ''):\n    return x * 2\nfor n in ['a', 'b']:\n    f(torch.ones(2), n)\n",
        # the argument for a parameter that is no string
        "import torch\n@torch.compile\ndef f(x, scale):\n    return x * scale\nfor s in [1, 2]:\n    f(torch.ones(2), s)\n",
    )
    invalid = (
        # dia's form: a method compiled in place, the prompt from a loop two calls out
        Example(
            "import torch\nclass Dia(torch.nn.Module):\n"
            "    def _prepare_generation(self, text: str):\n        return torch.tensor(list(text.encode()))\n"
            "    def generate(self, text):\n"
            "        self._prepare_generation = torch.compile(self._prepare_generation)\n"
            "        return self._prepare_generation(text)\n"
            "model = Dia()\nfor text in ['[S1] hello', '[S1] world']:\n    model.generate(text)\n"
        ),
        # an f-string rebuilt in the loop, a default string
        Example(
            "import torch\n@torch.compile\ndef f(x, tag='a'):\n    return x * len(tag)\nfor i in range(4):\n    f(torch.ones(2), tag=f'step {i}')\n"
        ),
        # two calls with different strings
        Example(
            "import torch\n@torch.compile\ndef f(x, mode: str):\n    return x.relu() if mode == 'relu' else x\nf(torch.ones(2), 'relu')\nf(torch.ones(2), 'gelu')\n"
        ),
        # a string of unknown origin, passed once: only with --unproven
        Example(
            "import torch\n@torch.compile\ndef f(x, mode: str):\n    return x.relu() if mode == 'relu' else x\ndef run(x, mode):\n    return f(x, mode)\n",
            unproven=True,
        ),
    )

    def check(self, ctx) -> Iterable[Finding]:
        model, source = ctx.model, ctx.source
        passed: Dict[Tuple[int, str], List[Tuple[object, ast.Call, ast.AST, ast.AST]]] = {}
        seen: Set[int] = set()
        for site in model.compile_sites:
            for call in site.calls:
                fn = site.def_of(call)
                if not isinstance(fn, _DEFS):
                    continue
                bound = binds_self(source, fn)
                for param in string_parameters(fn):
                    if not _reads(fn, param):
                        continue
                    value = passed_argument(call, fn, param, bound)
                    if value is None or id(value) in seen:
                        continue  # the default: the same string at every call
                    seen.add(id(value))
                    passed.setdefault((id(fn), param), []).append((site, call, fn, value))
        findings: List[Finding] = []
        for (_fn, param), calls in passed.items():
            literals = sorted({v.value for _s, _c, _f, v in calls if isinstance(v, ast.Constant) and isinstance(v.value, str)})
            feeds = tuple(line for reader in _readers(model, calls[0][2], param) for line in def_first_lines(reader))
            for site, call, fn, value in calls:
                if isinstance(value, ast.Constant):
                    if len(literals) < 2:
                        continue  # one literal at every call: the string never changes
                    why: Optional[str] = f"`{fn.name}` is called with different strings: {', '.join(repr(v) for v in literals[:3])}"  # type: ignore[attr-defined]
                else:
                    why = number_varies(model, call, value)
                where = f" (compiled on line {site.node.lineno})" if site.node.lineno != fn.lineno else ""  # type: ignore[attr-defined]
                changes = f"changes between calls ({why})" if why else "is passed here (no call seen passing another string: reported with --unproven)"
                findings.append(
                    self.finding(
                        ctx,
                        value,
                        f"the str `{param}` of compiled `{fn.name}`{where} {changes}: torch guards a string by its value "  # type: ignore[attr-defined]
                        "and never makes it dynamic, so each new string is a graph, until the recompile limit (a mode that "
                        "takes few values is bounded: a graph each); for data (a prompt, a path) encode or tokenize it outside "
                        "the compiled code and pass the tensor (nari-labs/dia 5f57172d); where a function the compiled code "
                        "calls reads it, `run --fix` runs that function eagerly, from the trace (no fix from the source)",
                        proven=why is not None,
                        feeds=feeds,
                    )
                )
        return sorted(findings, key=lambda f: (f.line, f.column))
