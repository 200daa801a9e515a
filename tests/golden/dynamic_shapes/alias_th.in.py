# golden: runtime
import torch as th


@th.compile(dynamic=False)
def norm(x):
    return (x - x.mean()).abs().sum()


for n in range(2, 12):
    print(n, round(float(norm(th.arange(n, dtype=th.float32))), 4))
