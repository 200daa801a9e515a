"""Liger-Kernel before ef420c3d: only the loss math of each chunk is
compiled, `torch.compile(functools.partial(...))`, and it selects tokens by
the sign of their advantage with a boolean index.  The index breaks the graph
(capture_dynamic_output_shape_ops is off) and the frames resumed after it
get a new token count per chunk: recompiles.  The setting for this compiled
callable only, `torch._dynamo.config.patch(...)` around it, keeps the index
in the graph (unbacked sizes)."""
import functools

import torch


def sapo_loss_fn(ratio, temperature):
    return torch.sigmoid(temperature * (ratio - 1.0)) * 4.0 / temperature


def compute_loss(logps, old_logps, advantages, temperature_pos, temperature_neg):
    ratio = torch.exp(logps - old_logps)
    positive = advantages > 0
    loss = torch.empty_like(ratio)
    loss[positive] = sapo_loss_fn(ratio[positive], temperature_pos)
    loss[~positive] = sapo_loss_fn(ratio[~positive], temperature_neg)
    return -(loss * advantages).mean()


def fused_loss(chunks, compiled=True):
    loss_fn = functools.partial(compute_loss, temperature_pos=1.0, temperature_neg=1.05)
    # backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
    compiled_loss = torch.compile(loss_fn, backend="eager") if compiled else loss_fn
    total = 0.0
    for logps, old_logps, advantages in chunks:
        total += float(compiled_loss(logps, old_logps, advantages))
    return total


torch.manual_seed(0)
chunks = [(torch.randn(16), torch.randn(16), torch.randn(16)) for _ in range(5)]
print(f"result: {fused_loss(chunks):.4f}")
