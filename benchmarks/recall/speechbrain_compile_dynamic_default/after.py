"""speechbrain `--compile` before 31e007e9a (#2824), reduced to CPU.

templates/speaker_id (Xvector + Classifier) trained with `--compile`:
Brain._compile wraps every module in `compile_module_keys` with
`torch.compile(..., dynamic=self.compile_using_dynamic_shape_tracing)`,
whose run-opt default was False. Every batch of utterances is padded to its
own longest utterance, so the embedding model sees a new time length per
batch (and the last batch a smaller batch size) -> a fresh static graph each.
"""
import math
import random
from enum import Enum, auto
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


# ---- speechbrain/core.py ----------------------------------------------------
run_opt_defaults = {
    "device": "cpu",
    "jit": False,
    "jit_module_keys": None,
    "compile": False,
    "compile_module_keys": None,
    "compile_mode": "default",
    "compile_using_fullgraph": False,
    "compile_using_dynamic_shape_tracing": True,
    "precision": "fp32",
    "eval_precision": "fp32",
}


class Stage(Enum):
    """Simple enum to track stage of experiments."""

    TRAIN = auto()
    VALID = auto()
    TEST = auto()


class Brain:
    def __init__(self, modules=None, opt_class=None, hparams=None, run_opts=None, checkpointer=None):
        self.optimizers_dict = None
        self.opt_class = opt_class
        self.checkpointer = checkpointer

        for arg, default in run_opt_defaults.items():
            if run_opts is not None and arg in run_opts:
                setattr(self, arg, run_opts[arg])
            else:
                # If any arg from run_opt_defaults exist in hparams and
                # not in command line args "run_opts"
                if hparams is not None and arg in hparams:
                    setattr(self, arg, hparams[arg])
                else:
                    setattr(self, arg, default)

        # Put modules on the right device, accessible with dot notation
        self.modules = torch.nn.ModuleDict(modules).to(self.device)

        # Make hyperparams available with dot notation too
        if hparams is not None:
            self.hparams = SimpleNamespace(**hparams)

        self.step = 0
        self.avg_train_loss = 0.0

    def on_fit_start(self):
        # Run this *after* starting all processes since jit/compiled modules
        # cannot be pickled.
        self._compile()

        # Initialize optimizers after parameters are configured
        self.init_optimizers()

    def init_optimizers(self):
        self.optimizer = self.opt_class(self.modules.parameters())

    def zero_grad(self, set_to_none=False):
        self.optimizer.zero_grad(set_to_none)

    def fit_batch(self, batch):
        outputs = self.compute_forward(batch, Stage.TRAIN)
        loss = self.compute_objectives(outputs, batch, Stage.TRAIN)
        loss.backward()
        self.optimizer.step()
        self.zero_grad()
        return loss.detach().cpu()

    def evaluate_batch(self, batch, stage):
        out = self.compute_forward(batch, stage=stage)
        loss = self.compute_objectives(out, batch, stage=stage)
        return loss.detach().cpu()

    def update_average(self, loss, avg_loss):
        if torch.isfinite(loss):
            avg_loss -= avg_loss / self.step
            avg_loss += float(loss) / self.step
        return avg_loss

    def _fit_train(self, train_set, epoch, enable):
        # Training stage
        self.on_stage_start(Stage.TRAIN, epoch)
        self.modules.train()
        self.zero_grad()
        for batch in train_set:
            self.step += 1
            loss = self.fit_batch(batch)
            self.avg_train_loss = self.update_average(loss, self.avg_train_loss)
        self.zero_grad(set_to_none=True)  # flush gradients
        self.on_stage_end(Stage.TRAIN, self.avg_train_loss, epoch)
        self.avg_train_loss = 0.0
        self.step = 0

    def _fit_valid(self, valid_set, epoch, enable):
        # Validation stage
        if valid_set is not None:
            self.on_stage_start(Stage.VALID, epoch)
            self.modules.eval()
            avg_valid_loss = 0.0
            with torch.no_grad():
                for batch in valid_set:
                    self.step += 1
                    loss = self.evaluate_batch(batch, stage=Stage.VALID)
                    avg_valid_loss = self.update_average(loss, avg_valid_loss)
                self.step = 0
                self.on_stage_end(Stage.VALID, avg_valid_loss, epoch)

    def fit(self, epoch_counter, train_set, valid_set=None, progressbar=None,
            train_loader_kwargs={}, valid_loader_kwargs={}):
        self.on_fit_start()
        for epoch in epoch_counter:
            self._fit_train(train_set=train_set, epoch=epoch, enable=False)
            self._fit_valid(valid_set=valid_set, epoch=epoch, enable=False)

    def _compile(self):
        """Compile requested modules with either JIT or TorchInductor."""
        compile_available = hasattr(torch, "compile")

        if not compile_available and self.compile_module_keys is not None:
            raise ValueError(
                "'compile_module_keys' specified, but this install of PyTorch "
                "seems to be too old to support it."
            )
        # Modules to compile with torch.compile
        compile_module_keys = set()
        if self.compile:
            if self.compile_module_keys is None:
                compile_module_keys = set(self.modules)
            else:
                compile_module_keys = set(self.compile_module_keys)

        # Modules to compile with jit
        jit_module_keys = set()
        if self.jit:
            if self.jit_module_keys is None:
                jit_module_keys = set(self.modules)
            else:
                jit_module_keys = set(self.jit_module_keys)

        # find missing keys
        for name in compile_module_keys | jit_module_keys:
            if name not in self.modules:
                raise ValueError(
                    f"module {name} is not defined in your hparams file."
                )

        # try 'torch.compile', remove successful compiles from JIT list
        for name in sorted(compile_module_keys):
            try:
                module = torch.compile(
                    self.modules[name],
                    # real: mode=self.compile_mode (an inductor option; the
                    # counting backend takes none)
                    backend=counting_backend,
                    fullgraph=self.compile_using_fullgraph,
                    dynamic=self.compile_using_dynamic_shape_tracing,
                )
            except Exception as e:
                print(f"'{name}' in 'compile_module_keys' failed to compile: {e}")
                continue

            self.modules[name] = module.to(self.device)
            jit_module_keys.discard(name)

        for name in jit_module_keys:
            module = torch.jit.script(self.modules[name])
            self.modules[name] = module.to(self.device)


