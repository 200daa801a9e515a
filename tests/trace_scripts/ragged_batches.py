"""A ragged last batch (113 samples, batches of 32, no drop_last) into a
function compiled with the default dynamic=None: the 17-sample batch
recompiles.  No static finding: only the trace shows the shape changing."""
import torch


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager")
def energy(x):
    return (x * x).sum() / x.numel()


data = torch.linspace(0.0, 1.0, 113)
total = 0.0
for epoch in range(3):
    for start in range(0, 113, 32):
        batch = data[start : start + 32]
        # one batch
        total += float(energy(batch))
print("result:", round(total, 4))
