"""The divergence guard: what counts as a diverged training step, and what to do about it.

After each window of steps the Trainer hands the guard the window's per-step losses
and gradient norms. A step diverges when its loss is NaN or infinite, when its
gradient's global norm is (without loss scaling: under mixed_float16 an overflowing
gradient is the loss scaler's business, and it skips that step), or when its loss is
a *spike*: above `spike_factor` times the median loss of the last `spike_window`
good steps, and above the loss of the run's first step (and `loss_floor`). On a diverged step the
Trainer rolls back to the last good checkpoint with the learning rate scaled by
`lr_factor` (`on_divergence="rollback"`, at most `max_rollbacks` times) or stops
(`"stop"`); see `albert_tf.training.loop.Trainer`.

The median of a window, not its mean: a spike must not raise its own threshold, and
one noisy step must not lower it. Only good steps enter the window. The first step's
loss as a floor: a fine-tuning run that fits its training set has medians near zero,
and then one batch holding a mistake is a hundred times the median (152x measured on
SST-2) while still below where the run started; a diverging run goes far above it
(RTE at learning rate 50: 0.70 at step 1, 681 at step 2). See docs/robust_runs.md.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Optional, Sequence

import numpy as np

ON_DIVERGENCE = ("rollback", "stop")


@dataclasses.dataclass(frozen=True)
class DivergenceOptions:
    """The guard's settings (flags --on_divergence, --spike_factor, --spike_window,
    --divergence_lr_factor, --max_rollbacks).

    spike_factor: a step whose loss exceeds this many times the median of the last
        `spike_window` good steps (and the first step's loss) diverged; 0 turns the
        spike check off (NaN and infinite losses and gradient norms are always caught).
    lr_factor: each rollback multiplies the learning rate (the whole schedule) by it.
    loss_floor: a spike also exceeds this loss, for a run whose first step is no floor
        because it starts at its final loss: a distillation student made from its
        teacher's own layer (run_distill.py --student=layers:k) started at 0.006 on SST-2
        and its batches reached 0.15, 21 times the median (measured); its job sets the
        chance-level cross-entropy, ln(labels). Not a flag.
    """

    on_divergence: str = "rollback"
    spike_factor: float = 5.0
    spike_window: int = 100
    lr_factor: float = 0.5
    max_rollbacks: int = 3
    loss_floor: float = 0.0

    def validate(self) -> None:
        """ValueError naming the flag of the first bad value."""
        if self.on_divergence not in ON_DIVERGENCE:
            raise ValueError(f"--on_divergence must be one of {', '.join(ON_DIVERGENCE)}, "
                             f"got {self.on_divergence!r}")
        if self.spike_factor != 0 and not self.spike_factor > 1.0:
            raise ValueError(f"--spike_factor must be above 1 (or 0: no spike check), got "
                             f"{self.spike_factor}")
        if self.spike_window < 1:
            raise ValueError(f"--spike_window must be at least 1 step, got "
                             f"{self.spike_window}")
        if not 0.0 < self.lr_factor < 1.0:
            raise ValueError(f"--divergence_lr_factor must be in (0, 1), got "
                             f"{self.lr_factor}")
        if self.max_rollbacks < 0:
            raise ValueError(f"--max_rollbacks must be >= 0, got {self.max_rollbacks}")


@dataclasses.dataclass(frozen=True)
class Divergence:
    """A diverged step: `step` is the optimizer update's number (1-based), `cause` a phrase
    such as "the loss became NaN"."""

    step: int
    loss: float
    cause: str


class DivergenceGuard:
    """Finds the first diverged step of each window; keeps the spike window's history.

    check_gradients: whether a non-finite gradient norm is a divergence (False under
        dynamic loss scaling, which skips such steps itself).
    initial_loss: the loss of the run's first step, when known (a resumed run's, from
        its checkpoint); else the first good step seen sets it.
    """

    def __init__(self, options: DivergenceOptions, check_gradients: bool = True,
                 initial_loss: Optional[float] = None):
        self.options = options
        self.check_gradients = check_gradients
        self.initial_loss = initial_loss
        self._history: collections.deque = collections.deque(maxlen=options.spike_window)

    def reset(self) -> None:
        """Forgets the spike history (after a rollback the replayed steps refill it)."""
        self._history.clear()

    def inspect(self, first_step: int, losses: Sequence[float],
                grad_norms: Sequence[float]) -> Optional[Divergence]:
        """The first diverged step among a window's steps `first_step + 1, ...` (their
        losses and gradient norms), or None; good steps before it enter the history."""
        for index, (loss, norm) in enumerate(zip(losses, grad_norms)):
            cause = self._cause(float(loss), float(norm))
            if cause is not None:
                return Divergence(step=first_step + index + 1, loss=float(loss), cause=cause)
            self._history.append(float(loss))
            if self.initial_loss is None:
                self.initial_loss = float(loss)
        return None

    def _cause(self, loss: float, norm: float) -> Optional[str]:
        if not math.isfinite(loss):
            return f"the loss became {_name(loss)}"
        if self.check_gradients and not math.isfinite(norm):
            return f"the gradient norm became {_name(norm)}"
        factor = self.options.spike_factor
        if factor and self._history:
            median = float(np.median(self._history))
            floor = max(self.initial_loss, self.options.loss_floor)
            if loss > factor * median and loss > floor:
                steps = len(self._history)
                window = f"the last {steps} steps" if steps > 1 else "the last step"
                return (f"loss spike: {loss:.4g} > {factor:g} x {median:.4g}, the median of "
                        f"{window} (first step: {self.initial_loss:.4g})")
        return None


def _name(value: float) -> str:
    return "NaN" if math.isnan(value) else "infinite"
