# The counter changes once, outside any loop: one recompile, not one per
# call; nothing to report.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step_count = 0

    def forward(self, x):
        return x * (self.step_count + 1)


def main():
    model = Model()
    compiled = torch.compile(model)
    x = torch.ones(2)
    for _ in range(4):
        print(compiled(x).sum().item())
    model.step_count += 1
    print(compiled(x).sum().item())


if __name__ == "__main__":
    main()
