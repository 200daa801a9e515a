# golden: runtime
# torchmetrics-style: the compiled thing is a bound method of a module
# (torch.compile(metric.update)); update() advances an int counter on self.
import torch


class MeanMetric(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(()))
        self._update_count = 0

    def update(self, preds):
        self._update_count += 1
        self.total += preds.mean()

    def compute(self):
        return self.total / self._update_count


def main():
    metric = MeanMetric()
    if hasattr(torch._dynamo.config, "allow_unspec_int_on_nn_module"):
        torch._dynamo.config.allow_unspec_int_on_nn_module = True
    update = torch.compile(metric.update)
    for i in range(12):
        update(torch.full((4,), float(i)))
    print(round(metric.compute().item(), 4))


if __name__ == "__main__":
    main()
