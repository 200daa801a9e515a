# golden: runtime --target-torch 2.7
import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


if __name__ == "__main__":
    model = torch.compile(Counter())
    for _ in range(12):
        print(round(float(model(torch.ones(2)).sum()), 4))
