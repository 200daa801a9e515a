# golden: runtime
# An annealed sampling temperature, recomputed every step.
import torch


@torch.compile(dynamic=False)
def sample_probs(logits, temperature):
    return torch.softmax(logits / (temperature + 1e-6), dim=-1)


torch.manual_seed(0)
logits = torch.randn(2, 5)
for step in range(10):
    temperature = 1.0 - 0.05 * step
    probs = sample_probs(logits, temperature)
    print(step, round(float(probs.max()), 5))
