# diffusion_speed._compile_repeated_blocks (trimmed)
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


def _compile_repeated_blocks(transformer, *, max_autotune=False, cache_active=False, offload_active=False):
    kwargs = {
        "fullgraph": not (cache_active or offload_active),
        "dynamic": not max_autotune,
        "backend": counting_backend,
    }
    dynamo_cfg = getattr(getattr(torch, "_dynamo", None), "config", None)
    if dynamo_cfg is not None:
        for _limit_attr in ("recompile_limit", "cache_size_limit"):  # name varies by torch ver
            if hasattr(dynamo_cfg, _limit_attr):
                setattr(dynamo_cfg, _limit_attr, max(getattr(dynamo_cfg, _limit_attr) or 0, 64))
    transformer.compile_repeated_blocks(**kwargs)
    return True

