"""Issue 13: a fix made from evidence alone.  An observed shape recompile that
no static finding cures -> ``torch._dynamo.maybe_mark_dynamic(arg, dim)``
inserted before the calls, for the dims the trace saw vary (a libcst
transformer in codemods/trace/cures.py)."""

from __future__ import annotations

import ast
import re
import textwrap

from test_trace import SCRIPTS, copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.trace import read as tr
from codemods.trace import cures as trace_cures
from codemods.trace import guide as trace_guide
import pytest

from codemods.analysis.context import Settings
from codemods.findings import Safety

DECORATED = textwrap.dedent(
    """\
    import torch


    @torch.compile(backend="eager")
    def energy(x, scale=1.0):
        return (x * x).sum() * scale


    for batch in batches():
        # one batch
        total = float(energy(batch))
        total += energy(x=batch, scale=2.0)
        energy(batch[1:])
        [energy(b) for b in batch_list]
    """
)


def mark(src: str, function="energy", first=4, dims=None):
    new, sites, _why = trace_cures.mark_dynamic(src.encode(), function, first, dims or {"x": (0,)})
    return (new.decode() if new is not None else None), sites


def test_marks_before_each_call_that_passes_a_name():
    new, sites = mark(DECORATED)
    assert new == DECORATED.replace(
        "    # one batch\n    total = float(energy(batch))\n    total += energy(x=batch, scale=2.0)\n    energy(batch[1:])\n",
        "    # one batch\n    torch._dynamo.maybe_mark_dynamic(batch, 0)\n    total = float(energy(batch))\n"
        "    torch._dynamo.maybe_mark_dynamic(batch, 0)\n    total += energy(x=batch, scale=2.0)\n    energy(batch[1:])\n",
    )
    # an expression that makes a tensor (a slice) and a comprehension variable are not marked
    assert [(s.line, s.arg, s.dim) for s in sites] == [(11, "batch", 0), (12, "batch", 0)]


def test_an_expression_argument_is_bound_only_where_the_order_of_evaluation_stays():
    src = textwrap.dedent(
        """\
        import torch


        @torch.compile(backend="eager")
        def block(h, mask=None):
            return h.masked_fill(mask, 0.0)


        def tower(h, full, prepare, given):
            masks = [h > 0, h < 0]
            h = block(h, mask=masks[0] if full else masks[1])
            h = block(prepare(h), mask=masks[0] if full else masks[1])
            h = block(h, mask=masks[0]) if full else h
            h = block(h, mask=given[0])
            h = block(h, mask=masks[0][1:])
            return h
        """
    )
    new, sites, _why = trace_cures.mark_dynamic(src.encode(), "block", 4, {"mask": (1,)})
    new = new.decode()
    # in a function: a name the function does not use (`mask` is only the compiled function's parameter)
    assert "    mask = masks[0] if full else masks[1]\n    torch._dynamo.maybe_mark_dynamic(mask, 1)\n    h = block(h, mask=mask)\n" in new
    # `prepare(h)` runs before the mask is evaluated: not moved; a call in a conditional expression: not either
    assert "    h = block(prepare(h), mask=masks[0] if full else masks[1])\n    h = block(h, mask=masks[0]) if full else h\n" in new
    # an element of a parameter (what is it?) and a slice (a new view): not either
    assert "    h = block(h, mask=given[0])\n    h = block(h, mask=masks[0][1:])\n" in new
    assert [(s.line, s.arg) for s in sites] == [(11, "mask")]
    again, sites, _why = trace_cures.mark_dynamic(new.encode(), "block", 4, {"mask": (1,)})
    assert again is None and sites == []  # a second run finds its marks


