# realworld: positive fix=safe graphs=3
# Pattern: the optimizer and its scheduler built in the entry script, the
# training loop in another module (`train.train(model, optimizer,
# scheduler, batches)`, as open_clip, torchtune and most trainers split it)
# compiling a train-step closure that a factory returns and that steps the
# optimizer; the scheduler's lr changes recompile the compiled step.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 3
# graphs over 10 steps; `lr=torch.tensor(1e-3)`: 2, same output.
import torch

from train import train

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # expect: FR004
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
train(model, optimizer, scheduler, [torch.randn(4, 8) for _ in range(10)])
print(round(model.weight.sum().item(), 5))
