# golden: runtime
# The float is wrapped at the call only: the caller keeps using `temperature`
# as a Python number afterwards (round, isinstance, f-string, `if`, dict key).
import torch


@torch.compile(dynamic=False)
def sample_probs(logits, temperature):
    return torch.softmax(logits / temperature, dim=-1)


torch.manual_seed(0)
logits = torch.randn(2, 5)
temperature = 1.0
seen = {}
for step in range(6):
    temperature = temperature * 0.9
    probs = sample_probs(logits, torch.tensor(temperature, dtype=torch.float64))
    seen[temperature] = step
    hot = "hot" if temperature > 0.6 else "cold"
    print(step, round(temperature, 4), isinstance(temperature, float), f"{temperature:.3f}", hot, round(float(probs.max()), 5))
print(len(seen), sorted(seen.values()))