def test_a_submodules_output_is_bound_and_marked():
    """NeMo Automodel c4e9a6c3: `self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))`
    (the compiled norm's argument is the output of a submodule `__init__` stores)."""
    src = textwrap.dedent(
        """\
        import torch


        @torch.compile(backend="eager")
        def norm(h):
            return h / h.norm()


        class Attention(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.q_a_proj = torch.nn.Linear(4, 4)
                self.q_b_proj = torch.nn.Linear(4, 4)

            def half(self, h):
                return h[:, :2]

            def forward(self, x):
                q = self.q_b_proj(norm(self.q_a_proj(x)))
                k = norm(self.half(x))
                v = norm(self.q_a_proj(self.half(x)))
                w = self.q_b_proj(x) + norm(self.q_a_proj(x))
                return q, k, v, w
        """
    )
    new, sites, _why = trace_cures.mark_dynamic(src.encode(), "norm", 4, {"h": (1,)})
    new = new.decode()
    assert "        h = self.q_a_proj(x)\n        torch._dynamo.maybe_mark_dynamic(h, 1)\n        q = self.q_b_proj(norm(h))\n" in new
    # a submodule's output of a method's result: evaluated first all the same, bound whole
    assert "        h_1 = self.q_a_proj(self.half(x))\n        torch._dynamo.maybe_mark_dynamic(h_1, 1)\n        v = norm(h_1)\n" in new
    # a method's result (may be a view), an argument evaluated after another call: left alone
    assert "        k = norm(self.half(x))\n" in new
    assert "        w = self.q_b_proj(x) + norm(self.q_a_proj(x))\n" in new
    assert [(s.line, s.arg) for s in sites] == [(19, "h"), (21, "h_1")]
    again, sites, _why = trace_cures.mark_dynamic(new.encode(), "norm", 4, {"h": (1,)})
    assert again is None and sites == []


def test_a_second_run_changes_nothing():
    new, _ = mark(DECORATED)
    again, sites = mark(new, first=4)
    assert again is None and sites == []


def test_the_def_line_must_be_the_traced_code_object():
    assert mark(DECORATED, first=40) == (None, [])
    assert mark(DECORATED, function="other") == (None, [])


def test_only_dims_seen_to_vary_and_only_traced_parameters():
    new, sites = mark(DECORATED, dims={"x": (0, 2)})
    assert [(s.arg, s.dim) for s in sites] == [("batch", 0), ("batch", 2)] * 2
    assert "maybe_mark_dynamic(batch, 1)" not in new
    assert mark(DECORATED, dims={"scale": (0,)}) == (None, [])  # never a name for scale


def test_compiled_through_an_assignment_and_a_torch_alias():
    src = textwrap.dedent(
        """\
        import torch as th


        def energy(x):
            return (x * x).sum()


        fast = th.compile(energy, dynamic=None)
        for b in loader:
            energy(b)
            fast(b)
        """
    )
    new, sites = mark(src)
    assert [(s.line, s.arg) for s in sites] == [(11, "b")]  # energy(b) runs eager
    assert "    energy(b)\n    th._dynamo.maybe_mark_dynamic(b, 0)\n    fast(b)\n" in new


def test_no_torch_import_no_fix():
    assert mark(DECORATED.replace("import torch\n", "from torch import compile\n")) == (None, [])


# -- in the trace-guided flow ------------------------------------------------------


def test_guide_applies_the_evidence_fix_when_no_static_finding_cures(copied):  # noqa: F811
    script, trace = copied("ragged_batches")
    [entry] = trace.entries
    assert entry.causes == [tr.TENSOR_SHAPE] and tr.varying_dims(entry) == {"x": (0,)}
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    f = m.finding
    assert (f.code, f.fix.safety, f.applied) == ("TRACE", Safety.SAFE, True)
    assert f.message == (
        "`energy` recompiled on tensor shape `x` (dim 0 changed 1 time in the trace):"
        " mark dim 0 of `batch` dynamic before the call"
        " (`torch._dynamo.maybe_mark_dynamic(batch, 0)`, from the trace)"
    )
    assert (f.line, f.column) == (19, 24)
    new = guided.files[0].new.decode()
    assert new == script.read_text().replace(
        "        # one batch\n",
        "        # one batch\n        torch._dynamo.maybe_mark_dynamic(batch, 0)\n",
    )


def test_a_static_shape_fix_takes_precedence(copied):  # noqa: F811
    # loader_shapes: FR001 (upgraded by the trace) removes dynamic=False; no mark is added
    script, trace = copied("loader_shapes")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.code for m in guided.matches] == ["FR001"]
    assert b"maybe_mark_dynamic" not in guided.files[0].new


