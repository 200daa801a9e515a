# golden: --unproven
# A batch of a custom dataset (a dict): not visibly a tensor, so reported
# (with --unproven: the length is not visible) without a fix.
import torch
from torch.utils.data import DataLoader

model = torch.compile(torch.nn.Linear(8, 2))


def train(dataset):
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    for batch in loader:
        x = batch["x"]
        model(x)
