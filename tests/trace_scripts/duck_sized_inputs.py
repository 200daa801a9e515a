"""Duck sizing under dynamic=True (llm-compressor's MSE observer before
aa5f4b0): the compiled chunk gets a layer's weight rows and the per-row
ranges; on the first call the weight's width happens to equal the number
of rows (64 and 64), the two sizes share one symbol, and torch guards their
equality ("duck sizing added this equality").  The next layer (width 32,
48 rows) recompiles.  Torch's hint, and the cure from the trace:
`torch.fx.experimental._config.use_duck_shape = False` (a mark of the
weight's dim before the call would do as well, but a view is passed)."""
import torch


# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
@torch.compile(backend="eager", dynamic=True)
def _compute_chunk(observed, min_val, max_val):
    scale = (max_val - min_val).clamp(min=1e-6) / 255
    q = torch.round(observed / scale.unsqueeze(-1)).clamp(-128, 127)
    return ((q * scale.unsqueeze(-1) - observed) ** 2).sum()


torch.manual_seed(0)
total = 0.0
for rows, width in ((64, 64), (48, 32), (96, 16), (40, 24)):
    weight = torch.randn(rows, width)
    # a view of the weight, as flatten_for_calibration passes (no name a mark could take)
    total += float(_compute_chunk(weight.view(rows, width), weight.amin(dim=1), weight.amax(dim=1)))
print(f"result: {total:.4f}")
