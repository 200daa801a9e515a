"""The fixes ``run`` makes from the trace alone (code ``TRACE``): one
declaration each, with the documentation ``fix-recompiles rules TRACE`` and
``fix-recompiles rules <name>`` print, in the order the guide applies them
(:func:`codemods.trace.guide.guide`).  The rules' own fixes are in
:mod:`codemods.transforms`; these are the cures no static finding makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from ..transforms.base import rule_doc
from .causes import ALIASING, CONSTANT, DTYPE, INT_ARG, INVALIDATED, KEYS, LAYOUT, LENGTH, MODULE_FLOAT_ATTR, MODULE_INT_ATTR, NONE_CHECK, PARAMETER_SHAPE, RANK, RESUME_VALUE, TENSOR_SHAPE

#: the code of every finding the trace makes on its own
CODE = "TRACE"


@dataclass(frozen=True)
class TraceCure:
    """One fix made from trace evidence: its name (the finding's
    ``rule_name``), the causes it cures, and its documentation."""

    name: str
    summary: str
    causes: Tuple[str, ...]
    what_it_does: str
    why_it_recompiles: str
    example: str
    fix_safety: str
    #: the rule whose fix this cure writes where the rule found nothing (the
    #: trace's table names the rule: the flag set from a trace is FR005's)
    rule: str = ""

    def doc(self) -> str:
        """As ``fix-recompiles rules NAME`` prints it (a rule's layout)."""
        return rule_doc(f"{CODE} ({self.name})", self.what_it_does, self.why_it_recompiles, self.example, self.fix_safety)


UNSPEC_FLAG = TraceCure(
    name="unspec-flag-from-trace",
    summary="FR005's flag where nn.Module methods recompile on int attributes of self",
    causes=(MODULE_INT_ATTR,),
    what_it_does="""
Sets `torch._dynamo.config.allow_unspec_int_on_nn_module = True` (FR005's own
rendering) before the compile of the nn.Module class whose methods the trace
shows recompiling on int attributes of `self` (`self.calls == 3`,
`L['self'].layer_idx == 1`), when no applied FR005 finding of that file sets it.
""",
    why_it_recompiles="""
Dynamo specialises an int attribute of an nn.Module: every new value (a
counter, a layer index of blocks compiled one by one) is a new graph.
""",
    example="""
    class Block(torch.nn.Module):
        def forward(self, x):
            self.calls += 1
            return x * self.calls
    # + torch._dynamo.config.allow_unspec_int_on_nn_module = True
    block = torch.compile(Block())
""",
    fix_safety="Safe: a dynamo setting that changes no value; `run --fix` keeps it only if the rerun compiles fewer graphs with the same output.",
    rule="FR005",
)

MARK_DYNAMIC = TraceCure(
    name="mark-dynamic-from-trace",
    summary="maybe_mark_dynamic before the call, for the dims the trace saw vary",
    causes=(TENSOR_SHAPE,),
    what_it_does="""
Inserts `torch._dynamo.maybe_mark_dynamic(x, dim)` before each call of the
compiled function that passes a plain name (or a `**batch` dict entry; one
whose parameter has a default only under `if isinstance(batch.get("mask"),
torch.Tensor):`; a name that may hold None only under `if x is not None:`;
or a choice of an existing tensor or a submodule's output,
first bound to a fresh name) for a tensor whose dim the trace saw change,
and that no static finding cures (a recompile such a fix leaves is marked
in `run --fix`'s next round).
""",
    why_it_recompiles="""
A size seen once is compiled static; the next size fails the guard, and
duck sizing can tie a data dim to a weight's.
""",
    example="""
    for x in loader:
        torch._dynamo.maybe_mark_dynamic(x, 0)  # inserted
        loss = step(x)
""",
    fix_safety="Safe: a hint that changes no value; kept only if the rerun compiles fewer graphs with the same output.",
)

DYNAMIC_TRUE = TraceCure(
    name="dynamic-true-from-trace",
    summary="dynamic=True on the compile where the calls pass a varying tensor's sizes as ints",
    causes=(TENSOR_SHAPE,),
    what_it_does="""
For a shape recompile whose calls also pass sizes of the varying tensor as
Python ints (`m, n = weight.shape; unpack(weight, m, n * 2)`), passes
`dynamic=True` to the function's compile (a decorator or a `torch.compile`
call without `dynamic=`) instead of marking the tensor's dims
(compressed-tensors 6bb69c17).
""",
    why_it_recompiles="""
An int argument is specialised at its first value and made dynamic only after
it changed: each int that carries a size is one more recompile, marks or not.
""",
    example="""
    @torch.compile(fullgraph=True, dynamic=True)  # dynamic=True added
    def unpack_fp4_from_uint8(a, m, n, dtype=torch.bfloat16):
        ...
        return values.reshape(m, n).to(dtype=dtype)
""",
    fix_safety="Unsafe: every dim of every tensor the function reads is symbolic from the first call, also those that never change (a global table's length), which can be slower; applied with --unsafe-fixes and kept only if the rerun compiles fewer graphs with the same output.",
)

MARK_UNBACKED = TraceCure(
    name="mark-unbacked-from-trace",
    summary="mark_unbacked for a size 0 or 1 compiled beside a symbolic size",
    causes=(TENSOR_SHAPE,),
    what_it_does="""
For a dim the graphs show compiled at size 0 or 1 first and symbolic later
(vLLM #38933: a first batch of one), or symbolic first and then at size 0 or 1
after the guard `2 <= x.size()[0]` failed (vLLM #30709: a 1-token decode step
after the prefill), inserts `torch._dynamo.decorators.mark_unbacked(x, dim)`
before the call.
""",
    why_it_recompiles="""
Sizes 0 and 1 are specialised even under dynamic shapes; maybe_mark_dynamic
does not lift that.
""",
    example="""
    torch._dynamo.decorators.mark_unbacked(logprobs, 0)  # inserted
    ranks = batched_count_greater_than(logprobs, token_logprobs)
""",
    fix_safety="Safe and verified: code that branches on the size graph-breaks or fails under fullgraph=True, and the rerun then restores the file.",
)

CONTIGUOUS = TraceCure(
    name="contiguous-from-trace",
    summary="x.contiguous() at the calls of code that recompiled on strides",
    causes=(LAYOUT,),
    what_it_does="""
Passes `arg.contiguous()` at each call of a compiled function the trace shows
recompiling on the strides of that parameter (diffusers' WanAnimate: a
transposed view into the first of blocks compiled one by one); for the
strides of a field of a state passed in and fed back (`args[1].subtree_com`),
writes `.contiguous()` on the values the code writes to that field
(mujoco-torch b8e4fa6), and a new tensor written there
(`torch.zeros(n, dtype=t, device=v)`, broadcast by `torch.vmap`) as
`torch.zeros_like(d.field, dtype=t, device=v)` (mujoco-torch f81eea1).
""",
    why_it_recompiles="Dynamo guards a tensor input's strides: another layout is another graph.",
    example="""
    hidden_states = x.flatten(2).transpose(1, 2)
    for block in self.blocks:
        hidden_states = block(hidden_states.contiguous(), scale)  # .contiguous() added
""",
    fix_safety="Safe: the same values, a copy only where the tensor is not contiguous; never where the function changes that input in place. A new tensor made like the field has the field's shape, which the failed stride guard shows equal to the one written, and the dtype and device given.",
)

FLATTEN_CORE = TraceCure(
    name="flatten-core-from-trace",
    summary="an eager wrapper flattens the input of a compiled elementwise function that recompiled on its rank",
    causes=(RANK,),
    what_it_does="""
Where compiled code recompiled on the rank of its one tensor parameter
(`tensor 'x' rank mismatch`) and its body is proven elementwise in it, keeps
the body compiled under a new name and makes the function an eager wrapper
that passes `x.flatten()` and reshapes the result to `x.shape`
(compressed-tensors 55777c4b). Only a function compiled by its decorator, at
module level or as a (static) method of a module-level class, or bound at
module level by `name = torch.compile(fn, ...)` (then `_name` holds the
compile and `def name(x)` flattens), taking that one tensor; elementwise: straight-line code of elementwise torch ops, operators,
literals and numbers the module binds once, in-place writes only into new
tensors, a new tensor returned. Otherwise the run says why and changes
nothing.
""",
    why_it_recompiles="""
Dynamo guards the number of dims of a tensor input, and dynamic shapes never
make it symbolic: every rank the callers pass is one more graph, up to the
recompile limit.
""",
    example="""
    @staticmethod
    def cast_to_fp4(x):  # eager now
        return FP4_E2M1_DATA._cast_to_fp4(x.flatten()).reshape(x.shape)

    @staticmethod
    @torch.compile
    def _cast_to_fp4(x):  # the body as it was
        sign = torch.sign(x)
        ...
""",
    fix_safety="Safe: the same values, each element computed from the input's element at the same place (bit-identical for a contiguous input; a non-contiguous input is copied once by flatten(), and ops with vectorised kernels may then differ in the last bit, as eager does between layouts); the result is contiguous. Kept only if the rerun compiles fewer graphs with the same output.",
)

INIT_DEFAULT = TraceCure(
    name="init-default-from-trace",
    summary="a default in `__init__` for an attribute compiled code tested with hasattr while it was missing",
    causes=(KEYS,),
    what_it_does="""
Where compiled code recompiled because an attribute of `self` it tests with
`hasattr` was missing at one call and present at the next (`not
hasattr(self.impl, 'running_in_graph')`: the compiled call itself sets it),
writes `self.<name> = <default>` first in the class's `__init__`
(vllm-ascend cc9fa548). Only where every use of the name in the run's files
reads the same with the default as it read for the missing attribute:
`hasattr(X, 'a') and X.a` (default False), `hasattr(X, 'a') and not X.a`
(True), `hasattr(X, 'a') and X.a is not None` (None), the `not hasattr(X, 'a')
or ...` forms, `getattr(X, 'a', C)` (C);
plain reads (which raised) and writes. A lazy set-up (`if not hasattr(self,
'a'): self.a = ...`), a `del`, the name as a string elsewhere, `__slots__`,
`__getattr__` or `__setattr__`: the run says why and changes nothing.
""",
    why_it_recompiles="""
Dynamo answers `hasattr` on the object as the call found it and guards that
answer; the compiled call then creates the attribute, so the next call fails
the guard and compiles again (one recompile; the projects fix it: a compile
of a large model, a CUDA-graph capture, or an error under
`error_on_recompile`).
""",
    example="""
    class AscendMLATorchairImpl:
        def __init__(self, num_heads, ...):
            self.running_in_graph = True  # inserted: `hasattr(...) and not self.running_in_graph` is False either way
            ...

        def _v_up_proj_and_o_proj(self, x):
            if hasattr(self, "running_in_graph") and not self.running_in_graph:
                ...

        def forward(self, ...):
            self.running_in_graph = ...   # first set here, inside the compiled call
""",
    fix_safety="Safe: every reader of the name in the run's files is proven to read what it read before (a plain read that raised AttributeError reads the default); whatever `__init__` sets still wins. Kept only if the rerun compiles fewer graphs with the same output.",
)

GLOBAL_MEMO = TraceCure(
    name="global-memo-from-trace",
    summary="a module global filled on first use inside compiled code, skipped while compiling",
    causes=(NONE_CHECK,),
    what_it_does="""
Where compiled code recompiled because a module global it checks with
`if NAME is None:` was None at one call and filled by that call (vllm-gaudi
86bb66e7: an attention op made on first use inside the regionally compiled
layers), reads a local instead: `name = None if torch.compiler.is_compiling()
else NAME` before the check, the local checked, assigned and used in place of
the global, and the global written back only outside compiled code. Only
where the module binds the global once, to None, one function declares it
`global`, checks it in one `if` without `else` and writes it only there, and
no other function reads it (FR014's judgement of a memo's form); otherwise
the run says why and changes nothing.
""",
    why_it_recompiles="""
Dynamo guards the global's None check as the first compiled call found it;
that call fills the global, so the next call fails the guard and compiles
again (one recompile: the projects fix it, a compile of a large model or an
error under `error_on_recompile`).
""",
    example="""
    _CACHED_FSDPA_OP = None

    def _hpu_sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs):
        global _CACHED_FSDPA_OP
        cached_fsdpa_op = None if torch.compiler.is_compiling() else _CACHED_FSDPA_OP  # inserted
        if cached_fsdpa_op is None:
            HPUFusedSDPA = kernels.fsdpa()
            cached_fsdpa_op = ModuleFusedSDPA(HPUFusedSDPA)
            if not torch.compiler.is_compiling():  # the write, outside compiled code only
                _CACHED_FSDPA_OP = cached_fsdpa_op
        attn_output = cached_fsdpa_op(query, key, value, attention_mask)
""",
    fix_safety="Safe where the value the check's body computes is proven a pure function of nothing (FR014's proof, analysis/purity.py, with no key): a compiled call computes what the global would hold. Unsafe otherwise (a call of another module, a module-level object's method: the message says which), applied with --unsafe-fixes. Eager calls read, fill and use the global as before. Kept only if the rerun compiles fewer graphs with the same output.",
)

PARTIAL_REUSE = TraceCure(
    name="partial-reuse-from-trace",
    summary="a functools.partial installed anew between compiled calls, made once per argument and reused",
    causes=(INVALIDATED,),
    what_it_does="""
Where compiled code was thrown away because a callable it read was freed
(`Cache line invalidated because ...['to_q'].forward got deallocated`), and a
file of the run installs it as `<x>.forward = functools.partial(self.<method>,
<index>)` in a method run again between calls (OneTrainer before 3fced711:
adapters hooked again at every step with a prior prediction), keeps one
partial per argument in a dict on the object, set first in `__init__`:
`<x>.forward = self._<method>_partials.setdefault(<index>,
functools.partial(self.<method>, <index>))`. Only where the partial binds a
method the class defines (that nothing rebinds) to the object itself, and its
arguments are int or str literals or an enclosing loop's index (`enumerate`,
`range`), in a method other than `__init__` of a class with a plain
`__init__`; otherwise the run says why and changes nothing.
""",
    why_it_recompiles="""
Dynamo guards the identity of a callable the compiled code reads; when the
old object is freed, the compiled code that guarded it is thrown away, and
each re-made callable costs a compile, for as long as the re-making goes on.
""",
    example="""
    class FusedModuleGroup:
        def __init__(self, leaves):
            self._leaf_forward_partials = {}  # inserted
            self.leaves = leaves

        def hook_to_module(self):
            for leaf_index, leaf in enumerate(self.leaves):
                leaf.forward = self._leaf_forward_partials.setdefault(
                    leaf_index, functools.partial(self._leaf_forward, leaf_index)
                )
""",
    fix_safety="Safe: the reused partial calls the same method of the same object with equal arguments (ints, strings); only its identity stays the same across re-makes, which is what torch guards. Not covered: code in another module that rebinds the method on the class or the object after the first partial was made (this file is checked for that). Kept only if the rerun compiles fewer graphs with the same output.",
)

CLONE_ALIAS = TraceCure(
    name="clone-alias-from-trace",
    summary=".clone() where two inputs the trace saw aliased are made one tensor",
    causes=(ALIASING,),
    what_it_does="""
From a duplicate-tensor guard (`Duplicate tensors found: ["args[1].qacc",
"args[1].qacc_smooth"]`), writes `.clone()` where one field is set from the
other (a keyword `qacc=d.qacc_smooth`, an assignment), or on the second of two
arguments a call passes the same name for.
""",
    why_it_recompiles="""
The first compile saw two tensors; a later call passes one tensor under both
names (state fed back from the compiled step), which fails the guard.
""",
    example="""
    if nefc == 0:
        d.update_(qacc=d.qacc_smooth.clone())  # was d.qacc_smooth (mujoco-torch dbf4ed8)
""",
    fix_safety="Safe: the same values, one copy more; never where the file changes either field or argument in place (the alias may be meant).",
)

TENSOR_DICT_VALUES = TraceCure(
    name="tensor-dict-values-from-trace",
    summary="torch.as_tensor(...) at every write of a dict of floats the trace saw guarded",
    causes=(MODULE_FLOAT_ATTR,),
    what_it_does="""
For a float in a dict attribute of (sub)modules that the trace saw guarded
(`….scaling['default'] == 2.0`), writes `torch.as_tensor(value)` at every
write into that dict in the run's files, when every use of its values is one
a 0-d tensor behaves the same in.
""",
    why_it_recompiles="A Python float read in compiled code is guarded by value; eager code that rewrites it (a LoRA hot-swap) makes the next call recompile.",
    example="""
    self.scaling[adapter_name] = torch.as_tensor(lora_alpha / r)  # was lora_alpha / r
""",
    fix_safety="Unsafe: every reader of the dict now gets a 0-d tensor; applied with --unsafe-fixes and kept only if the rerun compiles fewer graphs with the same output.",
)

CAPTURE_SCALARS = TraceCure(
    name="capture-scalars-from-trace",
    summary="capture_scalar_outputs for the compiled function that recompiles after Tensor.item() graph breaks",
    causes=(RESUME_VALUE,),
    what_it_does="""
Sets `capture_scalar_outputs=True` for the compiled function whose code broke
the graph at `Tensor.item()` and recompiled (pytorch/rl #4094): a
`torch._dynamo.config.patch(...)` decorator right above the decorator that
compiles it (`@torch.compile`, or a project decorator whose body calls
torch.compile), around its `torch.compile(f)` call, or on the `forward` of a
module the trace shows called as a module. Where the file does not show how
that function is compiled, sets
`torch._dynamo.config.capture_scalar_outputs = True` after the imports.
""",
    why_it_recompiles="The break splits the function; the frames resumed after it guard the values around it and recompile when they change.",
    example="""
    @torch._dynamo.config.patch(capture_scalar_outputs=True)  # inserted
    @torch.compile
    def extend_and_sample(storage, data):
        ...
""",
    fix_safety=(
        "Safe for the compiled function: a function the trace shows breaking is not compiled with fullgraph=True, so a branch on "
        "such a value breaks the graph there, and the patch reaches no other compiled code (run --fix keeps it only with fewer "
        "graphs). The global setting (where the file does not show the compile) is unsafe: every compiled function of the process gets it."
    ),
)

CAPTURE_DYNAMIC_SHAPES = TraceCure(
    name="capture-dynamic-shapes-from-trace",
    summary="capture_dynamic_output_shape_ops for the compiled function that recompiles after graph breaks at data-dependent sizes",
    causes=(TENSOR_SHAPE, RESUME_VALUE),
    what_it_does="""
Sets `capture_dynamic_output_shape_ops=True` for the compiled function whose
code broke the graph at an op whose output size depends on the data
(`torch.where(mask)`, a boolean index, `torch.unique`, `repeat_interleave`)
and recompiled, as capture-scalars-from-trace does (Liger ef420c3d,
speculators dbd631b1, kornia 7d73de442 on its module's `forward`).
""",
    why_it_recompiles="The break splits the function; each frame resumed after it gets tensors of the count the data gave, and a new count is a new size.",
    example="""
    compiled_loss = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)(torch.compile(loss_fn))  # wrapped
""",
    fix_safety=(
        "Safe for the compiled function (no fullgraph=True where it broke: a branch on such a size breaks the graph there; the "
        "patch reaches no other compiled code). The global setting (where the file does not show the compile) is unsafe: every compiled function of "
        "the process gets it, and one compiled with fullgraph=True that branches on such a size fails to compile."
    ),
)

DYNAMIC_SOURCES = TraceCure(
    name="dynamic-sources-from-trace",
    summary="torch.compiler.config.dynamic_sources for int arguments (and sizes behind them) automatic dynamic made symbolic after a recompile, and int attributes of self tested in control flow",
    causes=(INT_ARG, MODULE_INT_ATTR),
    what_it_does="""
Where compiled code recompiled on the value of an int argument that automatic
dynamic then made symbolic (`kwargs['max_doc_len'] == 22`; also an int an
object passed in holds, `seq_ctx.max_length == 5`, as `L['seq_ctx'].max_length`;
an optimizer's step count in its param group under a compiled
`optimizer.step`, `L['args'][0].param_groups[0]['step']`, timm #2704: the
code is torch's, the setting goes in the file that compiled it),
appends its source, the other ints the recompile made symbolic (its
`create_symbol` records: an int that changed at the same call, hidden behind
the guard that failed first, xtuner 567df4be's `max_length_q` behind
`max_length_k`), and the dims of inputs the graphs show compiled static and
then symbolic (a size hidden the same way), to
`torch.compiler.config.dynamic_sources` after the imports of the file of that
code (OLMo-core 23a3af57, issue #500). Also an int attribute of `self` that
recompiled at its first value and then, symbolic, decides a test
(`not (self.layer_idx == 0 or self.layer_idx == 5)`, FastVideo's per-block
VSA impl before 3792707), as `L['self'].layer_idx`: each outcome of the test
stays a graph, the one specialised to the first value goes (3 -> 2; an
nn.Module's attribute, which the setting makes symbolic too: FR005's flag
8 -> 3, then this 3 -> 2).
""",
    why_it_recompiles="""
An int argument is specialised at its first value; when it changes the code
recompiles once with it symbolic. Per batch values (a document count, a
maximum sequence length for varlen attention) pay that recompile, and a
tensor whose size changes at the same call fails its own guard once the
int is cured.
""",
    example="""
    import torch
    torch.compiler.config.dynamic_sources += "L['kwargs']['max_doc_len'],L['kwargs']['cu_doc_lens']:0,"  # inserted
""",
    fix_safety="Safe when no other compiled code of the run has an input of that name (the setting matches sources by name, in every compiled function; it changes no value): kept only if the rerun compiles fewer graphs with the same output. Unsafe when another one has: it would be made dynamic there too.",
)

NO_DUCK_SHAPE = TraceCure(
    name="no-duck-shape-from-trace",
    summary="use_duck_shape = False where code recompiles on an equality duck sizing added",
    causes=(TENSOR_SHAPE,),
    what_it_does="""
Sets `torch.fx.experimental._config.use_duck_shape = False` after the imports
of the first file whose compiled code recompiled on a size equality torch says
duck sizing added (llm-compressor aa5f4b0's MSE observer).
""",
    why_it_recompiles="""
Under dynamic shapes two inputs' sizes that are equal at the first compile
share one symbol; the guard on their equality fails when they differ.
""",
    example="""
    import torch
    torch.fx.experimental._config.use_duck_shape = False  # inserted
""",
    fix_safety="Safe: a setting that changes no value (each size gets its own symbol); kept only if the rerun compiles fewer graphs with the same output.",
)

PARAMETER_SHAPES = TraceCure(
    name="parameter-shapes-from-trace",
    summary="force_parameter_static_shapes=False for the compiled function that recompiles on the size of an nn.Parameter",
    causes=(PARAMETER_SHAPE,),
    what_it_does="""
Sets `force_parameter_static_shapes=False` for the compiled function whose
code recompiled on the size of an `nn.Parameter`, or on an input's dim its
code tied to one (`out * self.weight`: the trace's specialisation of that dim
names the line, and the parameter's size is the value): one forward shared by
modules whose weights differ in size (unsloth-zoo before #1003, a norm's
forward compiled once for every norm of the model). A
`torch._dynamo.config.patch(...)` decorator right above the decorator that
compiles it, or around its `torch.compile(f)` call (`RMSNorm.forward =
torch.compile(RMSNorm.forward)` included). Where the file does not show how
that function is compiled, sets
`torch._dynamo.config.force_parameter_static_shapes = False` after the
imports. No mark is proposed for a tied dim: it stays static whatever a mark
says.
""",
    why_it_recompiles="""
Dynamo keeps the sizes of parameters static whatever `dynamic=` says
(`force_parameter_static_shapes`, on by default): automatic dynamic never
makes them symbolic, so each new weight size the shared code sees is another
graph, until the recompile limit.
""",
    example="""
    RMSNorm.forward = torch._dynamo.config.patch(force_parameter_static_shapes=False)(  # inserted
        torch.compile(RMSNorm.forward)
    )
""",
    fix_safety=(
        "Safe for the compiled function: the setting changes no value, and a parameter's size becomes dynamic as any other "
        "tensor's does (after it is seen to change, or from the first compile under dynamic=True); the patch reaches no other "
        "compiled code (run --fix keeps it only with fewer graphs and the same output). The global setting (where the file "
        "does not show the compile) is unsafe: every compiled function's parameters get dynamic sizes, which can make its "
        "kernels slower."
    ),
)

FIELD_DTYPE = TraceCure(
    name="field-dtype-from-trace",
    summary="the first call's dtype where a field of a state fed back is made with another",
    causes=(DTYPE,),
    what_it_does="""
Where a compiled function recompiled on the dtype of a field of a state
passed in (`tensor 'args[1].contact.geom' dtype mismatch. expected Long,
actual Int`: mujoco-torch before a0eaa36, `Contact.zero()` writing int32
contact ids over `make_data`'s int64 ones at every step without contacts),
and a file of the run passes that field by keyword to a call made with the
later dtype (`geom=torch.zeros(shape, dtype=torch.int32)`) while another
construction makes it with the first call's dtype: that `dtype=` becomes
the first call's.
""",
    why_it_recompiles="""
The state a compiled step returns is fed back to it; a field made with
another dtype than at the first call fails the dtype guard, and the step
compiles again (once per dtype).
""",
    example="""
    return Contact(
        geom=torch.zeros(shape + (2,), dtype=torch.int64, device=device),  # was torch.int32
    )
""",
    fix_safety=(
        "Unsafe: the tensor made there has another dtype for every reader, eager code of other files too (an int32 a kernel "
        "expects, a float's precision). Applied with --unsafe-fixes; run --fix keeps it only if the rerun compiles fewer graphs "
        "with the same output and exit code."
    ),
)

GROWTH_DISABLE = TraceCure(
    name="disable-growth-from-trace",
    summary="@torch.compiler.disable on a method compiled code reaches that grows a list attribute",
    causes=(LENGTH,),
    what_it_does="""
Where compiled code recompiled on the length of a list reached through an
attribute (`len(ref._metrics_computations[0].labels) == 7  #
w_labels.append(labels)`) and the line torch names grows it (`.append`,
`.extend`, `.insert`) in a function of a file of the run that is not the
compiled function itself, puts `@torch.compiler.disable` on that function
(torchrec eb2d656b: `AUCMetricComputation.update`, which appends each batch
to its window lists, made by `setattr` in a helper). Where FR013 found the
growth in the source, its fix (the same decorator, made safe by the trace)
is the one applied.
""",
    why_it_recompiles="""
Dynamo guards a list's length; a list the compiled code appends to has a new
length at every call, so every call compiles again, until the recompile
limit (then the whole compiled function runs eagerly).
""",
    example="""
    @torch.compiler.disable  # inserted
    def update(self, *, predictions, labels, weights, **kwargs):
        ...
        w_labels.append(labels)
""",
    fix_safety=(
        "Safe where the code object hit the recompile limit: it ran eagerly from then on, the method now does and the rest of "
        "the compiled call compiles once. Unsafe otherwise (the method, compiled so far, runs eagerly at every call, which can be "
        "slower): applied with --unsafe-fixes. run --fix keeps it only if the rerun compiles fewer graphs with the same output "
        "and exit code (a fullgraph=True compile fails at the break and is restored)."
    ),
)

STRING_DISABLE = TraceCure(
    name="disable-string-from-trace",
    summary="@torch.compiler.disable on a function compiled code calls whose frames recompile on string values",
    causes=(CONSTANT, RESUME_VALUE),
    what_it_does="""
Where the frames of a function (its own, or one resumed after a graph break
in it) recompiled on the value of a string or bytes (`text == '[S1] Dia is
...'`, `___stack0 == b'\\x01 Dia ...'`, `tasks[0] == 'Open the drawer'`), and
compiled code calls it (a frame of compiled code resumed after a graph break
at the call: it is not the compiled function itself), puts
`@torch.compiler.disable` on that function in a file of the run
(nari-labs/dia 5f57172d: `_prepare_text_input`, which encodes the prompt;
OpenTau 1aeed09: `prepare_language`, which formats the prompt and the
binned state).
""",
    why_it_recompiles="""
Dynamo never makes a string dynamic: code that reads one guards its value, so
every new prompt, path or formatted state is a graph, until the recompile
limit.
""",
    example="""
    @torch.compiler.disable  # inserted
    def _prepare_text_input(self, text: str) -> torch.Tensor:
        byte_text = text.encode("utf-8")
        ...
""",
    fix_safety=(
        "Safe where a frame of the function hit the recompile limit: from then on torch ran it, and what it calls, without compiling again; it now runs eagerly from the first call. "
        "Unsafe otherwise (a string that takes few values, a mode, compiles once each and is then reused; the function runs eagerly "
        "at every call, which can be slower): applied with --unsafe-fixes. run --fix keeps it only if the rerun compiles fewer graphs "
        "with the same output and exit code."
    ),
)

#: the name of the trace's finding that says why no mark was written for a
#: shape recompile (``rule_name``; not a cure: the table names no mark then)
NO_MARK = "no-mark-placeable"

#: in the order the guide applies them
TRACE_CURES: Tuple[TraceCure, ...] = (
    UNSPEC_FLAG, MARK_DYNAMIC, DYNAMIC_TRUE, MARK_UNBACKED, CONTIGUOUS, FLATTEN_CORE, INIT_DEFAULT, GLOBAL_MEMO, GROWTH_DISABLE, STRING_DISABLE, PARTIAL_REUSE, CLONE_ALIAS, TENSOR_DICT_VALUES, CAPTURE_SCALARS, CAPTURE_DYNAMIC_SHAPES, PARAMETER_SHAPES, NO_DUCK_SHAPE, DYNAMIC_SOURCES, FIELD_DTYPE,
)
BY_NAME: Dict[str, TraceCure] = {c.name: c for c in TRACE_CURES}


def listing() -> str:
    """What ``fix-recompiles rules TRACE`` prints."""
    lines = [f"{CODE}: the fixes `run` makes from the trace alone (`fix-recompiles rules NAME` explains one)", ""]
    lines += [f"{c.name:<32} {c.summary} (cures: {', '.join(c.causes)})" for c in TRACE_CURES]
    return "\n".join(lines) + "\n"
