# realworld: negative graphs=3
# Pattern: KellerJordan/modded-nanogpt (train_gpt.py at
# f411b3d346aa52d3504324ca93c230fd84c6c07f: `dynamo.config.recompile_limit =
# 64` at the top, then `@torch.compile(dynamic=False, fullgraph=True)` kernels
# called once per parameter shape): a bounded set of shapes, one graph each,
# under a limit the author raised on purpose.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs (one per distinct shape) over 5 x 4 calls; no limit hit.
import torch
import torch._dynamo as dynamo

dynamo.config.recompile_limit = 64


@torch.compile(dynamic=False, fullgraph=True, backend="eager")
def polar_express(G):
    X = G / (G.norm() + 1e-7)
    return 1.5 * X - 0.5 * (X @ X.mT) @ X


torch.manual_seed(0)
params = [torch.randn(8, 8), torch.randn(8, 16), torch.randn(16, 32), torch.randn(8, 8)]
total = 0.0
for step in range(5):
    for p in params:
        total += polar_express(p).sum().item()
print(round(total, 3))
