"""Int attributes of nn.Modules: a submodule's counter, a per-instance layer
index (blocks compiled one by one), and train/eval switches."""
import torch


class KVCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.size = 0


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kv_cache = KVCache()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        self.kv_cache.size += 1
        return self.lin(x) + self.kv_cache.size


class Block(torch.nn.Module):
    def __init__(self, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx

    def forward(self, x):
        return x * (self.layer_idx + 1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) * 0 + x


torch.manual_seed(0)
x = torch.ones(2, 4)
total = 0.0
decoder = Decoder()
decoder.compile(backend="eager")
for _ in range(3):
    total += float(decoder(x).sum())
blocks = [Block(i) for i in range(4)]
for b in blocks:
    b.compile(backend="eager")
for b in blocks:
    x = b(x)
total += float(x.sum())
net = Net()
net.compile(backend="eager")
for mode in (True, False, True, False):
    net.train(mode)
    total += float(net(torch.ones(3)).sum())
print("result:", round(total, 3))
