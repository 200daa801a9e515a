# realworld: negative graphs=1
# Pattern: karpathy/nanochat (nanochat/optim.py at
# 92d63d4e8bb4df75c3b71618f31ddde2378b2bcd: `@torch.compile(dynamic=False,
# fullgraph=True) def adamw_step_fused(p, grad, exp_avg, exp_avg_sq, step_t,
# lr_t, ...)` with "0-D CPU tensors to avoid torch.compile recompilation when
# values change", refreshed with `.fill_(group['lr'])`): the hyperparameters
# are already 0-d tensors, so the schedule does not recompile.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 10 steps while the lr changes every step.
import torch
from torch import Tensor


@torch.compile(dynamic=False, fullgraph=True, backend="eager")
def adamw_step_fused(p: Tensor, grad: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor, step_t: Tensor, lr_t: Tensor, beta1_t: Tensor, beta2_t: Tensor, eps_t: Tensor, wd_t: Tensor) -> None:
    p.mul_(1 - lr_t * wd_t)
    exp_avg.lerp_(grad, 1 - beta1_t)
    exp_avg_sq.lerp_(grad.square(), 1 - beta2_t)
    bias1 = 1 - beta1_t**step_t
    bias2 = 1 - beta2_t**step_t
    p.sub_(lr_t * (exp_avg / bias1) / ((exp_avg_sq / bias2).sqrt() + eps_t))


class FusedAdamW(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        # 0-D CPU tensors to avoid torch.compile recompilation when values change
        self._step_t = torch.tensor(0.0, dtype=torch.float32, device="cpu")
        self._lr_t = torch.tensor(0.0, dtype=torch.float32, device="cpu")
        self._beta1_t = torch.tensor(0.0, dtype=torch.float32, device="cpu")
        self._beta2_t = torch.tensor(0.0, dtype=torch.float32, device="cpu")
        self._eps_t = torch.tensor(0.0, dtype=torch.float32, device="cpu")
        self._wd_t = torch.tensor(0.0, dtype=torch.float32, device="cpu")

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                self._step_t.fill_(state["step"])
                self._lr_t.fill_(group["lr"])
                self._beta1_t.fill_(group["betas"][0])
                self._beta2_t.fill_(group["betas"][1])
                self._eps_t.fill_(group["eps"])
                self._wd_t.fill_(group["weight_decay"])
                adamw_step_fused(p, p.grad, state["exp_avg"], state["exp_avg_sq"], self._step_t, self._lr_t, self._beta1_t, self._beta2_t, self._eps_t, self._wd_t)


torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(8, 8))
opt = FusedAdamW([w], lr=1e-2)
for step in range(10):
    w.grad = torch.ones_like(w)
    for group in opt.param_groups:
        group["lr"] = 1e-2 * (1 - step / 10)
    opt.step()
print(round(w.sum().item(), 4))
