# Reproduction of huggingface/diffusers tests BEFORE 52110fbbf6 (#14297): the LoRA hot-swap test
# `_check_model_hotswap` compiles QwenImageTransformer2DModel with dynamic=True and feeds
# different_shapes_for_compilation = [(4, 4), (4, 8), (8, 8)]. The first input is
# hidden_states (1, 4*4=16, 16 channels): the sequence length equals the channel count of img_in.
import torch
import torch.nn as nn
import torch.nn.functional as F

FIXED = True  # the real fix: use_duck_shape = False moved into _check_model_hotswap

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


class LoraLinear(nn.Module):
    """peft LoRA Linear after enable_lora_hotswap(target_rank=...): padded rank, tensor scaling."""

    def __init__(self, base: nn.Linear, rank: int):
        super().__init__()
        self.base_layer = base
        self.lora_A = nn.ModuleDict({"adapter0": nn.Linear(base.in_features, rank, bias=False)})
        self.lora_B = nn.ModuleDict({"adapter0": nn.Linear(rank, base.out_features, bias=False)})
        self.scaling = {"adapter0": torch.tensor(1.0)}

    def forward(self, x):
        result = self.base_layer(x)
        lora_A, lora_B = self.lora_A["adapter0"], self.lora_B["adapter0"]
        return result + lora_B(lora_A(x)) * self.scaling["adapter0"]


class TinyQwenImageAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim)])

    def forward(self, x, rope):
        b, s, d = x.shape
        q = self.to_q(x).view(b, s, self.heads, -1).transpose(1, 2)
        k = self.to_k(x).view(b, s, self.heads, -1).transpose(1, 2)
        v = self.to_v(x).view(b, s, self.heads, -1).transpose(1, 2)
        q = q * rope
        k = k * rope
        o = F.scaled_dot_product_attention(q, k, v)
        return self.to_out[0](o.transpose(1, 2).reshape(b, s, d))


class TinyQwenImageTransformer2DModel(nn.Module):
    # get_init_dict of the test: in_channels=16, joint_attention_dim=16, heads 4 x head_dim 16, out 4, patch 2
    def __init__(self, in_channels=16, out_channels=4, patch_size=2, attention_head_dim=16,
                 num_attention_heads=4, joint_attention_dim=16, num_layers=2):
        super().__init__()
        self.inner_dim = num_attention_heads * attention_head_dim
        self.img_in = nn.Linear(in_channels, self.inner_dim)
        self.txt_in = nn.Linear(joint_attention_dim, self.inner_dim)
        self.time_in = nn.Linear(1, self.inner_dim)
        self.blocks = nn.ModuleList([TinyQwenImageAttention(self.inner_dim, num_attention_heads)
                                     for _ in range(num_layers)])
        self.proj_out = nn.Linear(self.inner_dim, patch_size * patch_size * out_channels)
        self.pos_table = torch.randn(4096, attention_head_dim).cos()  # rope stand-in (plain attribute)

    def forward(self, hidden_states, encoder_hidden_states, encoder_hidden_states_mask, timestep, img_shapes):
        hidden_states = self.img_in(hidden_states)
        encoder_hidden_states = self.txt_in(encoder_hidden_states)
        temb = self.time_in(timestep[:, None].to(hidden_states.dtype))
        frame, height, width = img_shapes[0]
        img_rope = self.pos_table[: frame * height * width]
        txt_rope = self.pos_table[: encoder_hidden_states.shape[1]]
        x = torch.cat([encoder_hidden_states, hidden_states + temb[:, None]], dim=1)
        rope = torch.cat([txt_rope, img_rope], dim=0)
        for block in self.blocks:
            x = x + block(x, rope)
        return {"sample": self.proj_out(x[:, encoder_hidden_states.shape[1]:])}


def get_dummy_inputs(gen, height=4, width=4):
    batch_size = 1
    num_latent_channels = embedding_dim = 16
    sequence_length = 8
    vae_scale_factor = 4
    hidden_states = torch.randn((batch_size, height * width, num_latent_channels), generator=gen)
    encoder_hidden_states = torch.randn((batch_size, sequence_length, embedding_dim), generator=gen)
    encoder_hidden_states_mask = torch.ones((batch_size, sequence_length)).to(torch.long)
    timestep = torch.tensor([1.0]).expand(batch_size)
    orig_height = height * 2 * vae_scale_factor
    orig_width = width * 2 * vae_scale_factor
    img_shapes = [(1, orig_height // vae_scale_factor // 2, orig_width // vae_scale_factor // 2)] * batch_size
    return {"hidden_states": hidden_states, "encoder_hidden_states": encoder_hidden_states,
            "encoder_hidden_states_mask": encoder_hidden_states_mask, "timestep": timestep,
            "img_shapes": img_shapes}


def _check_model_hotswap(rank0=7, rank1=13):
    different_shapes = [(4, 4), (4, 8), (8, 8)]
    if FIXED and different_shapes is not None:
        # Specifying `use_duck_shape=False` instructs the compiler if it should use the same symbolic
        # variable to represent input sizes that are the same.
        torch.fx.experimental._config.use_duck_shape = False
    torch.manual_seed(0)
    model = TinyQwenImageTransformer2DModel()
    max_rank = max(rank0, rank1)
    for blk in model.blocks:  # load_lora_adapter(adapter0) after enable_lora_hotswap(target_rank=max_rank)
        for name in ("to_q", "to_k", "to_v"):
            setattr(blk, name, LoraLinear(getattr(blk, name), max_rank))
        blk.to_out[0] = LoraLinear(blk.to_out[0], max_rank)
    model = torch.compile(model, dynamic=different_shapes is not None,
                          backend=counting_backend)  # test: mode="reduce-overhead" (inductor); counting backend here
    gen = torch.Generator("cpu").manual_seed(0)
    total = 0.0
    with torch.inference_mode():
        for height, width in different_shapes:
            total += model(**get_dummy_inputs(gen, height, width))["sample"].sum().item()
    # hotswap the 2nd adapter: weights copied in place, scaling tensor filled
    torch.manual_seed(1)
    for m in model.modules():
        if isinstance(m, LoraLinear):
            with torch.no_grad():
                m.lora_A["adapter0"].weight.copy_(torch.randn_like(m.lora_A["adapter0"].weight) * 0.1)
                m.scaling["adapter0"].fill_(rank1 / rank1)
    with torch.inference_mode():
        for height, width in different_shapes:
            total += model(**get_dummy_inputs(gen, height, width))["sample"].sum().item()
    return total


out = _check_model_hotswap()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
