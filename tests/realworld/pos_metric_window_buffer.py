# realworld: positive fix=unsafe graphs=8 limit
# Pattern: pytorch/torchrec's rec metrics before #3647 ("disable pt2 compile
# for RecMetricComputation::_aggregate_window_state"): with
# enable_pt2_compile the metric's update is a compiled bound method, and it
# appends each batch's state to a window buffer (a deque of maxlen 1000)
# through a helper method. dynamo guards the deque's length
# (`len(self._window_buffers['neg_labels']) == 7` in torchrec's trace), so
# every update recompiles.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (12 updates). Cure by hand (torchrec's):
# decorate the method that appends with @torch.compiler.disable (1 graph), or
# keep the window outside the compiled code. FR013 writes torchrec's
# decorator on the method that appends: unsafe (that method runs eagerly from
# the first call); `run --fix` applies it, safe, where the trace shows the
# length recompiling (8 -> 1 in benchmarks/trace_recall.py).
import collections

import torch


class NEMetric(torch.nn.Module):
    def __init__(self, window_size=1000):
        super().__init__()
        self.register_buffer("cross_entropy_sum", torch.zeros(1))
        self._window = collections.deque(maxlen=1000)

    def update(self, predictions, labels):
        ce = torch.nn.functional.binary_cross_entropy_with_logits(predictions, labels, reduction="sum")
        self.cross_entropy_sum += ce.detach()
        self._aggregate_window_state(ce.detach())
        return ce

    def _aggregate_window_state(self, value):
        self._window.append(value)  # expect: FR013

    def compute(self):
        return self.cross_entropy_sum / max(len(self._window), 1)


torch.manual_seed(0)
metric = NEMetric()
update = torch.compile(metric.update)
for step in range(12):
    predictions = torch.randn(16)
    labels = torch.randint(0, 2, (16,)).float()
    update(predictions, labels)
print("ne", round(float(metric.compute()), 4))
