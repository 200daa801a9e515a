# No fix: `flag` is bound twice (a function rebinds it through `global`), so
# its value at the compile is not a literal the tool can read; reported with
# --unproven only.
import torch

flag = False


def configure(static):
    global flag
    flag = static


@torch.compile(dynamic=flag)
def step(x):
    return (x * 2).sum()


for n in range(1, 11):
    print(round(float(step(torch.ones(n))), 4))
