"""Graph breaks a dynamo setting lifts, whose resumed code recompiles -> the
setting after the imports, from the trace (codemods/trace/config_cures.py):
``capture_scalar_outputs`` for ``Tensor.item()`` (pytorch/rl before #4094),
``capture_dynamic_output_shape_ops`` for ops whose output size depends on the
data (kornia before 7d73de442)."""

from __future__ import annotations

import textwrap

from test_trace import copied, fixture, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr
from codemods.trace import config_cures as scalar_capture


def run_fix_cures(tmp_path, name: str, total: str, *flags: str) -> str:
    """`run --fix FLAGS` on the script: exit code 0, the total graphs
    ``total`` ("9 -> 1"), the same printed result; the fixed source."""
    proc, script = run_cli(tmp_path, name, "--fix", *flags)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "  total" in out and f" {total}" in out, out
    first, second = results(out)
    assert first == second
    return script.read_text()


def test_the_flag_goes_after_the_imports_once():
    src = textwrap.dedent(
        """\
        \"\"\"doc\"\"\"
        import os
        import torch
        import torch.nn as nn
        from torch import Tensor

        X = 1
        import json
        """
    )
    new, line = scalar_capture.capture_flag(src.encode())
    assert line == 5
    assert new.decode() == src.replace("from torch import Tensor\n", "from torch import Tensor\ntorch._dynamo.config.capture_scalar_outputs = True\n")
    assert scalar_capture.capture_flag(new) == (None, 0)  # set already: a second run changes nothing
    # no module-level `import torch`: no place known
    assert scalar_capture.capture_flag(b"def f():\n    import torch\n") == (None, 0)


def test_the_recorded_trace_counts_item_breaks_and_sets_the_flag_for_the_compiled_function_only(copied):  # noqa: F811
    script, trace = copied("item_resume")
    first = next(e for e in trace.entries if e.name == "normalize")
    assert first.capture_breaks == {"capture_scalar_outputs": ["Tensor.item()"]}
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [match] = [m for m in guided.matches if m.finding.rule_name == "capture-scalars-from-trace"]
    # `@torch.compile(backend="eager")` on `normalize` (line 6): the patch goes right above it, safe
    assert (match.finding.line, match.finding.applied, match.finding.fix.safety.value) == (6, True, "safe")
    assert "set `capture_scalar_outputs` for it only" in match.finding.message
    [g] = [g for g in guided.files if g.changed]
    assert g.new == script.read_bytes().replace(
        b'@torch.compile(backend="eager")\n', b'@torch._dynamo.config.patch(capture_scalar_outputs=True)\n@torch.compile(backend="eager")\n', 1
    )
    off = trace_guide.guide(trace, Settings(ignore=frozenset({"TRACE"})), [str(script.parent)], fixing=True)
    assert not any(m.finding.rule_name == "capture-scalars-from-trace" for m in off.matches)


def test_the_global_flag_where_a_broken_function_is_compiled_elsewhere(copied):  # noqa: F811
    """`normalize` compiled by a call in another file: no wrapper of this
    file's can carry the setting; the global one, unsafe, as before."""
    script, trace = copied("item_resume")
    script.write_bytes(script.read_bytes().replace(b'@torch.compile(backend="eager")\n', b"", 1).replace(b"total = 0.0", b"normalize = __import__('other').compiled(normalize)\ntotal = 0.0"))
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [match] = [m for m in guided.matches if m.finding.rule_name == "capture-scalars-from-trace"]
    assert (match.finding.line, match.finding.applied, match.finding.fix.safety.value) == (3, False, "unsafe")
    assert all(not g.changed for g in guided.files)
    applied = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    [g] = [g for g in applied.files if g.changed]
    assert b"import torch\ntorch._dynamo.config.capture_scalar_outputs = True\n" in g.new


