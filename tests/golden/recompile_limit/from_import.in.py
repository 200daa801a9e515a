# golden: --unsafe-fixes runtime=limit_hits
from torch import compile, ones


@compile(dynamic=False)
def f(x):
    return (x + 1).sum()


def run():
    for n in range(1, 12):
        print(n, round(float(f(ones(n, 2))), 4))


run()
