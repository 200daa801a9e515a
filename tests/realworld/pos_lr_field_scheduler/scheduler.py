class WarmupScheduler:
    """Linear warm-up written against any optimizer-like object: the lr lives
    under a configurable key (some optimizers call it "learning_rate")."""

    def __init__(self, optimizer, base_lr, warmup, lr_field="lr"):
        self.optimizer = optimizer
        self.base_lr = base_lr
        self.warmup = warmup
        self.lr_field = lr_field
        self.n = 0

    def step(self):
        self.n += 1
        new_lr = self.base_lr * min(1.0, self.n / self.warmup)
        for group in self.optimizer.param_groups:
            group[self.lr_field] = new_lr  # expect: FR004
