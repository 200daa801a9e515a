import torch

from modules import TransformerDecoder, TransformerSelfAttentionLayer


def compile_model(model: TransformerDecoder, backend: str = "inductor") -> None:
    """Compile the layers one by one (per-layer compile: faster compile times)."""
    for m in reversed(list(model.modules())):
        if isinstance(m, TransformerSelfAttentionLayer):
            m.compile(backend=backend)
