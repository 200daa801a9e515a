# golden: --unproven
# golden: runtime
# The same loop with --unproven: the flag is written, and at runtime the
# helper's calls compile 2 graphs instead of 8 + the limit.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.step_count = 0

    def forward(self, x):
        return x * (self.step_count + 1)


def train_step(fn, x):
    return fn(x).sum().item()


def main():
    model = Model()
    compiled = torch.compile(model)
    x = torch.ones(2)
    for _ in range(12):
        print(train_step(compiled, x))
        model.step_count += 1


if __name__ == "__main__":
    main()
