# realworld: positive fix=safe graphs=3
# Pattern: mlfoundations/open_clip before 3650e7b / 0b07760 ("Tensorize
# optimizer learning rates for step compile"): `open_clip_train/scheduler.py`
# (here verbatim) builds the schedule as a closure, `cosine_lr(optimizer,
# ...)` returning `_lr_adjuster(step)`, which calls
# `assign_learning_rate(optimizer, lr)`: a float lr written into the param
# groups of an AdamW that the `--torchcompile-strategy step` train step
# steps inside the compiled code.  Every new lr recompiles.  The project's
# cure: a 0-d tensor lr, filled in place by the helper.  Here the train step
# is compiled in this file (open_clip builds it in `train.py` through a
# factory and a dataclass, which the tool does not follow yet).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend):
# 3 graphs over 10 steps; fixed in both files (`lr=torch.tensor(...)`,
# `param_group["lr"].fill_(new_lr)`): 2, same output.
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
print(round(sum(p.sum().item() for p in model.parameters()), 5))
