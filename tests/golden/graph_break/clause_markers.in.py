import torch


def f(x, y=0):
    if x:
        y = 1
    # fix-recompiles: graph-break
    elif y:
        y = 2
    # fix-recompiles: graph-break
    else:
        y = 3
    try:
        pass
    # fix-recompiles: graph-break
    except ValueError:
        pass
    # fix-recompiles: graph-break
    finally:
        pass
    return y


def g(x): return x  # fix-recompiles: graph-break
