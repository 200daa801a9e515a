"""Demo for FR001 (dynamic-shapes): ``dynamic=False`` on a function fed
sequences of growing length.

``dynamic=False`` turns off automatic dynamic shapes, so every new sequence
length is a new graph, and after the recompile limit (8) the function quietly
runs eager.  The loop below builds its inputs from the loop variable, so
``fix-recompiles examples/dynamic_shapes_demo.py --fix`` removes
``dynamic=False`` as a safe fix: torch then compiles one static graph and one
dynamic graph that serves every later length.
"""

import torch as th


@th.compile(dynamic=False)
def attention_pool(tokens, query):
    scores = tokens @ query / tokens.shape[-1] ** 0.5
    probs = th.softmax(scores, dim=0)
    return (probs.unsqueeze(1) * tokens).sum(0)


def main():
    th.manual_seed(0)
    query = th.randn(16)
    for length in range(4, 16):
        tokens = th.randn(length, 16)
        pooled = attention_pool(tokens, query)
        print(length, round(float(pooled.norm()), 4))


if __name__ == "__main__":
    main()
