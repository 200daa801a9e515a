"""A metric's compiled update reaches a method that keeps a window of the
last inputs in list attributes (torchrec before eb2d656b: the compiled
metric update calls `AUCMetricComputation.update`, which appends each
batch to `self.predictions` / `self.labels` and trims the lists to the
window).  torch guards the lists' lengths: every call compiles again,
8 graphs and the limit over 12 calls.  `@torch.compiler.disable` on
`update` (the project's fix): 1 graph."""
import functools

import torch


class WindowComputation(torch.nn.Module):
    def __init__(self, window: int):
        super().__init__()
        self._window = window
        self.predictions = []
        self.labels = []

    def update(self, predictions, labels):
        self.predictions.append(predictions.float())
        self.labels.append(labels.float())
        while sum(p.numel() for p in self.predictions) > self._window:
            self.predictions.pop(0)
            self.labels.pop(0)

    def compute(self):
        p, y = torch.cat(self.predictions), torch.cat(self.labels)
        return ((p > 0.5).float() == y).float().mean()


class Metric(torch.nn.Module):
    def __init__(self, window: int):
        super().__init__()
        self.computation = WindowComputation(window)

    def update(self, predictions, labels):
        predictions = torch.sigmoid(predictions * 2.0).clamp(0.01, 0.99)
        labels = labels.clamp(0, 1)
        self.computation.update(predictions, labels)


def checked(fn):
    @functools.wraps(fn)
    def inner(ref, *args):
        return fn(ref, *args)

    return inner


torch.manual_seed(0)
metric = Metric(window=1000)
compiled_update = torch.compile(checked(Metric.update), backend="eager")
total = 0.0
for step in range(12):
    compiled_update(metric, torch.randn(10), (torch.rand(10) > 0.5).float())
    total += float(metric.computation.compute())
print("result:", round(total, 4))
