# golden: runtime
import torch


def smooth(x):
    return torch.tanh(x).cumsum(0)[-1]


fast = torch.compile(
    smooth,  # the function to compile
    # options below
    mode="max-autotune-no-cudagraphs",  # tuned kernels
)
last = torch.compile(
    smooth,
    mode="default",
)
inline = torch.compile(smooth)
for n in range(1, 11):
    x = torch.linspace(-1, 1, n)
    print(n, round(float(fast(x)), 4), round(float(last(x[: n // 2 + 1])), 4), round(float(inline(x)), 4))
