# realworld: positive fix=safe graphs=3
# Pattern: deepspeedai/DeepSpeed 407708cdb ("add support for tensor learning
# rate (vs scalar)", #7633): the model script builds its optimizer with a
# 0-d tensor lr so that the compiled step does not recompile when the lr
# changes, but a schedule in another module writes Python floats into the
# param groups (DeepSpeed's `update_lr`: `param_group['lr'] = lr`), and the
# float replaces the tensor: the compiled step recompiles.  The same state
# is what the interactive review leaves when one accepts an optimizer's
# tensor lr and rejects its writer's `.fill_`.  Here the schedule is
# open_clip's `scheduler.py` (verbatim, the form FR004 follows across
# modules; DeepSpeed's `zip(param_groups, lrs)` form is not followed yet).
# The cure, as DeepSpeed's: the write keeps the lr a tensor (here
# `param_group["lr"].fill_(new_lr)`, in scheduler.py only).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend):
# 3 graphs over 10 steps; fixed: 2, same output.
import torch

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
    lr=torch.tensor(5e-4),
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
print(round(sum(p.sum().item() for p in model.parameters()), 5))
