"""The one training / evaluation loop and what it needs.

loop.py (Trainer, Objective, TrainingConfig, evaluate), divergence.py (the divergence guard's
options and checks: NaN, infinite, loss spikes), reproducibility.py (seeds and op
determinism), optimization.py (the original's
AdamW and LAMB with warmup and linear decay), distribute.py (tf.distribute strategies
from flags' values), run_dir.py (what an output directory holds, and refusing another
run's directory), best_checkpoint.py (every evaluation recorded, the best weights
exported as model.ckpt-best), batching.py (the global batch split over replicas and
micro-batches: what each replica's training dataset yields), preemption.py (SIGTERM and
GCE's maintenance notice turned into a stop after the current step), worker_loss.py (a
multi-worker run's lost peer named in one line).

May import: albert_tf.config, albert_tf.errors, albert_tf.fileio, albert_tf.kernels,
albert_tf.modeling, albert_tf.checkpoints.
"""
# The public names of the former module albert_tf.training, which this package replaced.
from albert_tf.training.loop import (  # noqa: F401
    CorruptedInputError, DivergenceError, NonFiniteLossError, Objective, Task, Trainer, TrainingConfig,
    evaluate)
from albert_tf.training.divergence import DivergenceOptions  # noqa: F401
from albert_tf.training.batching import check_batch_split, per_replica_batch  # noqa: F401
