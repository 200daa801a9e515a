# realworld: negative graphs=2
# Pattern: pytorch/torchtune after PR #1663 ("Fixing recompiles in KV-cache +
# compile", commit bae4b276d82f12d5bbc72138bfd40bb5b73f0c01), in its layout:
# the layers are compiled one by one (_compile.py), the layer's attention
# (attention.py) calls `self.kv_cache.update(k, v)`, but `KVCache` (kv_cache.py)
# keeps the next position in a buffer (`self.cache_pos.add_(seq_len)`); its
# int attributes (`batch_size`, `max_seq_len`) never change after `__init__`.
# Nothing to fix: no int attribute of a compiled module changes between calls.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs (the prefill's sequence length, then one dynamic graph for decoding),
# no recompile-limit hit.
import torch

from _compile import compile_model
from modules import TransformerDecoder

torch.manual_seed(0)
model = TransformerDecoder(vocab_size=32, embed_dim=16, num_heads=2, num_layers=2, max_seq_len=32)
model.setup_caches(batch_size=1)
compile_model(model, backend="eager")

tokens = torch.tensor([[1, 5, 7, 2]])
generated = []
with torch.no_grad():
    logits = model(tokens)
    for _ in range(11):
        nxt = logits[:, -1].argmax(-1, keepdim=True)
        generated.append(int(nxt))
        logits = model(nxt)
print(generated)
