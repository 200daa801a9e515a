# golden: runtime
# The canonical annealed sampling temperature: rebuilt from itself every step.
import torch


@torch.compile(dynamic=False)
def sample_probs(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


torch.manual_seed(0)
logits = torch.randn(2, 5)
temperature = 1.0
for step in range(10):
    temperature = temperature * 0.95
    out = sample_probs(logits, temperature)
    print(step, round(float(out.max()), 5), round(temperature, 5))
