# golden: --unsafe-fixes
# golden: runtime
# torchrec before #3647: the compiled metric update reaches a helper that
# appends each batch's value to a window deque (maxlen 1000); torch guards
# the deque's length, so every update recompiles (8 graphs and the limit
# over 12 updates). torchrec's fix: the helper runs eagerly.
import collections

import torch


class NEMetric(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cross_entropy_sum", torch.zeros(1))
        self._window = collections.deque(maxlen=1000)

    def update(self, predictions, labels):
        ce = torch.nn.functional.binary_cross_entropy_with_logits(predictions, labels, reduction="sum")
        self.cross_entropy_sum += ce.detach()
        self._aggregate_window_state(ce.detach())
        return ce

    @torch.compiler.disable
    def _aggregate_window_state(self, value):
        self._window.append(value)


torch.manual_seed(0)
metric = NEMetric()
update = torch.compile(metric.update)
for step in range(12):
    update(torch.randn(16), torch.randint(0, 2, (16,)).float())
print("ne", round(float(metric.cross_entropy_sum / len(metric._window)), 4))
