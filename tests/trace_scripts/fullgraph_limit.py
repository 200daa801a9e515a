"""fullgraph=True and dynamic=False with growing inputs: the 9th shape raises
FailOnRecompileLimitHit instead of falling back to eager."""
import torch


@torch.compile(backend="eager", dynamic=False, fullgraph=True)
def normalize(x):
    return (x - x.mean()) / (x.std() + 1e-6)


total = 0.0
try:
    for n in range(2, 14):
        total += float(normalize(torch.arange(n, dtype=torch.float32)).abs().sum())
except Exception as exc:  # torch._dynamo.exc.FailOnRecompileLimitHit
    print("raised:", type(exc).__name__)
print("result:", round(total, 3))
