# The compiled model is called outside the loader's loop: nothing to mark.
import torch
from torch.utils.data import DataLoader, TensorDataset

model = torch.compile(torch.nn.Linear(8, 2))
loader = DataLoader(TensorDataset(torch.randn(113, 8)), batch_size=32)
x = torch.randn(32, 8)
for (batch,) in loader:
    pass
model(x)
