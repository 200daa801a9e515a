# golden: runtime
# The training loop advances the counter through a helper it passes the
# module to (`advance(model)`), and calls the compiled model in the same
# loop: measured, 8 graphs + limit; with the flag, 2.
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
    compiled = torch.compile(model)
    x = torch.ones(2)
    for _ in range(12):
        print(compiled(x).sum().item())
        advance(model)


if __name__ == "__main__":
    main()
