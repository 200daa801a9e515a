"""Shape recompiles under the default dynamic=None: a size change (then the dim
is dynamic), sizes 0 and 1 (0/1 specialisation), a rank change, a stride change."""
import torch


@torch.compile(backend="eager")
def energy(x):
    return (x * x).sum()


@torch.compile(backend="eager", dynamic=False)
def flat(x):
    return x.sum()


@torch.compile(backend="eager", dynamic=False)
def rowsum(x):
    return x.sum(0)


total = 0.0
for n in (4, 5, 1, 6, 0, 7):
    total += float(energy(torch.ones(n)))
total += float(flat(torch.ones(4))) + float(flat(torch.ones(2, 2)))
m = torch.arange(16.0).reshape(4, 4)
total += float(rowsum(m).sum()) + float(rowsum(m.t()).sum())
print("result:", round(total, 4))