def test_no_flag_without_a_recompile(copied):  # noqa: F811
    script, trace = copied("item_resume")
    for e in trace.entries:  # the same breaks; no compile counted as a recompile
        e.recompiles = 0
    guided = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert guided.files  # the file is implicated (its reasons stay) ...
    assert not any(m.finding.rule_name == "capture-scalars-from-trace" for m in guided.matches)  # ... the flag is not offered


def test_run_fix_keeps_the_item_in_the_graph(tmp_path):
    """Under torch 2.13: 3 graphs -> 1, the same printed result; safe, so
    plain `run --fix` applies it."""
    text = run_fix_cures(tmp_path, "item_resume", "3 -> 1")
    assert '@torch._dynamo.config.patch(capture_scalar_outputs=True)\n@torch.compile(backend="eager")\ndef normalize' in text
    assert "torch._dynamo.config.capture_scalar_outputs = True" not in text


# -- capture_dynamic_output_shape_ops: kornia's NMS refinement ------------------------


def test_the_setting_is_named_by_the_break():
    src = b"import torch\n\nx = 1\n"
    new, line = scalar_capture.capture_flag(src, "capture_dynamic_output_shape_ops")
    assert line == 1 and new == b"import torch\ntorch._dynamo.config.capture_dynamic_output_shape_ops = True\n\nx = 1\n"
    # the other setting is another line; each is set once
    both, _ = scalar_capture.capture_flag(new, "capture_scalar_outputs")
    assert both.count(b"capture_") == 2
    assert scalar_capture.capture_flag(both, "capture_dynamic_output_shape_ops") == (None, 0)


def test_the_recorded_trace_names_the_data_dependent_op_and_the_frames_after_it():
    trace = fixture("shape_op_resume")
    first = next(e for e in trace.entries if e.name == "forward")
    assert set(first.capture_breaks) == {"capture_dynamic_output_shape_ops"}
    assert set(first.capture_breaks["capture_dynamic_output_shape_ops"]) == {"aten.nonzero"}
    resumed = [e for e in trace.entries if e.name.startswith("torch_dynamo_resume_in_refine_at_")]
    assert len(resumed) == 4 and all(e.recompiles == 1 for e in resumed)
    assert all(set(e.resumed_after) == {"capture_dynamic_output_shape_ops"} for e in resumed)
    label = tr.cure_label(resumed[0], tr.TENSOR_SHAPE, ["FR001", "FR007"])
    assert "capture_dynamic_output_shape_ops=True for the compiled function that broke (the sizes come from a graph break at `aten.nonzero`)" in label
    # the item break's trace names no dynamic-shape setting
    item = fixture("item_resume")
    assert all("capture_dynamic_output_shape_ops" not in e.capture_breaks for e in item.entries)


def test_the_dynamic_shape_setting_goes_on_the_forward_of_a_compiled_module(copied):  # noqa: F811
    """`torch.compile(Refiner())`: no wrapper can stand for the module; the
    patch goes on `Refiner.forward` itself (the trace shows it called as a
    module and breaking), safe."""
    script, trace = copied("shape_op_resume")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [match] = [m for m in guided.matches if m.finding.rule_name == "capture-dynamic-shapes-from-trace"]
    assert (match.finding.line, match.finding.applied, match.finding.fix.safety.value) == (24, True, "safe")
    [g] = [g for g in guided.files if g.changed]
    assert g.new == script.read_bytes().replace(
        b"    def forward(self, response, threshold):\n",
        b"    @torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)\n    def forward(self, response, threshold):\n",
        1,
    )


def test_run_fix_keeps_the_data_dependent_ops_in_the_graph(tmp_path):
    """Under torch 2.13: 9 graphs -> 1 (four frames resumed after the breaks,
    each compiled twice, are gone), the same printed result."""
    text = run_fix_cures(tmp_path, "shape_op_resume", "9 -> 1")
    assert "    @torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)\n    def forward" in text


