# Without --unproven: the dataset's length is not visible, no finding.
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.compile(torch.nn.Linear(8, 2))


def train(data):
    for (x,) in DataLoader(TensorDataset(data), batch_size=32):
        model(x)
