"""Issue 27, form 5: sizes 0 and 1 under dynamic shapes.  A compiled function
first called with a batch of 1, then 2..N: torch specialises size 1 even
under ``dynamic=True``, so the second batch recompiles, and
``maybe_mark_dynamic`` does not lift it (measured on 2.13: 2 -> 2 graphs).
The graphs of the trace show the dims compiled at size 1 first and symbolic
later; the trace mode inserts ``torch._dynamo.decorators.mark_unbacked(name,
dim)`` before the call for each (vLLM PR #38933's fix: 2 -> 1).
tests/trace_scripts/batch_one_first.py reproduces vLLM before the PR;
batch_two_first.py is its twin whose first batch is 2 (no 0/1
specialisation: maybe_mark_dynamic, as before)."""

from __future__ import annotations

import re
import subprocess
import textwrap

import pytest

import warm_python
from test_trace import CLI, SCRIPTS, _env, copied, fixture, graphs, only, results, run_cli  # noqa: F401 (copied: a pytest fixture)

from codemods.trace import read as tr
from codemods.trace import cures as trace_cures
from codemods.trace import guide as trace_guide
from codemods.analysis.context import Settings
from codemods.findings import Safety
from codemods.transforms import BY_CODE

CODES = list(BY_CODE)
CALL = "        token_ranks = batched_count_greater_than(logprobs, token_logprobs)\n"
UNBACKED = (
    "        torch._dynamo.decorators.mark_unbacked(logprobs, 0)\n"
    "        torch._dynamo.decorators.mark_unbacked(token_logprobs, 0)\n"
)


# -- what the trace shows ------------------------------------------------------------


def test_the_recorded_reason_and_graphs_show_size_one_compiled_first():
    entry = only(fixture("batch_one_first"), "batched_count_greater_than")
    assert (entry.graphs, entry.limit_hit, entry.causes) == (2, False, [tr.TENSOR_SHAPE])
    assert [r.text for r in entry.reasons] == ["tensor 'x' size mismatch at index 0. expected 1, actual 2"]
    # the graphs: x and values compiled with 1 row, then a symbolic row count
    # (the reason names x only: the first guard that failed)
    assert [g["l_x_"][0] for g in entry.graph_sizes][0] == 1
    assert isinstance(entry.graph_sizes[1]["l_values_"][0], str)
    assert tr.zero_one_sizes(entry) == {"l_x_": {0: 1}, "l_values_": {0: 1}}
    assert tr.unbacked_dims(entry) == {"x": (0,), "values": (0,)}
    assert tr.varying_dims(entry) == {"x": (0,)}


def test_the_cure_names_mark_unbacked_not_maybe_mark_dynamic():
    entry = only(fixture("batch_one_first"), "batched_count_greater_than")
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, CODES)
    assert label.startswith(
        "FR001, FR007, torch._dynamo.decorators.mark_unbacked(x, 0), torch._dynamo.decorators.mark_unbacked(values, 0),"
        " size 1 specialised even when dynamic (maybe_mark_dynamic does not lift it)"
    ), label
    assert "maybe_mark_dynamic(" not in label


def test_the_twin_whose_first_batch_is_two_keeps_maybe_mark_dynamic():
    entry = only(fixture("batch_two_first"), "batched_count_greater_than")
    assert [r.text for r in entry.reasons] == ["tensor 'x' size mismatch at index 0. expected 2, actual 4"]
    assert tr.zero_one_sizes(entry) == {} and tr.unbacked_dims(entry) == {}
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, CODES)
    assert "torch._dynamo.maybe_mark_dynamic(x, 0)" in label and "mark_unbacked" not in label


def test_sizes_zero_and_one_seen_after_a_symbolic_size_are_marked_unbacked_too():
    # shape_guards: 4, 5, then 1 and 0 break `2 <= x.size()[0]` (graphs [4], [s], [1], [0]);
    # measured on 2.13: 4 graphs; maybe_mark_dynamic(x, 0) before each call 3, mark_unbacked 1
    entry = [e for e in fixture("shape_guards").entries if e.name == "energy"][0]
    assert tr.zero_one_sizes(entry) == {"l_x_": {0: 1}}
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, CODES)
    assert "torch._dynamo.decorators.mark_unbacked(x, 0)" in label and "torch._dynamo.maybe_mark_dynamic(" not in label
    assert "bounded (2 recompiles)" not in label  # the mark cures them


