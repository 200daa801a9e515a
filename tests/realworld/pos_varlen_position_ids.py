# realworld: positive fix=none graphs=21
# Pattern: fla-org/flash-linear-attention before 16405f24 (#909, "Make varlen
# index helpers torch.compile-friendly"), fla/ops/utils/index.py:
# prepare_position_ids builds one torch.arange per packed segment in a
# comprehension over `prepare_lens(cu_seqlens).unbind()`; the fix's own
# compile-contract test compiles it with dynamic=True. torch unrolls the
# loop and guards the number of segments: every new count recompiles.
# prepare_lens, prepare_position_ids and tensor_cache verbatim.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 21
# graphs over 9 packed batches; fla's vectorised _segmented_arange: 1. No
# rewrite can make that one: FR015 reports it.
import functools
from collections import deque
from typing import Any, Callable

import torch
import torch.nn.functional as F

# --- fla/utils.py ---
FLA_DISABLE_TENSOR_CACHE = True  # the test sets fu.FLA_DISABLE_TENSOR_CACHE = True
FLA_TENSOR_CACHE_SIZE = 4


def tensor_cache(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    cached: deque = deque(maxlen=FLA_TENSOR_CACHE_SIZE)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if FLA_DISABLE_TENSOR_CACHE:
            return fn(*args, **kwargs)
        for cached_args, cached_kwargs, cached_result in cached:
            if len(args) != len(cached_args) or len(kwargs) != len(cached_kwargs):
                continue
            if all(a is b for a, b in zip(args, cached_args)) and \
                    all(k in cached_kwargs and v is cached_kwargs[k] for k, v in kwargs.items()):
                return cached_result
        result = fn(*args, **kwargs)
        cached.append((args, kwargs, result))
        return result

    return wrapper


# --- fla/ops/utils/index.py (parent of 16405f24) ---
@tensor_cache
def prepare_lens(cu_seqlens: torch.LongTensor) -> torch.LongTensor:
    return torch.diff(cu_seqlens)


@tensor_cache
def prepare_position_ids(cu_seqlens: torch.LongTensor, cu_seqlens_cpu: torch.LongTensor | None = None) -> torch.LongTensor:
    if cu_seqlens_cpu is not None:
        return torch.cat([
            torch.arange(n, dtype=cu_seqlens.dtype, device=cu_seqlens.device)
            for n in prepare_lens(cu_seqlens_cpu).unbind()  # expect: FR015
        ])
    return torch.cat([
        torch.arange(n, dtype=cu_seqlens.dtype, device=cu_seqlens.device)
        for n in prepare_lens(cu_seqlens).unbind()  # expect: FR015
    ])


# --- tests/ops/utils/test_index.py ---
def make_cu_seqlens(seqlens):
    seqlens = torch.tensor(seqlens, dtype=torch.int32)
    return torch.cat([torch.zeros(1, dtype=torch.int32), seqlens.cumsum(0)])


torch._dynamo.config.capture_dynamic_output_shape_ops = True
compiled = torch.compile(prepare_position_ids, dynamic=True)
# test_no_recompile_across_multi_segment_shapes + more packed batches of a training run
shapes = [[5, 7, 8], [10, 20, 15, 35, 20], [7, 7], [3, 5, 8, 8, 16], [1, 1, 1, 1, 1, 1, 1],
          [4, 9, 2, 6], [12, 3, 3, 3, 3, 3], [2, 2, 2, 2, 2, 2, 2, 2, 2], [6, 6, 6]]
checksum = 0
for seqlens in shapes:
    cu_seqlens = make_cu_seqlens(seqlens)
    out = compiled(cu_seqlens)
    assert torch.equal(out.long(), prepare_position_ids(cu_seqlens).long())
    checksum += int((out.long() * torch.arange(1, out.numel() + 1)).sum())
print(f"OUT {checksum}")
