import torch
from torch import nn

from attention import MultiHeadAttention


class TransformerSelfAttentionLayer(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.attn = MultiHeadAttention(embed_dim, num_heads)
        self.mlp = nn.Sequential(nn.Linear(embed_dim, 2 * embed_dim), nn.SiLU(), nn.Linear(2 * embed_dim, embed_dim))
        self.sa_norm = nn.LayerNorm(embed_dim)
        self.mlp_norm = nn.LayerNorm(embed_dim)

    def setup_cache(self, batch_size, max_seq_len):
        self.attn.setup_cache(batch_size, max_seq_len)

    def forward(self, x, mask=None):
        h = self.attn(self.sa_norm(x), mask=mask) + x
        return h + self.mlp(self.mlp_norm(h))


class TransformerDecoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_heads, num_layers, max_seq_len):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.tok_embeddings = nn.Embedding(vocab_size, embed_dim)
        self.layers = nn.ModuleList([TransformerSelfAttentionLayer(embed_dim, num_heads) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(embed_dim)
        self.output = nn.Linear(embed_dim, vocab_size, bias=False)

    def setup_caches(self, batch_size):
        for layer in self.layers:
            layer.setup_cache(batch_size, self.max_seq_len)

    def forward(self, tokens, mask=None):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, mask=mask)
        return self.output(self.norm(h))
