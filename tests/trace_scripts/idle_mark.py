"""Two compiled functions recompile: `scaled` on a float argument (FR003's
tensor cures it), `pooled` on a size its code branches on (`if x.shape[1] >
4`): a maybe_mark_dynamic of that dim still compiles one graph per branch
(2 -> 2).  The run's total falls with both fixes; the mark did nothing for
its own function and is taken back."""
import torch


def scaled(x, temperature):
    return torch.softmax(x / temperature, dim=-1)


def pooled(x):
    if x.shape[1] > 4:
        return x.sum(1)
    return x.mean(1)


sample = torch.compile(scaled, backend="eager", dynamic=False)
pool = torch.compile(pooled, backend="eager")

logits = torch.linspace(-1.0, 1.0, 8)
total = 0.0
for step in range(6):
    temperature = 1.0 - 0.05 * step
    total += float(sample(logits, temperature).max())
for width in (3, 5, 6):
    x = torch.ones(2, width)
    total += float(pool(x).sum())
print("result:", round(total, 4))
