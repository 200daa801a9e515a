"""A simulator's state fed back to a compiled step, one of whose fields the
step makes with another dtype than the initial state had (mujoco-torch
before a0eaa36: `make_data` builds the contact ids as int64, and
`Contact.zero()`, run at every step of a model without contacts, writes int32
ones over them).  The second call fails the dtype guard on the field and
compiles again.  The cure makes the field with the initial dtype where the
step makes it (unsafe: the readers of that tensor get another dtype)."""
import dataclasses

import torch
import torch.utils._pytree as pytree

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


@dataclasses.dataclass
class Contact:
    dist: torch.Tensor
    geom1: torch.Tensor
    geom: torch.Tensor

    @classmethod
    def zero(cls, shape=(0,)):
        return Contact(
            dist=torch.zeros(shape),
            geom1=torch.zeros(shape, dtype=torch.int32),
            geom=torch.zeros(shape + (2,), dtype=torch.int32),
        )


@dataclasses.dataclass
class Data:
    qpos: torch.Tensor
    contact: Contact


pytree.register_dataclass(Contact)
pytree.register_dataclass(Data)


def make_data(nq):
    contact = Contact(
        dist=torch.zeros((0,)),
        geom1=torch.full((0,), -1, dtype=torch.int64),
        geom=torch.full((0, 2), -1, dtype=torch.int64),
    )
    return Data(qpos=torch.zeros(nq), contact=contact)


def step(d):
    active = (d.contact.geom1 >= 0).sum() + (d.contact.geom >= 0).sum()  # the collision pass reads the contacts
    qpos = d.qpos * 0.5 + 1.0 + active
    return Data(qpos=qpos, contact=Contact.zero())  # a model without contacts


compiled_step = torch.compile(step, backend=counting_backend)
d = make_data(3)
total = 0.0
for _ in range(3):
    d = compiled_step(d)
    total += float(d.qpos.sum()) + d.contact.geom1.shape[0]
print(f"result: {total:.4f}")
print(f"graphs: {GRAPHS}")
