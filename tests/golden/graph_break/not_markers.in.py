import torch


@torch.compile
def fn(x):
    y = x + 1
    # fix-recompiles: graph break
    y = y * 2
    # fix-recompiles: graph-break please
    y = y - 1  # fix-recompiles: graph-break
    # FIX-RECOMPILES: GRAPH-BREAK
    # note: fix-recompiles: graph-break
    text = """
    # fix-recompiles: graph-break
    """
    # fix-recompiles: graph-breaks
    return y, text
