# realworld: positive fix=safe graphs=3
# Pattern: mlfoundations/open_clip before 3650e7b ("Use tensor based LR w/
# native AdamW for task compile"), its two entry points: `main.py` steps the
# AdamW inside the compiled train step, `legacy_main.py` steps its own
# eagerly, and both schedule it with `scheduler.cosine_lr` (verbatim), whose
# closure calls `assign_learning_rate`.  `.fill_` there would fail on the
# legacy optimizer's float lr, so the project's cure (3650e7b) made the write
# tensor-aware: `if isinstance(lr, torch.Tensor): lr.fill_(new_lr) else:
# param_group["lr"] = new_lr`, with a tensor lr for the compiled path only.
# FR004 writes the same: the constructor's `lr=torch.tensor(...)` here, the
# tensor-aware write in the scheduler (the legacy optimizer keeps its float).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend):
# 3 graphs over 10 steps; fixed: 2, the same output (both entry points).
import torch

from legacy_main import legacy_main
from scheduler import cosine_lr

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 1))
exclude = lambda n, p: p.ndim < 2 or "bn" in n or "ln" in n or "bias" in n or "logit_scale" in n
include = lambda n, p: not exclude(n, p)
named_parameters = list(model.named_parameters())
gain_or_bias_params = [p for n, p in named_parameters if exclude(n, p) and p.requires_grad]
rest_params = [p for n, p in named_parameters if include(n, p) and p.requires_grad]
optimizer = torch.optim.AdamW(
    [
        {"params": gain_or_bias_params, "weight_decay": 0.0},
        {"params": rest_params, "weight_decay": 0.2},
    ],
    lr=5e-4,  # expect: FR004
    betas=(0.9, 0.98),
    eps=1e-6,
)
total_steps = 10
scheduler = cosine_lr(optimizer, 5e-4, 3, total_steps)


@torch.compile(backend="eager")
def train_step(batch):
    optimizer.zero_grad()
    total_loss = model(batch).pow(2).mean()
    total_loss.backward()
    optimizer.step()
    return total_loss


batches = [torch.randn(16, 8) for _ in range(total_steps)]
for step in range(total_steps):
    scheduler(step)
    loss = train_step(batches[step])
print(round(sum(p.sum().item() for p in model.parameters()), 5), round(legacy_main(batches), 5))
