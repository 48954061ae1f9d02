"""LAMB and AdamW exactly as the original ALBERT release, and its learning-rate schedule.

Written by hand because no maintained library reproduces the original update:
Keras' `Lamb` and `AdamW` apply Adam bias correction, Keras' weight decay is
decoupled from the trust ratio and has no layer-adaptation exclusions, and
tensorflow-addons (whose LAMB was close) no longer imports under TF >= 2.16.

The update of a variable w with gradient g (after global-norm clipping at 1.0):
    m <- b1 m + (1 - b1) g
    v <- b2 v + (1 - b2) g^2
    u  = m / (sqrt(v) + eps)                      # no bias correction
    u += weight_decay_rate * w                    # unless the name matches an exclusion
    r  = ||w|| / ||u||  if both > 0 else 1        # LAMB only, unless excluded
    w <- w - r * lr * u
Exclusions are regexes searched in the variable's path (the model's own name,
the first path component, is left out so a model called "bias_model" does not
match "bias"): by default "LayerNorm", "layer_norm" and "bias".
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

import keras
import tensorflow as tf
from keras import ops

from albert_tf.kernels import fused_ops

DEFAULT_EXCLUSIONS = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original's schedule, as a function of the (0-based) step before the update.

    decayed = init_lr * (1 - min(step, num_train_steps) / num_train_steps) ** poly_power
    during warmup ((step - start_warmup_step) < num_warmup_steps):
        lr = init_lr * (step - start_warmup_step) / num_warmup_steps
    The decay uses the unshifted step, as the original does (so right after a
    shifted warmup the rate is below init_lr). Before `start_warmup_step` the
    original would produce a negative rate; here it is clamped to 0.
    """

    def __init__(self, init_lr: float, num_train_steps: int, num_warmup_steps: int = 0,
                 poly_power: float = 1.0, start_warmup_step: int = 0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if num_warmup_steps < 0 or start_warmup_step < 0:
            raise ValueError("num_warmup_steps and start_warmup_step must be >= 0, got "
                             f"{num_warmup_steps} and {start_warmup_step}")
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.poly_power = float(poly_power)
        self.start_warmup_step = int(start_warmup_step)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        progress = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
        decayed = self.init_lr * ops.power(1.0 - progress, self.poly_power)
        if not self.num_warmup_steps:
            return decayed
        shifted = step - float(self.start_warmup_step)
        warmup = self.init_lr * ops.maximum(shifted, 0.0) / float(self.num_warmup_steps)
        return ops.where(shifted < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps, "poly_power": self.poly_power,
                "start_warmup_step": self.start_warmup_step}


@keras.saving.register_keras_serializable(package="albert_tf")
class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`schedule(step) * scale`, where `scale` (a float32 variable, 1.0 until changed) is
    what the divergence guard lowers after a rollback: the whole schedule, warmup and
    decay, shrinks by the same factor. Build it in the strategy scope."""

    def __init__(self, schedule: keras.optimizers.schedules.LearningRateSchedule,
                 scale: float = 1.0):
        self.schedule = schedule
        self.scale = tf.Variable(float(scale), trainable=False, dtype=tf.float32,
                                 name="learning_rate_scale")

    def __call__(self, step):
        return self.schedule(step) * ops.cast(self.scale, "float32")

    def get_config(self):
        return {"schedule": keras.saving.serialize_keras_object(self.schedule),
                "scale": float(self.scale.numpy())}

    @classmethod
    def from_config(cls, config):
        return cls(keras.saving.deserialize_keras_object(config["schedule"]), config["scale"])


def learning_rate_scale(optimizer: keras.optimizers.Optimizer) -> Optional[tf.Variable]:
    """The variable scaling `optimizer`'s whole learning rate (through a LossScaleOptimizer):
    its ScaledSchedule's scale, or its constant rate's own variable; None for any other
    schedule."""
    optimizer = getattr(optimizer, "inner_optimizer", optimizer)
    rate = getattr(optimizer, "_learning_rate", None)
    if isinstance(rate, ScaledSchedule):
        return rate.scale
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule) or rate is None:
        return None
    return rate if isinstance(rate, tf.Variable) else None


def _matches(patterns: Sequence[str], path: str) -> bool:
    return any(re.search(p, path) is not None for p in patterns)


def _relative_path(variable) -> str:
    """The variable path without the top-level model name."""
    path = getattr(variable, "path", None) or variable.name
    return path.split("/", 1)[1] if "/" in path else path


def _update(gradient, w, m, v, lr, beta_1: float, beta_2: float, epsilon: float,
            weight_decay_rate: float, layer_adaptation: bool):
    """The formulas in this module's docstring, for one variable (all tensors of w's
    shape and dtype; lr a scalar): returns (new m, new v, the step subtracted from w)."""
    next_m = beta_1 * m + (1.0 - beta_1) * gradient
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(gradient)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    if weight_decay_rate:
        update = update + weight_decay_rate * w
    if layer_adaptation:
        w_norm = tf.norm(tf.reshape(w, [-1]))
        u_norm = tf.norm(tf.reshape(update, [-1]))
        safe = tf.where(u_norm > 0, u_norm, 1.0)
        ratio = tf.where((w_norm > 0) & (u_norm > 0), w_norm / safe, 1.0)
        update = ratio * update
    return next_m, next_v, lr * update


# Python floats and bools are part of the trace key: one kernel per variable shape,
# exclusion pattern and device. (Assigning the variables inside the kernel was tried: it
# was slower, 47 vs 36 ms, and no smaller.)
_update_xla = tf.function(_update, jit_compile=True)


@keras.saving.register_keras_serializable(package="albert_tf")
class AdamWeightDecay(keras.optimizers.Optimizer):
    """The original's AdamWeightDecayOptimizer (no bias correction, decay added to the update).

    Slots `m` and `v` per variable (the TF1 checkpoints call them adam_m / adam_v).
    """

    use_layer_adaptation = False

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.0, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Optional[Sequence[str]] = None,
                 name: str = "adam_weight_decay", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = float(beta_1)
        self.beta_2 = float(beta_2)
        self.epsilon = float(epsilon)
        self.exclude_from_weight_decay_patterns = list(exclude_from_weight_decay or [])

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["m", "v"])

    @property
    def learning_rate_schedule(self):
        """The LearningRateSchedule driving this optimizer (None for a constant rate)."""
        schedule = self._learning_rate
        return schedule if isinstance(
            schedule, keras.optimizers.schedules.LearningRateSchedule) else None

    def apply(self, grads, trainable_variables=None):
        """Keras' apply, with sparse gradients (an embedding lookup's IndexedSlices) made
        dense first: the global norm that `global_clipnorm` clips by is then the norm of the
        summed gradient, as the Trainer computes it (the norm of IndexedSlices' values
        counts a token that occurs twice in a batch as two rows)."""
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                 for g in grads]
        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return super().apply(grads, trainable_variables)
        # Several replicas (Keras' fit under a strategy): the replicas' gradients are summed
        # before `global_clipnorm` clips them, so the clip sees the global batch's gradient,
        # as the original's and the Trainer's (Keras clips each replica's part, then sums).
        present = [g for g in grads if g is not None]
        summed = iter(context.all_reduce(tf.distribute.ReduceOp.SUM, present) if present
                      else [])
        grads = [None if g is None else next(summed) for g in grads]
        self._summed_by_apply = True
        try:
            return super().apply(grads, trainable_variables)
        finally:
            self._summed_by_apply = False

    def _all_reduce_sum_gradients(self, grads_and_vars):
        """Keras' sum over the replicas, unless `apply` summed them already."""
        if getattr(self, "_summed_by_apply", False):
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def uses_weight_decay(self, variable) -> bool:
        return bool(self.weight_decay_rate) and not _matches(
            self.exclude_from_weight_decay_patterns, _relative_path(variable))

    def uses_layer_adaptation(self, variable) -> bool:
        return False

    def update_step(self, gradient, variable, learning_rate):
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        gradient = tf.cast(tf.convert_to_tensor(gradient), variable.dtype)  # IndexedSlices too
        lr = ops.cast(learning_rate, variable.dtype)
        # In a traced training step the update is one XLA kernel: one read of g, w, m
        # and v and one write of the new m, v and the step, instead of ~12 passes
        # over variable-sized temporaries (LAMB on ALBERT-base: 47 -> 36 ms).
        formula = _update_xla if fused_ops.use_fused() else _update
        next_m, next_v, step = formula(
            gradient, tf.convert_to_tensor(variable), tf.convert_to_tensor(m),
            tf.convert_to_tensor(v), lr, self.beta_1, self.beta_2, self.epsilon,
            self.weight_decay_rate if self.uses_weight_decay(variable) else 0.0,
            self.uses_layer_adaptation(variable))
        self.assign(m, next_m)
        self.assign(v, next_v)
        self.assign_sub(variable, step)

    def get_config(self):
        config = super().get_config()
        config.update(weight_decay_rate=self.weight_decay_rate, beta_1=self.beta_1,
                      beta_2=self.beta_2, epsilon=self.epsilon,
                      exclude_from_weight_decay=self.exclude_from_weight_decay_patterns)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class Lamb(AdamWeightDecay):
    """The original's LAMBOptimizer: the AdamW update scaled by the trust ratio ||w|| / ||u||.

    `exclude_from_layer_adaptation` defaults to `exclude_from_weight_decay`, as the original.
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate: float = 0.0, beta_1: float = 0.9,
                 beta_2: float = 0.999, epsilon: float = 1e-6,
                 exclude_from_weight_decay: Optional[Sequence[str]] = None,
                 exclude_from_layer_adaptation: Optional[Sequence[str]] = None,
                 name: str = "lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate,
                         beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
                         exclude_from_weight_decay=exclude_from_weight_decay, name=name,
                         **kwargs)
        self.exclude_from_layer_adaptation_patterns = list(
            exclude_from_layer_adaptation or self.exclude_from_weight_decay_patterns)

    def uses_layer_adaptation(self, variable) -> bool:
        return not _matches(self.exclude_from_layer_adaptation_patterns,
                            _relative_path(variable))

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = self.exclude_from_layer_adaptation_patterns
        return config


def create_optimizer(init_lr: float, num_train_steps: int, num_warmup_steps: int,
                     optimizer: str = "lamb", poly_power: float = 1.0,
                     start_warmup_step: int = 0, weight_decay_rate: float = 0.01,
                     clip_norm: Optional[float] = 1.0) -> AdamWeightDecay:
    """The optimizer of the original's `create_optimizer`: schedule, decay 0.01, eps 1e-6,
    exclusions LayerNorm/layer_norm/bias, and gradients clipped to global norm `clip_norm`.
    The schedule is wrapped in a ScaledSchedule (scale 1.0: the original's rates) that the
    divergence guard can lower.
    """
    schedule = ScaledSchedule(WarmupPolynomialDecay(init_lr, num_train_steps, num_warmup_steps,
                                                    poly_power, start_warmup_step))
    kwargs = dict(learning_rate=schedule, weight_decay_rate=weight_decay_rate, beta_1=0.9,
                  beta_2=0.999, epsilon=1e-6, exclude_from_weight_decay=DEFAULT_EXCLUSIONS,
                  global_clipnorm=clip_norm)
    if optimizer == "lamb":
        return Lamb(**kwargs)
    if optimizer == "adamw":
        return AdamWeightDecay(**kwargs)
    raise ValueError(f"unknown optimizer {optimizer!r}; choose 'lamb' or 'adamw'")
