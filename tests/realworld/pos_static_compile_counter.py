# realworld: positive fix=none graphs=8 limit
# Pattern: a module that counts its calls in an int attribute (a step
# counter read in forward, as in pytorch#140464), compiled with
# dynamic=False. FR005's flag (allow_unspec_int_on_nn_module) alone does not
# help: dynamic=False keeps the int static whatever the flag says.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 calls); with the flag added, 8 graphs
# still; without dynamic=False and with the flag, 2. FR005 reports, with no
# fix (removing dynamic=False is FR001's judgement: it may be deliberate).
import torch


class StepScaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.step = 0

    def forward(self, x):
        self.step += 1
        return self.lin(x) * (1.0 + 0.1 * self.step)


torch.manual_seed(0)
model = torch.compile(StepScaled(), dynamic=False)  # expect: FR005
total = 0.0
for i in range(12):
    total += float(model(torch.ones(2, 4)).sum())
print("total", round(total, 4))
