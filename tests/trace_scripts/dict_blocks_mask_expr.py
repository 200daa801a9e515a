"""Blocks held in an `nn.ModuleDict` filled in a loop and compiled one by one
(`register_module` of the compiled block), called with a mask chosen by a
conditional expression (nvidia-cosmos/cosmos-rl before 30c31abe: Qwen2.5-VL's
vision blocks): every batch has another number of patches.  The trace marks
the varying dims; the mask, passed as an expression, is first bound to a
name (3 graphs -> 1)."""
import torch

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class Block(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, hidden_states, attention_mask=None, rotary_pos_emb=None):
        scores = (hidden_states @ hidden_states.T).masked_fill(~attention_mask, -1e4)
        mixed = scores.softmax(-1) @ hidden_states
        return hidden_states + self.proj(mixed * rotary_pos_emb.cos())


class Tower(torch.nn.Module):
    def __init__(self, dim=8, depth=3):
        super().__init__()
        self.blocks = torch.nn.ModuleDict()
        for layer_id in range(depth):
            self.blocks[str(layer_id)] = Block(dim)
        self.fullatt_block_indexes = ["1"]

    def forward(self, hidden_states, window):
        n = hidden_states.shape[0]
        full = torch.ones(n, n, dtype=torch.bool)
        idx = torch.arange(n)
        windowed = (idx[:, None] // window) == (idx[None, :] // window)
        attention_masks = [full, windowed]
        rotary_pos_emb = idx[:, None].float() / n
        for layer_num, blk in self.blocks.items():
            hidden_states = blk(
                hidden_states,
                attention_mask=attention_masks[0]
                if layer_num in self.fullatt_block_indexes
                else attention_masks[1],
                rotary_pos_emb=rotary_pos_emb,
            )
        return hidden_states


def apply_compile(model):
    for layer_id, transformer_block in model.blocks.named_children():
        transformer_block = torch.compile(transformer_block, backend=counting_backend)
        model.blocks.register_module(layer_id, transformer_block)


torch.manual_seed(0)
tower = Tower()
apply_compile(tower)
total = 0.0
with torch.no_grad():
    for n in (16, 24, 40, 20):
        total += float(tower(torch.randn(n, 8), 4).sum())
print("graphs:", GRAPHS)
print("result:", round(total, 3))
