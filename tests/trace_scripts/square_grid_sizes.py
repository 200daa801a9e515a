"""A ViT's patch tokens back to their square grid (`side =
math.isqrt(n)`), compiled with `dynamic=False` and `fullgraph=True`, at four
resolutions: 4 graphs, and it runs.  Removing `dynamic=False` (FR001) makes
the token count symbolic at its first change, and `math.isqrt` of a
symbolic size cannot be traced: the rerun fails (fullgraph=True), so the
removal is taken back; `dynamic=True` fails the same way from the first
call, so that round is taken back too, and the file stays as it was."""
import math

import torch


def tokens_to_grid(x):
    side = math.isqrt(x.shape[1])
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], side, side)


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
to_grid = torch.compile(tokens_to_grid, backend="eager", dynamic=False, fullgraph=True)

total = 0.0
for side in (2, 3, 4, 5):
    tokens = torch.arange(side * side * 3, dtype=torch.float32).reshape(1, side * side, 3)
    total += float(to_grid(tokens)[..., -1, -1].sum())
print(f"result: {total}")
