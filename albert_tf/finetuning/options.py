"""The options of a fine-tuning job: the run's (FinetuningOptions) and every task's (TaskOptions).

Configuration flows one way: a CLI's flags -> a task's options (a TaskOptions subclass:
GlueOptions, SquadOptions, RaceOptions) -> the job. Fields are keyword-only.
"""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import tensorflow as tf

from albert_tf import tokenization
from albert_tf.config import AlbertConfig
from albert_tf.export import formats, portable
from albert_tf.kernels import fused_ops, precision
from albert_tf.training import batching
from albert_tf.training.divergence import DivergenceOptions


@dataclasses.dataclass(kw_only=True)
class FinetuningOptions:
    """Options of a fine-tuning job; defaults are the original run_classifier's flags.

    Batch sizes are global: `train_batch_size` is one optimizer step's, split over the
    replicas and then into `gradient_accumulation_steps` micro-batches
    (`training.batching`). `train_step` / `warmup_step` count optimizer updates.
    `divergence`: the divergence guard (rollback on NaN, infinite or spiking losses).
    `deterministic`: TensorFlow's op determinism (needs `seed`).
    """

    output_dir: str
    init_checkpoint: Optional[str] = None
    init_from_group0: bool = False
    do_train: bool = False
    do_eval: bool = False
    do_predict: bool = False
    train_batch_size: int = 32
    learning_rate: float = 5e-5
    train_step: int = 1000
    warmup_step: int = 0
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 5
    iterations_per_loop: int = 1000
    optimizer: str = "adamw"
    mixed_precision: str = "float32"
    jit_compile: bool = False
    gradient_accumulation_steps: int = 1
    seed: Optional[int] = None
    deterministic: bool = False
    divergence: DivergenceOptions = dataclasses.field(default_factory=DivergenceOptions)

    @classmethod
    def from_fields(cls, source, **overrides) -> "FinetuningOptions":
        """Options taken field by field from a task's own options object `source`.

        Every field not in `overrides` must exist on `source` (AttributeError otherwise).
        """
        values = {f.name: getattr(source, f.name) for f in dataclasses.fields(cls)
                  if f.name not in overrides}
        values.update(overrides)
        return cls(**values)

    def validate(self, num_replicas: int) -> None:
        if not (self.do_train or self.do_eval or self.do_predict):
            raise ValueError("at least one of --do_train, --do_eval, --do_predict must be set")
        precision.check(self.mixed_precision)
        self.divergence.validate()
        if self.deterministic and self.seed is None:
            raise ValueError("--deterministic needs --seed")
        for name in ("train_step", "save_checkpoints_steps", "iterations_per_loop",
                     "train_batch_size", "gradient_accumulation_steps"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}")
        if self.do_train:
            batching.check_batch_split(self.train_batch_size, num_replicas,
                                       self.gradient_accumulation_steps)


