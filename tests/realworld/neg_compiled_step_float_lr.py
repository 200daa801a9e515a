# realworld: negative graphs=2
# Pattern: KellerJordan/modded-nanogpt (train_gpt_medium.py at
# f411b3d346aa52d3504324ca93c230fd84c6c07f: `class DistAdam(torch.optim.Optimizer)`
# with `@torch.compile` on `def step(self)`, which reads `lr = group['lr'] *
# getattr(param, "lr_mul", 1.0)`; the training loop sets `group["lr"] =
# group["initial_lr"] * step_lr` every step, line ~1571): the compiled step of
# a custom optimizer reads a float lr that the loop rewrites every step, next
# to an int step counter kept in the optimizer state. On torch 2.13 the lr
# costs no graph of its own: the counter changes on the second call, dynamo
# recompiles once with both values dynamic, and that is all. Wrapping the lr
# in a tensor changes nothing, so a finding would be noise. (On torch <= 2.5
# floats were exact-value guards; the tool targets the installed torch.)
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps with the lr changing every step; also 2 with a constant
# lr, and 2 with a 0-d tensor lr refreshed by `.fill_()`.
import torch


class DistAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.99), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = dict(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))

    @torch.compile(backend="eager")
    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                state = self.state[param]
                state["step"] += 1
                lr = group["lr"] * getattr(param, "lr_mul", 1.0)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(param.grad, 1 - beta1)
                exp_avg_sq.lerp_(param.grad.square(), 1 - beta2)
                step_size = lr * ((1 - beta2 ** state["step"]) ** 0.5 / (1 - beta1 ** state["step"]))
                param.sub_(exp_avg / (exp_avg_sq.sqrt() + group["eps"]) * step_size)


torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(4, 4))
opt = DistAdam([w], lr=1e-2)
for group in opt.param_groups:
    group["initial_lr"] = group["lr"]
for step in range(10):
    w.grad = torch.full_like(w, 0.5)
    step_lr = 1 - step / 10
    for group in opt.param_groups:
        group["lr"] = group["initial_lr"] * step_lr
    opt.step()
print(round(w.sum().item(), 4))
