"""Issue 27, form 4: a stride recompile (callers of one compiled code object
pass different layouts) -> ``arg.contiguous()`` at the calls, made from the
trace alone (codemods/trace/cures.py, ``contiguous_at_calls``)."""

from __future__ import annotations

import textwrap

from test_trace import copied, graphs, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.analysis.context import Settings
from codemods.trace import cures as trace_cures
from codemods.trace import guide as trace_guide
from codemods.trace import read as tr

BLOCKS = textwrap.dedent(
    """\
    import torch


    class Block(torch.nn.Module):
        def forward(self, hidden_states, scale):
            return hidden_states * scale


    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])

        def forward(self, x, scale):
            hidden_states = x.flatten(2).transpose(1, 2)
            for block in self.blocks:
                hidden_states = block(hidden_states, scale=scale)
            first = self.blocks[0](x.transpose(1, 2).contiguous(), scale)
            return hidden_states, first
    """
)


def contiguous(src: str, params=("hidden_states",), traced=()):
    new, sites = trace_cures.contiguous_at_calls(src.encode(), "forward", 5, list(params), traced)
    return (new.decode() if new is not None else None), sites


def test_each_call_of_the_compiled_blocks_passes_one_layout():
    new, sites = contiguous(BLOCKS)
    assert "            hidden_states = block(hidden_states.contiguous(), scale=scale)\n" in new
    # an argument made contiguous already is left alone
    assert "self.blocks[0](x.transpose(1, 2).contiguous(), scale)" in new
    assert [(s.line, s.arg) for s in sites] == [(17, "hidden_states")]
    again, sites = contiguous(new)
    assert again is None and sites == []  # a second run changes nothing


def test_not_when_the_compiled_function_changes_its_input_in_place():
    src = BLOCKS.replace("        return hidden_states * scale\n", "        hidden_states.mul_(scale)\n        return hidden_states\n")
    assert "mul_" in src
    assert contiguous(src) == (None, [])


def test_not_at_calls_inside_compiled_code():
    # the model's forward is compiled too (a code object of the trace): its calls run traced
    assert contiguous(BLOCKS, traced=[("forward", 14)]) == (None, [])


