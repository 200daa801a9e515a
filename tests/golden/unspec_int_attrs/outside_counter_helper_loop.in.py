# golden: runtime
# The loop advances the counter and calls the compiled model through a
# helper of this module (`train_step(compiled, x)` calls `fn(x)`): the same
# evidence as a direct call (measured: 8 graphs + limit -> 2 with the flag).
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
