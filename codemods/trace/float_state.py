"""A fix made from trace evidence: a float kept in a dict attribute of
(sub)modules, changed by eager code between calls, becomes a 0-d tensor at
every write.

The trace shows a compiled module recompiling on a float of a dict attribute
(``self._modules['layers']._modules['0']._modules['q_proj'].scaling['default']
== 1.0``): peft before #2177 kept each LoRA layer's ``scaling[adapter]`` a
Python float and a hot-swap of another ``lora_alpha`` wrote a new one from
eager code.  Its fix, ``prepare_model_for_compiled_hotswap``, turns every
scaling into a 0-d tensor before compiling.  This one does the same where the
values are written: every ``<x>.scaling[<key>] = <value>`` of the run's files
(and the values of a dict literal assigned to ``<x>.scaling``) becomes
``<x>.scaling[<key>] = torch.as_tensor(<value>)``.  The compiled graph then
takes the tensor as an input and guards its dtype and shape, not its value
nor its identity (measured on 2.13: a new tensor written between calls does
not recompile; ``benchmarks/recall/peft_hotswap_scaling_tensor``: 2 -> 1
graphs, same output).

The edits and when a file's uses forbid them are FR018's
(:func:`codemods.transforms.float_dict_state.tensor_value_edits`); a file
whose uses forbid them is left alone and the table's report stands.
Unsafe: the values'
type changes for every reader, also eager code of other files; applied with
``--unsafe-fixes``, and ``run --fix`` keeps it only if the rerun compiles
fewer graphs with the same output and exit code.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from . import read as tr
from .registry import TENSOR_DICT_VALUES
from ..findings import FileError
from ..transforms.float_dict_state import FloatDictState, tensor_value_edits
from .cures import _applied_finding, _render_edits
from .match import Guided, Match

RULE_NAME = TENSOR_DICT_VALUES.name


def wrap_values(data: bytes, attr: str) -> Tuple[Optional[bytes], List[Tuple[int, int, str]], bool]:
    """``data`` with every value written into the dict attribute ``attr``
    made ``torch.as_tensor(value)``, the places changed, and whether a use
    here forbids the fix; (None, [], …) when nothing is written here, a use
    forbids it, or the file has no ``import torch``."""
    from ..analysis.compile_sites import model_of
    from ..pipeline.engine import parse_ast

    try:
        source = parse_ast("<trace>", data)
    except FileError:
        return None, [], False
    model = model_of(source)
    planned = tensor_value_edits(source, model, attr)
    if not planned:
        return None, [], planned is None
    if model.torch_alias is None:
        return None, [], True
    sites = []
    for v, _edit in planned:
        line, column = source.start(v)
        sites.append((line, column + 1, source.segment(v)))
    return _render_edits(source, data, [edit for _, edit in planned]), sites, False


def apply_float_state_evidence(trace: tr.Trace, guided: Guided, unsafe_fixes: bool, trace_cures: bool = True) -> None:
    """For each dict attribute whose float entries the trace saw recompile a
    code object of a guided file, make every value written into it in the
    guided files a 0-d tensor: one finding (code ``TRACE``, unsafe) per
    write, or FR018's finding about that dict where the rule found it (its
    fix makes the same edits); applied with ``--unsafe-fixes``, reported
    otherwise.  Nothing when a file's uses forbid it.  ``trace_cures``: the
    code ``TRACE`` is selected (FR018's findings exist only where it is)."""
    attrs: List[Tuple[str, tr.CodeEntry]] = []
    for entry in trace.entries:
        if tr.is_library_file(entry.filename):
            continue
        for attr in tr.dict_attributes(entry):
            if all(a != attr for a, _ in attrs):
                attrs.append((attr, entry))
    if not attrs:
        return
    for attr, entry in attrs:
        plans = []
        for g in guided.files:
            base = g.new if g.new is not None else g.original
            new, sites, forbidden = wrap_values(base, attr)
            if forbidden:
                plans = []
                break  # one file's use forbids it: none is changed
            if new is not None:
                plans.append((g, new, sites))
        if not plans:
            continue
        sources = tr.shown_sources([s for s in entry.sources(tr.MODULE_FLOAT_ATTR) if tr.DICT_ENTRY.search(s)])
        for g, new, sites in plans:
            # FR018 found this dict here from the source: its finding (the
            # same edits) is the one the trace implicates
            found = [f for f in g.others if f.code == FloatDictState.code and attr in f.about and f.fix is not None]
            if found:
                g.others = [f for f in g.others if f is not found[0]]
                found[0].applied = unsafe_fixes
                g.matches.append(Match(found[0], entry, tr.MODULE_FLOAT_ATTR))
                if unsafe_fixes:
                    g.new = new
                continue
            if not trace_cures:
                continue
            if unsafe_fixes:
                g.new = new
            for line, column, value in sites:
                message = (
                    f"`{tr.display_name(entry)}` recompiled on the float {sources} (from the trace): the dict `{attr}`"
                    f" holds Python floats changed between calls, and torch guards each value; write a 0-d tensor"
                    f" (`torch.as_tensor({value})`: a tensor input, guarded on its dtype and shape, not its value;"
                    f" unsafe: every reader of `{attr}` now gets a tensor)"
                )
                finding = _applied_finding(
                    g.display_path, line, column, message, f"write `torch.as_tensor({value})`", RULE_NAME, unsafe_fixes=unsafe_fixes
                )
                g.matches.append(Match(finding, entry, tr.MODULE_FLOAT_ATTR))
