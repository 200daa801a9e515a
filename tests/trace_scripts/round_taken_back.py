"""`pooled` is compiled with `dynamic=False` and fed five widths: 5 graphs.
Round 1 of `run --fix` removes `dynamic=False` (5 -> 2: the first width
static, then one dynamic graph).  The rerun shows dim 1 changing once, and
round 2 marks it; but the code branches on that size (`if x.shape[1] >
4`), so the marked first call still leaves a graph per branch (2 -> 2):
round 2 is taken back, round 1 stays."""
import torch


def pooled(x):
    if x.shape[1] > 4:
        return x.sum(1)
    return x.mean(1)


pool = torch.compile(pooled, backend="eager", dynamic=False)

total = 0.0
for width in (3, 5, 6, 7, 8):
    x = torch.ones(2, width)
    total += float(pool(x).sum())
print("result:", round(total, 4))
