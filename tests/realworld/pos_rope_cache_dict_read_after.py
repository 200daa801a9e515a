# realworld: positive fix=safe graphs=2
# Pattern: huggingface/diffusers before 4a9dbd56f6 (#12061, "enable
# compilation in qwen image."), src/diffusers/models/transformers/
# transformer_qwenimage.py: `QwenEmbedRope.forward` memoises the video rope
# table in `self.rope_cache[rope_key]` (rope_key = f"{frame}_{height}_{width}")
# inside the compiled transformer, filling it in the miss branch and reading
# it back after the `if`. dynamo guards the key's absence
# (`not ___dict_contains('1_4_4', ...rope_cache)`), the first call writes it,
# the second recompiles. QwenEmbedRope verbatim; the transformer around it is
# a tiny stand-in with the test config's sizes (fullgraph=True dropped: the
# probe's eager reference refuses it).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 3 calls of one shape; FR014's fix (safe: the value is a pure function of the key) (a local dict, fresh
# while compiling, stands in for the memo): 1 graph, the same output.
from typing import List

import torch
import torch.nn as nn

class QwenEmbedRope(nn.Module):
    def __init__(self, theta: int, axes_dim: List[int], scale_rope=False):
        super().__init__()
        self.theta = theta
        self.axes_dim = axes_dim
        pos_index = torch.arange(1024)
        neg_index = torch.arange(1024).flip(0) * -1 - 1
        self.pos_freqs = torch.cat([self.rope_params(pos_index, self.axes_dim[0], self.theta),
                                    self.rope_params(pos_index, self.axes_dim[1], self.theta),
                                    self.rope_params(pos_index, self.axes_dim[2], self.theta)], dim=1)
        self.neg_freqs = torch.cat([self.rope_params(neg_index, self.axes_dim[0], self.theta),
                                    self.rope_params(neg_index, self.axes_dim[1], self.theta),
                                    self.rope_params(neg_index, self.axes_dim[2], self.theta)], dim=1)
        self.rope_cache = {}
        self.scale_rope = scale_rope

    def rope_params(self, index, dim, theta=10000):
        assert dim % 2 == 0
        freqs = torch.outer(index, 1.0 / torch.pow(theta, torch.arange(0, dim, 2).to(torch.float32).div(dim)))
        freqs = torch.polar(torch.ones_like(freqs), freqs)
        return freqs

    def forward(self, video_fhw, txt_seq_lens, device):
        if self.pos_freqs.device != device:
            self.pos_freqs = self.pos_freqs.to(device)
            self.neg_freqs = self.neg_freqs.to(device)

        if isinstance(video_fhw, list):
            video_fhw = video_fhw[0]
        frame, height, width = video_fhw
        rope_key = f"{frame}_{height}_{width}"

        if rope_key not in self.rope_cache:
            seq_lens = frame * height * width
            freqs_pos = self.pos_freqs.split([x // 2 for x in self.axes_dim], dim=1)
            freqs_neg = self.neg_freqs.split([x // 2 for x in self.axes_dim], dim=1)
            freqs_frame = freqs_pos[0][:frame].view(frame, 1, 1, -1).expand(frame, height, width, -1)
            if self.scale_rope:
                freqs_height = torch.cat([freqs_neg[1][-(height - height // 2):], freqs_pos[1][: height // 2]], dim=0)
                freqs_height = freqs_height.view(1, height, 1, -1).expand(frame, height, width, -1)
                freqs_width = torch.cat([freqs_neg[2][-(width - width // 2):], freqs_pos[2][: width // 2]], dim=0)
                freqs_width = freqs_width.view(1, 1, width, -1).expand(frame, height, width, -1)
            else:
                freqs_height = freqs_pos[1][:height].view(1, height, 1, -1).expand(frame, height, width, -1)
                freqs_width = freqs_pos[2][:width].view(1, 1, width, -1).expand(frame, height, width, -1)
            freqs = torch.cat([freqs_frame, freqs_height, freqs_width], dim=-1).reshape(seq_lens, -1)
            self.rope_cache[rope_key] = freqs.clone().contiguous()  # expect: FR014
        vid_freqs = self.rope_cache[rope_key]

        if self.scale_rope:
            max_vid_index = max(height // 2, width // 2)
        else:
            max_vid_index = max(height, width)
        max_len = max(txt_seq_lens)
        txt_freqs = self.pos_freqs[max_vid_index: max_vid_index + max_len, ...]
        return vid_freqs, txt_freqs


def apply_rotary_emb_qwen(x, freqs_cis):  # x: [B, S, H, D]
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_rotated * freqs_cis.unsqueeze(1)).flatten(3).type_as(x)


class TinyQwenImageTransformer2DModel(nn.Module):
    # test config: in_channels=16, heads=4, attention_head_dim=16, axes_dims_rope=(8, 4, 4), joint_attention_dim=16
    def __init__(self, in_channels=16, heads=4, head_dim=16, axes_dims_rope=(8, 4, 4), joint_attention_dim=16):
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.img_in = nn.Linear(in_channels, heads * head_dim)
        self.txt_in = nn.Linear(joint_attention_dim, heads * head_dim)
        self.pos_embed = QwenEmbedRope(theta=10000, axes_dim=list(axes_dims_rope), scale_rope=True)
        self.proj_out = nn.Linear(heads * head_dim, 4)

    def forward(self, hidden_states, encoder_hidden_states, img_shapes, txt_seq_lens):
        img = self.img_in(hidden_states)
        txt = self.txt_in(encoder_hidden_states)
        image_rotary_emb = self.pos_embed(img_shapes, txt_seq_lens, device=hidden_states.device)
        img_freqs, txt_freqs = image_rotary_emb
        b = img.shape[0]
        q_img = apply_rotary_emb_qwen(img.view(b, -1, self.heads, self.head_dim), img_freqs)
        q_txt = apply_rotary_emb_qwen(txt.view(b, -1, self.heads, self.head_dim), txt_freqs)
        q = torch.cat([q_txt, q_img], dim=1).transpose(1, 2)
        o = torch.softmax(q @ q.transpose(-1, -2) / 4.0, -1) @ q
        o = o.transpose(1, 2).flatten(2)[:, txt.shape[1]:]
        return self.proj_out(o)


torch.manual_seed(0)
model = TinyQwenImageTransformer2DModel().eval()
# test_torch_compile_recompilation_and_graph_break: torch.compile(model, fullgraph=True), called repeatedly
model = torch.compile(model)
out = 0.0
with torch.no_grad():
    for _ in range(3):
        hs = torch.randn(1, 4 * 4, 16)
        ehs = torch.randn(1, 7, 16)
        out += model(hs, ehs, img_shapes=[(1, 4, 4)], txt_seq_lens=[7]).sum().item()
print(f"OUT {out:.4f}")
