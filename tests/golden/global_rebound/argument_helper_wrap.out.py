# golden: runtime --unsafe-fixes
# A helper with `global STEP` advances the int global between calls of a
# function compiled with torch.compile(step_fn), called in a training
# function; `step_fn` is also called uncompiled once (a warm-up check), so
# that call gets the argument too. Measured (torch 2.13 CPU, counting
# backend, 12 steps): 8 graphs + limit -> 2, same output.
import torch

STEP = 0


def advance():
    global STEP
    STEP += 1


def step_fn(x, *, scale=1, STEP):
    return x * scale + STEP


compiled = torch.compile(step_fn)


def train(x):
    for _ in range(12):
        advance()
        x = compiled(x, STEP=STEP)
    return x


print(float(step_fn(torch.ones(4), STEP=STEP).sum()))
print(float(train(torch.ones(4)).sum()))
