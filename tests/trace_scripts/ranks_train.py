"""Two ranks (gloo, CPU) run one compiled step with dynamic=False on
batches whose length differs per step and per rank: each rank recompiles
until the limit.  Run under torchrun; the trace folder holds one file per
rank."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


@torch.compile(backend="eager", dynamic=False)
def step(x, scale):
    return (x * scale).sum()


total = 0.0
for n in range(4, 14):
    x = torch.ones(n + rank)
    v = step(x, 0.5)
    dist.all_reduce(v)
    total += float(v)
if rank == 0:
    print("result:", total)
dist.destroy_process_group()
