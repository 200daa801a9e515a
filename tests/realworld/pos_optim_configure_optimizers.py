# realworld: positive fix=safe graphs=2
# Pattern: karpathy/nanoGPT (model.py `GPT.configure_optimizers`, train.py):
# the optimizer is built by a model method from param groups made there
# (`optim_groups = [{"params": decay_params, "weight_decay": ...}, ...]`,
# `torch.optim.AdamW(optim_groups, lr=learning_rate, ...)`), returned, and its
# lr set every iteration from `get_lr(it)` through the param groups; the
# step runs compiled. One file here (nanoGPT splits model.py and train.py;
# the cross-file form, pos_optim_configure_cross_module, is reported, not fixed).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 20 steps; FR004's fix (`lr=torch.tensor(learning_rate)`, the
# write `.fill_(lr)`): 1, same output.
import math
import torch
import torch.nn as nn


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        return self.lin(x).pow(2).mean()

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)  # expect: FR004
        return optimizer


def get_lr(it, warmup_iters=10, lr_decay_iters=100, learning_rate=6e-4, min_lr=6e-5):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


torch.manual_seed(0)
model = GPT()
optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), "cpu")


@torch.compile
def opt_step():
    optimizer.step()


for it in range(20):
    lr = get_lr(it)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr
    loss = model(torch.randn(4, 8))
    loss.backward()
    opt_step()
    optimizer.zero_grad()
print(f"OUT {float(model.lin.weight.detach().sum()):.6f}")
