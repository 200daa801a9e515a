"""Variable-length batches from a loader the codemod cannot see into: statically
`dynamic=False` looks deliberate (FR001 unsafe); the trace proves it recompiles."""
import torch


def batches():
    for n in (4, 6, 8, 10, 12, 14):
        yield torch.linspace(0.0, 1.0, n)


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager", dynamic=False)
def energy(x):
    return (x * x).sum() / x.numel()


total = 0.0
for batch in batches():
    total += float(energy(batch))
print("result:", round(total, 4))
