"""Blocks compiled one by one by a trainer method that gets the model as a
parameter (kohya-ss/musubi-tuner before fe044b6: `compile_transformer(self,
args, transformer)` loops over `transformer.transformer_blocks`), with
`dynamic=args.compile_dynamic`, a store_true flag: `--compile` alone compiles
with dynamic=False, so every new bucket resolution recompiles each block's
shared forward (3 resolutions: 3 graphs; the fix `or None`: 2)."""
import argparse

import torch
from torch import nn


class TransformerBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Linear(dim, dim)

    def forward(self, hidden_states):
        return hidden_states + self.ff(self.norm(hidden_states))


class Transformer(nn.Module):
    def __init__(self, dim=8, depth=2):
        super().__init__()
        self.transformer_blocks = nn.ModuleList([TransformerBlock(dim) for _ in range(depth)])

    def forward(self, hidden_states):
        for block in self.transformer_blocks:
            hidden_states = block(hidden_states)
        return hidden_states


class Trainer:
    def compile_transformer(self, args, transformer):
        for i, block in enumerate(transformer.transformer_blocks):
            block = torch.compile(block, backend="eager", dynamic=args.compile_dynamic)
            transformer.transformer_blocks[i] = block
        return transformer


parser = argparse.ArgumentParser()
parser.add_argument("--compile", action="store_true")
parser.add_argument("--compile_dynamic", action="store_true")
args = parser.parse_args(["--compile"])
torch.manual_seed(0)
transformer = Trainer().compile_transformer(args, Transformer())
total = 0.0
with torch.no_grad():
    for seq_len in (16, 24, 32):
        total += float(transformer(torch.randn(2, seq_len, 8)).sum())
print("result:", round(total, 4))
