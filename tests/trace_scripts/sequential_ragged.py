"""A compiled nn.Sequential fed by a DataLoader without drop_last: the last
batch is ragged (100 samples in batches of 16: 4 rows). Dynamo compiles
torch's own Sequential.forward; the recompile is shown at the user's call."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
features = torch.randn(100, 6)
loader = DataLoader(TensorDataset(features), batch_size=16)
model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
# backend="eager": dynamo guards (and recompiles) exactly as with inductor, in seconds
compiled_model = torch.compile(model, backend="eager")
total = 0.0
with torch.no_grad():
    for (inputs,) in loader:
        total += float(compiled_model(inputs).sum())
print("result:", round(total, 4))
