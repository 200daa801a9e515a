"""What torch ops do with a 0-d tensor where a Python float went.

The one place FR003 (float-args) reads when it judges a use of a float
parameter inside a compiled function that ends in a torch call
(:mod:`codemods.analysis.floats`), and that its table tests
(``tests/test_tensor_ops_table.py``) prove on the installed torch.  Three
tables:

* :data:`TENSOR_OK` -- ops that take a 0-d ``float64`` tensor in a slot where a
  float went, with the same values and the same result dtype, and compile once
  for every value of it.  Each row is proven under torch 2.13 by a test that
  runs the op with the float and with the tensor (every floating dtype the row
  allows, 1000 elements, several values: bit-identical, same dtype) and under
  ``torch.compile(fullgraph=True)`` with a counting backend (one graph for
  three values, the graph's results equal to eager's).  A use in a row is
  safe when the row's tensor operand is visibly floating at the call (as wide
  as the row says); a torch call in no row stays unsafe.
* :data:`REJECTED` -- forms that were measured and left out, each with what
  the test asserts really happens (so the table cannot drift silently).
* :data:`NUMBER_ONLY` -- ops that need the value as a Python number: a 0-d
  tensor there cannot cure the recompiles (it is read back, or the op leaves
  the graph), so FR003 reports the float and offers no fix.  Each row's claim
  (``tensor_effect``) is asserted by the tests.

Measured on torch 2.13 (CPU), counting backend, ``dynamic=None``:

* ``F.dropout(x, p=p)`` and the rest of the dropout family: a float ``p`` is
  specialised whatever ``dynamic`` is (the op needs a Python number): 10
  values hit the recompile limit (8 graphs, then eager).  With a 0-d tensor
  ``p`` dynamo cannot put the op in the graph: a graph break at the call (the
  op runs eager; under ``fullgraph=True`` it raises). ``torch.dropout`` with a
  tensor ``p`` still recompiles for every value.  A dropout written as tensor
  code, ``x * (torch.rand_like(x) >= p) / (1 - p)``, compiles once for every
  tensor ``p`` (also under ``fullgraph=True``).
* ``round(t)``, ``round(t, n)``, ``range(t)`` of a 0-d float tensor raise
  ``TypeError``.  ``int(t)`` and ``float(t)`` graph-break (``.item()``) and
  the number after them is guarded again; ``math.sqrt(t)`` compiles more
  graphs than ``math.sqrt`` of the float (5 against 2 for 5 values).
* A Python ``if`` on a 0-d tensor (``if t > 0.0``) is data-dependent:
  ``fullgraph=True`` raises ``Unsupported: Data-dependent branching``; without
  it the branch is a graph break. 12 values (signs mixed) under the default
  ``dynamic=None``: 3 graphs with the float, 3 with the tensor (the wrap cuts
  nothing, the break stays); under ``dynamic=False``: the float hits the
  recompile limit, the tensor compiles 3 graphs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple


#: torch calls that make a new tensor of a number (``torch.tensor(0.1)``):
#: a value built so is a tensor already (FR004's lr, FR018's dict values)
TENSOR_MAKERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.full", "torch.zeros", "torch.ones", "torch.scalar_tensor"})

@dataclass(frozen=True)
class TensorArgRow:
    """A torch op that takes a 0-d float64 tensor where a Python float went."""

    name: str
    #: dotted torch paths of the function form (``torch.lerp``)
    functions: Tuple[str, ...]
    #: tensor method names (``x.lerp(...)``, ``x.lerp_(...)``)
    methods: Tuple[str, ...]
    #: the slots that take the tensor: keyword -> positional index in the
    #: function form (the tensor input is 0; a method's receiver is the input)
    slots: Dict[str, Optional[int]]
    #: the tensor operands whose dtype the result follows: keyword -> index
    operands: Dict[str, int]
    #: "full": identical only for float32/float64 operands (lerp: float16 and
    #: bfloat16 differ in the last bit); "float": every floating dtype
    width: str
    #: other keywords a call may carry and stay in the row (anything else --
    #: ``alpha=``, ``rounding_mode=``, ``out=`` -- was not proven)
    keywords: Tuple[str, ...] = ()


def _binary(name: str, *methods: str) -> TensorArgRow:
    return TensorArgRow(name, (f"torch.{name}",), methods, {"other": 1}, {"input": 0}, "float")


TENSOR_OK: Dict[str, TensorArgRow] = {
    row.name: row
    for row in (
        TensorArgRow("lerp", ("torch.lerp",), ("lerp", "lerp_"), {"weight": 2}, {"input": 0, "end": 1}, "full"),
        _binary("mul", "mul", "mul_"),
        _binary("add", "add", "add_"),
        _binary("sub", "sub", "sub_"),
        _binary("div", "div", "div_"),
        TensorArgRow("clamp", ("torch.clamp", "torch.clip"), ("clamp", "clamp_", "clip", "clip_"), {"min": 1, "max": 2}, {"input": 0}, "float"),
        TensorArgRow("clamp_min", ("torch.clamp_min",), ("clamp_min", "clamp_min_"), {"min": 1}, {"input": 0}, "float"),
        TensorArgRow("clamp_max", ("torch.clamp_max",), ("clamp_max", "clamp_max_"), {"max": 1}, {"input": 0}, "float"),
        # ``value`` is keyword-only in the signature
        TensorArgRow("addcmul", ("torch.addcmul",), ("addcmul",), {"value": None}, {"input": 0, "tensor1": 1, "tensor2": 2}, "float"),
    )
}

#: rows that are a Python operator on ``input`` and ``other``: ``x.mul_(c)``
#: is ``x * c``, ``x.add(y)`` is ``x + y`` (their result is as wide as the
#: wider operand, as for the operator)
ARITHMETIC = frozenset({"mul", "add", "sub", "div"})

#: forms measured and left out: name -> (a call ``fn(x, y, c, v)`` with v the
#: value, what the test asserts: "differs" (eager float vs tensor results),
#: "compiled differs" (the compiled graph's result vs eager), or an exception
#: message).  Kept as data so the test proves each reason.
REJECTED: Dict[str, Tuple[str, str]] = {
    "lerp on float16/bfloat16": ("torch.lerp(x.half(), y.half(), v)", "differs"),
    "pow (x ** c)": ("torch.pow(x.abs(), v)", "differs"),
    "the float divided by the tensor (c / x)": ("v / c", "differs"),
    "x.add_(y, alpha=)": ("x.clone().add_(y, alpha=v)", "compiled differs"),
    "addcdiv(value=)": ("torch.addcdiv(x, y, c, value=v)", "compiled differs"),
    "x.addcmul_(value=)": ("x.clone().addcmul_(y, c, value=v)", "compiled differs"),
    "maximum": ("torch.maximum(x, v)", "must be Tensor, not float"),
}


@dataclass(frozen=True)
class NumberOnlyRow:
    """A torch op whose float argument must stay a Python number: wrapping it
    cannot cure the recompiles."""

    name: str
    functions: Tuple[str, ...]
    #: keyword -> positional index (the tensor input is 0)
    slots: Dict[str, int]
    #: what a 0-d tensor there does under torch.compile (asserted by the tests):
    #: "graph break" (the op runs outside the graph; fullgraph=True raises) or
    #: "recompiles" (still one graph per value)
    tensor_effect: str


_F = "torch.nn.functional."
NUMBER_ONLY: Dict[str, NumberOnlyRow] = {
    row.name: row
    for row in (
        NumberOnlyRow("dropout", (_F + "dropout",), {"p": 1}, "graph break"),
        NumberOnlyRow("dropout1d", (_F + "dropout1d",), {"p": 1}, "graph break"),
        NumberOnlyRow("dropout2d", (_F + "dropout2d",), {"p": 1}, "graph break"),
        NumberOnlyRow("dropout3d", (_F + "dropout3d",), {"p": 1}, "graph break"),
        NumberOnlyRow("alpha_dropout", (_F + "alpha_dropout",), {"p": 1}, "graph break"),
        NumberOnlyRow("feature_alpha_dropout", (_F + "feature_alpha_dropout",), {"p": 1}, "graph break"),
        NumberOnlyRow("torch.dropout", ("torch.dropout",), {"p": 1}, "recompiles"),
    )
}

#: the cure named in the message for a NUMBER_ONLY use
DROPOUT_CURE = (
    "keep `{p}` constant, change it in a few steps (each value compiles once), "
    "or write the dropout as tensor code, `x * (torch.rand_like(x) >= {p}) / (1 - {p})` with `{p}` a 0-d tensor (one graph for every value)"
)

#: builtins (and ``math.*``) that need a Python number: why a 0-d tensor
#: cannot cure it (each claim asserted by the tests)
BUILTIN_NUMBER_ONLY: Dict[str, str] = {
    "round": "`round()` of a 0-d tensor raises TypeError",
    "range": "`range()` of a 0-d float tensor raises TypeError",
    "int": "`int()` of a 0-d tensor is a graph break (`.item()`) and the Python int after it is guarded again",
    "float": "`float()` of a 0-d tensor is a graph break (`.item()`) and the Python float after it is guarded again",
    "math": "`math.{fn}()` reads a 0-d tensor back as a Python number, which is guarded again (measured: more graphs than with the float)",
}

#: the cure named for a builtin or ``math`` use
NUMBER_CURE = (
    "keep it a Python float (on torch 2.6+ under the default `dynamic=None` a changing float costs one recompile), "
    "or rewrite the use as tensor arithmetic"
)


def tensor_row(path: Optional[str], method: Optional[str]) -> Optional[TensorArgRow]:
    """The row of a call: by its dotted torch path, else by a method name."""
    for row in TENSOR_OK.values():
        if (path is not None and path in row.functions) or (path is None and method is not None and method in row.methods):
            return row
    return None


def arithmetic_method(method: str) -> bool:
    """``x.<method>(y)`` is ``x <op> y`` (a method of an :data:`ARITHMETIC` row)."""
    row = tensor_row(None, method)
    return row is not None and row.name in ARITHMETIC


def number_only_row(path: Optional[str]) -> Optional[NumberOnlyRow]:
    if path is None:
        return None
    for row in NUMBER_ONLY.values():
        if path in row.functions:
            return row
    return None
