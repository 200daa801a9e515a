import torch


def compile_whole(transformer, *, max_autotune=False):
    return torch.compile(transformer, dynamic=not max_autotune)
