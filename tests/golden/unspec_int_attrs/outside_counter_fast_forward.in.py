# The loop only fast-forwards the counter; the compiled model is called once
# after it: one value per call, nothing to report by default.
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
    for _ in range(10):
        model.step_count += 1
    print(compiled(torch.ones(2)).sum().item())


if __name__ == "__main__":
    main()
