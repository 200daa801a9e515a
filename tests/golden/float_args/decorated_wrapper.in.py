# A decorator below @torch.compile: what is compiled is its wrapper, which
# branches on the float (`if not temperature > 0.0`); wrapping the float in a
# tensor makes dynamo fail there (found by an audit). No finding: the body
# of sample_probs says nothing of how the wrapper uses its arguments.
import functools
import torch
import torch.nn.functional as F

torch.manual_seed(0)


def validate_temperature(fn):
    @functools.wraps(fn)
    def wrapper(logits, temperature):
        if not temperature > 0.0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        return fn(logits, temperature)
    return wrapper


@torch.compile(backend="eager", fullgraph=True)
@validate_temperature
def sample_probs(logits, temperature):
    return F.softmax(logits / temperature, dim=-1)


logits = torch.randn(2, 5)
for step in range(4):
    temperature = 1.0 - 0.2 * step
    print(step, sample_probs(logits, temperature).max().item())
