# realworld: positive fix=unsafe graphs=2
# Pattern: mlfoundations/open_clip before 3650e7bb ("Disable loss label
# caching with task and step compile"): `TrainingTask.compile()` compiles
# `self.training_forward`, which `CLIPTask` overrides to run the model and
# `ClipLoss`; `ClipLoss.get_ground_truth` caches the labels per device, valid
# while `self.prev_num_logits` equals the batch's logit count, and writes both
# inside the compiled call (here always; open_clip writes them when its
# `cache_labels` setting holds, True by default: a setting the analysis
# cannot read, so that form is reported with --unproven and by the trace).
# dynamo guards `not self.loss.labels` (the dict empty) and the write fails
# it at step 2: a second graph. FR014 makes the check true and skips both
# writes while compiling; unsafe, because the dict is keyed by device alone
# (a stale entry of another device would be returned by the memo and
# computed afresh by the graph).
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 2
# graphs over 4 steps; with the unsafe fix 1, the same output.
import torch
import torch.nn.functional as F


class ClipLoss(torch.nn.Module):
    def __init__(self, world_size=1, rank=0):
        super().__init__()
        self.world_size = world_size
        self.rank = rank
        self.prev_num_logits = 0
        self.labels = {}

    def get_ground_truth(self, device, num_logits) -> torch.Tensor:
        # calculated ground-truth and cache if enabled
        if self.prev_num_logits != num_logits or device not in self.labels:  # expect: FR014 [memo]
            labels = torch.arange(num_logits, device=device, dtype=torch.long)
            if self.world_size > 1:
                labels = labels + num_logits * self.rank
            self.labels[device] = labels  # expect: FR014 [memo]
            self.prev_num_logits = num_logits
        else:
            labels = self.labels[device]
        return labels

    def forward(self, image_features, text_features, logit_scale):
        logits_per_image = logit_scale * image_features @ text_features.T
        logits_per_text = logit_scale * text_features @ image_features.T
        labels = self.get_ground_truth(image_features.device, logits_per_image.shape[0])
        return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


class TrainingTask(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.trainable_module = model
        self._compiled_training_forward = None

    def compile(self, **kwargs):
        self._compiled_training_forward = torch.compile(self.training_forward, **kwargs)
        return self

    def forward(self, batch):
        forward_fn = self._compiled_training_forward or self.training_forward
        return forward_fn(batch)

    def training_forward(self, batch):
        raise NotImplementedError


class CLIPTask(TrainingTask):
    def __init__(self, model, loss=None):
        super().__init__(model)
        if loss is not None:
            self.loss = loss
        else:
            self.loss = ClipLoss()

    def training_forward(self, batch):
        image_features, text_features = self.trainable_module(batch["image"], batch["text"])
        return self.loss(image_features, text_features, logit_scale=10.0)


class TwoTower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.visual = torch.nn.Linear(6, 4)
        self.text = torch.nn.Linear(5, 4)

    def forward(self, image, text):
        return F.normalize(self.visual(image), dim=-1), F.normalize(self.text(text), dim=-1)


torch.manual_seed(0)
task = CLIPTask(TwoTower()).compile(backend="eager")
total = 0.0
for step in range(4):
    batch = {"image": torch.randn(8, 6), "text": torch.randn(8, 5)}
    total += float(task(batch))
print(f"result: {total:.4f}")