def test_a_decode_step_after_prefill_is_marked_unbacked(copied):  # noqa: F811
    # vLLM #30709: the profile and prefill steps made dim 0 symbolic, the first
    # 1-token step failed `2 <= input_.size()[0]` (graphs [s], [1])
    script, trace = copied("decode_after_prefill")
    entry = only(trace, "get_masked_input_and_mask")
    assert [r.text for r in entry.reasons] == ["2 <= input_.size()[0]"]
    assert tr.zero_one_sizes(entry) == {"l_input_": {0: 1}}
    assert tr.describe_zero_one_evidence(entry, "l_input_", 0) == "dim 0 of `input_` compiled symbolic, then at size 1"
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert m.finding.rule_name == "mark-unbacked-from-trace" and m.finding.applied
    assert (
        b"        torch._dynamo.decorators.mark_unbacked(input_, 0)\n"
        b"        masked_input, input_mask = get_masked_input_and_mask(input_, self.start, self.end)\n"
    ) in guided.files[0].new


def test_run_fix_marks_the_decode_step_fewer_graphs_same_output(tmp_path):
    """Under torch 2.13: 2 graphs -> 1, the same printed result."""
    proc, script = run_cli(tmp_path, "decode_after_prefill", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert graphs(out, "get_masked_input_and_mask (decode_after_prefill.py)") == (2, 1)
    first, second = results(out)
    assert first == second
    assert "mark_unbacked(input_, 0)" in script.read_text()


def _entry(graph_sizes, reasons=("0/0: tensor 'x' size mismatch at index 0. expected 1, actual 2",)):
    entry = tr.CodeEntry(name="f", filename="/p/f.py", firstlineno=3, graphs=len(graph_sizes))
    entry.graph_sizes = [dict(g) for g in graph_sizes]
    for text in reasons:
        entry.reasons.extend(tr.parse_reason(text))
    return entry


def test_zero_one_sizes_from_the_graphs():
    # size 0 first, then symbolic; a dim that stays 1 is not marked
    e = _entry([{"l_x_": [0, 1], "mul": [0, 1]}, {"l_x_": ["s0", 1], "mul": ["s0", 1]}])
    assert tr.zero_one_sizes(e) == {"l_x_": {0: 0}}
    assert tr.cure_label(e, tr.TENSOR_SHAPE, []).startswith(
        "torch._dynamo.decorators.mark_unbacked(x, 0), size 0 specialised even when dynamic"
    )
    # size 1 after a static size, then symbolic (sizes 4, 1, 5 under dynamic=None; measured: 3 -> 1 graphs with the mark)
    e = _entry([{"l_x_": [4]}, {"l_x_": [1]}, {"l_x_": ["s0"]}])
    assert tr.zero_one_sizes(e) == {"l_x_": {0: 1}}
    # another rank, a module's parameter, an intermediate node: not compared / not an argument
    e = _entry([
        {"l_x_": [1], "l_self_modules_lin_parameters_weight_": [1, 4], "add": [1]},
        {"l_x_": ["s0", 4], "l_self_modules_lin_parameters_weight_": ["s1", 4], "add": ["s0"]},
    ])
    assert tr.zero_one_sizes(e) == {}
    # without a shape recompile the graphs are not read
    e = _entry([{"l_x_": [1]}, {"l_x_": ["s0"]}], reasons=("0/0: ___check_obj_id(L['m'], 1)",))
    assert tr.zero_one_sizes(e) == {}


@pytest.mark.parametrize("source,name", [
    ("x", "l_x_"),
    ("token_logprobs", "l_token_logprobs_"),
    ("kwargs['cu_doc_lens']", "l_kwargs_cu_doc_lens_"),
    ("tokenIds", "l_token_ids_"),
])
def test_graph_input_names_as_dynamo_makes_them(source, name):
    assert tr.graph_input(source) == name


# -- the fix -------------------------------------------------------------------------

SRC = textwrap.dedent(
    """\
    import torch


    @torch.compile(dynamic=True, backend="eager")
    def count(x, values, *, scale=1):
        return (x >= values).sum(-1) * scale


    for logits in batches:
        ranks = count(logits, logits[:, :1])
        ranks = count(x=logits, values=picked)
    """
)


def test_mark_unbacked_before_each_call_for_the_inputs_the_graphs_show():
    new, sites, _why = trace_cures.mark_dynamic(SRC.encode(), "count", 4, {"x": (0,)}, {"l_x_": (0,), "l_values_": (0,)})
    new = new.decode()
    assert new == SRC.replace(
        "    ranks = count(logits, logits[:, :1])\n    ranks = count(x=logits, values=picked)\n",
        "    torch._dynamo.decorators.mark_unbacked(logits, 0)\n"
        "    ranks = count(logits, logits[:, :1])\n"
        "    torch._dynamo.decorators.mark_unbacked(logits, 0)\n"
        "    torch._dynamo.decorators.mark_unbacked(picked, 0)\n"
        "    ranks = count(x=logits, values=picked)\n",
    )
    # an expression argument (logits[:, :1]) is not marked; no maybe_mark_dynamic for a dim marked unbacked
    assert [(s.line, s.arg, s.dim, s.func) for s in sites] == [
        (10, "logits", 0, "mark_unbacked"), (11, "logits", 0, "mark_unbacked"), (11, "picked", 0, "mark_unbacked"),
    ]
    # a second run finds its own marks
    assert trace_cures.mark_dynamic(new.encode(), "count", 4, {"x": (0,)}, {"l_x_": (0,), "l_values_": (0,)}) == (None, [], "every mark it needs is already before its calls")


def test_both_kinds_of_mark_together_and_again():
    # dim 1 of x varied (maybe_mark_dynamic), dim 0 compiled at size 1 first (mark_unbacked)
    new, sites, _why = trace_cures.mark_dynamic(SRC.encode(), "count", 4, {"x": (0, 1)}, {"l_x_": (0,)})
    assert [(s.arg, s.dim, s.func) for s in sites][:2] == [("logits", 0, "mark_unbacked"), ("logits", 1, "maybe_mark_dynamic")]
    assert "    torch._dynamo.decorators.mark_unbacked(logits, 0)\n    torch._dynamo.maybe_mark_dynamic(logits, 1)\n    ranks = count(logits" in new.decode()
    assert trace_cures.mark_dynamic(new, "count", 4, {"x": (0, 1)}, {"l_x_": (0,)}) == (None, [], "every mark it needs is already before its calls")


def test_guide_inserts_mark_unbacked_at_the_call(copied):  # noqa: F811
    script, trace = copied("batch_one_first")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    found = [m.finding for m in guided.matches]
    assert [(f.code, f.fix.safety, f.applied, f.line, f.column, f.rule_name) for f in found] == [
        ("TRACE", Safety.SAFE, True, 43, 23, "mark-unbacked-from-trace")
    ] * 2
    assert found[1].message == (
        "`batched_count_greater_than` recompiled on tensor shape `x`: dim 0 of `values` compiled at size 1,"
        " then symbolic (a size 0 or 1 is specialised even under dynamic shapes, and maybe_mark_dynamic does"
        " not lift that): mark dim 0 of `token_logprobs` unbacked before the call"
        " (`torch._dynamo.decorators.mark_unbacked(token_logprobs, 0)`, from the trace)"
    )
    assert script.read_text().splitlines()[42] == CALL.rstrip("\n")
    new = guided.files[0].new.decode()
    assert new == script.read_text().replace(CALL, UNBACKED + CALL)
    assert "maybe_mark_dynamic(" not in new


def test_guide_on_the_twin_keeps_maybe_mark_dynamic(copied):  # noqa: F811
    script, trace = copied("batch_two_first")
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    # logprobs, whose guard failed; token_logprobs, which the graphs show changing behind it
    assert [(m.finding.code, m.finding.rule_name) for m in guided.matches] == [("TRACE", "mark-dynamic-from-trace")] * 2
    new = guided.files[0].new.decode()
    assert new == script.read_text().replace(
        CALL, "        torch._dynamo.maybe_mark_dynamic(logprobs, 0)\n        torch._dynamo.maybe_mark_dynamic(token_logprobs, 0)\n" + CALL
    )
    assert "mark_unbacked(" not in new


# -- end to end (torch 2.13) -------------------------------------------------------------


def test_run_fix_marks_unbacked_fewer_graphs_same_output(tmp_path):
    """2 graphs -> 1, the same printed results (before this form the trace
    mode inserted maybe_mark_dynamic(logprobs, 0): 2 -> 2, restored)."""
    proc, script = run_cli(tmp_path, "batch_one_first", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert re.search(
        r"^batched_count_greater_than\s+batch_one_first\.py:17\s+2\s+no\s+tensor shape `x`\s+"
        r"torch\._dynamo\.decorators\.mark_unbacked\(x, 0\), torch\._dynamo\.decorators\.mark_unbacked\(values, 0\), ",
        out,
        re.MULTILINE,
    ), out
    assert out.count("fixed: batch_one_first.py:43:23: TRACE ") == 2, out
    assert graphs(out, "batched_count_greater_than (batch_one_first.py)") == (2, 1)
    assert "Exit code unchanged (0)." in out
    first, second = results(out)[:6], results(out)[6:]
    assert len(first) == 6 and first == second
    assert UNBACKED + CALL in script.read_text()


BRANCH = (
    "    return (x >= values).sum(-1)\n",
    "    if x.shape[0] > 1:  # branches on the batch size\n"
    "        return (x >= values).sum(-1)\n"
    "    return (x >= values).sum(-1, keepdim=True).squeeze(-1)\n",
)


@pytest.mark.parametrize("fullgraph,restored_because", [
    # the branch on the unbacked size graph-breaks: 2 -> 3 graphs
    (False, "the fixes did not reduce the graphs compiled (2 -> 3); the files were restored"),
    # fullgraph=True: a data-dependent guard error, the command fails
    (True, "error: exit code changed 0 -> 1 after the fixes; the files were restored"),
])
def test_run_fix_restores_mark_unbacked_when_the_code_branches_on_the_size(tmp_path, fullgraph, restored_because):
    text = (SCRIPTS / "batch_one_first.py").read_text().replace(*BRANCH)
    if fullgraph:
        text = text.replace('@torch.compile(dynamic=True, backend="eager")', '@torch.compile(dynamic=True, backend="eager", fullgraph=True)')
    script = tmp_path / "branching.py"
    script.write_text(text)
    proc = warm_python.cli_run(
        check=False,
        args=CLI + ["run", "--fix", "--", *warm_python.python_command(_env()), "branching.py"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        timeout=600,
    )
    out = proc.stdout
    assert "fixed: branching.py:45:23: TRACE " in out, out
    assert restored_because in out, out
    assert script.read_text() == text  # restored


# -- a module whose compiled forward is reached only by the trace's frames -------------


def test_the_module_call_the_trace_shows_gets_the_mark(copied):  # noqa: F811
    # xDiT: `transformer.forward = torch.compile(transformer.forward)` on a module
    # fetched with getattr; the code object is a decorator's `wrapper(self, *args,
    # **kwargs)`; the stack shows `Pipeline.__call__` calling it through torch's
    # module call: that call passes `timestep=unique_timesteps`
    script, trace = copied("module_kwargs_timestep")
    [entry] = trace.entries
    assert entry.name == "wrapper"
    assert [(line, name) for _f, line, name in entry.module_callers] == [(49, "__call__")]
    assert entry.callers == []  # torch's frames sit between them
    guided = trace_guide.guide(trace, Settings(), [str(script.parent)], fixing=True)
    [m] = guided.matches
    assert (m.finding.code, m.finding.line) == ("TRACE", 49)
    new = guided.files[0].new.decode()
    assert "            torch._dynamo.decorators.mark_unbacked(unique_timesteps, 0)\n            out = transformer(\n" in new


def test_no_mark_without_a_module_frame_or_at_a_line_of_two_calls():
    src = textwrap.dedent(
        """\
        import torch


        def deco(fn):
            def wrapper(self, *args, **kwargs):
                return fn(self, *args, **kwargs)
            return wrapper


        class M(torch.nn.Module):
            @deco
            def forward(self, x, t):
                return x * t


        def run(m, ts):
            return m(x=ts, t=ts)
        """
    )
    mark = lambda callers: trace_cures.mark_dynamic(src.encode(), "wrapper", 5, {}, {"l_kwargs_t_": (0,)}, (), None, callers)  # noqa: E731
    new, sites, _why = mark([(17, "run", True)])
    assert [(s.line, s.arg, s.func) for s in sites] == [(17, "ts", "mark_unbacked")]
    assert "    torch._dynamo.decorators.mark_unbacked(ts, 0)\n    return m(x=ts, t=ts)\n" in new.decode()
    assert mark([(17, "run", False)])[:2] == (None, [])  # a frame that is not a module call
    assert mark([])[:2] == (None, [])
    assert "no call from eager code that runs `wrapper` compiled" in mark([])[2]
    two = src.replace("return m(x=ts, t=ts)", "return m(x=ts, t=ts), m(x=ts, t=ts)")
    assert trace_cures.mark_dynamic(two.encode(), "wrapper", 5, {}, {"l_kwargs_t_": (0,)}, (), None, [(17, "run", True)])[:2] == (None, [])
