# An autocast region in the compiled function: the tensors the float meets
# are bf16, and a 0-d float64 tensor times them computes otherwise than a
# Python float (found by an audit: 21.719 -> 21.673): unsafe.
import math
import torch
import torch.nn.functional as F

torch.manual_seed(0)
W_img = torch.randn(32, 16) / 4
W_txt = torch.randn(32, 16) / 4


@torch.compile(backend="eager")
def clip_loss(images, texts, logit_scale):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        img = F.linear(images, W_img)
        txt = F.linear(texts, W_txt)
        logits = logit_scale * img @ txt.t()
    labels = torch.arange(logits.size(0))
    return (F.cross_entropy(logits.float(), labels) + F.cross_entropy(logits.float().t(), labels)) / 2


images = torch.randn(8, 16)
texts = torch.randn(8, 16)
for epoch in range(5):
    # temperature annealed from 1.0 towards 0.07 (CLIP's final value)
    temperature = 0.07 + (1.0 - 0.07) * math.exp(-epoch)
    loss = clip_loss(images, texts, 1.0 / temperature)
    print(f"epoch {epoch}: tau {temperature:.4f} loss {loss.item():.6f}")
