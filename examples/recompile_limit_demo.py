"""FR006 recompile-limit: a `dynamic=False` function called with 12 positions.

Under `dynamic=False` every new int is a new graph; after 8 (the recompile
limit) the function runs eager for the rest of the process.  The set of
variants is small and known (`range(12)`), and `dynamic=False` is deliberate
here, so the cure is a limit of 12:
`fix-recompiles examples/recompile_limit_demo.py --fix --unsafe-fixes`
inserts `torch._dynamo.config.cache_size_limit = max(..., 12)` before the loop
(unsafe: more compiles, and the limit is process-wide).  FR001 offers the
other cure, removing `dynamic=False`.
"""

import torch


@torch.compile(dynamic=False)  # fix-recompiles: ignore[FR001] static shapes on purpose
def shift(x, offset):
    return (x.roll(offset) * torch.arange(x.numel())).sum()


def main():
    x = torch.arange(12.0)
    for offset in range(12):
        print(offset, round(float(shift(x, offset)), 4))


if __name__ == "__main__":
    main()
