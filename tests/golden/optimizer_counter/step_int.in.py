# FR022 reports it and offers no fix: the file stays unchanged.
# Pattern: timm's LAMB before 29993ffc (huggingface/pytorch-image-models
# PR #2704) keeps the step count a Python int in each param group
# (`group['step'] += 1`) and reads it into the bias corrections; timm's
# tests compile `optimizer.step`. torch guards the int it read
# (`args[0].param_groups[0]['step'] == 1`), the step writes the next one:
# the next step recompiles once, then automatic dynamic makes it symbolic.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs over 6 steps (the empty state's first step, then the count).
# Cure by hand: a 0-d tensor step counted in place (timm's fix); from the
# trace, `run --fix` names it in torch.compiler.config.dynamic_sources.
import math

import torch
from torch.optim import Optimizer


class Lamb(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            if "step" in group:
                group["step"] += 1
            else:
                group["step"] = 1
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


def train(steps=6):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = Lamb(model.parameters())
    compiled_step = torch.compile(optimizer.step)
    for _ in range(steps):
        model(torch.randn(16, 8)).sum().backward()
        compiled_step()
        optimizer.zero_grad(set_to_none=False)
    return sum(p.sum().item() for p in model.parameters())


print(round(train(), 4))
