"""The shared core of every checkpoint reader: name and shape checks, all-or-nothing
assignment, and the `LoadReport` each reader returns.

`assign_named_arrays` checks every name and shape, and reads every tensor, before the
first variable is assigned, so an error leaves the model as it was.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from typing import Callable, Dict, List, Mapping, NamedTuple, Sequence, Tuple

import numpy as np

from albert_tf.checkpoints import names as tf1_names
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError, UserValueError

logger = logging.getLogger(__name__)

# Optimizer state and counters written by the original (AdamWeightDecay / LAMB slots,
# global_step) and by stock TF1 optimizers; never model weights.
_OPTIMIZER_RE = re.compile(
    r"(^|/)(adam_m|adam_v|lamb_m|lamb_v|Adam|Adam_1|Momentum|ExponentialMovingAverage)$"
    r"|^global_step$|^beta[12]_power(_\d+)?$|AdamWeightDecayOptimizer|LAMBOptimizer"
    r"|^(current_loss_scale|good_steps)$")
# The naming some later TF1 code writes: `group_0_2/layer_2/inner_group_0/layer_normalization_5`.
_LEGACY_RE = re.compile(r"/layer_normalization(_\d+)?/|/transformer/group_\d+_\d+/|"
                        r"/transformer/.*/layer_\d+/")
_GROUP_RE = re.compile(r"/transformer/group_(\d+)/")
_INNER_RE = re.compile(r"/inner_group_(\d+)/")


class CheckpointMismatchError(UserError, ValueError):
    """The checkpoint does not fit the model: names, shapes or config fields differ."""


@dataclasses.dataclass
class LoadReport:
    """What a load did. Names are TF1 names (the model's, see `albert_tf.checkpoints.names`).

    loaded:   model variables that received a value
    missing:  model variables left at their initial values (heads absent from the checkpoint)
    unused:   checkpoint variables no model variable took (optimizer state excluded)
    skipped:  optimizer slots, `global_step` and similar, ignored on purpose
    renamed:  model name -> checkpoint name, where they differ (TF-Hub prefix, init_from_group0)
    """

    source: str
    format: str
    loaded: List[str] = dataclasses.field(default_factory=list)
    missing: List[str] = dataclasses.field(default_factory=list)
    unused: List[str] = dataclasses.field(default_factory=list)
    skipped: List[str] = dataclasses.field(default_factory=list)
    renamed: Dict[str, str] = dataclasses.field(default_factory=dict)

    def summary(self, max_names: int = 20) -> str:
        """A human-readable multi-line summary (name lists cut at `max_names`)."""
        def names(items):
            shown = ", ".join(items[:max_names])
            return shown + (f", ... ({len(items) - max_names} more)" if len(items) > max_names
                             else "")
        lines = [f"Loaded {len(self.loaded)} variables from {self.format} checkpoint "
                 f"{self.source}"]
        if self.renamed:
            lines.append(f"  {len(self.renamed)} read under another name "
                         f"(e.g. {next(iter(self.renamed))} <- "
                         f"{next(iter(self.renamed.values()))})")
        lines.append(f"  model variables left at initial values: {len(self.missing)}"
                     + (f" ({names(self.missing)})" if self.missing else ""))
        lines.append(f"  checkpoint variables unused: {len(self.unused)}"
                     + (f" ({names(self.unused)})" if self.unused else ""))
        lines.append(f"  optimizer state / counters ignored: {len(self.skipped)}")
        return "\n".join(lines)

    __str__ = summary


def is_optimizer_state(name: str) -> bool:
    return bool(_OPTIMIZER_RE.search(name))


def _reshape_compatible(have: Tuple[int, ...], want: Tuple[int, ...], name: str) -> bool:
    """True when a kernel only differs by merged/split axes (e.g. [H, N*D] vs [H, N, D])."""
    if have == want:
        return True
    return (name.endswith("kernel") and len(have) != len(want)
            and int(np.prod(have)) == int(np.prod(want))
            and (have[0] == want[0] or have[-1] == want[-1]))


def _shape_hint(name: str) -> str:
    """Which model argument a head variable's shape depends on (encoder shapes are
    diagnosed field by field in `_check_config`)."""
    if name in ("output_weights", "output_bias"):
        return (" (num_labels / the task: run_classifier stores [num_labels, H], "
                "run_race [1, H])")
    if name == "cls/predictions/output_bias":
        return " (vocab_size)"
    if name.startswith("cls/predictions/"):
        return " (embedding_size)"
    return ""


def _infer_fields(shapes: Mapping[str, Tuple[int, ...]]) -> Dict[str, Tuple[int, str]]:
    """Config fields readable from encoder shapes: field -> (value, evidence)."""
    found: Dict[str, Tuple[int, str]] = {}

    def take(field, name, axis):
        if name in shapes and field not in found:
            found[field] = (shapes[name][axis], f"{name} {list(shapes[name])}")

    take("vocab_size", "bert/embeddings/word_embeddings", 0)
    take("embedding_size", "bert/embeddings/word_embeddings", 1)
    take("max_position_embeddings", "bert/embeddings/position_embeddings", 0)
    take("type_vocab_size", "bert/embeddings/token_type_embeddings", 0)
    take("hidden_size", "bert/pooler/dense/kernel", 1)
    for name in sorted(shapes):
        if name.endswith("/attention_1/self/query/kernel"):
            take("hidden_size", name, 1)
        if name.endswith("/ffn_1/intermediate/dense/kernel"):
            take("intermediate_size", name, 1)
    groups = {int(m.group(1)) for n in shapes for m in [_GROUP_RE.search(n)] if m}
    inner = {int(m.group(1)) for n in shapes for m in [_INNER_RE.search(n)] if m}
    if groups:
        found["num_hidden_groups"] = (max(groups) + 1,
                                      f"groups {sorted(groups)} under bert/encoder/transformer")
    if inner:
        found["inner_group_num"] = (max(inner) + 1, f"inner groups {sorted(inner)}")
    return found


def _check_config(config: AlbertConfig, shapes: Mapping[str, Tuple[int, ...]], source: str,
                  init_from_group0: bool) -> None:
    """Raises CheckpointMismatchError naming each config field that contradicts the checkpoint."""
    expected = dict(config.to_dict())
    if config.parameter_sharing == "none":
        expected["num_hidden_groups"] = config.num_hidden_layers
    problems = []
    for field, (value, evidence) in _infer_fields(shapes).items():
        if field == "num_hidden_groups" and init_from_group0:
            continue
        want = expected[field]
        if value != want:
            hint = ("; to initialise every group from the checkpoint's group 0 pass "
                    "init_from_group0=True" if field == "num_hidden_groups" and value < want
                    else "")
            problems.append(f"{field} is {want} in the config but {value} in the checkpoint "
                            f"({evidence}){hint}")
    has_projection = "bert/encoder/embedding_hidden_mapping_in/kernel" in shapes
    if has_projection and config.embedding_size == config.hidden_size:
        problems.append("the checkpoint has bert/encoder/embedding_hidden_mapping_in (so its "
                        "embedding_size != hidden_size) but the config has embedding_size == "
                        f"hidden_size == {config.hidden_size}")
    if problems:
        raise CheckpointMismatchError(
            f"config does not match checkpoint {source}:\n  - " + "\n  - ".join(problems)
            + "\n(num_attention_heads and hidden_act cannot be read from a checkpoint: "
              "check them in albert_config.json)")


def model_config(model) -> AlbertConfig:
    config = getattr(model, "config", None)
    if not isinstance(config, AlbertConfig):
        raise TypeError(f"{type(model).__name__} has no AlbertConfig `config` attribute")
    return config


class _PlannedAssignment(NamedTuple):
    """One model variable and the checkpoint tensor it will receive."""

    model_name: str  # the variable's TF1 name in the model
    checkpoint_name: str  # the name it is read under (differs with init_from_group0)
    variable: object  # the model's tf.Variable


# The original has no embedding projection when embedding_size == hidden_size; Hugging
# Face and keras-hub checkpoints always hold one.
PROJECTION = "bert/encoder/embedding_hidden_mapping_in"


def drop_identity_projection(arrays: Dict[str, np.ndarray], hidden_size: int,
                             mismatch: str) -> bool:
    """Removes the TF1-named embedding projection from `arrays` when it is the identity (no
    bias or a zero one), for a model whose embedding_size == hidden_size; a projection that
    is not the identity is a CheckpointMismatchError with `mismatch`. Returns whether one
    was removed."""
    kernel = arrays.pop(PROJECTION + "/kernel", None)
    bias = arrays.pop(PROJECTION + "/bias", None)
    if kernel is None:
        return False
    if not (np.array_equal(kernel, np.eye(hidden_size, dtype=kernel.dtype))
            and (bias is None or not np.any(bias))):
        raise CheckpointMismatchError(mismatch)
    return True


def assign_named_arrays(model, shapes: Mapping[str, Tuple[int, ...]],
                        read: Callable[[str], np.ndarray], source: str, fmt: str,
                        init_from_group0: bool = False,
                        optional_encoder: Sequence[str] = ()) -> LoadReport:
    """Assigns checkpoint tensors, keyed by TF1 name, to `model`'s variables.

    Args:
      model: any model with a `tf1_names` layout.
      shapes: every checkpoint name (already stripped of a TF-Hub `module/` prefix) -> shape.
      read: name -> ndarray for a name of `shapes`.
      source, fmt: for messages and the report.
      init_from_group0: read every `group_g` variable from `group_0` (the original's flag).
      optional_encoder: encoder names whose absence is reported instead of raised.
    Raises CheckpointMismatchError (config fields, shapes, missing encoder variables)
    before any variable is changed.
    """
    model_variables = tf1_names.variables_for(model)
    _refuse_legacy_naming(shapes, source)
    _check_config(model_config(model), shapes, source, init_from_group0)
    plan, absent = _plan_assignments(model_variables, shapes, source, init_from_group0,
                                     optional_encoder)
    # Every tensor is read before the first assignment, so a read error changes nothing.
    values = _read_planned_values(plan, read, source)
    report = LoadReport(source=source, format=fmt, missing=absent)
    _assign_planned_values(plan, values, report)
    _report_checkpoint_leftovers(shapes, plan, report)
    logger.info("%s", report.summary())
    return report


def _refuse_legacy_naming(shapes: Mapping[str, Tuple[int, ...]], source: str) -> None:
    """Raises CheckpointMismatchError for the later TF1 code's `layer_normalization_K` names."""
    legacy_names = sorted(name for name in shapes if _LEGACY_RE.search(name))
    if legacy_names:
        raise CheckpointMismatchError(
            f"{source} uses the `group_X_Y/layer_N/.../layer_normalization_K` naming written by "
            f"later, modified TF1 ALBERT code (e.g. {legacy_names[0]}); it is not supported: its "
            "numbered layer_normalization_K scopes cannot be matched to the original's "
            "post-attention `LayerNorm` / post-FFN `LayerNorm_1` without that code. Only the "
            "official names (…/inner_group_k/LayerNorm, …/LayerNorm_1) are read.")


def _plan_assignments(model_variables: Mapping[str, object],
                      shapes: Mapping[str, Tuple[int, ...]], source: str,
                      init_from_group0: bool, optional_encoder: Sequence[str]
                      ) -> Tuple[List[_PlannedAssignment], List[str]]:
    """Matches each model variable to a checkpoint name and checks its shape.

    Returns (the assignments in model order, the model names the checkpoint lacks and
    may lack: heads and `optional_encoder`). Raises CheckpointMismatchError for absent
    encoder variables, then for shapes that differ beyond merged / split kernel axes.
    """
    plan: List[_PlannedAssignment] = []
    absent, absent_encoder, shape_mismatches = [], [], []
    for model_name, variable in model_variables.items():
        checkpoint_name = (_GROUP_RE.sub("/transformer/group_0/", model_name)
                           if init_from_group0 else model_name)
        if checkpoint_name not in shapes:
            if tf1_names.is_encoder_name(model_name) and model_name not in optional_encoder:
                absent_encoder.append(model_name)
            else:
                absent.append(model_name)
            continue
        checkpoint_shape, model_shape = tuple(shapes[checkpoint_name]), tuple(variable.shape)
        if not _reshape_compatible(checkpoint_shape, model_shape, model_name):
            shape_mismatches.append(
                f"{checkpoint_name}: checkpoint shape {list(checkpoint_shape)}, model expects "
                f"{list(model_shape)}{_shape_hint(model_name)}")
            continue
        plan.append(_PlannedAssignment(model_name, checkpoint_name, variable))
    if absent_encoder:
        raise CheckpointMismatchError(
            f"{source} lacks {len(absent_encoder)} encoder variable(s) the model needs: "
            + ", ".join(absent_encoder[:10]) + (" ..." if len(absent_encoder) > 10 else "")
            + ". Is it an ALBERT checkpoint of the same architecture (num_hidden_groups, "
              "inner_group_num, parameter_sharing)?")
    if shape_mismatches:
        raise CheckpointMismatchError(f"{source}: shape mismatch\n  - "
                                      + "\n  - ".join(shape_mismatches))
    return plan, absent


def _read_planned_values(plan: Sequence[_PlannedAssignment], read: Callable[[str], np.ndarray],
                         source: str) -> List[np.ndarray]:
    """Each planned tensor, read and reshaped to its variable's shape and dtype.

    Raises UserValueError naming the tensor and the file when a read fails.
    """
    values = []
    for assignment in plan:
        try:
            value = np.asarray(read(assignment.checkpoint_name))
        except Exception as err:  # noqa: BLE001 -- re-raised with the file and variable named
            raise UserValueError(f"cannot read {assignment.checkpoint_name} from {source} "
                                 f"(truncated or corrupt checkpoint?): {err}") from err
        variable = assignment.variable
        values.append(value.reshape(tuple(variable.shape)).astype(variable.dtype))
    return values


def _assign_planned_values(plan: Sequence[_PlannedAssignment], values: Sequence[np.ndarray],
                           report: LoadReport) -> None:
    """Assigns `values` (in plan order) and records each name as loaded or renamed."""
    for assignment, value in zip(plan, values):
        assignment.variable.assign(value)
        report.loaded.append(assignment.model_name)
        if assignment.checkpoint_name != assignment.model_name:
            report.renamed[assignment.model_name] = assignment.checkpoint_name


def _report_checkpoint_leftovers(shapes: Mapping[str, Tuple[int, ...]],
                                 plan: Sequence[_PlannedAssignment], report: LoadReport) -> None:
    """Records the checkpoint names nothing read: optimizer state as skipped, the rest
    as unused (sorted)."""
    read_names = {assignment.checkpoint_name for assignment in plan}
    for name in shapes:
        if name in read_names:
            continue
        (report.skipped if is_optimizer_state(name) else report.unused).append(name)
    report.unused.sort()
