# realworld: negative graphs=1
# Pattern: mlfoundations/open_clip at 3650e7bb, the twin of
# pos_clip_loss_label_cache: `create_task` turns the label cache off when the
# task is compiled (`cache_labels=False`, its `_use_loss_label_cache`), and
# `ClipLoss.get_ground_truth` writes its cache only when `self.cache_labels`
# holds, so the compiled call never writes `self.labels` or
# `self.prev_num_logits`.
# Measured (torch 2.13.0 CPU, tests/runtime_probe.py counting backend): 1
# graph over 4 steps. FR014 must stay quiet by default: the writes depend on
# a setting the analysis cannot read (reported with --unproven).
import torch
import torch.nn.functional as F


class ClipLoss(torch.nn.Module):
    def __init__(self, cache_labels=True):
        super().__init__()
        self.cache_labels = cache_labels
        self.prev_num_logits = 0
        self.labels = {}

    def get_ground_truth(self, device, num_logits) -> torch.Tensor:
        if self.prev_num_logits != num_logits or device not in self.labels:
            labels = torch.arange(num_logits, device=device, dtype=torch.long)
            if self.cache_labels:
                self.labels[device] = labels
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
    def __init__(self, model, loss=None, cache_labels=True):
        super().__init__(model)
        if loss is not None:
            self.loss = loss
        else:
            self.loss = ClipLoss(cache_labels=cache_labels)

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


def _use_loss_label_cache(torchcompile):
    # Task/step compile captures the loss module. Avoid mutable label-cache
    # state inside compiled regions; arange is cheap enough.
    return not torchcompile


torch.manual_seed(0)
task = CLIPTask(TwoTower(), cache_labels=_use_loss_label_cache(True)).compile(backend="eager")
total = 0.0
for step in range(4):
    batch = {"image": torch.randn(8, 6), "text": torch.randn(8, 5)}
    total += float(task(batch))
print(f"result: {total:.4f}")
