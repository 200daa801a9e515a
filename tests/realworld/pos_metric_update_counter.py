# realworld: positive fix=safe graphs=8 limit
# Pattern: torchmetrics' `Metric.update()` advances the int module attribute
# `_update_count` on every call, and the test compiled the bound method
# (`torch.compile(metric.update, fullgraph=True)`): meta-pytorch/torchrec
# PR #4338 "Fix test_xauc_compile recompilation-limit failure". Dynamo treats
# `self` as an nn.Module and guards the int (`self._update_count == N`), so
# every update recompiles. Cure (what the PR did):
# `torch._dynamo.config.allow_unspec_int_on_nn_module = True` before compiling
# (FR005's safe fix: 8 graphs + limit -> 2, same output).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 updates).
import torch


class MeanMetric(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(()))
        self._update_count = 0

    def update(self, preds):
        self._update_count += 1
        self.total += preds.mean()

    def compute(self):
        return self.total / self._update_count


metric = MeanMetric()
update = torch.compile(metric.update)  # expect: FR005
for i in range(12):
    update(torch.full((4,), float(i)))
print(round(metric.compute().item(), 4))
