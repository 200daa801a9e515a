# The helper is called in a loop, but with another module instance than the
# one compiled: the compiled module's counter never changes (no recompile).
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step_count = 0

    def forward(self, x):
        return x * (self.step_count + 1)


def advance(m):
    m.step_count += 1


def main():
    model = Model()
    shadow = Model()
    compiled = torch.compile(model)
    x = torch.ones(2)
    for _ in range(12):
        print(compiled(x).sum().item())
        advance(shadow)


if __name__ == "__main__":
    main()
