"""Demo for FR002 (graph-break): a large graph with a small tail that
recompiles.

The feature stack is expensive and never changes shape (``dynamic=False`` is
deliberate here); the tail divides by ``cfg.temperature``, a Python float
read from a config object, and under ``dynamic=False`` every new temperature
recompiles the *whole* function.  The
marker comment asks fix-recompiles to split the graph there
(``torch._dynamo.graph_break()``), so only the small tail recompiles and the
feature stack is compiled once.
"""

import torch


class Config:
    temperature = 1.0


cfg = Config()
torch.manual_seed(0)
WEIGHTS = [torch.randn(32, 32) / 6 for _ in range(8)]


# static shapes on purpose: the feature stack is tuned for this exact size
@torch.compile(dynamic=False)
def predict(x):
    h = x
    for w in WEIGHTS:
        h = torch.tanh(h @ w) + h
    # fix-recompiles: graph-break
    return torch.softmax(h.sum(0) / cfg.temperature, dim=0).max()


def main():
    x = torch.randn(4, 32)
    for temperature in (2.0, 1.5, 1.0, 0.7, 0.5):
        cfg.temperature = temperature
        print(temperature, round(float(predict(x)), 4))


if __name__ == "__main__":
    main()
