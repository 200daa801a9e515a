# Reproduction of hao-ai-lab/FastVideo BEFORE 37927079f ("[perf] MiniMax-H3: share compiled VSA graph
# across layers"): fastvideo/attention/backends/video_sparse_attn_h3.py. Every MiniMax-H3 block owns a
# `MiniMaxH3VSAImpl` whose `forward` (one code object for all blocks) reads the Python int
# `self.layer_idx` (`self.layer_idx in attn_metadata.dense_layers`) while Dynamo captures the regional
# fullgraph: one graph per block.
#
# Compile site: as in the commit's test (fastvideo/tests/attention/test_vsa_h3_sm100a_route.py),
# `torch.compile(impl.forward, backend="eager", fullgraph=True)` for each block's implementation after
# `prepare_for_regional_compile`. Trimmed: the CUDA kernels (fastvideo_kernel sm_100a / Triton) are
# replaced by a CPU reference of `block_sparse_attn_sm100a_from_mask` (dense SDPA with the tile mask
# expanded to tokens); the probe recorder, env probe, tile-256 and gate_compress branches and the
# metadata builder's tile geometry are dropped (metadata built with an identity tile layout).
import math
import types
from dataclasses import dataclass, field

import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):  # FastVideo test: backend="eager"
    global GRAPHS
    GRAPHS += 1
    return gm.forward


_TILE_ELEMS = 64


def compute_topk(sparsity: float, num_blocks: int) -> int:
    """Blocks to keep for a sparsity level, clamped to [1, num_blocks]."""
    return max(1, min(math.ceil((1 - sparsity) * num_blocks), num_blocks))


def layer_idx_from_prefix(prefix: str, default: int | None = None) -> int:
    import re
    match = re.search(r"blocks\.(\d+)", prefix)
    if match:
        return int(match.group(1))
    if default is None:
        raise ValueError(f"cannot parse a layer index from attention prefix {prefix!r}")
    return default


# CPU stand-in for fastvideo_kernel.block_sparse_attn_sm100a (fake-backed custom op on GPU)
def _block_sparse_attn_sm100a_from_mask(q, k, v, block_map, variable_block_sizes):
    tile = q.shape[-2] // block_map.shape[-1]  # uniform 64-token tiles here
    token_mask = block_map.repeat_interleave(tile, dim=-2).repeat_interleave(tile, dim=-1)
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=token_mask)
    return out, None


_sm100a = types.SimpleNamespace(block_sparse_attn_sm100a_from_mask=_block_sparse_attn_sm100a_from_mask)


@dataclass
class AttentionMetadata:
    current_timestep: int
    VSA_sparsity: float = field(default=0.0, kw_only=True)


@dataclass
class MiniMaxH3VSAMetadata(AttentionMetadata):
    total_seq_length: int
    num_prefix_tiles: int
    num_video_tiles: int
    exempt: bool
    variable_block_sizes: torch.Tensor
    untile_combined_index: torch.Tensor
    tile_elems: int = _TILE_ELEMS
    # layers forced dense regardless of sparsity (probe-guided opt-outs)
    dense_layers: tuple[int, ...] = ()


def _pool_tiles(x: torch.Tensor, variable_block_sizes: torch.Tensor, tile_elems: int = _TILE_ELEMS) -> torch.Tensor:
    """fp32 mean over each tile_elems-token tile. x: [B, S_pad, H, D] -> [B, H, n_tiles, D]."""
    batch, seq_len, heads, dim = x.shape
    n_tiles = seq_len // tile_elems
    pooled = x.view(batch, n_tiles, tile_elems, heads, dim).sum(dim=2, dtype=torch.float32)
    pooled = pooled / variable_block_sizes.view(1, -1, 1, 1)
    return pooled.permute(0, 2, 1, 3)


def _build_block_mask(
    scores: torch.Tensor,
    num_prefix_tiles: int,
    num_video_tiles: int,
    VSA_sparsity: float,
    exempt: bool,
) -> torch.Tensor:
    """scores: [B, H, n_tiles, n_tiles] -> bool mask, same shape."""
    n_tiles = scores.shape[-1]
    k_vid = compute_topk(VSA_sparsity, num_video_tiles)
    if k_vid == num_video_tiles:
        return torch.ones_like(scores, dtype=torch.bool)
    mask = torch.zeros_like(scores, dtype=torch.bool)
    if exempt or num_prefix_tiles == 0:
        video_cols = scores[..., num_prefix_tiles:]
        idx = video_cols.topk(k_vid, dim=-1).indices + num_prefix_tiles
        mask.scatter_(-1, idx, True)
        mask[..., :num_prefix_tiles] = True
    else:
        k_total = min(k_vid + num_prefix_tiles, n_tiles)
        idx = scores.topk(k_total, dim=-1).indices
        mask.scatter_(-1, idx, True)
    mask[:, :, :num_prefix_tiles, :] = True
    return mask