@dataclasses.dataclass(kw_only=True)
class TaskOptions(FinetuningOptions):
    """What every task family's job needs besides the run: the model's config, the vocabulary,
    the sequence length, the evaluation batch sizes and the export.

    The vocabulary: `spm_model_file` (SentencePiece, the English models) or `vocab_file`
    (WordPiece, the Chinese models); SentencePiece wins when both are given, as in the
    original. Batch sizes are global. `export_dir`: where the best weights are exported as
    `export_format` ("saved_model", "onnx", "tflite"); with `export_int8` the ONNX and
    LiteRT models in int8 too, each kept only where its predictions on the evaluation set
    agree with float32's at least `int8_min_agreement` of the time; with `export_fp16` a
    float16 LiteRT model. `num_train_epochs` (when set) gives `train_step` as
    int(training examples / train_batch_size * epochs), the original's rule, and
    `warmup_proportion` (when set) gives `warmup_step` as int(train_step * proportion).
    """

    albert_config: AlbertConfig
    spm_model_file: Optional[str] = None
    vocab_file: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 512
    eval_batch_size: int = 8
    predict_batch_size: int = 8
    export_dir: Optional[str] = None
    export_layer_norm: str = "auto"
    export_format: Tuple[str, ...] = formats.DEFAULT_EXPORT_FORMATS
    export_int8: bool = False
    export_fp16: bool = False
    int8_min_agreement: float = portable.DEFAULT_INT8_MIN_AGREEMENT
    num_train_epochs: Optional[float] = None
    warmup_proportion: Optional[float] = None

    # The checks every task shares, each raising ValueError naming the flag. A task calls
    # them where its own checks interleave, so that the first error a user sees stays the
    # one the task always reported first.

    def validate_task_options(self) -> None:
        """All the shared checks, in order."""
        self.check_export()
        self.check_vocabulary_given()
        self.check_max_seq_length()
        self.check_batch_sizes()
        self.check_schedule()

    def check_export(self) -> None:
        fused_ops.check_export_layer_norm(self.export_layer_norm, "--export_layer_norm")
        formats.check_export_formats(self.export_format, self.export_int8,
                                     mixed_precision=self.mixed_precision,
                                     export_dir=self.export_dir, fp16=self.export_fp16,
                                     int8_min_agreement=self.int8_min_agreement)

    def check_schedule(self) -> None:
        if self.num_train_epochs is not None and not self.num_train_epochs > 0:
            raise ValueError(f"--num_train_epochs must be positive, got {self.num_train_epochs}")
        if self.warmup_proportion is not None and not 0.0 <= self.warmup_proportion < 1.0:
            raise ValueError(f"--warmup_proportion must be in [0, 1), got "
                             f"{self.warmup_proportion}")

    def check_vocabulary_given(self) -> None:
        if not self.spm_model_file and not self.vocab_file:
            raise ValueError("give --spm_model_file (SentencePiece) or --vocab_file (WordPiece)")

    def check_max_seq_length(self) -> None:
        limit = self.albert_config.max_position_embeddings
        if self.max_seq_length > limit:
            raise ValueError(f"--max_seq_length {self.max_seq_length} exceeds the model's "
                             f"max_position_embeddings {limit} (--albert_config_file)")

    def check_batch_sizes(self, flags=("eval_batch_size", "predict_batch_size")) -> None:
        for flag in flags:
            if getattr(self, flag) <= 0:
                raise ValueError(f"--{flag} must be positive, got {getattr(self, flag)}")

    def check_vocabulary_exists(self) -> None:
        """The vocabulary file that will be read exists (not vocab_file when a SentencePiece
        model is given: the original's rule)."""
        flag = "spm_model_file" if self.spm_model_file else "vocab_file"
        path = getattr(self, flag)
        if not tf.io.gfile.exists(path):
            raise ValueError(f"--{flag} {path!r} does not exist")

    def load_tokenizer(self) -> tokenization.Tokenizer:
        """The Python tokenizer (SentencePiece when spm_model_file is given); its errors are
        user errors naming the flag."""
        return tokenization.load_tokenizer(vocab_file=self.vocab_file,
                                           spm_model_file=self.spm_model_file,
                                           do_lower_case=self.do_lower_case)

    def in_graph_tokenizer(self):
        """The same tokenizer as TensorFlow ops, for serving signatures that take raw text."""
        return tokenization.in_graph_tokenizer(vocab_file=self.vocab_file,
                                               spm_model_file=self.spm_model_file,
                                               do_lower_case=self.do_lower_case)

    def finetuning_options(self, num_train_examples: Optional[int] = None
                           ) -> FinetuningOptions:
        """The run's options alone (what run_finetuning takes), with the step counts that
        `num_train_epochs` / `warmup_proportion` give for `num_train_examples` training
        examples (the steps as given when those are unset or the count unknown)."""
        train_step, warmup_step = self.train_step, self.warmup_step
        if self.num_train_epochs is not None and num_train_examples is not None:
            train_step = max(1, int(num_train_examples / self.train_batch_size
                                    * self.num_train_epochs))
        if self.warmup_proportion is not None:
            warmup_step = int(train_step * self.warmup_proportion)
        return FinetuningOptions.from_fields(self, train_step=train_step,
                                             warmup_step=warmup_step)
