# realworld: negative graphs=3
# Pattern: pytorch/ao low-bit optimizers after #812 (commit
# 1e7f132e387a0e301176d5afa1830329c126b747): "for a given model, the number of
# different argument combinations to single_param_adam() is fixed. thus, it is
# safe to disable cache limit" -- `with torch._dynamo.utils.disable_cache_limit():
# torch.compile(single_param_adam, fullgraph=True, dynamic=False)(p, grad,
# step, ..., group["lr"], ...)` with the lr already a 0-d tensor.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs (one per parameter shape) over 6 steps x 3 params; no limit hit.
import torch
from torch import Tensor


def single_param_adam(p, grad, step, exp_avg, exp_avg_sq, lr, beta1, beta2, weight_decay, eps):
    p.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad.square(), 1 - beta2)
    bias1 = 1 - beta1**step
    bias2 = 1 - beta2**step
    p.sub_(lr * (exp_avg / bias1) / ((exp_avg_sq / bias2).sqrt() + eps))


class LowBitAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        defaults = dict(lr=torch.tensor(lr), betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        # for a given model, the number of different argument combinations to single_param_adam() is fixed.
        with torch._dynamo.utils.disable_cache_limit():
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = torch.tensor(0.0)
                        state["exp_avg"] = torch.zeros_like(p)
                        state["exp_avg_sq"] = torch.zeros_like(p)
                    state["step"] += 1
                    if not isinstance(group["lr"], Tensor):
                        raise RuntimeError("use optim.param_groups[0]['lr'].fill_(new_lr)")
                    torch.compile(single_param_adam, fullgraph=True, dynamic=False, backend="eager")(
                        p,
                        p.grad,
                        state["step"],
                        state["exp_avg"],
                        state["exp_avg_sq"],
                        group["lr"],
                        group["betas"][0],
                        group["betas"][1],
                        group["weight_decay"],
                        group["eps"],
                    )


torch.manual_seed(0)
params = [torch.nn.Parameter(torch.randn(s)) for s in ((4, 4), (8,), (4, 2))]
opt = LowBitAdam(params, lr=1e-2)
for step in range(6):
    for p in params:
        p.grad = torch.ones_like(p)
    opt.param_groups[0]["lr"].fill_(1e-2 * (1 - step / 6))
    opt.step()
print([round(p.sum().item(), 4) for p in params])
