# realworld: positive fix=safe graphs=8 limit target=2.13
# Pattern: the training loop advances a step counter kept on the model
# (`model.step_count += 1`, outside the compiled region) and forward reads it
# for a warm-up factor: pytorch/pytorch#140464 "int property on NN module is
# always specialized, even if it is mutated outside of compiled region".
# Dynamo guards the module's int attribute (`self.step_count == N`), so every
# step recompiles. Cure: `torch._dynamo.config.allow_unspec_int_on_nn_module
# = True` before compiling (FR005's safe fix: 8 graphs + limit -> 2, same
# output), or keep the counter in a buffer tensor.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 steps). Analysed for torch 2.13
# (`target=2.13`): before 2.13 inductor computes this `min(1.0, (step + 1) /
# warmup)` as 0.0 once the int is dynamic (2.9.1, 2.11.0), so there the flag
# is unsafe.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.step_count = 0
        self.warmup = 10

    def forward(self, x):
        return self.lin(x) * min(1.0, (self.step_count + 1) / self.warmup)


torch.manual_seed(0)
model = Model()
compiled = torch.compile(model)  # expect: FR005
x = torch.randn(2, 4)
for _ in range(12):
    y = compiled(x)
    print(round(float(y.sum()), 4))
    model.step_count += 1