def test_run_fix_marks_dynamic_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "ragged_batches", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert re.search(
        # the fix is the trace's own (mark_dynamic before the call): neither rule of the cause found anything
        r"^energy\s+ragged_batches\.py:8\s+2\s+no\s+tensor shape `x`\s+torch\._dynamo\.maybe_mark_dynamic\(x, 0\), bounded in this run \(1 recompile, then automatic dynamic; a storm needs dynamic=False\); FR001, FR007 found nothing here$",
        out,
        re.MULTILINE,
    ), out
    assert "fixed: ragged_batches.py:19:24: TRACE " in out
    assert graphs(out, "energy (ragged_batches.py)") == (2, 1)
    assert "Exit code unchanged (0)." in out
    first, second = results(out)
    assert first == second
    assert "        torch._dynamo.maybe_mark_dynamic(batch, 0)\n        total += float(energy(batch))" in script.read_text()


# -- the trace's own fixes obey --select / --ignore (issue 29, item 4) -----------------


@pytest.mark.parametrize("settings", [Settings(ignore=frozenset({"TRACE"})), Settings(select=frozenset({"FR001"}))])
def test_the_marks_are_not_applied_when_trace_is_not_selected(copied, settings):  # noqa: F811
    script, trace = copied("ragged_batches")
    guided = trace_guide.guide(trace, settings, [str(script.parent)], fixing=True)
    assert not [m for m in guided.matches if m.finding.code == "TRACE"]
    assert not any(g.changed for g in guided.files)


@pytest.mark.parametrize("settings", [Settings(ignore=frozenset({"FR005"})), Settings(select=frozenset({"FR001"}))])
def test_fr005s_flag_is_not_set_from_the_trace_when_fr005_is_not_selected(copied, settings):  # noqa: F811
    script, trace = copied("module_attrs")
    selected = trace_guide.guide(trace, Settings(target_torch=(2, 13)), [str(script.parent)], fixing=True)
    assert [m for m in selected.matches if m.finding.code == "TRACE"]  # the flag, when FR005 is selected
    from dataclasses import replace

    guided = trace_guide.guide(trace, replace(settings, target_torch=(2, 13)), [str(script.parent)], fixing=True)
    assert not [m for m in guided.matches if m.finding.code == "TRACE"]
    assert "allow_unspec_int_on_nn_module" not in b"".join(g.new or b"" for g in guided.files).decode()


# -- calls the compile-site model does not see as calls of the compile (issue 27, forms 6 and 8) --


def test_a_function_compiled_elsewhere_is_marked_at_its_calls_by_name_and_alias():
    """torchtitan's form: another module rebinds the function compiled, a
    local alias calls it; the trace proves the compile."""
    src = textwrap.dedent(
        """\
        import torch


        def run(x, counts):
            return x * counts.sum()


        class Experts(torch.nn.Module):
            def forward(self, x, counts):
                fn = run
                return fn(x, counts)


        def direct(x, c):
            return run(x, c)


        @torch.compile
        def inside(x, c):
            return run(x, c)


        run(torch.ones(2), torch.ones(2))
        """
    )
    new, sites = mark(src, function="run", first=4, dims={"x": (0,)})
    # the alias's call and the direct call; not at module level (runs once), not inside compiled code
    assert [(s.line, s.arg) for s in sites] == [(11, "x"), (15, "x")]
    assert "        fn = run\n        torch._dynamo.maybe_mark_dynamic(x, 0)\n        return fn(x, counts)\n" in new
    assert "    torch._dynamo.maybe_mark_dynamic(x, 0)\n    return run(x, c)\n\n\n@torch.compile" in new
    # with the trace showing `direct` compiled too, its call is left alone
    _new, sites, _why = trace_cures.mark_dynamic(src.encode(), "run", 4, {"x": (0,)}, traced=[("direct", 14)])
    assert [s.line for s in sites] == [11]


def test_an_alias_bound_twice_is_not_followed():
    src = textwrap.dedent(
        """\
        import torch


        def run(x):
            return x * 2


        def step(x, other):
            fn = run
            if other is not None:
                fn = other
            return fn(x)
        """
    )
    assert mark(src, function="run", first=4) == (None, [])


def test_a_function_compiled_here_under_another_name_is_not_marked_at_its_eager_calls():
    src = "import torch\n\n\ndef run(x):\n    return x * 2\n\n\nfast = torch.compile(run)\n\n\ndef step(x):\n    return run(x)\n"
    assert mark(src, function="run", first=4) == (None, [])


DICT_CALLS = textwrap.dedent(
    """\
    import torch


    class Model(torch.nn.Module):
        def forward(self, hidden_states, scale, mask=None):
            return hidden_states * scale


    model = torch.compile(Model())


    def step(gen, batch, extra):
        out = model(**make(gen))
        out = out + model(**batch)
        out = out + model(**batch, **extra)
        out = helper() + model(**make(gen))
        out = model(**make(gen)) if gen else None
        return out
    """
)


