# huggingface/diffusers, src/diffusers/models/transformers/auraflow_transformer_2d.py with #11297's fix
# (b6156aafe9, 2025-04-15): AuraFlowPatchEmbed.pe_selection_index_based_on_dim slices a view of
# arange(pos_embed_max_size) with bounds derived from the latent's height/width; under
# torch.compile(transformer, fullgraph=True, dynamic=True) the slice clamping adds guards on the
# resolution, so a pipeline run at another resolution recompiles.
# Trimmed: one joint-attention block stands in for the MMDiT / single-DiT stacks; only torch.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# Aura Flow patch embed doesn't use convs for projections.
# Additionally, it uses learned positional embeddings.
class AuraFlowPatchEmbed(nn.Module):
    def __init__(
        self,
        height=224,
        width=224,
        patch_size=16,
        in_channels=3,
        embed_dim=768,
        pos_embed_max_size=None,
    ):
        super().__init__()

        self.num_patches = (height // patch_size) * (width // patch_size)
        self.pos_embed_max_size = pos_embed_max_size

        self.proj = nn.Linear(patch_size * patch_size * in_channels, embed_dim)
        self.pos_embed = nn.Parameter(torch.randn(1, pos_embed_max_size, embed_dim) * 0.1)

        self.patch_size = patch_size
        self.height, self.width = height // patch_size, width // patch_size
        self.base_size = height // patch_size

    def pe_selection_index_based_on_dim(self, h, w):
        # select subset of positional embedding based on H, W, where H, W is size of latent
        # PE will be viewed as 2d-grid, and H/p x W/p of the PE will be selected
        # because original input are in flattened format, we have to flatten this 2d grid as well.
        h_p, w_p = h // self.patch_size, w // self.patch_size
        h_max, w_max = int(self.pos_embed_max_size**0.5), int(self.pos_embed_max_size**0.5)

        # Calculate the top-left corner indices for the centered patch grid
        starth = h_max // 2 - h_p // 2
        startw = w_max // 2 - w_p // 2

        # Generate the row and column indices for the desired patch grid
        rows = torch.arange(starth, starth + h_p, device=self.pos_embed.device)
        cols = torch.arange(startw, startw + w_p, device=self.pos_embed.device)

        # Create a 2D grid of indices
        row_indices, col_indices = torch.meshgrid(rows, cols, indexing="ij")

        # Convert the 2D grid indices to flattened 1D indices
        selected_indices = (row_indices * w_max + col_indices).flatten()

        return selected_indices

    def forward(self, latent):
        batch_size, num_channels, height, width = latent.size()
        latent = latent.view(
            batch_size,
            num_channels,
            height // self.patch_size,
            self.patch_size,
            width // self.patch_size,
            self.patch_size,
        )
        latent = latent.permute(0, 2, 4, 1, 3, 5).flatten(-3).flatten(1, 2)
        latent = self.proj(latent)
        pe_index = self.pe_selection_index_based_on_dim(height, width)
        return latent + self.pos_embed[:, pe_index]


def get_timestep_embedding(timesteps, embedding_dim, max_period=10000):
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(0, half_dim, dtype=torch.float32) / half_dim
    emb = timesteps[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(emb), torch.sin(emb)], dim=-1)


class AuraFlowTransformer2DModel(nn.Module):
    def __init__(
        self,
        sample_size=64,
        patch_size=2,
        in_channels=4,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=24,
        out_channels=4,
        pos_embed_max_size=1024,
    ):
        super().__init__()
        self.patch_size = patch_size
        self.out_channels = out_channels
        self.num_heads = num_attention_heads
        self.inner_dim = num_attention_heads * attention_head_dim
        self.pos_embed = AuraFlowPatchEmbed(
            height=sample_size,
            width=sample_size,
            patch_size=patch_size,
            in_channels=in_channels,
            embed_dim=self.inner_dim,
            pos_embed_max_size=pos_embed_max_size,
        )
        self.context_embedder = nn.Linear(joint_attention_dim, self.inner_dim, bias=False)
        self.time_step_proj = nn.Linear(256, self.inner_dim)
        self.register_tokens = nn.Parameter(torch.randn(1, 8, self.inner_dim) * 0.02)
        self.qkv = nn.Linear(self.inner_dim, 3 * self.inner_dim, bias=False)
        self.to_out = nn.Linear(self.inner_dim, self.inner_dim, bias=False)
        self.norm_out = nn.LayerNorm(self.inner_dim, elementwise_affine=False)
        self.adaln = nn.Linear(self.inner_dim, 2 * self.inner_dim, bias=False)
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * out_channels, bias=False)

    def forward(self, hidden_states, encoder_hidden_states, timestep):
        height, width = hidden_states.shape[-2:]

        # Apply patch embedding, timestep embedding, and project the caption embeddings.
        hidden_states = self.pos_embed(hidden_states)  # takes care of adding positional embeddings too.
        temb = self.time_step_proj(get_timestep_embedding(timestep, 256))
        encoder_hidden_states = self.context_embedder(encoder_hidden_states)
        encoder_hidden_states = torch.cat(
            [self.register_tokens.repeat(encoder_hidden_states.size(0), 1, 1), encoder_hidden_states], dim=1
        )

        # one joint attention block (stand-in for the MMDiT and single DiT blocks)
        encoder_seq_len = encoder_hidden_states.size(1)
        combined = torch.cat([encoder_hidden_states, hidden_states], dim=1)
        b, n, _ = combined.shape
        q, k, v = self.qkv(combined).view(b, n, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, -1)
        combined = combined + self.to_out(attn)
        hidden_states = combined[:, encoder_seq_len:]

        scale, shift = self.adaln(F.silu(temb)).chunk(2, dim=1)
        hidden_states = self.norm_out(hidden_states) * (1 + scale[:, None, :]) + shift[:, None, :]
        hidden_states = self.proj_out(hidden_states)

        # unpatchify
        patch_size = self.patch_size
        out_channels = self.out_channels
        height = height // patch_size
        width = width // patch_size

        hidden_states = hidden_states.reshape(
            shape=(hidden_states.shape[0], height, width, patch_size, patch_size, out_channels)
        )
        hidden_states = torch.einsum("nhwpqc->nchpwq", hidden_states)
        output = hidden_states.reshape(
            shape=(hidden_states.shape[0], out_channels, height * patch_size, width * patch_size)
        )
        return output


# diffusers docs (AuraFlow, "Support for torch.compile()", #11327): compile once, run at several resolutions
torch.fx.experimental._config.use_duck_shape = False
transformer = AuraFlowTransformer2DModel().eval()
transformer = torch.compile(transformer, fullgraph=True, dynamic=True, backend=counting_backend)

prompt_embeds = torch.randn(1, 12, 24)
checksum = 0.0
with torch.no_grad():
    for height, width in [(64, 64), (96, 48), (128, 128), (80, 112)]:  # latent sizes of the pipeline calls
        latents = torch.randn(1, 4, height // 2, width // 2)
        timesteps = torch.linspace(1000.0, 0.0, 4)[:-1]
        for t in timesteps:
            noise_pred = transformer(latents, prompt_embeds, t.expand(latents.shape[0]))
            latents = latents - 0.25 * noise_pred
        checksum += float(latents.sum())

print("GRAPHS", GRAPHS)
print("OUT", round(checksum, 4))
