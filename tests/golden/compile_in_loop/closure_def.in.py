# Reported, no fix: a def in the loop body reads the loop variable.
import torch


def run(x, scales):
    for s in scales:
        @torch.compile
        def step(t):
            return t * s

        x = step(x)
    return x
