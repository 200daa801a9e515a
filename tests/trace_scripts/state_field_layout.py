"""A compiled step that returns its state with a field written, fed back
by the caller (mujoco-torch's `d = step(m, d)` before b8e4fa6): the field's
new value takes its layout from a transposed operand (`torch.where` on a
mask built transposed), the state first passed was contiguous, so the
second call fails the stride guard on `args[0].com` (2 graphs).  The cure,
the project's own: `.contiguous()` where the step writes the field."""
import dataclasses

import torch
import torch.utils._pytree as pytree


@dataclasses.dataclass
class State:
    pos: torch.Tensor
    com: torch.Tensor


pytree.register_dataclass(State)


def com_pos(d: State, heavy: torch.Tensor) -> State:
    cond = heavy.tile((3, 1)).T  # (n, 3), transposed layout
    com = torch.where(cond, d.pos, d.pos * 0.5 + d.com)
    return dataclasses.replace(d, com=com)


def step(d: State, heavy: torch.Tensor) -> State:
    d = dataclasses.replace(d, pos=d.pos + 0.1)
    return com_pos(d, heavy)


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
compiled_step = torch.compile(step, backend="eager", fullgraph=True)
heavy = torch.tensor([True, False, True, False, False])
d = State(pos=torch.zeros(5, 3), com=torch.zeros(5, 3))
for _ in range(4):
    d = compiled_step(d, heavy)
print(f"result: {float(d.com.sum() + d.pos.sum()):.4f}")