def test_a_forward_fed_a_dict_is_marked_at_the_dict_entry():
    new, sites = mark(DICT_CALLS, function="forward", first=5, dims={"hidden_states": (1,)})
    assert [(s.line, s.arg) for s in sites] == [(13, 'inputs["hidden_states"]'), (14, 'batch["hidden_states"]')]
    assert (
        '    inputs = make(gen)\n    torch._dynamo.maybe_mark_dynamic(inputs["hidden_states"], 1)\n    out = model(**inputs)\n'
        '    torch._dynamo.maybe_mark_dynamic(batch["hidden_states"], 1)\n    out = out + model(**batch)\n'
    ) in new
    # two ** dicts (which one passes it?), a call evaluated before the dict
    # (helper() would run after make(gen)), a conditional call: left alone
    assert new.count("maybe_mark_dynamic") == 2
    again, sites = mark(new, function="forward", first=5, dims={"hidden_states": (1,)})
    assert again is None and sites == []  # a second run finds its marks


def test_a_parameter_with_a_default_is_marked_only_where_the_entry_is_a_tensor():
    """`mask` may be absent from the dict (its default then), or None:
    `batch["mask"]` could raise, and a mark of None raises; the marks go
    under a test that the entry is a tensor (transformers' Gemma3 decode
    step, `model_forward(**model_inputs)` with `attention_mask=None`)."""
    new, sites = mark(DICT_CALLS, function="forward", first=5, dims={"mask": (0, 1)})
    assert (
        '    inputs = make(gen)\n    if isinstance(inputs.get("mask"), torch.Tensor):\n'
        '        torch._dynamo.maybe_mark_dynamic(inputs["mask"], 0)\n        torch._dynamo.maybe_mark_dynamic(inputs["mask"], 1)\n'
        '    out = model(**inputs)\n    if isinstance(batch.get("mask"), torch.Tensor):\n'
    ) in new
    assert [(s.line, s.arg, s.dim, s.optional) for s in sites] == [(13, 'inputs["mask"]', d, True) for d in (0, 1)] + [(14, 'batch["mask"]', d, True) for d in (0, 1)]
    again, sites = mark(new, function="forward", first=5, dims={"mask": (0, 1)})
    assert again is None and sites == []  # a second run finds its marks under the test
    # mark_unbacked (which fails where code needs the size) stays off optional entries
    assert trace_cures.mark_dynamic(DICT_CALLS.encode(), "forward", 5, {}, {"l_mask_": (0,)})[:2] == (None, [])
    # a file whose `isinstance` is another function's name: left alone
    shadowed = DICT_CALLS.replace("def step(gen, batch, extra):", "def step(gen, batch, extra, isinstance=None):")
    assert mark(shadowed, function="forward", first=5, dims={"mask": (0,)}) == (None, [])


def test_the_fresh_name_avoids_every_name_of_the_file():
    src = DICT_CALLS.replace("def step(gen, batch, extra):", "def step(gen, batch, extra, inputs=None):")
    new, _ = mark(src, function="forward", first=5, dims={"hidden_states": (1,)})
    assert "    inputs_1 = make(gen)\n" in new


