# An optimizer that keeps its step count as a Python int in the param group
# (timm's Lamb before 29993ffc: group['step'] += 1), stepped by a compiled
# opt.step: the int changes every step (one recompile, then automatic dynamic
# makes it symbolic), and the state dict, empty on the first step, fails a
# truthiness guard once.  3 graphs, no limit: bounded.
import math

import torch


class Lamb(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            group["step"] = group.get("step", 0) + 1
            bias_correction1 = 1 - beta1 ** group["step"]
            bias_correction2 = 1 - beta2 ** group["step"]
            for p in group["params"]:
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                p.add_(exp_avg / bias_correction1 / denom, alpha=-group["lr"])


def train(steps=8):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = Lamb(model.parameters())
    opt.step = torch.compile(opt.step, backend="eager")
    for i in range(steps):
        model(torch.randn(16, 8)).sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    return sum(p.sum().item() for p in model.parameters())


print("result:", round(train(), 4))
