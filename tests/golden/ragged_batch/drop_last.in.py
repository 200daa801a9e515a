import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.compile(torch.nn.Linear(8, 2))
loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32, drop_last=True)
for (x,) in loader:
    model(x)