@pytest.mark.parametrize(
    "name,function,line,marked",
    [
        # torchtitan #2007's form: compiled by rebinding in other setup code, called through an alias
        ("rebound_elsewhere", "_run_experts", 33, "        torch._dynamo.maybe_mark_dynamic(x, 0)\n        return run_experts_fn(self.w1, x, counts)"),
        # diffusers #14297's form: duck sizing under dynamic=True, inputs passed as **dict
        ("dict_inputs", "forward", 30, '        inputs = get_dummy_inputs(gen, tokens)\n        torch._dynamo.maybe_mark_dynamic(inputs["hidden_states"], 1)\n        total += float(model(**inputs).sum())'),
        # xtuner ea57efb8's form: a tensor a context object passed in holds, marked through it
        ("held_tensor_field", "forward", 46, (
            "            torch._dynamo.maybe_mark_dynamic(seq_ctx.cu_seq_lens_q, 0)\n"
            "            hidden_states = decoder_layer(hidden_states, seq_ctx)\n"
        )),
        # NeMo Automodel c4e9a6c3's form: norms made by a factory that returns one of two classes
        ("factory_norms", "forward", 44, (
            "        torch._dynamo.maybe_mark_dynamic(x, 1)\n        x = x + self.proj(self.input_layernorm(x))\n"
            "        torch._dynamo.maybe_mark_dynamic(x, 1)\n        return self.post_attention_layernorm(x)\n"
        )),
        # transformers' decode step: `model_forward(**model_inputs)`, `attention_mask=None` optional in the dict
        # (marking `input_ids` alone: 2 -> 2, by hand)
        ("optional_dict_entry", "forward", 41, (
            '        torch._dynamo.maybe_mark_dynamic(model_inputs["input_ids"], 1)\n'
            '        if isinstance(model_inputs.get("attention_mask"), torch.Tensor):\n'
            '            torch._dynamo.maybe_mark_dynamic(model_inputs["attention_mask"], 1)\n'
            '        total += float(compiled(**model_inputs).sum())\n'
        )),
        # and its `self.q_a_layernorm(self.q_a_proj(x))`: a submodule's output, bound and marked
        ("submodule_output_arg", "forward", 32, (
            "        x_1 = self.q_a_proj(x)\n        torch._dynamo.maybe_mark_dynamic(x_1, 1)\n"
            "        q = self.q_b_proj(self.q_a_layernorm(x_1))\n"
        )),
    ],
)
def test_run_fix_marks_calls_the_model_did_not_see(tmp_path, name, function, line, marked):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, name, "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert f"fixed: {name}.py:{line}:" in out
    assert graphs(out, f"{function} ({name}.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert marked in script.read_text()


@pytest.mark.parametrize("name", ["rebound_elsewhere", "dict_inputs", "factory_norms", "held_tensor_field", "submodule_output_arg", "optional_dict_entry"])
def test_the_recorded_trace_gives_the_same_marks(copied, name):  # noqa: F811
    script, trace = copied(name)
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.code for m in guided.matches if m.finding.applied] == ["TRACE"] * (1 if name in ("rebound_elsewhere", "held_tensor_field", "submodule_output_arg") else 2)


def test_a_tensor_an_object_passed_in_holds_is_marked_through_it(copied):  # noqa: F811
    """xtuner ea57efb8: the guard names `seq_ctx.cu_seq_lens_q`; the mark
    goes before the call, through the name passed for `seq_ctx`; a second
    run finds it; the table names it."""
    src = (SCRIPTS / "held_tensor_field.py").read_bytes()
    dims = {"seq_ctx.cu_seq_lens_q": (0,)}
    new, sites, _why = trace_cures.mark_dynamic(src, "forward", 30, dims)
    assert [(s.line, s.arg, s.dim) for s in sites] == [(46, "seq_ctx.cu_seq_lens_q", 0)]
    assert b"            torch._dynamo.maybe_mark_dynamic(seq_ctx.cu_seq_lens_q, 0)\n            hidden_states = decoder_layer(" in new
    assert trace_cures.mark_dynamic(new, "forward", 30, dims)[:2] == (None, [])  # a second run changes nothing
    # not an attribute of something that is not a parameter (`self.…`, an unknown name)
    assert trace_cures.mark_dynamic(src, "forward", 30, {"self.mask": (0,)})[:2] == (None, [])
    assert trace_cures.mark_dynamic(src, "forward", 30, {"ctx.cu_seq_lens_q": (0,)})[:2] == (None, [])
    _script, trace = copied("held_tensor_field")
    [entry] = [e for e in trace.entries if e.name == "forward"]
    assert "torch._dynamo.maybe_mark_dynamic(seq_ctx.cu_seq_lens_q, 0)" in tr.cure_label(entry, tr.TENSOR_SHAPE, [])


