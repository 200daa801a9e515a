"""A compiled, vmapped step that returns its state with a field written,
fed back by the caller (mujoco-torch's `d = step(m, d)` before f81eea1): the
field's new value is a new tensor that depends on no input
(`torch.zeros(nv, ...)`), which `torch.vmap` returns broadcast (batch stride
0), while the state first passed was a real batch, so the second call fails
the stride guard on `args[0].force` (2 graphs).  `.contiguous()` on the
value does not help (it is contiguous per sample); the cure makes it
`torch.zeros_like(d.force, ...)`: the same values, laid out as the state."""
import dataclasses

import torch
import torch.utils._pytree as pytree


@dataclasses.dataclass
class State:
    pos: torch.Tensor
    force: torch.Tensor


pytree.register_dataclass(State)


def passive(d: State) -> State:
    force = torch.zeros(3, dtype=d.pos.dtype, device=d.pos.device)
    return dataclasses.replace(d, force=force)


def step(d: State) -> State:
    d = dataclasses.replace(d, pos=d.pos * 0.5 + d.force + 1.0)
    return passive(d)


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
compiled_step = torch.compile(torch.vmap(step), backend="eager", fullgraph=True)
d = State(pos=torch.arange(12.0).reshape(4, 3), force=torch.ones(4, 3))
for _ in range(4):
    d = compiled_step(d)
print(f"result: {float(d.pos.sum() + d.force.sum()):.4f}")
