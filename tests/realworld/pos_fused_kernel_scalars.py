# realworld: positive fix=unsafe graphs=8 limit
# Pattern: karpathy/nanochat (nanochat/adamw.py at
# 22a71aa3d30b50d6e7659ca0e8bcad9f3b7bfd98, "fuse adamw into a single torch
# compiled kernel"): `@torch.compile(dynamic=False, fullgraph=True) def
# adamw_step_fused(p, grad, exp_avg, exp_avg_sq, step_t, lr_t, ...)`, which
# the commit feeds 0-d tensors "to avoid recompilation when hyperparameter
# values change". Here the kernel is fed what the loop has before that
# (issue 28): the Python int `state['step']`, counted up each step, and the
# scheduled float `group['lr']` (betas, eps and weight decay constant). Under
# dynamic=False every step is a new graph: the recompile limit. Wrapping the
# lr alone cures nothing (the step still changes); FR003 wraps the two
# together, as float64 0-d tensors (the int held exactly, its arithmetic with
# the Python betas done in float64 as before). `fullgraph=True` dropped: it
# turns the limit into an error, and the probe's eager reference refuses it.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs and the limit over 10 steps x 2 params; fixed: 2 (one per parameter
# shape), same output.
import torch
from torch import Tensor


@torch.compile(dynamic=False)
def adamw_step_fused(p: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step: int, lr: float, beta1: float, beta2: float, eps: float, wd: float) -> None:
    # Weight decay (decoupled, applied before the update)
    p.mul_(1 - lr * wd)
    # Update running averages (lerp_ is cleaner and fuses well)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad.square(), 1 - beta2)
    # Bias corrections
    bias1 = 1 - beta1 ** step
    bias2 = 1 - beta2 ** step
    # Compute update and apply
    denom = (exp_avg_sq / bias2).sqrt() + eps
    step_size = lr / bias1
    p.add_(exp_avg / denom * -step_size)


class DistAdamW(torch.optim.Optimizer):
    def __init__(self, param_groups, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.01):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(param_groups, defaults)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr = group['lr']
            beta1, beta2 = group['betas']
            eps = group['eps']
            wd = group['weight_decay']
            for p in group['params']:
                state = self.state[p]
                if not state:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p)
                    state['exp_avg_sq'] = torch.zeros_like(p)
                exp_avg = state['exp_avg']
                exp_avg_sq = state['exp_avg_sq']
                state['step'] += 1
                adamw_step_fused(p, p.grad, exp_avg, exp_avg_sq, state['step'], lr, beta1, beta2, eps, wd)  # expect: FR003


torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
optimizer = DistAdamW(model.parameters(), lr=0.02, betas=(0.8, 0.95), weight_decay=0.1)
initial_lr = 0.02
num_iterations = 10
for it in range(num_iterations):
    lrm = 1.0 - it / num_iterations  # linear warmdown
    for group in optimizer.param_groups:
        group['lr'] = initial_lr * lrm
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    optimizer.step()
    model.zero_grad(set_to_none=True)
print(f"{sum(p.double().abs().sum().item() for p in model.parameters()):.6f}")