def test_attributes_a_factory_fills_are_marked_only_when_the_trace_ties_them():
    """The model says which classes a factory may return; which class an
    attribute holds depends on the factory's arguments, so the calls of such
    attributes are marked only when the trace shows one of them calling the
    compiled forward as a module (NeMo Automodel c4e9a6c3)."""
    src = (SCRIPTS / "factory_norms.py").read_bytes()
    dims = {"x": (1,)}
    new, sites, _why = trace_cures.mark_dynamic(src, "forward", 20, dims, callers=[(44, "forward", True)])
    assert [(s.line, s.arg) for s in sites] == [(44, "x"), (45, "x")]
    assert trace_cures.mark_dynamic(src, "forward", 20, dims)[:2] == (None, [])  # no frame of the trace
    assert trace_cures.mark_dynamic(src, "forward", 20, dims, callers=[(40, "__init__", True)])[:2] == (None, [])  # not a call of one
    # a factory returning one class only: the model names it surely
    from codemods.analysis.compile_sites import model_of
    from codemods.pipeline.engine import parse_ast

    source = parse_ast("<t>", src)
    model = model_of(source)
    call = next(c for c in source.nodes(ast.Call) if getattr(c.func, "attr", None) == "input_layernorm")
    assert [c.name for c in model.factory_module_classes(call.func)] == ["Float32RMSNorm"]  # nn.RMSNorm is not of this file
    assert model.module_class_of(call.func) is None


# -- a dynamic size tested against a constant: reported, never marked -----------------


def test_a_size_tested_against_a_constant_is_reported_not_marked():
    """clamped_slice (diffusers' AuraFlow before #11297): under dynamic=True the
    slice end from the input's height is clamped to the grid, torch guards
    ``32 != (latent.size()[2] // 2)`` and the call whose grid reaches the
    whole grid recompiles.  The dim is dynamic already: no maybe_mark_dynamic
    (it was offered and measured 2 -> 2); the table names the test and its line."""
    from test_trace import fixture, only

    entry = only(fixture("clamped_slice"), "forward")
    assert entry.graphs == 2 and entry.causes == [tr.TENSOR_SHAPE]
    assert tr.varying_dims(entry) == {}
    [test] = tr.size_tests(entry)
    assert test.text == "32 != (latent.size()[2] // 2)"
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, ["FR001", "FR007"])
    assert "maybe_mark_dynamic(" not in label
    # the rules of the cause are listed first (a run's table says when they found nothing)
    assert label.startswith(
        "FR001, FR007, report: `32 != (latent.size()[2] // 2)` tests a dynamic size against a constant at clamped_slice.py:30"
    ), label


@pytest.mark.parametrize(
    "text, is_test",
    [
        ("0/0: 32 != (x.size()[3] // 2)", True),
        ("0/0: x.size()[0] <= 1024", True),
        ("0/0: 2 <= x.size()[0]", False),  # the 0/1 specialisation: mark_unbacked's
        ("0/0: x.size()[1] == y.size()[1]", False),  # two sizes (duck sizing): not a constant
        ("0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16", False),
        ("0/0: (x.size()[0] + y.size()[0]) < 64", False),  # two tensors
    ],
)
def test_which_guards_are_size_tests(text, is_test):
    [reason] = tr.parse_reason(text)
    assert tr.is_size_test(reason) is is_test