def test_run_fix_sets_the_shape_setting_for_a_compiled_partial_only(tmp_path):
    """Liger before ef420c3d: `torch.compile(functools.partial(...))` of the
    loss math, a boolean index breaking it; the call is wrapped (the name
    keeps the compiled callable when `compiled` is False too).  Under torch
    2.13: 5 graphs -> 1, the same printed result, plain `run --fix` (safe)."""
    text = run_fix_cures(tmp_path, "partial_mask_loss", "5 -> 1")
    # too long for one line: the compile call on its own, as black lays out a call
    assert (
        "    compiled_loss = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)(\n"
        '        torch.compile(loss_fn, backend="eager")\n'
        "    ) if compiled else loss_fn\n"
    ) in text
    assert "torch._dynamo.config.capture_dynamic_output_shape_ops = True" not in text


def test_run_fix_puts_the_setting_above_a_project_decorator_that_compiles(tmp_path):
    """speculators before dbd631b1: `@conditional_torch_compile` (its body
    calls torch.compile) on a module's `forward`; the patch goes right above
    it.  Under torch 2.13: 3 graphs -> 1 (the frame resumed after
    `repeat_interleave` is gone), the same printed result."""
    text = run_fix_cures(tmp_path, "factory_decorated_nonzero", "3 -> 1")
    assert "    @torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)\n    @conditional_torch_compile\n    def forward" in text
    # one patch: `forward` is compiled as a function here, so no `def` the
    # trace shows called as a module gets one too
    assert text.count("@torch._dynamo.config.patch(") == 1


def test_the_compile_call_is_wrapped_on_its_line_when_it_fits():
    from codemods.analysis.compile_sites import model_of
    from codemods.pipeline.engine import parse_ast

    def scoped(src: bytes):
        source = parse_ast("<t>", src)
        model = model_of(source)
        fn = next(n for n in source.tree.body if getattr(n, "name", "") == "f")
        scope = scalar_capture._compiled_as_function(model, fn)
        if scope is None:
            return None
        assert scope.how == "wrap"
        cure = next(c for c in scalar_capture.CONFIG_CURES if c.flag == "capture_scalar_outputs")
        return scalar_capture._render_edits(source, src, [scope.edit(source, model, cure)])

    head = b"import torch\nimport functools\n\n\ndef f(x):\n    return x\n\n\n"
    assert scoped(head + b"s = torch.compile(f)\n") == head + b"s = torch._dynamo.config.patch(capture_scalar_outputs=True)(torch.compile(f))\n"
    # over 88 columns: the compile call on a line of its own (black's layout of a call)
    assert scoped(head + b"step = torch.compile(functools.partial(f))\n") == head + (
        b"step = torch._dynamo.config.patch(capture_scalar_outputs=True)(\n    torch.compile(functools.partial(f))\n)\n"
    )
    # compiled with fullgraph=True: no wrapper (a break there is an error, not this cure's case)
    assert scoped(head + b"s = torch.compile(f, fullgraph=True)\n") is None


def test_a_second_run_over_the_scoped_setting_changes_nothing(copied):  # noqa: F811
    script, trace = copied("item_resume")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [g] = [g for g in guided.files if g.changed]
    script.write_bytes(g.new)
    again = trace_guide.guide(trace, Settings(unsafe_fixes=True), [str(script.parent)], fixing=True)
    assert not any(m.finding.rule_name == "capture-scalars-from-trace" for m in again.matches)
    assert all(not g.changed for g in again.files)


