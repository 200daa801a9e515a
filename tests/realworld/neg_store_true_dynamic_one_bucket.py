# realworld: negative graphs=1
# Pattern: the musubi-tuner flag of pos_store_true_dynamic_flag (an argparse
# store_true `--compile_dynamic` passed as `dynamic=`), but every call has one
# resolution (a single bucket): nothing varies, nothing recompiles, and no
# default finding (with --unproven: FR001's unsafe `or None`).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1 graph.
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
dit = torch.compile(call_dit, dynamic=args.compile_dynamic)
torch.manual_seed(0)
weight = torch.randn(1)
total = 0.0
for step in range(4):
    latents = torch.randn(2, 4, 16, 16)
    timesteps = torch.rand(2)
    total += dit(latents, timesteps, weight).item()
print("total", round(total, 4))