class MiniMaxH3VSAImpl:  # (AttentionImpl)

    def __init__(self, num_heads, head_size, causal, softmax_scale, num_kv_heads=None, prefix="",
                 **extra_impl_args) -> None:
        self.prefix = prefix
        self.layer_idx = layer_idx_from_prefix(prefix, default=-1)
        self.head_size = head_size
        self._regional_compile_sm100a_enabled: bool | None = None

    def prepare_for_regional_compile(self, device: torch.device) -> None:
        """Resolve the inference-only sm_100a route before fullgraph capture (probe trimmed:
        FASTVIDEO_VSA_SM100A=1 and the kernel reported supported)."""
        self._regional_compile_sm100a_enabled = True

    def forward(  # type: ignore[override]
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        gate_compress: torch.Tensor | None,
        attn_metadata: MiniMaxH3VSAMetadata,
    ) -> torch.Tensor:
        tile_elems = attn_metadata.tile_elems

        compiling = torch.compiler.is_compiling()

        # probe-guided per-layer opt-out: diffuse layers run dense (all-True
        # mask) while the rest keep the configured sparsity
        layer_sparsity = 0.0 if self.layer_idx in attn_metadata.dense_layers else attn_metadata.VSA_sparsity
        probe_dir = None  # if compiling else probe_enabled()

        scores = None
        if layer_sparsity > 0.0 or gate_compress is not None or probe_dir is not None:
            q_pooled = _pool_tiles(query, attn_metadata.variable_block_sizes, tile_elems)
            k_pooled = _pool_tiles(key, attn_metadata.variable_block_sizes, tile_elems)
            scores = torch.matmul(q_pooled, k_pooled.transpose(-2, -1)) / (query.shape[-1]**0.5)

        if scores is None:
            n_tiles = attn_metadata.variable_block_sizes.numel()
            mask = torch.ones(query.shape[0], query.shape[2], n_tiles, n_tiles, dtype=torch.bool, device=query.device)
        else:
            mask = _build_block_mask(
                scores,
                attn_metadata.num_prefix_tiles,
                attn_metadata.num_video_tiles,
                layer_sparsity,
                attn_metadata.exempt,
            )

        # tile_elems == 64: native 64-token path, BHSD layout
        q_bhsd = query.transpose(1, 2).contiguous()
        k_bhsd = key.transpose(1, 2).contiguous()
        v_bhsd = value.transpose(1, 2).contiguous()

        grad_mode = torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad)
        use_sm100a = False
        if compiling:
            if self._regional_compile_sm100a_enabled is None:
                raise RuntimeError(
                    "VSA-H3 sm_100a routing was not resolved before torch.compile; "
                    "call prepare_for_regional_compile(device) on every MiniMaxH3VSAImpl after loading weights.")
            use_sm100a = (self._regional_compile_sm100a_enabled and not grad_mode and q_bhsd.dtype == torch.float32
                          and q_bhsd.shape[-1] == 32 and attn_metadata.variable_block_sizes.numel() % 2 == 0)
            # (bfloat16 / head 128 on the GPU; float32 / head 32 in this CPU reproduction)

        if use_sm100a:
            out_bhsd, _ = _sm100a.block_sparse_attn_sm100a_from_mask(
                q_bhsd,
                k_bhsd,
                v_bhsd,
                mask,
                attn_metadata.variable_block_sizes,
            )
        else:
            raise NotImplementedError("Triton block_sparse_attn_64_bhsd (GPU) not reproduced")
        out = out_bhsd.transpose(1, 2).contiguous()
        return out


def main():
    torch.manual_seed(0)
    heads, dim, n_tiles, num_prefix_tiles = 2, 32, 4, 1
    seq = n_tiles * _TILE_ELEMS
    meta = MiniMaxH3VSAMetadata(
        current_timestep=0,
        VSA_sparsity=0.5,
        total_seq_length=seq,
        num_prefix_tiles=num_prefix_tiles,
        num_video_tiles=n_tiles - num_prefix_tiles,
        exempt=True,
        variable_block_sizes=torch.full((n_tiles, ), _TILE_ELEMS, dtype=torch.int32),
        untile_combined_index=torch.arange(seq),
        tile_elems=64,
        dense_layers=(0, 5),
    )
    num_layers = 8
    implementations = []
    for layer_idx in range(num_layers):
        impl = MiniMaxH3VSAImpl(num_heads=heads, head_size=dim, causal=False, softmax_scale=dim**-0.5,
                                prefix=f"transformer_blocks.{layer_idx}.attn")
        impl.prepare_for_regional_compile(torch.device("cpu"))
        implementations.append(impl)

    compiled = [torch.compile(impl.forward, backend=counting_backend, fullgraph=True) for impl in implementations]
    total = 0.0
    with torch.inference_mode():
        for step in range(2):  # two denoising steps
            x = torch.randn(1, seq, heads, dim)
            for run in compiled:
                q = x
                x = run(q, q * 0.5, q, None, meta)
                total += x.double().abs().sum().item()
    print(f"GRAPHS {GRAPHS}")
    print(f"OUT {total:.4f}")


if __name__ == "__main__":
    main()
