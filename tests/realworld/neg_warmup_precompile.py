# realworld: negative graphs=4
# Pattern: a bounded warm-up loop that precompiles every variant on purpose
# (KellerJordan/modded-nanogpt train_gpt.py at
# f411b3d346aa52d3504324ca93c230fd84c6c07f, line ~2276: "Sampling steps
# {warmup_steps} for warmup" runs the model at every schedule transition
# before training; pytorch-labs/gpt-fast warms up before timing), here over a
# fixed list of batch-size buckets with `dynamic=False`, then requests padded
# to those buckets only. 4 variants, under the limit.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 4
# graphs (the 4 buckets, compiled in the warm-up), none after; no limit hit.
import torch
import torch.nn as nn

BUCKETS = (1, 2, 4, 8)

torch.manual_seed(0)
model = nn.Linear(8, 4)
# static shapes per bucket (CUDA graphs need them): compile each bucket once, up front
model = torch.compile(model, dynamic=False, backend="eager")

with torch.no_grad():
    for bs in BUCKETS:
        model(torch.zeros(bs, 8))


def pad_to_bucket(x):
    bs = next(b for b in BUCKETS if b >= x.shape[0])
    return torch.cat([x, x.new_zeros(bs - x.shape[0], x.shape[1])])


requests = [torch.randn(n, 8) for n in (1, 3, 2, 7, 4, 5, 8, 1)]
with torch.no_grad():
    outs = [model(pad_to_bucket(r))[: r.shape[0]].sum().item() for r in requests]
print([round(o, 4) for o in outs])
