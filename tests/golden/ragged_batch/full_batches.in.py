import torch
from torch.utils.data import DataLoader, TensorDataset

BATCH = 32
model = torch.compile(torch.nn.Linear(8, 2))
loader = DataLoader(TensorDataset(torch.randn(4 * BATCH, 8)), batch_size=BATCH)
for (x,) in loader:
    model(x)
