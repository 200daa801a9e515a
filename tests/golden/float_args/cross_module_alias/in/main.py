# golden: runtime
from torch import linspace

import kernels as k

x = linspace(-1, 1, 6)
for step in range(6):
    print(step, round(float(k.leaky(x, slope=0.01 * (step + 1))), 5))
