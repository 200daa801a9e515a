# realworld: negative graphs=2
# Pattern: mlfoundations/open_clip's own fix (3650e7b, "Use tensor based LR
# w/ native AdamW for task compile", kept by 0b07760): `scheduler.py` (here
# verbatim) makes `assign_learning_rate` tensor-aware (`lr.fill_(new_lr)`
# when the lr is a tensor) and adds `tensorize_learning_rate(optimizer,
# device)`, which `main.py` calls right after building the optimizer.  The
# twin of pos_cosine_lr_closure_cross_module with the project's cure.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps (3 before the cure), same output.
import torch

from scheduler import cosine_lr, tensorize_learning_rate

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
    lr=5e-4,
    betas=(0.9, 0.98),
    eps=1e-6,
)
tensorize_learning_rate(optimizer, torch.device("cpu"))
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
