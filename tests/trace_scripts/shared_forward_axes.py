# One compiled forward shared by every instance of a norm class (unsloth-zoo
# #1003: Gemma4RMSNorm.forward compiled at class level): the cache holds the
# product of the input rank, the per-instance bool `self.with_scale` and the
# weight size, 8 graphs and the limit.  Each compile's recompile_reason names
# one cache entry's failure (a rank mismatch); the recompile_reasons
# artifacts name every entry's, which show all three axes.
import torch


class RMSNorm(torch.nn.Module):
    def __init__(self, dim, with_scale=True, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.with_scale = with_scale
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        x32 = x.float()
        out = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.with_scale:
            out = out * self.weight.float()
        return out.type_as(x)


RMSNorm.forward = torch.compile(RMSNorm.forward, backend="eager")

norms = [RMSNorm(64, True), RMSNorm(64, False), RMSNorm(128, True), RMSNorm(256, True), RMSNorm(256, False), RMSNorm(768, True)]
for step in range(2):
    for norm in norms:
        d = norm.weight.shape[0]
        norm(torch.ones(2, 3, d))
        norm(torch.ones(2, 2, 3, d))