def test_the_patch_reaches_only_its_callable_and_a_branch_on_an_unbacked_size_breaks_the_graph():
    """What makes the scoped setting safe, on real torch: a compiled function
    that is not fullgraph=True and branches on a data-dependent size gives
    the eager values with the setting (the branch breaks the graph, no
    error); the patch holds for its callable called from other compiled code
    (fullgraph=True there: the index stays in one graph), and another
    compiled function keeps the setting off."""
    import torch

    def f(x):
        kept = x[x > 0]
        if kept.shape[0] == 0:
            return x.sum()
        return kept.sum() * 2

    counts = {"graphs": 0}

    def backend(gm, example_inputs):
        counts["graphs"] += 1
        return gm.forward

    patched = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)(torch.compile(f, backend=backend))
    for x in (torch.randn(8), torch.zeros(8), torch.randn(5)):
        assert torch.equal(patched(x), f(x))

    inner = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)(torch.compile(lambda x: x[x > 0].sum(), backend=backend))
    outer = torch.compile(lambda x: inner(x) * 2, backend=backend, fullgraph=True)
    assert torch.equal(outer(torch.arange(-3.0, 4.0)), torch.tensor(12.0))

    torch._dynamo.reset()
    seen = []
    plain = torch.compile(lambda x: x[x > 0].sum(), backend=lambda gm, ex: seen.append(gm) or gm.forward)
    plain(torch.randn(6))
    assert torch._dynamo.config.capture_dynamic_output_shape_ops is False
    assert len(seen) == 2  # the index broke the graph: the setting did not leak


# -- use_duck_shape = False: llm-compressor's MSE observer --------------------------------


def test_a_guard_duck_sizing_added_is_known_by_torchs_comment():
    [duck] = tr.parse_reason(
        "0/0: observed.size()[1] == max_val.size()[0]  # duck sizing added this equality because these"
        " variables had the same size 64 (to avoid this specialization, set torch.fx.experimental._config.use_duck_shape = False)"
    )
    [plain] = tr.parse_reason("0/0: x.size()[1] == y.size()[1]")
    assert duck.duck and duck.cause == tr.TENSOR_SHAPE and duck.text == "observed.size()[1] == max_val.size()[0]"
    assert not plain.duck


def test_the_recorded_trace_offers_no_duck_shape_as_safe(copied):  # noqa: F811
    script, trace = copied("duck_sized_inputs")
    [entry] = trace.entries
    assert tr.duck_sized(entry) == ["observed.size()[1] == max_val.size()[0]"]
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, ["FR001", "FR007"])
    assert "torch.fx.experimental._config.use_duck_shape = False (duck sizing tied two sizes" in label
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [match] = [m for m in guided.matches if m.finding.rule_name == "no-duck-shape-from-trace"]
    assert (match.finding.applied, match.finding.fix.safety.value) == (True, "safe")
    [g] = [g for g in guided.files if g.changed]
    assert g.new == script.read_bytes().replace(b"import torch\n", b"import torch\ntorch.fx.experimental._config.use_duck_shape = False\n", 1)
    # the capture settings' traces show no duck sizing
    assert not any(tr.duck_sized(e) for e in fixture("shape_op_resume").entries)


