# golden: runtime --target-torch 2.13
# A trainer keeps the model and its compiled wrapper on self; its loop calls
# the compiled model and advances the model's step counter, which forward
# reads for a warm-up factor (measured: 8 graphs + limit; with the flag, 2).
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.step_count = 0

    def forward(self, x):
        return self.lin(x) * min(1.0, (self.step_count + 1) / 10)


class Trainer:
    def __init__(self):
        torch.manual_seed(0)
        self.model = Model()
        self.compiled = torch.compile(self.model)

    def fit(self, x, steps):
        for _ in range(steps):
            print(round(float(self.compiled(x).sum()), 4))
            self.model.step_count += 1


def main():
    Trainer().fit(torch.randn(2, 4), 12)


if __name__ == "__main__":
    main()
