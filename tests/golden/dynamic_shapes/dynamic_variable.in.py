# golden: runtime
# A module-level name bound once to a literal is read as that literal
# (issue 28): `dynamic=flag` with `flag = False` is `dynamic=False`, and the
# loop passes 10 shapes. Measured (torch 2.13 CPU): 9 graphs and the limit
# (8) before; 1 after removing it.
import torch

flag = False


@torch.compile(dynamic=flag)
def step(x):
    return (x * 2).sum()


for n in range(1, 11):
    print(round(float(step(torch.ones(n))), 4))
