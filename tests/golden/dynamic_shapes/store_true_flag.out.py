# golden: runtime
# `dynamic=args.compile_dynamic` where `--compile_dynamic` is a store_true
# flag (kohya-ss/musubi-tuner before fe044b6): without the flag it is
# dynamic=False, and the loop passes 10 shapes. The fix writes `or None`
# (True when the flag is passed, automatic dynamic otherwise). Measured
# (torch 2.13 CPU): 9 graphs and the limit (8) before; 2 after.
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--compile_dynamic", action="store_true")
args = parser.parse_args([])


def step(x):
    return (x * 2).sum()


compiled_step = torch.compile(step, dynamic=args.compile_dynamic or None)
for n in range(1, 11):
    print(round(float(compiled_step(torch.ones(n))), 4))
