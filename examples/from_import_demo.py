"""Demo for FR001 with ``from torch import compile``: a loss evaluated on
bucketed sequence lengths.

Batches are padded to a few bucket lengths; with ``dynamic=False`` each bucket
compiles its own graph.  The loop passes tensors whose shape comes from the
loop variable, so fix-recompiles removes ``dynamic=False`` (safe fix).
"""

from torch import compile, manual_seed, randn


def smooth_l1(pred, target):
    diff = (pred - target).abs()
    return (diff.clamp(max=1.0) ** 2 * 0.5 + (diff - 1.0).clamp(min=0.0)).mean()


loss_fn = compile(smooth_l1, dynamic=False)


def main():
    manual_seed(0)
    for seq_len in (8, 12, 16, 24, 32, 48):
        pred = randn(4, seq_len)
        target = randn(4, seq_len)
        print(seq_len, round(float(loss_fn(pred, target)), 4))


if __name__ == "__main__":
    main()
