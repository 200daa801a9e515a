# FR023 reports it and offers no fix: the file stays unchanged.
# A tag formatted at every step and read inside the compiled function: each
# step's string is a graph (tests/realworld/pos_prompt_string_compiled.py is
# the measured program, dia's prompt).
import torch


@torch.compile
def scaled_by_tag(x, tag: str):
    return x * len(tag.split("-"))


for step in range(3):
    scaled_by_tag(torch.ones(2), f"step-{step}")
