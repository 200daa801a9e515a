"""The negative twin of rank_and_size: a compiled function fed tensors of
several ranks whose body is not elementwise (a softmax over the last dim:
each element depends on its row).  Flattening the input would mix the rows,
so no wrapper is written; the rank is reported with its cure."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Scores:
    @staticmethod
    @torch.compile(backend=counting_backend)
    def normalize(x):
        x = torch.abs(x)
        x[x <= 0.25] = 0.0
        return torch.softmax(x, -1)


torch.manual_seed(0)
total = 0.0
for shape in ((16,), (4, 16), (2, 4, 16), (12,)):
    x = torch.randn(*shape)
    total += float((Scores.normalize(x) * torch.arange(x.numel()).reshape(shape)).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