# ---- speechbrain/nnet/CNN.py ------------------------------------------------
def get_padding_elem(L_in: int, stride: int, kernel_size: int, dilation: int):
    if stride > 1:
        padding = [math.floor(kernel_size / 2), math.floor(kernel_size / 2)]

    else:
        L_out = (
            math.floor((L_in - dilation * (kernel_size - 1) - 1) / stride) + 1
        )
        padding = [
            math.floor((L_in - L_out) / 2),
            math.floor((L_in - L_out) / 2),
        ]
    return padding


class Conv1d(nn.Module):
    def __init__(self, out_channels, kernel_size, input_shape=None, in_channels=None, stride=1,
                 dilation=1, padding="same", groups=1, bias=True, padding_mode="reflect",
                 skip_transpose=False, weight_norm=False, conv_init=None, default_padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.dilation = dilation
        self.padding = padding
        self.padding_mode = padding_mode
        self.unsqueeze = False
        self.skip_transpose = skip_transpose

        if input_shape is None and in_channels is None:
            raise ValueError("Must provide one of input_shape or in_channels")

        if in_channels is None:
            in_channels = self._check_input_shape(input_shape)

        self.in_channels = in_channels

        self.conv = nn.Conv1d(
            in_channels,
            out_channels,
            self.kernel_size,
            stride=self.stride,
            dilation=self.dilation,
            padding=default_padding,
            groups=groups,
            bias=bias,
        )

    def forward(self, x):
        if not self.skip_transpose:
            x = x.transpose(1, -1)

        if self.unsqueeze:
            x = x.unsqueeze(1)

        if self.padding == "same":
            x = self._manage_padding(
                x, self.kernel_size, self.dilation, self.stride
            )

        elif self.padding == "causal":
            num_pad = (self.kernel_size - 1) * self.dilation
            x = F.pad(x, (num_pad, 0))

        elif self.padding == "valid":
            pass

        else:
            raise ValueError(
                "Padding must be 'same', 'valid' or 'causal'. Got "
                + self.padding
            )

        wx = self.conv(x)

        if self.unsqueeze:
            wx = wx.squeeze(1)

        if not self.skip_transpose:
            wx = wx.transpose(1, -1)

        return wx

    def _manage_padding(self, x, kernel_size: int, dilation: int, stride: int):
        # Detecting input shape
        L_in = self.in_channels

        # Time padding
        padding = get_padding_elem(L_in, stride, kernel_size, dilation)

        # Applying padding
        x = F.pad(x, padding, mode=self.padding_mode)

        return x

    def _check_input_shape(self, shape):
        if len(shape) == 2:
            self.unsqueeze = True
            in_channels = 1
        elif self.skip_transpose:
            in_channels = shape[1]
        elif len(shape) == 3:
            in_channels = shape[2]
        else:
            raise ValueError(
                "conv1d expects 2d, 3d inputs. Got " + str(len(shape))
            )
        return in_channels


# ---- speechbrain/nnet/normalization.py --------------------------------------
class BatchNorm1d(nn.Module):
    def __init__(self, input_shape=None, input_size=None, eps=1e-05, momentum=0.1, affine=True,
                 track_running_stats=True, combine_batch_time=False, skip_transpose=False):
        super().__init__()
        self.combine_batch_time = combine_batch_time
        self.skip_transpose = skip_transpose

        if input_size is None and skip_transpose:
            input_size = input_shape[1]
        elif input_size is None:
            input_size = input_shape[-1]

        self.norm = nn.BatchNorm1d(
            input_size,
            eps=eps,
            momentum=momentum,
            affine=affine,
            track_running_stats=track_running_stats,
        )

    def forward(self, x):
        shape_or = x.shape
        if self.combine_batch_time:
            if x.ndim == 3:
                x = x.reshape(shape_or[0] * shape_or[1], shape_or[2])
            else:
                x = x.reshape(
                    shape_or[0] * shape_or[1], shape_or[3], shape_or[2]
                )

        elif not self.skip_transpose:
            x = x.transpose(-1, 1)

        x_n = self.norm(x)

        if self.combine_batch_time:
            x_n = x_n.reshape(shape_or)
        elif not self.skip_transpose:
            x_n = x_n.transpose(1, -1)

        return x_n


# ---- speechbrain/nnet/linear.py ---------------------------------------------
class Linear(torch.nn.Module):
    def __init__(self, n_neurons, input_shape=None, input_size=None, bias=True, max_norm=None,
                 combine_dims=False):
        super().__init__()
        self.max_norm = max_norm
        self.combine_dims = combine_dims

        if input_shape is None and input_size is None:
            raise ValueError("Expected one of input_shape or input_size")

        if input_size is None:
            input_size = input_shape[-1]
            if len(input_shape) == 4 and self.combine_dims:
                input_size = input_shape[2] * input_shape[3]

        # Weights are initialized following pytorch approach
        self.w = nn.Linear(input_size, n_neurons, bias=bias)

    def forward(self, x):
        if x.ndim == 4 and self.combine_dims:
            x = x.reshape(x.shape[0], x.shape[1], x.shape[2] * x.shape[3])

        if self.max_norm is not None:
            self.w.weight.data = torch.renorm(
                self.w.weight.data, p=2, dim=0, maxnorm=self.max_norm
            )

        wx = self.w(x)
        return wx


# ---- speechbrain/nnet/activations.py ----------------------------------------
class Softmax(torch.nn.Module):
    def __init__(self, apply_log=False, dim=-1, reshape=True, dtype=torch.float32):
        super().__init__()

        if apply_log:
            self.act = F.log_softmax
        else:
            self.act = F.softmax

        self.dim = dim
        self.reshape = reshape
        self.dtype = dtype

    def forward(self, x):
        # Reshaping the tensors
        dims = x.shape

        if self.reshape:
            if len(dims) == 3:
                x = x.reshape(dims[0] * dims[1], dims[2])

            if len(dims) == 4:
                x = x.reshape(dims[0] * dims[1], dims[2], dims[3])

        x_act = self.act(x, dim=self.dim, dtype=self.dtype)

        # Retrieving the original shape format
        if self.reshape:
            if len(dims) == 3:
                x_act = x_act.reshape(dims[0], dims[1], dims[2])

            if len(dims) == 4:
                x_act = x_act.reshape(dims[0], dims[1], dims[2], dims[3])

        return x_act


# ---- speechbrain/nnet/pooling.py --------------------------------------------
class StatisticsPooling(nn.Module):
    def __init__(self, return_mean=True, return_std=True):
        super().__init__()

        # Small value for GaussNoise
        self.eps = 1e-5
        self.return_mean = return_mean
        self.return_std = return_std
        if not (self.return_mean or self.return_std):
            raise ValueError(
                "both of statistics are equal to False \n"
                "consider enabling mean and/or std statistic pooling"
            )

    def forward(self, x, lengths=None):
        if lengths is None:
            if self.return_mean:
                mean = x.mean(dim=1)
            if self.return_std:
                std = x.std(dim=1)
        else:
            mean = []
            std = []
            for snt_id in range(x.shape[0]):
                # Avoiding padded time steps
                actual_size = int(torch.round(lengths[snt_id] * x.shape[1]))

                # computing statistics
                if self.return_mean:
                    mean.append(
                        torch.mean(x[snt_id, 0:actual_size, ...], dim=0)
                    )
                if self.return_std:
                    std.append(torch.std(x[snt_id, 0:actual_size, ...], dim=0))
            if self.return_mean:
                mean = torch.stack(mean)
            if self.return_std:
                std = torch.stack(std)

        if self.return_mean:
            gnoise = self._get_gauss_noise(mean.size(), device=mean.device)
            gnoise = gnoise
            mean += gnoise
        if self.return_std:
            std = std + self.eps

        # Append mean and std of the batch
        if self.return_mean and self.return_std:
            pooled_stats = torch.cat((mean, std), dim=1)
            pooled_stats = pooled_stats.unsqueeze(1)
        elif self.return_mean:
            pooled_stats = mean.unsqueeze(1)
        elif self.return_std:
            pooled_stats = std.unsqueeze(1)

        return pooled_stats

    def _get_gauss_noise(self, shape_of_tensor, device="cpu"):
        gnoise = torch.randn(shape_of_tensor, device=device)
        gnoise -= torch.min(gnoise)
        gnoise /= torch.max(gnoise)
        gnoise = self.eps * ((1 - 9) * gnoise + 9)

        return gnoise


# ---- speechbrain/nnet/containers.py -----------------------------------------
import inspect


class Sequential(torch.nn.ModuleDict):
    def __init__(self, *layers, input_shape=None, **named_layers):
        super().__init__()

        # Make sure either layers or input_shape is passed
        if not layers and input_shape is None and not named_layers:
            raise ValueError("Must pass either layers or input shape")

        # Keep track of what layers need "lengths" passed
        self.length_layers = []

        # Replace None dimensions with arbitrary value
        self.input_shape = input_shape
        if input_shape and None in input_shape:
            self.input_shape = list(input_shape)
            for i, dim in enumerate(self.input_shape):
                # To reduce size of dummy tensors, use 1 for batch dim
                if i == 0 and dim is None:
                    dim = 1

                # Use 64 as nice round arbitrary value, big enough that
                # halving this dimension a few times doesn't reach 1
                self.input_shape[i] = dim or 256

        # Append non-named layers
        for layer in layers:
            self.append(layer)

        # Append named layers
        for name, layer in named_layers.items():
            self.append(layer, layer_name=name)

    def append(self, layer, *args, layer_name=None, **kwargs):
        # Compute layer_name
        if layer_name is None:
            layer_name = str(len(self))
        elif layer_name in self:
            index = 0
            while f"{layer_name}_{index}" in self:
                index += 1
            layer_name = f"{layer_name}_{index}"

        # Check if it needs to be constructed with input shape
        if self.input_shape:
            argspec = inspect.getfullargspec(layer)
            if "input_shape" in argspec.args + argspec.kwonlyargs:
                input_shape = self.get_output_shape()
                layer = layer(*args, input_shape=input_shape, **kwargs)

        # Finally, append the layer.
        try:
            self.add_module(layer_name, layer)
        except TypeError:
            raise ValueError(
                "Must pass `input_shape` at initialization and use "
                "modules that take `input_shape` to infer shape when "
                "using `append()`."
            )

    def get_output_shape(self):
        with torch.no_grad():
            dummy_input = torch.zeros(self.input_shape)
            dummy_output = self(dummy_input)
        return dummy_output.shape

    def forward(self, x):
        for layer in self.values():
            x = layer(x)
            if isinstance(x, tuple):
                x = x[0]

        return x


# ---- templates/speaker_id/custom_model.py (verbatim) ------------------------
class Xvector(torch.nn.Module):
    def __init__(
        self,
        device="cpu",
        activation=torch.nn.LeakyReLU,
        tdnn_blocks=5,
        tdnn_channels=[512, 512, 512, 512, 1500],
        tdnn_kernel_sizes=[5, 3, 3, 1, 1],
        tdnn_dilations=[1, 2, 3, 1, 1],
        lin_neurons=512,
        in_channels=40,
    ):
        super().__init__()
        self.blocks = nn.ModuleList()

        # TDNN layers
        for block_index in range(tdnn_blocks):
            out_channels = tdnn_channels[block_index]
            self.blocks.extend(
                [
                    Conv1d(
                        in_channels=in_channels,
                        out_channels=out_channels,
                        kernel_size=tdnn_kernel_sizes[block_index],
                        dilation=tdnn_dilations[block_index],
                    ),
                    activation(),
                    BatchNorm1d(input_size=out_channels),
                ]
            )
            in_channels = tdnn_channels[block_index]

        # Statistical pooling
        self.blocks.append(StatisticsPooling())

        # Final linear transformation
        self.blocks.append(
            Linear(
                input_size=out_channels * 2,  # mean + std,
                n_neurons=lin_neurons,
                bias=True,
                combine_dims=False,
            )
        )

    def forward(self, x, lens=None):
        for layer in self.blocks:
            try:
                x = layer(x, lengths=lens)
            except TypeError:
                x = layer(x)
        return x


class Classifier(Sequential):
    def __init__(
        self,
        input_shape,
        activation=torch.nn.LeakyReLU,
        lin_blocks=1,
        lin_neurons=512,
        out_neurons=1211,
    ):
        super().__init__(input_shape=input_shape)

        self.append(activation(), layer_name="act")
        self.append(BatchNorm1d, layer_name="norm")

        if lin_blocks > 0:
            self.append(Sequential, layer_name="DNN")

        for block_index in range(lin_blocks):
            block_name = f"block_{block_index}"
            self.DNN.append(
                Sequential, layer_name=block_name
            )
            self.DNN[block_name].append(
                Linear,
                n_neurons=lin_neurons,
                bias=True,
                layer_name="linear",
            )
            self.DNN[block_name].append(activation(), layer_name="act")
            self.DNN[block_name].append(
                BatchNorm1d, layer_name="norm"
            )

        # Final Softmax classifier
        self.append(
            Linear, n_neurons=out_neurons, layer_name="out"
        )
        self.append(
            Softmax(apply_log=True), layer_name="softmax"
        )


# ---- templates/speaker_id/train.py ------------------------------------------
class SpkIdBrain(Brain):
    def compute_forward(self, batch, stage):
        # Compute features, embeddings, and predictions
        feats, lens = self.prepare_features(batch.sig, stage)
        embeddings = self.modules.embedding_model(feats, lens)
        predictions = self.modules.classifier(embeddings)

        return predictions

    def prepare_features(self, wavs, stage):
        # stand-in: the batch already carries Fbank features (Fbank,
        # InputNormalization and wav augmentation run eagerly, not compiled)
        feats, lens = wavs
        return feats, lens

    def compute_objectives(self, predictions, batch, stage):
        _, lens = batch.sig
        spkid, _ = batch.spk_id_encoded

        # Compute the cost function (sb.nnet.losses.nll_loss, utterance-level)
        loss = F.nll_loss(predictions.squeeze(1), spkid.squeeze(1).long())
        self.loss_metric.append(float(loss))
        return loss

    def on_stage_start(self, stage, epoch=None):
        self.loss_metric = []

    def on_stage_end(self, stage, stage_loss, epoch=None):
        LOSSES.append(stage_loss)


# ---- driver: mini-librispeech-like data, dataloader_options batch_size 16 --
class PaddedBatch:  # speechbrain.dataio.batch.PaddedBatch, reduced
    def __init__(self, examples):
        lens = [e["sig"].shape[0] for e in examples]
        max_len = max(lens)
        feats = torch.zeros(len(examples), max_len, examples[0]["sig"].shape[1])
        for i, e in enumerate(examples):
            feats[i, : lens[i]] = e["sig"]
        self.sig = (feats, torch.tensor(lens, dtype=torch.float) / max_len)
        spk = torch.stack([e["spk_id_encoded"] for e in examples])
        self.spk_id_encoded = (spk, torch.ones(len(examples)))


N_MELS, N_CLASSES, BATCH = 23, 28, 16
torch.manual_seed(1986)
rng = random.Random(1986)


def utterance():
    frames = rng.randint(60, 160)  # utterances of different durations
    return {"sig": torch.randn(frames, N_MELS), "spk_id_encoded": torch.tensor([rng.randrange(N_CLASSES)])}


train_data = [utterance() for _ in range(56)]  # 3 full batches + one of 8
valid_data = [utterance() for _ in range(16)]
train_set = [PaddedBatch(train_data[i:i + BATCH]) for i in range(0, len(train_data), BATCH)]
valid_set = [PaddedBatch(valid_data[i:i + BATCH]) for i in range(0, len(valid_data), BATCH)]

hparams = {
    "compile_module_keys": ["embedding_model", "classifier"],
    "modules": {
        "embedding_model": Xvector(
            in_channels=N_MELS,
            activation=torch.nn.LeakyReLU,
            tdnn_blocks=5,
            tdnn_channels=[128, 128, 128, 128, 384],
            tdnn_kernel_sizes=[5, 3, 3, 1, 1],
            tdnn_dilations=[1, 2, 3, 1, 1],
            lin_neurons=128,
        ),
        "classifier": Classifier(
            input_shape=[None, None, 128],
            activation=torch.nn.LeakyReLU,
            lin_blocks=1,
            lin_neurons=128,
            out_neurons=N_CLASSES,
        ),
    },
    "opt_class": lambda params: torch.optim.Adam(params, lr=0.001),
}
LOSSES = []
run_opts = {"compile": True}  # python train.py train.yaml --compile

spk_id_brain = SpkIdBrain(
    modules=hparams["modules"],
    opt_class=hparams["opt_class"],
    hparams=hparams,
    run_opts=run_opts,
)
spk_id_brain.fit(
    epoch_counter=range(1, 3),
    train_set=train_set,
    valid_set=valid_set,
)

print(f"GRAPHS {GRAPHS}")
print(f"OUT {sum(LOSSES):.4f}")
