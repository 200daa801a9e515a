# Reported, no fix. Measured (torch 2.13 CPU, 12 iterations, a new backend
# object each iteration): 8 graphs, then the recompile limit.
import functools

import torch


def my_backend(gm, example_inputs, tag):
    return gm.forward


def g(x):
    return x * 2


x = torch.ones(3)
for step in range(12):
    f = torch.compile(g, backend=functools.partial(my_backend, tag="a"))
    f(x)