def test_run_fix_leaves_a_size_test_alone(tmp_path):
    """No fix is tried (before: maybe_mark_dynamic applied, 2 -> 2, restored)."""
    proc, script = run_cli(tmp_path, "clamped_slice", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "tests a dynamic size against a constant at clamped_slice.py:30" in out
    assert "nothing to fix" in out and "restored" not in out
    from test_trace import SCRIPTS

    assert script.read_bytes() == (SCRIPTS / "clamped_slice.py").read_bytes()


# -- a compiled @staticmethod called through its class (compressed-tensors' cast_to_fp4) --

STATIC = textwrap.dedent(
    """\
    import torch


    class FP4:
        @staticmethod
        @torch.compile
        def cast(x, scale=1.0):
            return torch.round(x * scale)

        def method(self, x):
            return x


    def round_to(tensor):
        return FP4.cast(tensor)


    def plain(obj, tensor):
        return FP4.method(obj, tensor)
    """
)


def test_a_compiled_staticmethod_is_marked_at_its_calls_through_the_class():
    new, sites = mark(STATIC, function="cast", first=5)
    assert "    torch._dynamo.maybe_mark_dynamic(tensor, 0)\n    return FP4.cast(tensor)\n" in new
    assert [(s.line, s.arg, s.dim) for s in sites] == [(15, "tensor", 0)]
    # the plain method's call through the class passes `self` itself: never read as a call of `cast`
    assert "maybe_mark_dynamic(obj" not in new


def test_a_compiled_plain_method_called_through_the_class_is_not_marked():
    src = STATIC.replace("    @staticmethod\n", "")
    assert "staticmethod" not in src
    assert mark(src, function="cast", first=5) == (None, [])


def test_run_fix_marks_a_staticmethod_called_through_its_class(tmp_path):
    """Under torch 2.13: 3 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "static_method_cast", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: static_method_cast.py:34:" in out
    assert graphs(out, "cast_to_fp4 (static_method_cast.py)") == (3, 1)
    first, second = results(out)
    assert first == second
    assert (
        "    torch._dynamo.maybe_mark_dynamic(tensor, 0)\n    torch._dynamo.maybe_mark_dynamic(tensor, 1)\n"
        "    rounded = FP4_E2M1_DATA.cast_to_fp4(tensor)\n"
    ) in script.read_text()


def test_the_recorded_staticmethod_trace_gives_the_marks(copied):  # noqa: F811
    script, trace = copied("static_method_cast")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.code for m in guided.matches if m.finding.applied] == ["TRACE", "TRACE"]


# -- sizes passed as ints next to the tensor: dynamic=True (compressed-tensors 6bb69c17) --

UNPACK = textwrap.dedent(
    """\
    import torch


    @torch.compile(fullgraph=True)
    def unpack(a, m, n, dtype=None):
        return a.flatten().reshape(m, n)


    def decompress(weight):
        m, n = weight.shape
        return unpack(weight, m, n * 2)


    def direct(weight):
        return unpack(weight, weight.size(0), len(weight), dtype=torch.float32)


    def unrelated(weight, rows):
        return unpack(weight, rows, 4)
    """
)


def test_sizes_of_the_varying_tensor_passed_as_ints_are_found():
    found = trace_cures.sizes_passed_as_ints(UNPACK.encode(), "unpack", 4, {"a": (0, 1)})
    assert found == [(11, "m", "m", "weight"), (11, "n", "n * 2", "weight"), (15, "m", "weight.size(0)", "weight"), (15, "n", "len(weight)", "weight")]
    # ints that are no size of the marked tensor (a parameter, a constant): none
    assert trace_cures.sizes_passed_as_ints(UNPACK.encode(), "unpack", 4, {"n": (0,)}) == []


@pytest.mark.parametrize(
    "compile_line,expected",
    [
        ("@torch.compile(fullgraph=True)", "@torch.compile(fullgraph=True, dynamic=True)"),
        ("@torch.compile", "@torch.compile(dynamic=True)"),
        ("@torch.compile(fullgraph=True, dynamic=False)", None),  # FR001's, not this cure's
        ("@torch.compile(**opts)", None),
    ],
)
def test_dynamic_true_is_passed_to_the_one_compile(compile_line, expected):
    src = UNPACK.replace("@torch.compile(fullgraph=True)", compile_line)
    new, node = trace_cures.dynamic_true(src.encode(), "unpack", 4)
    if expected is None:
        assert (new, node) == (None, None)
    else:
        assert new.decode() == src.replace(compile_line, expected) and node.lineno == 4


def test_sizes_as_ints_get_dynamic_true_only_with_unsafe_fixes(copied):  # noqa: F811
    script, trace = copied("sizes_as_ints")
    for unsafe in (False, True):
        guided = trace_guide.guide(trace, Settings(unsafe_fixes=unsafe), [str(script.parent)], fixing=True)
        (match,) = guided.matches
        f = match.finding
        assert f.code == "TRACE" and f.rule_name == "dynamic-true-from-trace" and f.fix.safety == Safety.UNSAFE
        assert "its calls pass sizes of `weight` as ints too (`m` for `m`, `n * 2` for `n`, line 37)" in f.message
        assert f.applied is unsafe
        assert (b"@torch.compile(fullgraph=True, backend=counting_backend, dynamic=True)" in (guided.files[0].new or b"")) is unsafe
        assert b"maybe_mark_dynamic" not in (guided.files[0].new or b"")  # the marks would cure nothing (3 -> 3)


def test_run_fix_unsafe_passes_dynamic_true_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 3 graphs -> 1, the same printed result; plain
    --fix leaves the file byte-identical."""
    proc, script = run_cli(tmp_path, "sizes_as_ints", "--fix")
    assert "1 implicated fix stays unsafe" in proc.stdout, proc.stdout
    # the table names the cure the source decided, not the marks
    assert re.search(r"^unpack_fp4_from_uint8\s+sizes_as_ints\.py:23\s+3\s+no\s+tensor shape `a`\s+dynamic=True on its compile \(unsafe; ", proc.stdout, re.MULTILINE), proc.stdout
    assert "maybe_mark_dynamic" not in proc.stdout
    assert script.read_bytes() == (SCRIPTS / "sizes_as_ints.py").read_bytes()
    proc, script = run_cli(tmp_path, "sizes_as_ints", "--fix", "--unsafe-fixes")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "unpack_fp4_from_uint8 (sizes_as_ints.py)") == (3, 1)
    first, second = results(out)
    assert first == second
    assert "@torch.compile(fullgraph=True, backend=counting_backend, dynamic=True)\ndef unpack_fp4_from_uint8" in script.read_text()


