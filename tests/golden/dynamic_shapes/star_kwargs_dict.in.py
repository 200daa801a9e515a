import torch

# both forms are reported at the `dynamic` entry, with no fix
opts = dict(dynamic=False, fullgraph=True)
options = {"dynamic": False, "mode": "default"}


def total(x):
    return x.sum()


fast = torch.compile(total, **opts)


@torch.compile(**options)
def double(x):
    return x * 2


def main():
    local = {"fullgraph": False, "dynamic": False}
    g = torch.compile(total, **local)
    for n in range(1, 4):
        print(n, float(fast(torch.ones(n))), float(double(torch.ones(n)).sum()), float(g(torch.ones(n))))
