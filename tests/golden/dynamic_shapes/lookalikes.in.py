import re

import torch

pattern = re.compile(r"\d+", re.ASCII)


def compile(fn, dynamic=False):
    """A user helper that happens to be called compile."""
    return fn


twice = compile(lambda x: x * 2, dynamic=False)
for n in range(1, 5):
    print(n, float(twice(torch.ones(n)).sum()), bool(pattern.match(str(n))))
