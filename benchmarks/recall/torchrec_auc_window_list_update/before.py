"""torchrec eb2d656b^ (PR #4361): `AUCMetricComputation.update` keeps the window of raw inputs as Python
lists of tensors (`predictions`, `labels`, `weights` states) that grow by one tensor per update. Traced as
part of the compiled `AUCMetric.update`, it guards on the list lengths (and `_num_samples`) every warm-up
step: one graph per update until the recompile limit.

Trimmed CPU reproduction of torchrec/metrics/rec_metric.py (RecMetric, RecMetricComputation), auc.py
(AUCMetricComputation, AUCMetric), pt2/utils.py (pt2_compile_callable) and the test's compile site
(torchrec/metrics/tests/test_auc.py::AUCMetricCompileTest); torchmetrics' `Metric` is a stand-in with its
`add_state` / `_wrap_update` logic.
"""
import abc
import functools
import math
from contextlib import contextmanager
from enum import Enum
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Type, Union

import torch
from torch import nn
from torch.profiler import record_function

GRAPHS = 0


def counting_backend(gm, example_inputs):
    global GRAPHS
    GRAPHS += 1
    return gm.forward


RecModelOutput = Union[torch.Tensor, Dict[str, torch.Tensor]]


# ---------------------------------------------------------------- torchmetrics.Metric (trimmed stand-in)
class Metric(nn.Module, abc.ABC):

    def __init__(self, process_group=None, **kwargs: Any) -> None:
        super().__init__()
        self.process_group = process_group
        self.compute_on_cpu = False
        self._enable_grad = False
        self._computed = None
        self._update_count = 0
        self._defaults: Dict[str, Union[List, torch.Tensor]] = {}
        self._reductions: Dict[str, Any] = {}
        self._persistent: Dict[str, bool] = {}
        self.update: Callable = self._wrap_update(self.update)  # type: ignore[method-assign]

    def add_state(self, name: str, default, dist_reduce_fx=None, persistent: bool = False) -> None:
        if isinstance(default, list) and default:
            raise ValueError("state variable must be a tensor or any empty list (where you can append tensors)")
        setattr(self, name, list(default) if isinstance(default, list) else default)
        self._defaults[name] = list(default) if isinstance(default, list) else default.detach().clone()
        self._persistent[name] = persistent
        self._reductions[name] = dist_reduce_fx

    def _wrap_update(self, update: Callable) -> Callable:
        @functools.wraps(update)
        def wrapped_func(*args: Any, **kwargs: Any) -> None:
            self._computed = None
            self._update_count += 1
            with torch.set_grad_enabled(self._enable_grad):
                update(*args, **kwargs)
            if self.compute_on_cpu:
                self._move_list_states_to_cpu()

        return wrapped_func

    def _move_list_states_to_cpu(self) -> None:
        for key in self._defaults:
            current_val = getattr(self, key)
            if isinstance(current_val, list):
                setattr(self, key, [cur_v.to("cpu") for cur_v in current_val])

    @property
    def device(self):
        return torch.device("cpu")


