"""An annealed float argument: the softmax temperature decays every step."""
import torch


def scaled_softmax(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
sample = torch.compile(scaled_softmax, backend="eager")

logits = torch.linspace(-1.0, 1.0, 8)
total = 0.0
for step in range(12):
    temperature = 1.0 - 0.05 * step
    total += float(sample(logits, temperature).max())
print("result:", round(total, 4))
