import torch


@torch.compile
def fn(x, n, flag, name, nothing):
    return x * n


for i in range(5):
    fn(torch.ones(3), i, True, "a", None)
    fn(torch.ones(3), 3 * i + 1, False, "b", None)
