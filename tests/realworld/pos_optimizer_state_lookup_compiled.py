# realworld: positive fix=unsafe graphs=8 limit
# Pattern: Koratahiu/Advanced_Optimizers `Prodigy_adv` (adv_optm/optim/Prodigy_adv.py),
# torch.compile support of PR #6 (877bc8b9e8d27c4ad7c2a659f6f3663b22e60326,
# "compile"): `step()` calls `step_parameter(p, group)` for every parameter,
# which calls `self._compiled_step_parameter = torch.compile(self.__step_parameter,
# fullgraph=True)`; inside, `state = self.state[p]` looks up the parameter's
# state and `state['step'] += 1` counts a Python int up. Dynamo resolves the
# key while tracing (`self.state[list(dict.keys(self.state))[1]]['step'] == 0`):
# one graph per parameter, and the recompile limit on a real model; a call
# with another parameter of a shape already compiled reuses a graph that reads
# and writes the first parameter's `exp_avg`/`exp_avg_sq` (silently wrong
# values). The project's merged fix (V2.0, 5a1a7fa97524c7887391088b44b1c7864fffa1c2)
# looks the state up in the eager `step_parameter`, passes it in, and counts
# the step there (tests/realworld/neg_optimizer_state_passed_in.py).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs and the recompile limit over 3 steps of 8 parameters of one shape
# (the project's V2.0 form: 1 graph, the same output; FR017's fix, the entry
# passed in by the caller, looked up only when `p.grad is not None` as the
# function's early return says, the counter left inside: 3; unsafe, since the
# compiled method is called through `self._compiled_step_parameter`, which a
# subclass may bind to a function that takes no `state=`).
import torch
import torch.nn as nn


class Prodigy_adv(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0, d0: float = 1e-6, slice_p: int = 11):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "d": d0, "d0": d0, "d_max": d0, "d_numerator": 0.0, "k": 0, "slice_p": slice_p}
        super().__init__(params, defaults)
        self.device = torch.device("cpu")
        self.init_step()
        self._compiled_step_parameter = None

    def init_step(self):
        """Resets accumulators and calculates dlr for the upcoming step."""
        self.d_denom = torch.zeros(1, device=self.device)
        g_group = self.param_groups[0]
        self.beta1, self.beta2_default = g_group['betas']
        self.beta3 = self.beta2_default ** 0.5
        self.d = g_group['d']
        self.dlr = self.d * g_group['lr']
        self.d_numerator = torch.tensor(g_group.get('d_numerator', 0.0) * self.beta3, device=self.device)
        for group in self.param_groups:
            for i, p in enumerate(group['params']):
                self.init_state(p, group)

    def init_state(self, p, group):
        state = self.state[p]
        if 'step' in state:
            return
        state['step'] = 0
        state['exp_avg'] = torch.zeros_like(p)
        state['exp_avg_sq'] = torch.zeros_like(p)
        state['s'] = torch.zeros_like(p.flatten()[::group['slice_p']]).detach()
        state['p0'] = p.flatten()[::group['slice_p']].detach().clone()

    def __step_parameter(self, p: torch.Tensor, group: dict):
        if p.grad is None:
            return
        grad = p.grad
        state = self.state[p]  # expect: FR017
        beta2 = self.beta2_default
        exp_avg_sq = state['exp_avg_sq']
        exp_avg = state['exp_avg']
        exp_avg.mul_(self.beta1).add_(grad, alpha=self.d * (1.0 - self.beta1))
        update = exp_avg.clone()
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad.conj(), value=self.d * self.d * (1.0 - beta2))
        denom = exp_avg_sq.sqrt()
        update.div_(denom.add_(self.d * group['eps']))
        update.mul_(self.dlr)
        # --- Accumulate Prodigy stats ---
        d0, slice_p = group['d0'], group['slice_p']
        s, p0 = state['s'], state['p0']
        grad_flat = grad.flatten().float()
        p_flat = p.data.flatten().float()
        self.d_numerator.add_((self.d / d0) * self.dlr * torch.dot(grad_flat[::slice_p], p0.data - p_flat[::slice_p]))
        s.mul_(self.beta3).add_(grad_flat[::slice_p], alpha=(self.d / d0) * self.dlr)
        self.d_denom.add_(s.abs().sum())
        if group["weight_decay"] != 0:
            p.data.add_(p.data, alpha=-group["weight_decay"] * self.dlr)
        p.data.add_(-update)
        state['step'] += 1

    @torch.no_grad()
    def step_parameter(self, p: torch.Tensor, group: dict, i=None):
        if self._compiled_step_parameter is None:
            self.__step_parameter(p, group)
        else:
            self._compiled_step_parameter(p, group)

    def compile(self, *args, **kwargs):
        self._compiled_step_parameter = torch.compile(self.__step_parameter, *args, **kwargs)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for i, p in enumerate(group['params']):
                self.step_parameter(p, group, i)
        self.calculate_d()
        self.init_step()

    def calculate_d(self):
        g_group = self.param_groups[0]
        global_d_numerator = self.d_numerator.item()
        global_d_denom = self.d_denom.item()
        d_max = g_group['d_max']
        if global_d_denom > 0:
            d_hat = global_d_numerator / global_d_denom
            if self.d == g_group['d0']:
                self.d = max(self.d, d_hat)
            d_max = max(d_max, d_hat)
            self.d = min(d_max, self.d * 2.0)
        for group in self.param_groups:
            group['d_numerator'] = global_d_numerator
            group['d'] = self.d
            group['d_max'] = d_max
            group['k'] += 1


torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(16, 16, bias=False) for _ in range(8)])  # one shape: only the per-parameter state differs
opt = Prodigy_adv(model.parameters(), lr=1.0)
opt.compile()  # the project passes fullgraph=True (the probe's eager reference cannot run it)
x, y = torch.randn(32, 16), torch.randn(32, 16)
for _ in range(3):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"OUT {sum(float(p.detach().double().sum()) for p in model.parameters()):.6f}")
print("STEPS", [opt.state[p]['step'] for p in model.parameters()])
