"""The registry: every pass, in the order findings and fixes are produced.

One module per pass (pyupgrade's ``_plugins/`` layout); adding a pass means
writing its module and listing it here.  A list, not a set: output order is
part of the contract.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from ..analysis.project import ProjectFact

from .base import Example, Rule
from .compile_in_loop import CompileInLoop
from .container_growth import ContainerGrowth
from .dynamic_shapes import DynamicShapes
from .global_rebound import GlobalRebound
from .graph_break import GraphBreak
from .hook_after_compile import HookAfterCompile
from .int_control_flow import IntControlFlow
from .mark_dynamic_inside import MarkDynamicInside
from .float_args import FloatArgs
from .optimizer_scalars import OptimizerScalars
from .ragged_batch import RaggedBatch
from .recompile_limit import RecompileLimit
from .unspec_int_attrs import UnspecIntAttrs
from .compiled_memo import CompiledMemo
from .data_driven_loop import DataDrivenLoop
from .object_int_state import ObjectIntState
from .tensor_keyed_state import TensorKeyedState
from .float_dict_state import FloatDictState
from .class_per_call import ClassPerCall
from .presence_state import PresenceState
from .mode_on_coroutine import ModeOnCoroutine
from .optimizer_counter import OptimizerCounter
from .string_args import StringArgs

REGISTRY: List[Rule] = [
    DynamicShapes(),
    GraphBreak(),
    FloatArgs(),
    OptimizerScalars(),
    UnspecIntAttrs(),
    RecompileLimit(),
    RaggedBatch(),
    CompileInLoop(),
    IntControlFlow(),
    MarkDynamicInside(),
    GlobalRebound(),
    HookAfterCompile(),
    ContainerGrowth(),
    CompiledMemo(),
    DataDrivenLoop(),
    ObjectIntState(),
    TensorKeyedState(),
    FloatDictState(),
    ClassPerCall(),
    PresenceState(),
    ModeOnCoroutine(),
    OptimizerCounter(),
    StringArgs(),
]

#: every project fact a rule declares, with the code of the rule that reads
#: it (a file whose per-file ignores drop that rule gives none), in registry
#: order
PROJECT_FACTS: List[Tuple[str, ProjectFact]] = [(rule.code, fact) for rule in REGISTRY for fact in rule.project_facts]

BY_CODE: Dict[str, Rule] = {rule.code: rule for rule in REGISTRY}
BY_NAME: Dict[str, Rule] = {rule.name: rule for rule in REGISTRY}

__all__ = ["REGISTRY", "PROJECT_FACTS", "BY_CODE", "BY_NAME", "Rule", "Example"]
