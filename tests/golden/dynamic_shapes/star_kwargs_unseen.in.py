import torch

from config import COMPILE_OPTIONS

# nothing reported: the dicts cannot be seen, are changed, or do not set dynamic=False
changed = {"dynamic": False}
changed["dynamic"] = None
overridden = {"dynamic": False, **COMPILE_OPTIONS}
dynamic_true = dict(dynamic=True)
twice = {"dynamic": False}
twice = {"dynamic": None}


def total(x):
    return x.sum()


a = torch.compile(total, **COMPILE_OPTIONS)
b = torch.compile(total, **changed)
c = torch.compile(total, **overridden)
d = torch.compile(total, **dynamic_true)
e = torch.compile(total, **twice)


def build(**kwargs):
    return torch.compile(total, **kwargs)
