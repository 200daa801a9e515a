"""One compiled forward shared by norms whose weights differ in size
(unsloth-zoo before #1003: `Gemma4RMSNorm.forward` compiled once, at class
level, for every norm of the model).  The input's last dim is tied to the
weight's size by `out * self.weight`, and a parameter's size stays static
whatever `dynamic=` says (`force_parameter_static_shapes`): each width is
another graph, though only the first guard, on the input, fails.  The cure
sets `force_parameter_static_shapes=False` for that compiled function only
(a `torch._dynamo.config.patch` around its compile)."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))

    def forward(self, hidden_states):
        out = hidden_states * torch.rsqrt(hidden_states.pow(2).mean(-1, keepdim=True) + self.eps)
        return out * self.weight


RMSNorm.forward = torch.compile(RMSNorm.forward, backend=counting_backend, dynamic=True)

torch.manual_seed(0)
# hidden size, then the q/k norms of two head dims, as in a model's layers
norms = [RMSNorm(dim) for dim in (64, 16, 32, 48, 24)]
total = 0.0
for step in range(2):
    for norm in norms:
        total += norm(torch.randn(2, 5 + step, norm.weight.shape[0])).sum().item()
print(f"GRAPHS {GRAPHS}")
print(f"result: {total:.4f}")
