"""Warm-up under torch.inference_mode(), then serving under torch.no_grad()
(HabanaAI/vllm-fork before #1691): the warm-up's inputs are inference
tensors, the loop's are not, so the compiled code recompiles on its input's
dispatch keys (`ADInplaceOrView` in one set only).  Reported with the cure:
one mode for both."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


@torch.compile(backend=counting_backend)
def decode(input_ids, weight):
    return torch.nn.functional.embedding(input_ids, weight).sum(-1)


weight = torch.randn(32, 4)
total = 0.0
with torch.inference_mode():  # warm-up
    total += float(decode(torch.arange(8), weight).sum())
with torch.no_grad():  # the worker loop
    for step in range(3):
        ids = torch.empty(8, dtype=torch.long)
        ids.copy_(torch.arange(8) + step)
        total += float(decode(ids, weight).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
