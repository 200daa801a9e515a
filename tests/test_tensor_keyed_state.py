"""FR017's claim about torch, measured on the installed release: a dict
looked up inside compiled code by a tensor argument is resolved while
tracing, and a call with another tensor of the same shape reuses the graph
that reads the first tensor's entry.  If torch fixes this, this test fails:
then FR017's documentation (its "Why it recompiles" and the README row)
must say from which release the values are right."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import torch
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()
    params = [torch.nn.Parameter(torch.zeros(3)) for _ in range(3)]
    state = {p: {"buf": torch.full((3,), float(i))} for i, p in enumerate(params)}

    @torch.compile(backend=counter, fullgraph=True)
    def f(p):
        return state[p]["buf"] + 0

    print([float(f(p)[0]) for p in params], counter.frame_count)
    """
)


@pytest.mark.runtime
def test_a_tensor_keyed_lookup_inside_compiled_code_reads_the_first_key():
    torch = pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    values, graphs = out.stdout.strip().rsplit(" ", 1)
    # eager: [0.0, 1.0, 2.0]; compiled on torch 2.9.1-2.14.1: the first entry three times, one graph
    assert (values, graphs) == ("[0.0, 0.0, 0.0]", "1"), f"torch {torch.__version__}: {out.stdout}"
