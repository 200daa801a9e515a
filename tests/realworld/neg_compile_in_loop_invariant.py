# realworld: negative graphs=1
# Pattern: a benchmark loop that wraps the same function again each
# iteration (pytorch/ao benchmarks call `torch.compile(fn)` inside their
# timing loops). torch keeps the compiled code on the function's code object,
# so the second wrap reuses the first graph: no recompile to report.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
import torch


def gelu_mlp(x, w1, w2):
    return torch.nn.functional.gelu(x @ w1) @ w2


torch.manual_seed(0)
x, w1, w2 = torch.randn(8, 16), torch.randn(16, 32), torch.randn(32, 16)
for trial in range(10):
    fn = torch.compile(gelu_mlp)
    out = fn(x, w1, w2)
print(round(float(out.sum()), 3))
