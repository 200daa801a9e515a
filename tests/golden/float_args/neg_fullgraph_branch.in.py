# A helper of the compiled function branches on the float, compiled with
# fullgraph=True: with a 0-d tensor the branch is data-dependent and the
# compile raises, so the finding has no fix: unchanged.
import torch


def sample(logits, temperature):
    if temperature > 0.0:
        return torch.softmax(logits / temperature, dim=-1)
    return torch.softmax(logits, dim=-1)


@torch.compile(fullgraph=True)
def next_token(logits, temperature):
    return sample(logits, temperature).argmax(dim=-1)


logits = torch.randn(1, 8)
for temperature in (0.8, 0.7, 1.0):
    next_token(logits, temperature)
