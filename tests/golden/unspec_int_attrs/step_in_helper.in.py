# golden: runtime
import torch
import torch.nn as nn


class Stepper(nn.Module):
    """The counter is advanced in a helper that forward calls."""

    def __init__(self, dim):
        super().__init__()
        self.step = 0
        self.scale = 0.5  # a float: not an int attribute
        self.proj = nn.Linear(dim, dim)

    def advance(self):
        self.step = self.step + 1

    def forward(self, x):
        self.advance()
        return self.proj(x) * self.scale + self.step


def main():
    torch.manual_seed(0)
    net = Stepper(3)

    # compile once, call many times
    net = torch.compile(net)
    x = torch.ones(1, 3)
    for _ in range(12):
        print(round(float(net(x).sum()), 4))


if __name__ == "__main__":
    main()
