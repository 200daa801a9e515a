import torch


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


with torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True):
    model = torch.compile(Counter())
    print(round(float(model(torch.ones(2)).sum()), 4))