# -- a tensor whose rank changes too: no mark (dim 0 is another axis at another rank) --


def test_no_mark_for_a_tensor_whose_rank_changes(copied):  # noqa: F811
    script, trace = copied("rank_and_size")
    (entry,) = [e for e in trace.entries if e.name == "cast_to_fp4"]
    assert tr.RANK in entry.causes and tr.TENSOR_SHAPE in entry.causes
    assert tr.varying_dims(entry) == {}
    assert "no mark for `x`: its rank changes too" in tr.cure_label(entry, tr.TENSOR_SHAPE, [])
    assert tr.cure_label(entry, tr.RANK, []).startswith("report: one graph per number of dims of `x` (3 recompiles;")
    # no mark; the rank's own cure is tests/test_trace_flatten_core.py's
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.rule_name for m in guided.matches] == ["flatten-core-from-trace"]
    assert b"maybe_mark_dynamic" not in guided.files[0].new


# -- a dim behind the guard that failed first: marked too ---------------------------


def test_a_dim_the_graphs_show_changing_behind_the_first_guard_is_marked_too(copied):  # noqa: F811
    script, trace = copied("masked_pair")
    (entry,) = [e for e in trace.entries if e.name == "masked_mean"]
    assert tr.varying_dims(entry) == {"mask": (0,)}  # the one guard the trace names
    assert tr.hidden_varying_dims(entry) == {"l_hidden_": (0,)}
    # the run table names both marks, as the cure writes them
    assert tr.cure_label(entry, tr.TENSOR_SHAPE, []).startswith(
        "torch._dynamo.maybe_mark_dynamic(mask, 0), torch._dynamo.maybe_mark_dynamic(hidden, 0), bounded in this run"
    )
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    messages = [m.finding.message for m in guided.matches]
    assert len(messages) == 2 and "graphs show dim 0 of `hidden` compiled static, then symbolic" in messages[1]
    assert b"    torch._dynamo.maybe_mark_dynamic(mask, 0)\n    torch._dynamo.maybe_mark_dynamic(hidden, 0)\n" in guided.files[0].new


def test_run_fix_marks_both_inputs_of_a_batch_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1 (marking `mask` alone: 2 -> 2), the same printed result."""
    proc, script = run_cli(tmp_path, "masked_pair", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "masked_mean (masked_pair.py)") == (2, 1), out
    first, second = results(out)
    assert first == second
    assert "maybe_mark_dynamic(hidden, 0)" in script.read_text()


def test_run_fix_marks_blocks_of_a_filled_module_dict_and_binds_the_mask(tmp_path):
    """cosmos-rl before 30c31abe's form: blocks put into an `nn.ModuleDict` in a
    loop, compiled one by one, the mask passed as a conditional expression.
    Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "dict_blocks_mask_expr", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "forward (dict_blocks_mask_expr.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert (
        "            attention_mask = (\n"
        "                attention_masks[0]\n"
        "                if layer_num in self.fullatt_block_indexes\n"
        "                else attention_masks[1]\n"
        "            )\n"
        "            torch._dynamo.maybe_mark_dynamic(hidden_states, 0)\n"
        "            torch._dynamo.maybe_mark_dynamic(attention_mask, 0)\n"
        "            torch._dynamo.maybe_mark_dynamic(attention_mask, 1)\n"
        "            torch._dynamo.maybe_mark_dynamic(rotary_pos_emb, 0)\n"
        "            hidden_states = blk(\n"
        "                hidden_states,\n"
        "                attention_mask=attention_mask,\n"
    ) in script.read_text()


def test_the_filled_module_dict_trace_gives_the_marks(copied):  # noqa: F811
    script, trace = copied("dict_blocks_mask_expr")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.rule_name for m in guided.matches if m.finding.applied] == ["mark-dynamic-from-trace"] * 4
