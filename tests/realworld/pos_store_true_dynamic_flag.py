# realworld: positive fix=safe graphs=8 limit
# Pattern: kohya-ss/musubi-tuner before fe044b6 (PR #727 "fix: support compile
# dynamic=None"): `--compile_dynamic` is an argparse store_true flag, so a user
# who passes `--compile` alone compiles with `dynamic=args.compile_dynamic`,
# i.e. dynamic=False: automatic dynamic shapes are off and every new bucket
# resolution recompiles. The project's fix turned the flag into
# true/false/auto with default None.
# Cure: `dynamic=args.compile_dynamic or None` (FR001's fix for a store_true
# flag: True when passed, automatic dynamic otherwise): 8 graphs and the
# limit -> 3 (inductor, as `run --fix` runs it: 8 + limit -> 4), same output.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 8
# graphs, then the recompile limit (10 bucket resolutions).
import argparse

import torch


def setup_parser_common():
    parser = argparse.ArgumentParser()
    parser.add_argument("--compile", action="store_true", help="Enable torch.compile")
    parser.add_argument("--compile_dynamic", action="store_true", help="Enable dynamic shapes in torch.compile")
    return parser


def call_dit(latents, timesteps, weight):
    noise_pred = torch.tanh(latents * weight) * timesteps.view(-1, 1, 1, 1)
    return (noise_pred - latents).pow(2).mean()


args = setup_parser_common().parse_args(["--compile"])
dit = torch.compile(call_dit, dynamic=args.compile_dynamic)  # expect: FR001
torch.manual_seed(0)
weight = torch.randn(1)
total = 0.0
for h, w in ((16, 16), (24, 16), (16, 32), (32, 24), (40, 16), (24, 40), (48, 32), (32, 48), (56, 24), (24, 56)):
    latents = torch.randn(2, 4, h, w)
    timesteps = torch.rand(2)
    total += dit(latents, timesteps, weight).item()
print("total", round(total, 4))
