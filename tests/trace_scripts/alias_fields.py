"""A state whose two fields are made one tensor by the code that feeds it
back into a compiled, vmapped step (mujoco-torch before dbf4ed8:
`d.update_(qacc=d.qacc_smooth)` when there are no constraints): the first
call saw two tensors, the next one tensor under both names, and the
duplicate-tensor guard recompiles (2 graphs; the compiled code object is
torch's vmap wrapper, `wrapped` in torch/_functorch/apis.py)."""
import dataclasses

import torch
import torch.utils._pytree as pytree


@dataclasses.dataclass
class Data:
    qvel: torch.Tensor
    qacc_smooth: torch.Tensor
    qacc: torch.Tensor

    def update_(self, **kwargs):
        for name, value in kwargs.items():
            setattr(self, name, value)
        return self


pytree.register_dataclass(Data)


def forward(scale, d):
    d.update_(qacc_smooth=d.qvel * scale)
    d.update_(qacc=d.qacc_smooth)
    return d


def step(scale, d):
    d = forward(scale, d)
    d.update_(qvel=d.qvel + 0.1 * d.qacc)
    return d


compiled = torch.compile(torch.vmap(step, in_dims=(None, 0)), backend="eager", fullgraph=True)
d = Data(qvel=torch.ones(4, 3), qacc_smooth=torch.zeros(4, 3), qacc=torch.zeros(4, 3))
total = 0.0
for _ in range(3):
    d = compiled(torch.tensor(0.5), d)
    total += float(d.qvel.sum())
print("result:", round(total, 4))
