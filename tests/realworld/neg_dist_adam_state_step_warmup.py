# realworld: negative graphs=2
# Pattern: KellerJordan/modded-nanogpt's DistAdam (train_gpt_medium.py at the
# pinned commit): each parameter's state is made in __init__ as
# `dict(step=0, exp_avg=..., exp_avg_sq=...)` and the `@torch.compile`d step
# counts `state["step"] += 1` up, a Python int; the first real step after the
# first compile recompiles once (then automatic dynamic). The script warms
# its kernels up before the timed run (a few optimizer steps, then the
# initial state loaded back), which absorbs that recompile: FR022 reports a
# parameter's state count only with --unproven (precision: judged on this
# repo). Dist communication dropped; the update math verbatim.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs (warm-up 3 steps, reset, 10 steps).
import copy

import torch


class DistAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__([dict(params=list(params))], defaults)
        for group in self.param_groups:
            for p in group["params"]:
                exp_avg = torch.zeros_like(p)
                self.state[p] = dict(step=0, exp_avg=exp_avg, exp_avg_sq=torch.zeros_like(exp_avg))

    @torch.compile
    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            eps = group["eps"]
            wd = group["weight_decay"]
            for param in group["params"]:
                lr = group["lr"] * getattr(param, "lr_mul", 1.0)
                state = self.state[param]
                exp_avg = state["exp_avg"]
                exp_avg_sq = state["exp_avg_sq"]
                state["step"] += 1  # allow: FR022 (with --unproven: a warm-up absorbs it here)
                t = state["step"]
                g_slice = param.grad
                exp_avg.mul_(beta1).add_(g_slice, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(g_slice, g_slice, value=1 - beta2)
                bias1 = 1 - beta1**t
                bias2 = 1 - beta2**t
                denom = exp_avg_sq.sqrt().add_(eps)
                step_size = lr * (bias2**0.5 / bias1)
                update = exp_avg.div(denom).mul_(step_size)
                mask = (update * param) > 0
                eff_weight_decay = lr * wd * getattr(param, "wd_mul", 1.0)
                update.addcmul_(param, mask, value=eff_weight_decay * lr)
                param.add_(other=update, alpha=-1.0)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2))
optimizer = DistAdam(model.parameters())
initial_state = dict(model=copy.deepcopy(model.state_dict()), optimizer=copy.deepcopy(optimizer.state_dict()))
for _ in range(3):  # warm the kernels up
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    model.zero_grad(set_to_none=False)
model.load_state_dict(initial_state["model"])
optimizer.load_state_dict(initial_state["optimizer"])
for _ in range(10):
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    model.zero_grad(set_to_none=False)
print(round(sum(p.sum().item() for p in model.parameters()), 4))
