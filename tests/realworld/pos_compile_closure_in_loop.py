# realworld: positive fix=none graphs=8 limit
# Pattern: an evaluation sweep that compiles its metric inside the loop over
# k (the shape of pytorch/ao#2500 and pytorch/pytorch#167504: torch.compile
# called per iteration on a new closure). The lambda is one code object; the
# int `k` it captures is guarded (`__closure__[0].cell_contents == 1`), so
# every iteration recompiles.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 values of k). Cure by hand: make k an
# argument and compile once before the loop; no automatic rewrite (the
# signature changes).
import torch

torch.manual_seed(0)
scores = torch.randn(4, 16)
labels = torch.randint(0, 16, (4,))
for k in range(1, 13):
    recall_at_k = torch.compile(lambda s, y: (s.topk(k, dim=-1).indices == y[:, None]).any(dim=-1).float().mean())  # expect: FR008
    print(k, round(float(recall_at_k(scores, labels)), 4))
