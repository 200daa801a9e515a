# golden: --unsafe-fixes runtime
# The lr comes from the command line (`lr=args.lr`, as open_clip's and timm's
# train scripts build their optimizers) and a scheduler changes it while the
# step is compiled: every new lr recompiles.  Unsafe fix (FR004): the value
# is made a float and a 0-d tensor where it is passed
# (`torch.tensor(float(args.lr))`); unsafe because the value is not visible
# here (a tensor lr the program filled itself would be replaced by a copy).
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=5e-4)
args = parser.parse_args([])

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(float(args.lr)))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)


@torch.compile
def train_step(batch):
    optimizer.zero_grad()
    model(batch).pow(2).mean().backward()
    optimizer.step()


for step in range(8):
    train_step(torch.randn(4, 8))
    scheduler.step()
print("final", round(model.weight.sum().item(), 5))
