# The loop advances a counter that forward never reads: no guard on it.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.seen = 0

    def forward(self, x):
        return self.lin(x)


def main():
    torch.manual_seed(0)
    model = Model()
    compiled = torch.compile(model)
    x = torch.randn(2, 4)
    for _ in range(12):
        print(round(float(compiled(x).sum()), 4))
        model.seen += 1


if __name__ == "__main__":
    main()
