"""Hidden states and their mask, both of the batch's length, into one compiled
function: the second batch fails the guard on `mask` first (the only one the
trace names), and the graphs show `hidden` compiled static, then symbolic.
Marking `mask` alone: 2 -> 2 (restored); marking both: 1."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


@torch.compile(backend=counting_backend)
def masked_mean(hidden, mask):
    return (hidden * mask.unsqueeze(-1)).sum(0) / mask.sum()


torch.manual_seed(0)
total = 0.0
for n in (8, 12, 16, 20):
    hidden = torch.randn(n, 4)
    mask = (torch.rand(n) > 0.3).float()
    total += float(masked_mean(hidden, mask).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
