# golden: runtime --target-torch 2.13
# The training loop advances the module's step counter between calls
# (outside the compiled region); forward reads it for a warm-up factor.
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.step_count = 0
        self.warmup = 10

    def forward(self, x):
        return self.lin(x) * min(1.0, (self.step_count + 1) / self.warmup)


def main():
    torch.manual_seed(0)
    model = Model()
    torch._dynamo.config.allow_unspec_int_on_nn_module = True
    compiled = torch.compile(model)
    x = torch.randn(2, 4)
    for _ in range(12):
        y = compiled(x)
        print(round(float(y.sum()), 4))
        model.step_count += 1


if __name__ == "__main__":
    main()
