# realworld: positive fix=safe graphs=2
# Pattern: issue 12, form 1 (`group["lr"] * getattr(p, "lr_mul", 1.0)`). The
# expression is KellerJordan/modded-nanogpt's (train_gpt_medium.py at
# f411b3d346aa52d3504324ca93c230fd84c6c07f, line ~805, with parameters tagged
# `self.attn_gate.weight.lr_mul = 0.1`); there it is computed inside a compiled
# `step` (see neg_compiled_step_float_lr.py). Here, as in the issue's
# reproduction, the per-parameter float is passed to a compiled Adam kernel
# while the schedule rewrites `group["lr"]` every step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 10 steps; hand-fixed (lr as a float64 0-d tensor at the call):
# 1, same output.
import torch


@torch.compile(backend="eager")
def adam_kernel(p, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps):
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.lerp_(grad * grad, 1 - beta2)
    p.sub_(exp_avg / (exp_avg_sq.sqrt() + eps) * lr)


class DistAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.99), eps=1e-8):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                state = self.state[param]
                if not state:
                    state["exp_avg"] = torch.zeros_like(param)
                    state["exp_avg_sq"] = torch.zeros_like(param)
                lr = group["lr"] * getattr(param, "lr_mul", 1.0)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                adam_kernel(param, param.grad, exp_avg, exp_avg_sq, lr, beta1, beta2, group["eps"])  # expect: FR003


torch.manual_seed(0)
gate = torch.nn.Parameter(torch.randn(4, 4))
gate.lr_mul = 0.1
opt = DistAdam([gate], lr=1e-2)
for step in range(10):
    gate.grad = torch.full_like(gate, 0.5)
    for group in opt.param_groups:
        group["lr"] = 1e-2 * min(1.0, (step + 1) / 5)
    opt.step()
print(round(gate.sum().item(), 4))
