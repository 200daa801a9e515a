import torch

import diffusion_speed
from diffusion_convrot import apply_activation_rotation, rotatable_fqns, rotate_linears_, rotation_metadata
from diffusion_speed import _compile_repeated_blocks
from diffusion_transformer_quant import _MINIMAX_H3_INT8_EXCLUDES, make_filter_fn
from transformer_minimax_h3 import MiniMaxH3Transformer3DModel


def main():
    torch.manual_seed(0)
    group = 16

    # scripts/build_prequant_checkpoint.py: rotate BEFORE quantize_ (quantisation itself left out)
    builder = MiniMaxH3Transformer3DModel().eval()
    filter_fn = make_filter_fn(16, exclude_name_tokens=_MINIMAX_H3_INT8_EXCLUDES)
    rotatable, not_divisible = rotatable_fqns(builder, filter_fn, group)
    rotate_linears_(builder, rotatable, group)
    state_dict = {k: v.detach().clone() for k, v in builder.state_dict().items()}
    metadata = rotation_metadata(group, rotatable)

    # diffusion_prequant: from_config, load_state_dict(assign=True), then the ONLINE half
    transformer = MiniMaxH3Transformer3DModel().eval()
    transformer.load_state_dict(state_dict, strict=True, assign=True)
    apply_activation_rotation(transformer, metadata)

    _compile_repeated_blocks(transformer)

    # packed sequence: 4 text rows, 8 video rows, 2 audio rows
    n_text, n_video, n_audio = 4, 8, 2
    seq = n_text + n_video + n_audio
    text_indices = torch.arange(0, n_text)
    video_indices = torch.arange(n_text, n_text + n_video)
    audio_indices = torch.arange(n_text + n_video, seq)
    token_tags = torch.cat([torch.ones(n_text), torch.zeros(n_video), torch.full((n_audio,), 2.0)]).long()
    timestep_indices = torch.zeros(seq, dtype=torch.long)
    position_ids = torch.stack([torch.zeros(seq), torch.arange(seq) // 4, torch.arange(seq) % 4], dim=-1).long()
    encoder_hidden_states = torch.randn(1, n_text, 24)
    latents = torch.randn(1, n_video, 16)
    audio = torch.randn(1, n_audio, 4)

    total = 0.0
    with torch.no_grad():
        for t in (1.0, 0.75, 0.5, 0.25):
            v, a = transformer(latents, audio, encoder_hidden_states, torch.tensor([t]), timestep_indices,
                               token_tags, position_ids, video_indices, audio_indices, text_indices)
            latents = latents - 0.25 * v
            audio = audio - 0.25 * a
            total += float(v.sum()) + float(a.sum())
    print(f"GRAPHS {diffusion_speed.GRAPHS}")
    print(f"OUT {round(total, 4)}")


if __name__ == "__main__":
    main()
