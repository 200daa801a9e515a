"""Ops whose output size depends on the data (kornia's conv_quad_interp3d
before 7d73de442: `torch.where(mask)` on NMS maxima, a boolean index, in a
compiled module): with capture_dynamic_output_shape_ops off each breaks the
graph, and the frames resumed after the break see tensors of the count the
data gave, a new count every call: a size recompile per resumed frame (and
the 0/1 specialisation for an empty mask).  Torch's hint, the first half of
kornia's fix: `torch._dynamo.config.capture_dynamic_output_shape_ops = True`
(the ops stay in one graph with unbacked sizes)."""
import torch


def refine(response, threshold):
    bc, h, w = torch.where(response > threshold)
    inner = (h > 0) & (w > 0)
    h = h[inner]
    w = w[inner]
    bc = bc[inner]
    centre = response[bc, h, w]
    left = response[bc, h, w - 1]
    return (centre - left).sum() + h.float().sum()


class Refiner(torch.nn.Module):
    def forward(self, response, threshold):
        return refine(response, threshold)


torch.manual_seed(0)
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
model = torch.compile(Refiner(), backend="eager")
total = 0.0
for step in range(5):
    response = torch.randn(2, 12, 12)
    total += float(model(response, 1.5))
print(f"result: {total:.4f}")
