"""A str argument of the compiled function itself (a mode): each value is a
graph, and few values are bounded.  No frame of compiled code breaks at a
call of it, so disable-string-from-trace leaves it alone (a disable there
would compile nothing); the table says when it is bounded."""
import torch


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager")
def activate(x, mode: str):
    if mode == "relu":
        return torch.relu(x)
    if mode == "gelu":
        return torch.nn.functional.gelu(x)
    return torch.nn.functional.silu(x)


torch.manual_seed(0)
x = torch.randn(4, 8)
total = 0.0
for mode in ("relu", "gelu", "silu", "relu"):
    total += float(activate(x, mode).sum())
print(f"result: {total:.4f}")
