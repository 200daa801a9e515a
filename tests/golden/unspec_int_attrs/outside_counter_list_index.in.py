# The counter picks an element of a Python list: every value is a different
# constant even with the flag, so it is reported without a fix.
import torch

SCALES = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01]


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step_count = 0

    def forward(self, x):
        return x * SCALES[self.step_count]


def main():
    model = Model()
    compiled = torch.compile(model)
    x = torch.ones(2)
    for _ in range(12):
        print(compiled(x).sum().item())
        model.step_count += 1


if __name__ == "__main__":
    main()
