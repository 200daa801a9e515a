"""The causes of a recompile, as the trace's classifier names them
(:mod:`codemods.trace.read`), and how a rule declares the causes it cures
(``Rule.cures``: the trace's cure table is made from the registry)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# -- causes ---------------------------------------------------------------

FLOAT_ARG = "float argument"
INT_ARG = "int argument"
TENSOR_SHAPE = "tensor shape"
#: a tensor shape guard torch marks "Guard failed on a parameter": an
#: nn.Parameter keeps static shapes under automatic dynamic
#: (``force_parameter_static_shapes``), and ``maybe_mark_dynamic`` does not
#: lift it (measured on 2.13: 8 -> 8 graphs)
PARAMETER_SHAPE = "parameter shape"
MODULE_INT_ATTR = "module int attribute"
#: a param_groups entry: lr, or betas / momentum a scheduler writes (OneCycleLR)
OPTIMIZER_LR = "optimizer hyperparameter"
GLOBAL = "global"
MODULE_FLOAT_ATTR = "module float attribute"
LENGTH = "length"
CLOSURE = "closure contents"
RESUME_VALUE = "value after a graph break"
BACKEND = "backend changed"
IDENTITY = "object identity"
TYPE = "type"
NONE_CHECK = "None check"
KEYS = "key or attribute presence"
#: a value of a dict entry torch reached by its key's place among the keys
#: (``self.state[list(dict.keys(self.state))[1]]['step']``): a dict looked up
#: by a tensor inside the compiled code (FR017), or iterated there
KEYED_ENTRY = "dict entry by key position"
TRUTH = "truthiness"
CONSTANT = "constant value"
TRAIN_EVAL = "train/eval mode"
GRAD_MODE = "grad mode"
AUTOCAST = "autocast state"
GLOBAL_STATE = "global state"
REQUIRES_GRAD = "requires_grad"
DTYPE = "dtype"
DEVICE = "device"
DISPATCH = "dispatch keys"
RANK = "tensor rank"
LAYOUT = "tensor strides"
ALIASING = "aliasing"
INVALIDATED = "cache invalidated"
OTHER = "other"

#: every cause, in the order the table lists them
CAUSES = (
    FLOAT_ARG,
    INT_ARG,
    TENSOR_SHAPE,
    PARAMETER_SHAPE,
    MODULE_INT_ATTR,
    OPTIMIZER_LR,
    GLOBAL,
    MODULE_FLOAT_ATTR,
    LENGTH,
    CLOSURE,
    RESUME_VALUE,
    BACKEND,
    IDENTITY,
    TYPE,
    NONE_CHECK,
    KEYS,
    KEYED_ENTRY,
    TRUTH,
    CONSTANT,
    TRAIN_EVAL,
    GRAD_MODE,
    AUTOCAST,
    GLOBAL_STATE,
    REQUIRES_GRAD,
    DTYPE,
    DEVICE,
    DISPATCH,
    RANK,
    LAYOUT,
    ALIASING,
    INVALIDATED,
    OTHER,
)


@dataclass(frozen=True)
class CuresCause:
    """A rule's declaration that its fix cures ``cause`` (``Rule.cures``).
    ``upgrade``: an observed recompile of this cause is the evidence the rule
    lacks when it calls its fix unsafe, so a trace makes the fix safe.
    ``first``: tried before the cause's other rules (otherwise registry order)."""

    cause: str
    upgrade: bool = False
    first: bool = False
    #: for a length guard: only (True) or never (False) when the guarded
    #: source is a loop's iterator (``.0``, ``___stack1``); None: either
    loop_iterator: Optional[bool] = None
    #: only when a guarded source is an attribute reached from ``self``
    #: (a submodule's type, ``self.ff.proj``), not an argument's
    self_attribute: bool = False
    #: only for a finding about a guarded source (its ``Finding.about`` names
    #: it: FR017's ``self.state``, whose length and truth torch guards when the
    #: lookup fills a defaultdict); named in the table only when it matched
    about: bool = False
    #: only for a dispatch-key recompile between an inference tensor and a
    #: normal one, and then for the rule's findings anywhere in an implicated
    #: file (the trace cannot tell which code made the tensor: FR021's
    #: coroutine under a mode decorator that does not cover its body)
    inference_only: bool = False
    #: only for a guard on a string's value (``text == '[S1] ...'``), not a
    #: bool's or another constant's (FR023's strings)
    strings_only: bool = False
    #: the name of the trace's own cure (:mod:`codemods.trace.registry`)
    #: whose edit the rule's fix is: the trace's table names that cure too
    #: (FR013's `@torch.compiler.disable` is disable-growth-from-trace's)
    trace_cure: str = ""
