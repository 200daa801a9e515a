# golden: runtime
from torch import nn, ones


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.n -= 1
        return x.cos() * self.n


m = Counter()
m.compile()
for _ in range(12):
    print(round(float(m(ones(2)).sum()), 4))
