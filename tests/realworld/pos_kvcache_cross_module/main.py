# realworld: positive fix=safe graphs=8 limit
# Pattern: pytorch/torchtune before PR #1663 ("Fixing recompiles in KV-cache +
# compile", commit bae4b276d82f12d5bbc72138bfd40bb5b73f0c01), in its layout:
# torchtune/training/_compile.py compiles the layers one by one (`for m in
# reversed(list(model.modules())): if isinstance(m,
# TransformerSelfAttentionLayer): m.compile(backend=backend)`), the layer class
# imported through the package's re-exports (modules.py here); the layer's
# forward calls its attention module (attention.py), whose forward calls
# `self.kv_cache.update(k, v)`, and `KVCache.update` (kv_cache.py) does
# `self.size += seq_len`: an int attribute of a submodule three modules away,
# changed every decode step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (prefill + 11 decode steps, 2 layers sharing
# one code object); hand-fixed (`torch._dynamo.config.allow_unspec_int_on_nn_module
# = True` in compile_model, before the loop): 2 graphs, same output.
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