# ---------------------------------------------------------------- torchrec/pt2/utils.py
def pt2_compile_callable(f: Callable) -> Callable:
    """
    This method is used to decorate the update and compute methods of a metric computation class.
    If the metric computation class has enable_pt2_compile attribute set to True,
    then the update and compute methods will be compiled using torch.compile.
    """

    @functools.wraps(f)
    def inner_forward(
        ref: torch.nn.Module,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        if hasattr(ref, "enable_pt2_compile") and ref.enable_pt2_compile:
            pt2_compiled_attr_name = f"_{f.__name__}_pt2_compiled"
            if not hasattr(ref, pt2_compiled_attr_name):
                setattr(ref, pt2_compiled_attr_name, torch.compile(f))
            return getattr(ref, pt2_compiled_attr_name)(ref, *args, **kwargs)

        return f(ref, *args, **kwargs)

    return inner_forward


# ---------------------------------------------------------------- torchrec/metrics/rec_metric.py (trimmed)
class RecComputeMode(Enum):
    FUSED_TASKS_COMPUTATION = 1
    UNFUSED_TASKS_COMPUTATION = 2
    FUSED_TASKS_AND_STATES_COMPUTATION = 3


class RecTaskInfo:
    def __init__(self, name: str = "DefaultTask", label_name: str = "label", prediction_name: str = "prediction",
                 weight_name: str = "weight"):
        self.name = name
        self.label_name = label_name
        self.prediction_name = prediction_name
        self.weight_name = weight_name


DefaultTaskInfo = RecTaskInfo()


class RecMetricException(Exception):
    pass


class RecMetricComputation(Metric, abc.ABC):
    r"""The internal computation class template."""

    def __init__(
        self,
        my_rank: int,
        batch_size: int,
        n_tasks: int,
        window_size: int,
        compute_on_all_ranks: bool = False,
        should_validate_update: bool = False,
        compute_mode: RecComputeMode = RecComputeMode.UNFUSED_TASKS_COMPUTATION,
        process_group=None,
        fused_update_limit: int = 0,
        allow_missing_label_with_zero_weight: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self._enable_pt2_compile: bool = kwargs.pop("enable_pt2_compile", False)
        super().__init__(process_group=process_group, *args, **kwargs)

        self._my_rank = my_rank
        self._n_tasks = n_tasks
        self._batch_size = batch_size
        self._window_size = window_size
        self._compute_on_all_ranks = compute_on_all_ranks
        self._should_validate_update = should_validate_update
        self._batch_window_buffers = {} if self._window_size > 0 else None
        self._compute_mode: RecComputeMode = compute_mode

    def _add_state(self, name: str, default, add_window_state: bool, **kwargs: Any) -> None:
        super().add_state(name, default, **kwargs)
        if add_window_state:
            raise NotImplementedError("window states are not used by AUC")

    @abc.abstractmethod
    def update(self, *, predictions: Optional[torch.Tensor], labels: torch.Tensor, weights: Optional[torch.Tensor],
               **kwargs: Dict[str, Any]) -> None:
        pass


class RecMetric(nn.Module, abc.ABC):
    _computation_class: Type[RecMetricComputation]
    PREDICTIONS = "predictions"
    LABELS = "labels"
    WEIGHTS = "weights"

    def __init__(
        self,
        world_size: int,
        my_rank: int,
        batch_size: int,
        tasks: List[RecTaskInfo],
        compute_mode: RecComputeMode = RecComputeMode.UNFUSED_TASKS_COMPUTATION,
        window_size: int = 100,
        fused_update_limit: int = 0,
        compute_on_all_ranks: bool = False,
        should_validate_update: bool = False,
        process_group=None,
        **kwargs: Dict[str, Any],
    ) -> None:
        super().__init__()
        self._world_size = world_size
        self._my_rank = my_rank
        self._window_size = math.ceil(window_size / world_size)
        self._batch_size = batch_size
        self._metrics_computations = nn.ModuleList()
        self._tasks = tasks
        self._compute_mode = compute_mode
        self._fused_update_limit = fused_update_limit
        self._should_validate_update = should_validate_update
        self._update_buffers = {
            self.PREDICTIONS: [],
            self.LABELS: [],
            self.WEIGHTS: [],
        }
        self.enable_pt2_compile: bool = kwargs.get("enable_pt2_compile", False)
        if "enable_pt2_compile" in kwargs:
            del kwargs["enable_pt2_compile"]
        self._should_clone_update_inputs: bool = kwargs.get("should_clone_update_inputs", False)
        if "should_clone_update_inputs" in kwargs:
            del kwargs["should_clone_update_inputs"]

        if self._window_size < self._batch_size:
            raise ValueError(
                f"Local window size must be larger than batch size. Got local window size {self._window_size} and batch size {self._batch_size}."
            )

        task_per_metric = 1  # UNFUSED_TASKS_COMPUTATION
        for task_config in self._tasks:
            kwargs["fused_update_limit"] = fused_update_limit
            metric_computation = self._computation_class(
                my_rank=my_rank,
                batch_size=batch_size,
                n_tasks=task_per_metric,
                window_size=self._window_size,
                compute_on_all_ranks=compute_on_all_ranks,
                should_validate_update=self._should_validate_update,
                compute_mode=compute_mode,
                process_group=process_group,
                **{
                    **kwargs,
                    "enable_pt2_compile": self.enable_pt2_compile,
                },
            )
            self._metrics_computations.append(metric_computation)

    @torch.compiler.disable
    def _log_tensor_sizes(self, predictions: RecModelOutput, labels: RecModelOutput,
                          weights: Optional[RecModelOutput]) -> None:
        """Log tensor size metadata for debugging (EventLoggingHandler in torchrec)."""
        pass

    def _update_unfused(
        self,
        log_tensors: bool,
        predictions: RecModelOutput,
        labels: RecModelOutput,
        weights: Optional[RecModelOutput],
        **kwargs: Dict[str, Any],
    ) -> None:
        """Process update for UNFUSED_TASKS compute modes.

        Iterates over tasks and updates each metric computation independently.
        """
        if log_tensors:
            self._log_tensor_sizes(predictions, labels, weights)
        for task, metric_ in zip(self._tasks, self._metrics_computations):
            if task.name not in predictions:
                continue
            if torch.numel(predictions[task.name]) == 0:
                assert torch.numel(labels[task.name]) == 0
                assert weights is None or torch.numel(weights[task.name]) == 0
                continue
            task_predictions = (
                predictions[task.name].view(1, -1)
                if predictions[task.name].dim() == labels[task.name].dim()
                # predictions[task.name].dim() == labels[task.name].dim() + 1 for multiclass models
                else predictions[task.name].view(1, -1, predictions[task.name].size()[-1]))
            task_labels = labels[task.name].view(1, -1)
            task_weights = weights[task.name].view(1, -1)
            metric_.update(
                predictions=task_predictions,
                labels=task_labels,
                weights=task_weights,
                **kwargs,
            )

    def _update(
        self,
        *,
        predictions: RecModelOutput,
        labels: RecModelOutput,
        weights: Optional[RecModelOutput],
        _log_tensors: bool = True,
        **kwargs: Dict[str, Any],
    ) -> None:
        log_tensors: bool = _log_tensors
        with torch.no_grad():
            self._update_unfused(log_tensors, predictions, labels, weights, **kwargs)

    @pt2_compile_callable
    def update(
        self,
        *,
        predictions: RecModelOutput,
        labels: RecModelOutput,
        weights: Optional[RecModelOutput],
        **kwargs: Dict[str, Any],
    ) -> None:
        with record_function(f"## {self.__class__.__name__}:update ##"):
            log_tensors = bool(kwargs.pop("_log_tensors", True))
            self._update(
                predictions=predictions,
                labels=labels,
                weights=weights,
                _log_tensors=log_tensors,
                **kwargs,
            )


# ---------------------------------------------------------------- torchrec/metrics/auc.py (trimmed)
PREDICTIONS = "predictions"
LABELS = "labels"
WEIGHTS = "weights"
GROUPING_KEYS = "grouping_keys"
REQUIRED_INPUTS = "required_inputs"


def _state_reduction(state: List[torch.Tensor], dim: int = 1) -> List[torch.Tensor]:
    return [torch.cat(state, dim=dim)]


class AUCMetricComputation(RecMetricComputation):
    r"""
    This class implements the RecMetricComputation for AUC, i.e. Area Under the Curve.
    """

    def __init__(
        self,
        *args: Any,
        grouped_auc: bool = False,
        apply_bin: bool = False,
        fused_update_limit: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._grouped_auc: bool = grouped_auc
        self._apply_bin: bool = apply_bin
        self._num_samples: int = 0
        self._add_state(PREDICTIONS, [], add_window_state=False, dist_reduce_fx=_state_reduction, persistent=False)
        self._add_state(LABELS, [], add_window_state=False, dist_reduce_fx=_state_reduction, persistent=False)
        self._add_state(WEIGHTS, [], add_window_state=False, dist_reduce_fx=_state_reduction, persistent=False)
        self._init_states()

    def _init_states(self) -> None:
        if len(getattr(self, PREDICTIONS)) > 0:
            return
        self._num_samples = 0
        getattr(self, PREDICTIONS).append(torch.zeros((self._n_tasks, 1), dtype=torch.float, device=self.device))
        getattr(self, LABELS).append(torch.zeros((self._n_tasks, 1), dtype=torch.float, device=self.device))
        getattr(self, WEIGHTS).append(torch.zeros((self._n_tasks, 1), dtype=torch.float, device=self.device))

    def update(
        self,
        *,
        predictions: Optional[torch.Tensor],
        labels: torch.Tensor,
        weights: Optional[torch.Tensor],
        **kwargs: Dict[str, Any],
    ) -> None:
        """
        Args:
            predictions (torch.Tensor): tensor of size (n_task, n_examples)
            labels (torch.Tensor): tensor of size (n_task, n_examples)
            weights (torch.Tensor): tensor of size (n_task, n_examples)
        """
        if predictions is None or weights is None:
            raise RecMetricException(
                "Inputs 'predictions' and 'weights' should not be None for AUCMetricComputation update")
        predictions = predictions.float()
        labels = labels.float()
        weights = weights.float()
        batch_size = predictions.size(-1)
        start_index = max(self._num_samples + batch_size - self._window_size, 0)

        # Using `self.predictions =` will cause Pyre errors.
        w_preds = getattr(self, PREDICTIONS)
        w_labels = getattr(self, LABELS)
        w_weights = getattr(self, WEIGHTS)

        # remove init states
        if self._num_samples == 0:
            for lst in [w_preds, w_labels, w_weights]:
                lst.pop(0)

        w_preds.append(predictions)
        w_labels.append(labels)
        w_weights.append(weights)

        self._num_samples += batch_size

        while self._num_samples > self._window_size:
            diff = self._num_samples - self._window_size
            if diff > w_preds[0].size(-1):
                self._num_samples -= w_preds[0].size(-1)
                # Remove the first element from predictions, labels, and weights
                for lst in [w_preds, w_labels, w_weights]:
                    lst.pop(0)
            else:
                # Update the first element of predictions, labels, and weights
                # Off by one potentially - keeping legacy behaviour
                for lst in [w_preds, w_labels, w_weights]:
                    lst[0] = lst[0][:, diff:]
                    # if empty tensor, remove it
                    if torch.numel(lst[0]) == 0:
                        lst.pop(0)
                self._num_samples -= diff


class AUCMetric(RecMetric):
    _computation_class: Type[RecMetricComputation] = AUCMetricComputation


# ---------------------------------------------------------------- torchrec/metrics/tests/test_auc.py::AUCMetricCompileTest (trimmed)
WORLD_SIZE = 4
BATCH_SIZE = 10


def generate_compile_model_output(step: int) -> Dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(step)
    return {
        "predictions": torch.rand(1, 5, generator=g),
        "labels": (torch.rand(1, 5, generator=g) > 0.5).float(),
        "weights": torch.ones(1, 5),
    }


def main():
    auc_compiled = AUCMetric(
        world_size=WORLD_SIZE,
        my_rank=0,
        batch_size=BATCH_SIZE,
        tasks=[DefaultTaskInfo],
        window_size=200,
    )
    compiled_update = torch.compile(auc_compiled.update, backend=counting_backend)
    # torchmetrics increments the integer ``_update_count`` nn.Module attribute on every update; the test
    # treats int module attributes as dynamic to isolate the AUC list-length recompiles.
    with torch._dynamo.config.patch(allow_unspec_int_on_nn_module=True):
        for step in range(10):
            model_output = generate_compile_model_output(step)
            compiled_update(
                predictions={DefaultTaskInfo.name: model_output["predictions"][0]},
                labels={DefaultTaskInfo.name: model_output["labels"][0]},
                weights={DefaultTaskInfo.name: model_output["weights"][0]},
                _log_tensors=False,  # avoid logging-induced graph breaks
            )
    comp = auc_compiled._metrics_computations[0]
    preds = torch.cat(getattr(comp, PREDICTIONS), dim=-1)
    labels = torch.cat(getattr(comp, LABELS), dim=-1)
    weights = torch.cat(getattr(comp, WEIGHTS), dim=-1)
    return float((preds * labels * weights).sum() + preds.sum()) + comp._num_samples


out = main()
print(f"GRAPHS {GRAPHS}")
print(f"OUT {out:.4f}")
