"""An engine compiles each submodule's forward in place, the submodule a
parameter annotated with the base class (mstar before ef231010:
`_apply_torch_compile(self, node_name, submodule: NodeSubmodule)` writes
`submodule.forward = torch.compile(submodule.forward, dynamic=False)`); the
encoder passed is a subclass, fed a new audio length per request: one graph
per length (4); without dynamic=False: 2."""
import torch


class NodeSubmodule(torch.nn.Module):
    def forward(self, *args, **kwargs):
        raise NotImplementedError


class AudioEncoderSubmodule(NodeSubmodule):
    def __init__(self, n_mels=8, dim=16):
        super().__init__()
        self.conv = torch.nn.Conv1d(n_mels, dim, 3, padding=1)

    def forward(self, audio_features):
        return torch.nn.functional.gelu(self.conv(audio_features)).mean(dim=-1)


class StatelessEngine:
    def __init__(self, submodules):
        self.submodules = submodules

    def warmup(self):
        for node_name, submodule in self.submodules.items():
            self._apply_torch_compile(node_name, submodule)

    def _apply_torch_compile(self, node_name: str, submodule: NodeSubmodule) -> None:
        submodule.forward = torch.compile(submodule.forward, dynamic=False, backend="eager")

    def run(self, node_name, audio_features):
        return self.submodules[node_name](audio_features)


torch.manual_seed(0)
engine = StatelessEngine({"audio_encoder": AudioEncoderSubmodule()})
engine.warmup()
total = 0.0
with torch.no_grad():
    for mel_len in (40, 56, 48, 64):
        total += float(engine.run("audio_encoder", torch.randn(1, 8, mel_len)).sum())
print("result:", round(total, 4))