def test_run_fix_gives_each_size_its_own_symbol(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "duck_sized_inputs", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "_compute_chunk (duck_sized_inputs.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "import torch\ntorch.fx.experimental._config.use_duck_shape = False\n" in script.read_text()


def test_a_mark_before_the_call_is_preferred_to_the_global_setting(copied):  # noqa: F811
    """The weight passed by name: the mark of its dim (a local fix) cures the
    duck-sized pair as well (measured: 2 -> 1), and the setting is not added."""
    script, trace = copied("duck_sized_inputs")
    script.write_text(script.read_text().replace("_compute_chunk(weight.view(rows, width), ", "_compute_chunk(weight, "))
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [m.finding.rule_name for m in guided.matches] == ["mark-dynamic-from-trace"]
    [g] = [g for g in guided.files if g.changed]
    assert b"    torch._dynamo.maybe_mark_dynamic(weight, 1)\n" in g.new
    assert b"\ntorch.fx.experimental._config.use_duck_shape = False\n" not in g.new


# -- dynamic_sources: an int argument automatic dynamic made symbolic (OLMo-core 23a3af57) --


def test_raw_sources_and_dynamic_int_arguments():
    assert tr.raw_source("n") == "L['n']"
    assert tr.raw_source("kwargs['max_doc_len']") == "L['kwargs']['max_doc_len']"
    assert tr.raw_source('kwargs["k"]') == "L['kwargs']['k']"
    # an attribute of `self` (a tested int attribute: tested_attributes); the int-argument cure leaves it to FR005's flag
    assert tr.raw_source("self.n") == "L['self'].n" and tr.raw_source("args[1]") == "L['args'][1]"
    assert tr.raw_source("args[0].param_groups[0]['step']") == "L['args'][0].param_groups[0]['step']"
    assert tr.raw_source("x.size()") is None
    # an int an object passed in holds (xtuner 567df4be's `seq_ctx.max_length_k`)
    assert tr.raw_source("seq_ctx.max_length_k") == "L['seq_ctx'].max_length_k"
    assert tr.raw_source("self.cfg.n") == "L['self'].cfg.n"
    assert not tr._argument_path("self.n") and not tr._argument_path("self") and tr._argument_path("seq_ctx.n")
    # dynamic=False: the int fails again and again, never made symbolic: FR001's, not this cure's
    trace = fixture("int_global")
    (entry,) = [e for e in trace.entries if e.name == "add_n"]
    assert entry.count(tr.INT_ARG) > 1 and tr.dynamic_int_arguments(entry) == []


def test_the_int_and_the_size_behind_it_are_named(copied):  # noqa: F811
    script, trace = copied("olmo_doc_lens")
    (entry,) = [e for e in trace.entries if e.name == "forward" and tr.INT_ARG in e.causes]
    assert tr.dynamic_int_arguments(entry) == ["kwargs['max_doc_len']"]
    assert tr.hidden_varying_dims(entry) == {"l_kwargs_cu_doc_lens_": (0,)}
    assert tr.cure_label(entry, tr.INT_ARG, []).startswith(
        """torch.compiler.config.dynamic_sources += "L['kwargs']['max_doc_len'],\" plus the sizes its graphs show changing with it"""
    )
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (match,) = guided.matches
    assert match.finding.rule_name == "dynamic-sources-from-trace" and match.finding.applied
    assert b"""torch.compiler.config.dynamic_sources += "L['kwargs']['max_doc_len'],L['kwargs']['cu_doc_lens']:0,"\n""" in guided.files[0].new


def test_run_fix_names_the_int_and_the_size_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 3 graphs -> 2 (the blocks' forward 2 -> 1), the same printed result."""
    proc, script = run_cli(tmp_path, "olmo_doc_lens", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "total") == (3, 2), out
    first, second = results(out)
    assert first == second
    assert script.read_text().count("""\ntorch.compiler.config.dynamic_sources += "L['kwargs']['max_doc_len'],L['kwargs']['cu_doc_lens']:0,"\n""") == 1


def test_run_fix_names_an_int_an_object_passed_in_holds(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result (the setting
    matches `L['seq_ctx'].max_length`, dynamo's name of the attribute)."""
    proc, script = run_cli(tmp_path, "held_int_field", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "int argument `seq_ctx.max_length`  torch.compiler.config.dynamic_sources += \"L['seq_ctx'].max_length,\"" in out
    assert graphs(out, "forward (held_int_field.py)") == (2, 1), out
    first, second = results(out)
    assert first == second
    assert "\nfrom torch import nn\ntorch.compiler.config.dynamic_sources += \"L['seq_ctx'].max_length,\"\n" in script.read_text()


def test_the_recorded_held_int_trace_gives_the_setting(copied):  # noqa: F811
    script, trace = copied("held_int_field")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    assert tr.dynamic_int_arguments(entry) == ["seq_ctx.max_length"]
    # one changing int: nothing made symbolic behind it
    assert tr.hidden_int_arguments(entry) == [] and tr.dynamic_sources_named(entry) == ["seq_ctx.max_length"]
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (match,) = guided.matches
    assert match.finding.rule_name == "dynamic-sources-from-trace" and match.finding.applied


def test_an_int_behind_the_guard_that_failed_first_is_named_too(copied):  # noqa: F811
    """The trace names only `seq_ctx.max_length_k`; the recompile's
    `create_symbol` records show `seq_ctx.max_length_q` made symbolic too."""
    script, trace = copied("held_int_pair")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    assert tr.dynamic_int_arguments(entry) == ["seq_ctx.max_length_k"]
    assert tr.hidden_int_arguments(entry) == ["seq_ctx.max_length_q"]
    assert tr.cure_label(entry, tr.INT_ARG, []).startswith(
        """torch.compiler.config.dynamic_sources += "L['seq_ctx'].max_length_k,L['seq_ctx'].max_length_q,\""""
    )
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    (match,) = guided.matches
    assert "the recompile also made `seq_ctx.max_length_q` symbolic" in match.finding.message


def test_an_int_the_first_compile_made_symbolic_is_not_hidden(copied):  # noqa: F811
    import dataclasses

    _script, trace = copied("held_int_pair")
    (entry,) = [e for e in trace.entries if e.name == "forward"]
    marked = dataclasses.replace(entry, int_symbols=[(0, "seq_ctx.max_length_q")] + entry.int_symbols)
    assert tr.hidden_int_arguments(marked) == []
    # and no int is named when the code object recompiled on no int
    shapes_only = dataclasses.replace(entry, reasons=[r for r in entry.reasons if r.cause != tr.INT_ARG])
    assert tr.dynamic_sources_named(shapes_only) == []


def test_run_fix_names_both_ints_that_change_together(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result (the first
    int alone: 2 -> 2, measured by hand)."""
    proc, script = run_cli(tmp_path, "held_int_pair", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "forward (held_int_pair.py)") == (2, 1), out
    first, second = results(out)
    assert first == second
    assert "\nfrom torch import nn\ntorch.compiler.config.dynamic_sources += \"L['seq_ctx'].max_length_k,L['seq_ctx'].max_length_q,\"\n" in script.read_text()


def test_run_fix_names_a_step_count_in_a_param_group_of_a_compiled_optimizer_step(tmp_path):
    """timm #2704: `group['step']` a Python int, `opt.step = torch.compile(opt.step)`.
    The compiled code is torch's (the optimizer's step wrapper); the setting goes
    after the imports of the file that compiled it.  Under torch 2.13: 3 graphs
    -> 2 (the empty state's truthiness stays: one graph per truth value), the
    same printed parameters."""
    proc, script = run_cli(tmp_path, "param_group_step", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "total") == (3, 2), out
    first, second = results(out)
    assert first == second
    assert script.read_text().count("""\nimport torch\ntorch.compiler.config.dynamic_sources += "L['args'][0].param_groups[0]['step'],"\n""") == 1


def test_a_source_another_compiled_function_has_makes_the_setting_unsafe(copied):  # noqa: F811
    import dataclasses

    script, trace = copied("olmo_doc_lens")
    (entry,) = [e for e in trace.entries if e.name == "forward" and tr.INT_ARG in e.causes]
    other = dataclasses.replace(entry, name="decode_step", firstlineno=1, reasons=[], graph_sizes=[{"l_kwargs_cu_doc_lens_": [4]}])
    trace.entries.append(other)
    for unsafe in (False, True):
        guided = trace_guide.guide(trace, Settings(unsafe_fixes=unsafe), [str(script.parent)], fixing=True)
        (match,) = [m for m in guided.matches if m.finding.rule_name == "dynamic-sources-from-trace"]
        assert "unsafe: `decode_step` also compiles an input of that name" in match.finding.message
        assert match.finding.applied is unsafe
        assert (b"dynamic_sources +=" in (guided.files[0].new or b"")) is unsafe
