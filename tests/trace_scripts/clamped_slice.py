"""A slice whose end comes from the input's size, under dynamic=True
(diffusers' AuraFlowPatchEmbed before #11297): the positional-embedding
indexes are `arange(n).view(h_max, w_max)[starth:endh, startw:endw]` with
`endh = starth + h // patch_size`.  With a symbolic height the slice end is
clamped to `h_max`, so dynamo guards `32 != (latent.size()[2] // 2)`; the
call whose patch grid reaches the whole grid (latent 64 with patch 2) fails
it: 2 graphs.  The dim is dynamic already: maybe_mark_dynamic cannot lift
the test (the trace reports it, with the line that made it)."""
import torch


class PatchEmbed(torch.nn.Module):
    def __init__(self, patch_size=2, in_channels=4, embed_dim=8, pos_embed_max_size=1024):
        super().__init__()
        self.patch_size = patch_size
        self.pos_embed_max_size = pos_embed_max_size
        self.proj = torch.nn.Linear(patch_size * patch_size * in_channels, embed_dim)
        self.pos_embed = torch.nn.Parameter(torch.randn(1, pos_embed_max_size, embed_dim) * 0.1)

    def pe_selection_index_based_on_dim(self, h, w):
        h_p, w_p = h // self.patch_size, w // self.patch_size
        original_pe_indexes = torch.arange(self.pos_embed.shape[1])
        h_max, w_max = int(self.pos_embed_max_size**0.5), int(self.pos_embed_max_size**0.5)
        original_pe_indexes = original_pe_indexes.view(h_max, w_max)
        starth = h_max // 2 - h_p // 2
        endh = starth + h_p
        startw = w_max // 2 - w_p // 2
        endw = startw + w_p
        original_pe_indexes = original_pe_indexes[starth:endh, startw:endw]
        return original_pe_indexes.flatten()

    def forward(self, latent):
        b, c, height, width = latent.size()
        p = self.patch_size
        x = latent.view(b, c, height // p, p, width // p, p).permute(0, 2, 4, 1, 3, 5).flatten(-3).flatten(1, 2)
        x = self.proj(x)
        pe_index = self.pe_selection_index_based_on_dim(height, width)
        return x + self.pos_embed[:, pe_index]


torch.manual_seed(0)
embed = PatchEmbed()
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
compiled = torch.compile(embed, backend="eager", dynamic=True)
total = 0.0
with torch.no_grad():
    for size in (32, 48, 64, 40):
        latent = torch.randn(1, 4, size, size)
        total += float(compiled(latent).sum())
print(f"result: {total:.4f}")