def test_run_fix_makes_the_layout_one(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "layout_blocks", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "tensor strides `hidden_states`  hidden_states.contiguous() at the calls" in out
    assert "fixed: layout_blocks.py:36:35: TRACE " in out
    assert graphs(out, "forward (layout_blocks.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "            hidden_states = block(hidden_states.contiguous(), scale)\n" in script.read_text()


def test_the_recorded_trace_gives_the_same_fix(copied):  # noqa: F811
    script, trace = copied("layout_blocks")
    [entry] = trace.entries
    assert tr.cure_label(entry, tr.LAYOUT, []) == "hidden_states.contiguous() at the calls"
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [(m.finding.code, m.finding.rule_name, m.cause) for m in guided.matches] == [("TRACE", "contiguous-from-trace", tr.LAYOUT)]
    off = trace_guide.guide(trace, Settings(ignore=frozenset({"TRACE"})), [str(script.parent)], fixing=True)
    assert not off.matches


# -- a field of a state fed back: .contiguous() where the compiled code writes it -------

STATE = textwrap.dedent(
    """\
    import dataclasses
    import torch


    def com_pos(d, cond):
        com = torch.where(cond.T, d.pos, d.com)
        d.update_(com=com)
        return dataclasses.replace(d, com=com * 2, pos=d.pos)


    def kept(d, cond):
        com = torch.where(cond.T, d.pos, d.com)
        d = d.replace(com=com)
        com.mul_(2)  # the field must see this change: no copy
        return d


    class Model(torch.nn.Module):
        def forward(self, x):
            self.com = x.t()  # a module's attribute: not a state passed in
            state.com = x.t()
            return x
    """
)


def test_the_values_written_to_the_field_get_one_layout():
    new, sites = trace_cures.contiguous_at_writes(STATE.encode(), ["com"])
    new = new.decode()
    assert [(s.function, s.arg) for s in sites] == [("com_pos", "com"), ("forward", "x.t()")]
    assert "    d.update_(com=com.contiguous())\n" in new
    # an expression that would need parentheses is left alone (as at the calls)
    assert "dataclasses.replace(d, com=com * 2, pos=d.pos)" in new
    assert "    state.com = x.t().contiguous()\n" in new
    assert "self.com = x.t()  #" in new  # self's attribute is left alone
    assert "    d = d.replace(com=com)\n" in new  # changed in place afterwards: left alone
    again, sites = trace_cures.contiguous_at_writes(new.encode(), ["com"])
    assert again is None and sites == []  # a second run changes nothing
    assert trace_cures.contiguous_at_writes(STATE.encode(), ["pos"]) == (None, [])  # `pos=d.pos` passes the field through


def test_which_sources_are_fields_of_a_state():
    assert tr.field_of("args[1].subtree_com") == "subtree_com"
    assert tr.field_of("d.com") == "com"
    assert tr.field_of("kwargs['state'].com") == "com"
    assert tr.field_of("self.com") is None
    assert tr.field_of("d.a.b") is None
    assert tr.field_of("x") is None


def test_run_fix_writes_the_field_in_one_layout(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result (mujoco-torch before b8e4fa6)."""
    proc, script = run_cli(tmp_path, "state_field_layout", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "tensor strides `d.com`  `.contiguous()` where `com` is written" in out
    assert "fixed: state_field_layout.py:25:39: TRACE `step` recompiled on the strides of the field `com`" in out
    assert graphs(out, "step (state_field_layout.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "    return dataclasses.replace(d, com=com.contiguous())\n" in script.read_text()


FACTORIES = textwrap.dedent(
    """\
    import dataclasses
    import torch


    def passive(m, d):
        if m.off:
            d.update_(
                qfrc_passive=torch.zeros(m.nv, dtype=d.qpos.dtype, device=d.qpos.device),
                qfrc_gravcomp=torch.zeros(m.nv, dtype=d.qpos.dtype, device=d.qpos.device),
            )
            return d
        qfrc_gravcomp = torch.zeros(m.nv, dtype=d.qpos.dtype, device=d.qpos.device)
        if m.has_gravcomp:
            qfrc_gravcomp = gravcomp(m, d)
        return dataclasses.replace(d, qfrc_gravcomp=qfrc_gravcomp)


    def filled(d, n):
        bias = torch.full((n,), 0.5, dtype=d.qpos.dtype, device=d.qpos.device)
        d.bias = bias
        d.act = torch.ones(n, 2)  # no dtype, no device: the field's would be taken
        return d.replace(damping=torch.zeros(n, dtype=torch.float32, device="cpu", out=None))
    """
)


def test_a_new_tensor_written_to_the_field_is_made_like_it():
    """``.contiguous()`` does nothing for a new tensor that depends on no input
    (vmap returns it with batch stride 0: mujoco-torch before f81eea1): it is
    made like the field it is written to."""
    new, sites = trace_cures.contiguous_at_writes(FACTORIES.encode(), ["qfrc_gravcomp", "bias", "act", "damping"])
    new = new.decode()
    like = "torch.zeros_like(d.qfrc_gravcomp, dtype=d.qpos.dtype, device=d.qpos.device)"
    assert f"            qfrc_gravcomp={like},\n" in new
    assert "            qfrc_passive=torch.zeros(m.nv, dtype=d.qpos.dtype, device=d.qpos.device),\n" in new  # not a guarded field
    assert f"    qfrc_gravcomp = {like}\n" in new
    # another binding of the name is not a new tensor: it keeps `.contiguous()` where it is written
    assert "    return dataclasses.replace(d, qfrc_gravcomp=qfrc_gravcomp.contiguous())\n" in new
    assert "    bias = torch.full_like(d.bias, 0.5, dtype=d.qpos.dtype, device=d.qpos.device)\n" in new
    assert "    d.bias = bias\n" in new  # every binding of `bias` is a new tensor: no copy needed
    assert "    d.act = torch.ones(n, 2).contiguous()  #" in new  # no dtype / device given: not made like the field
    assert 'd.replace(damping=torch.zeros(n, dtype=torch.float32, device="cpu", out=None).contiguous())' in new
    assert sorted((s.line, s.written) for s in sites) == [
        (9, like),
        (12, like),
        (15, "qfrc_gravcomp.contiguous()"),
        (19, "torch.full_like(d.bias, 0.5, dtype=d.qpos.dtype, device=d.qpos.device)"),
        (21, "torch.ones(n, 2).contiguous()"),
        (22, 'torch.zeros(n, dtype=torch.float32, device="cpu", out=None).contiguous()'),
    ]
    again, sites = trace_cures.contiguous_at_writes(new.encode(), ["qfrc_gravcomp", "bias", "act", "damping"])
    assert again is None and sites == []  # a second run changes nothing


def test_run_fix_makes_the_new_field_value_like_the_state(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result (mujoco-torch
    before f81eea1; `.contiguous()` there: 2 -> 2)."""
    proc, script = run_cli(tmp_path, "vmap_zeros_field", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "fixed: vmap_zeros_field.py:25:13: TRACE `step (through torch.vmap)` recompiled on the strides of the field `force`" in out
    assert graphs(out, "step (vmap_zeros_field.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "    force = torch.zeros_like(d.force, dtype=d.pos.dtype, device=d.pos.device)\n" in script.read_text()


def test_the_recorded_vmap_trace_names_the_field(copied):  # noqa: F811
    script, trace = copied("vmap_zeros_field")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [(m.finding.code, m.finding.rule_name, m.cause, m.finding.line) for m in guided.matches] == [
        ("TRACE", "contiguous-from-trace", tr.LAYOUT, 25)
    ]
    assert "torch.zeros_like(d.force, dtype=d.pos.dtype, device=d.pos.device)" in guided.matches[0].finding.message


# -- a compiled closure handed on to a solver: the trace's frames tie the compile -------

CLOSURE = textwrap.dedent(
    """\
    import torch


    class Heun:
        def __init__(self, denoiser):
            self.denoiser = denoiser

        def step(self, x, t_cur):
            d = self.denoiser(x, t_cur)
            return self.denoiser(x + d, torch.where(t_cur > 0, t_cur, 1.0))


    def make(model):
        def ode_denoiser(x, t):
            return model(x) / t

        return 0, ode_denoiser


    def sample(denoiser, x, t):
        return Heun(denoiser).step(x, t.expand(2))


    _, denoiser = make(torch.nn.Identity())
    compiled = torch.compile(denoiser)
    sample(compiled, torch.ones(2), torch.tensor(1.0))
    """
)


def closure(callers, src=CLOSURE):
    new, sites = trace_cures.contiguous_at_calls(src.encode(), "ode_denoiser", 14, ["t"], (), callers)
    return (new.decode() if new is not None else None), sites


def test_a_compiled_closure_is_cured_at_the_calls_the_trace_ties_to_its_compile():
    # torch's stack shows `sample` calling (the frame of `step` is left out):
    # at line 21 `sample` calls `.step`, the function around the site's calls
    new, sites = closure([(21, "sample", False)])
    assert [(s.line, s.arg) for s in sites] == [(9, "t_cur"), (10, "torch.where(t_cur > 0, t_cur, 1.0)")]
    assert "        d = self.denoiser(x, t_cur.contiguous())\n" in new
    assert "torch.where(t_cur > 0, t_cur, 1.0).contiguous())\n" in new
    # the caller itself shown (a release that keeps the calling frame)
    assert closure([(9, "step", False)])[0] == new
    assert closure([(21, "sample", False)], new) == (None, [])  # a second run changes nothing


def test_no_cure_when_the_trace_shows_no_frame_tied_to_the_compile():
    assert closure([]) == (None, [])
    assert closure([(26, "<module>", False)]) == (None, [])  # calls `sample`: no call of the compile is in a `sample`
    # two compiles of unknown functions both tied: neither is taken
    two = CLOSURE + "other = torch.compile(denoiser)\nHeun(other).step(torch.ones(2), torch.ones(2))\n"
    assert closure([(21, "sample", False)], two) == (None, [])


def test_run_fix_makes_the_closure_calls_one_layout(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "solver_closure", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "ode_denoiser  solver_closure.py:42  2       no         tensor strides `t`  t.contiguous() at the calls" in out
    assert graphs(out, "ode_denoiser (solver_closure.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    text = script.read_text()
    assert "        d_cur = self.denoiser(x, t_cur.contiguous())\n" in text


def test_the_recorded_closure_trace_names_its_callers(copied):  # noqa: F811
    script, trace = copied("solver_closure")
    [entry] = trace.entries
    assert (entry.name, entry.firstlineno) == ("ode_denoiser", 42)
    assert [(line, name) for _f, line, name in entry.callers] == [(55, "sample")]
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    assert [(m.finding.line, m.finding.rule_name) for m in guided.matches] == [(16, "contiguous-from-trace"), (26, "contiguous-from-trace"), (30, "contiguous-from-trace")]


# -- a stride that differs only on a size-1 dim: a view of its own shape ----------------


def test_a_stride_guard_on_a_size_one_dim_gets_a_view_of_its_own_shape(copied):  # noqa: F811
    # vllm-rbln: `(1, V)` logits, the last row of a concatenation, stride (n * V, 1):
    # `.contiguous()` returns the same tensor (a size-1 dim does not count)
    script, trace = copied("size_one_stride")
    [entry] = [e for e in trace.entries if e.graphs]
    assert tr.size_one_strides(entry, "logits")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert "pass `logits.view(logits.shape)` here" in m.finding.message
    new = guided.files[0].new.decode()
    # the sampler's class derives from the one whose forward is compiled, through `self.sampler = sampler`
    assert "        return self.sampler(logits=logits.view(logits.shape), temperature=temperature)\n" in new


def test_the_view_only_for_size_one_dims_and_names():
    src = BLOCKS.replace("first = self.blocks[0](x.transpose(1, 2).contiguous(), scale)", "first = self.blocks[0](x.transpose(1, 2), scale)")
    new, sites = trace_cures.contiguous_at_calls(src.encode(), "forward", 5, ["hidden_states"], (), (), ["hidden_states"])
    # a call's result would be read twice: left alone; a name gets the view
    assert [(s.arg, s.view) for s in sites] == [("hidden_states", True)]
    assert "hidden_states = block(hidden_states.view(hidden_states.shape), scale=scale)" in new.decode()
    assert "self.blocks[0](x.transpose(1, 2), scale)" in new.decode()
    again, sites = trace_cures.contiguous_at_calls(new, "forward", 5, ["hidden_states"], (), (), ["hidden_states"])
    assert again is None and sites == []


def test_run_fix_views_the_size_one_stride(tmp_path):
    """Under torch 2.13: 3 graphs -> 1 (`.contiguous()` there: 3), the same printed result."""
    proc, script = run_cli(tmp_path, "size_one_stride", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "forward (size_one_stride.py)") == (3, 1)
    first, second = results(out)
    assert first == second
    assert "logits=logits.view(logits.shape)" in script.read_text()
