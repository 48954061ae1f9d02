"""The options of a fine-tuning job: the run's (FinetuningOptions) and every task's (TaskOptions).

Configuration flows one way: a CLI's flags -> a task's options (a TaskOptions subclass:
ClassificationOptions, SpanQaOptions, MultipleChoiceOptions) -> the job. Fields are keyword-only.
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar, Dict, Optional, Tuple

import tensorflow as tf

from albert_tf import tokenization
from albert_tf.config import AlbertConfig
from albert_tf.export import formats, litert, onnx as onnx_export, portable
from albert_tf.kernels import fused_ops, precision
from albert_tf.modeling import early_exit
from albert_tf.option_fields import (DROPOUT, POSITIVE, check_fields, option,
                                     renamed_attribute, renamed_option)
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

    output_dir: str = option(help="Checkpoints, results and predictions are written here.")
    init_checkpoint: Optional[str] = option(
        None, help="Initial weights: TF1 checkpoint (prefix or directory: official download, "
                   "TF-Hub module), Hugging Face directory, Keras .weights.h5 or "
                   "tf.train.Checkpoint.")
    init_from_group0: bool = option(False, help="Initialise every layer group from group 0 "
                                                "of --init_checkpoint (the original's flag).")
    do_train: bool = option(False, help="Train on the train split.")
    do_eval: bool = option(False, help="Evaluate every saved checkpoint on the dev split; "
                                       "keep the best.")
    do_predict: bool = option(False, help="Predict with the best checkpoint.")
    train_batch_size: int = option(32, help="Global training batch size.", check=POSITIVE)
    learning_rate: float = option(5e-5, help="Peak learning rate.")
    train_step: int = option(1000, help="Optimizer steps.", check=POSITIVE)
    warmup_step: int = option(0, help="Linear warmup steps.")
    save_checkpoints_steps: int = option(1000, help="Checkpoint (and evaluate) every N steps.",
                                         check=POSITIVE)
    keep_checkpoint_max: int = option(5, help="Training checkpoints kept (the best one is "
                                              "always kept as model.ckpt-best).")
    iterations_per_loop: int = option(1000, help="Steps per host round trip (also the "
                                                 "logging period).", check=POSITIVE)
    optimizer: str = option("adamw", help="Optimizer.", choices=("adamw", "lamb"))
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
        check_fields(self, ("train_step", "save_checkpoints_steps", "iterations_per_loop",
                            "train_batch_size"))
        if self.gradient_accumulation_steps <= 0:
            raise ValueError(f"--gradient_accumulation_steps must be positive, got "
                             f"{self.gradient_accumulation_steps}")
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
    spm_model_file: Optional[str] = option(
        None, help="SentencePiece model of the checkpoint (30k-clean.model: the English "
                   "models). Give it or --vocab_file; it wins when both are given.")
    vocab_file: Optional[str] = option(
        None, help="WordPiece vocabulary of the checkpoint (vocab.txt, vocab_chinese.txt: the "
                   "Chinese models), used when --spm_model_file is not given.")
    do_lower_case: bool = option(True, help="Lower-case the text (uncased models).")
    max_seq_length: int = option(512, help="Sequence length in tokens after tokenization.")
    eval_batch_size: int = option(8, help="Global evaluation batch size.", check=POSITIVE)
    predict_batch_size: int = option(8, help="Global prediction batch size.", check=POSITIVE)
    export_dir: Optional[str] = option(
        None, help="Export the best weights here: a SavedModel (signatures serving_default: "
                   "raw text; serve_tokens: token ids) and/or model.onnx and/or model.tflite, "
                   "as --export_format says.")
    export_layer_norm: str = option(
        "auto", choices=fused_ops.EXPORT_LAYER_NORMS,
        help="LayerNorms of the --export_dir SavedModel: 'onednn' runs them in one fused "
             "kernel on oneDNN TensorFlow (the default on x86 Linux; ~3% faster inference) but "
             "slower where oneDNN is off (up to ~10%); 'plain' is the same speed everywhere; "
             "'auto' is 'onednn' when this process runs oneDNN without a GPU. The same values "
             "up to float32 rounding either way.")
    export_format: Tuple[str, ...] = option(
        formats.DEFAULT_EXPORT_FORMATS,
        help=f"What --export_dir holds, comma-separated: {', '.join(formats.EXPORT_FORMATS)}. "
             f"saved_model: raw-text and token-id signatures (TF Serving, tf.saved_model.load); "
             f"onnx: {onnx_export.ONNX_FILE} taking token ids, for ONNX Runtime; tflite: "
             f"{litert.TFLITE_FILE} taking token ids, for LiteRT (phones, edge devices; runs "
             f"without TensorFlow). The vocabulary file goes beside the ONNX and LiteRT models.")
    export_int8: bool = option(
        False, help=f"Also write {onnx_export.INT8_FILE} and/or {litert.INT8_FILE}: "
                    "int8 weights, about a quarter of the size (dynamic quantization; needs "
                    "onnx or tflite in --export_format). Checked against float32 on the "
                    "evaluation set: see --int8_min_agreement.")
    export_fp16: bool = option(
        False, help=f"Also write {litert.FP16_FILE}: float16 weights, half the size "
                    "(needs tflite in --export_format).")
    int8_min_agreement: float = option(
        portable.DEFAULT_INT8_MIN_AGREEMENT,
        help="With --export_int8 and --do_eval: each int8 model runs beside its float32 model "
             f"on the evaluation set (at most {portable.AGREEMENT_EXAMPLES} examples); one "
             "that predicts the same less often than this fraction is removed, with a "
             "warning (0: no check).")
    exit_heads: str = option(
        "none", choices=early_exit.EXIT_HEADS,
        help="Train an exit after every layer (PABEE's objective: the exits' losses weighted "
             "by depth), so that shallower depths answer well: 'shared' reads every layer "
             "with the task's own head (no new weights), 'per_layer' gives each layer a head "
             "of its own. Needed for good answers from --inference_layers below L and from "
             "--patience / --exit_confidence.")
    inference_layers: Optional[int] = option(
        None, help="Run the shared layer this many times (1..num_hidden_layers) at "
                   "evaluation, prediction and in the exports, instead of all: faster, "
                   "and as good as the exits were trained (--exit_heads).")
    patience: Optional[int] = option(
        None, help="Early exit (PABEE): a row stops at the first layer whose prediction has "
                   "not changed for this many layers; at evaluation, prediction and inside "
                   "the exported graphs, at any batch size (each row reports exit_layer).")
    exit_confidence: Optional[float] = option(
        None, help="Early exit: a row also stops when its top probability reaches this, in "
                   "(0, 1] (single-label tasks).")
    exit_tolerance: float = option(
        0.0, help="Early exit of a regression task: a score that moved by at most this much "
                  "counts as unchanged.")
    classifier_dropout: float = option(
        0.1, check=DROPOUT,
        help="Dropout in the task head: on the pooled output (classification, multiple "
             "choice; the original run_classifier fixes it at 0.1), before the per-token "
             "classifier (NER), in the answerability head (SQuAD v2). run_race.py's and "
             "run_squad.py's --dropout_prob (the original's name) is still accepted.")
    num_train_epochs: Optional[float] = option(
        None, help="Train this many epochs of the training set: sets --train_step to "
                   "int(examples / --train_batch_size x epochs).")
    warmup_proportion: Optional[float] = option(
        None, help="Warm up for this fraction of the training steps (instead of "
                   "--warmup_step).")

    # run_race.py's and run_squad.py's old keyword for classifier_dropout (a warning).
    dropout_prob: dataclasses.InitVar[Optional[float]] = None

    def __post_init__(self, dropout_prob: Optional[float]) -> None:
        self.classifier_dropout = renamed_option(dropout_prob, self.classifier_dropout,
                                                 "dropout_prob", "classifier_dropout")

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
        self.check_light_inference()

    # The task families whose models have exits (early exit, --exit_heads).
    EXIT_FAMILIES: ClassVar[str] = ("text classification (run_classifier.py), token "
                                     "classification (run_ner.py) and multiple choice "
                                     "(run_race.py)")
    HAS_EXITS: ClassVar[bool] = False

    def check_light_inference(self) -> None:
        """--inference_layers in 1..L; early exit only where the family has exits, and not
        under XLA (its loop drops exited rows: shapes XLA cannot fix)."""
        limit = self.albert_config.num_hidden_layers
        if self.inference_layers is not None and not 1 <= self.inference_layers <= limit:
            raise ValueError(f"--inference_layers must be from 1 to the model's "
                             f"num_hidden_layers ({limit}, --albert_config_file); got "
                             f"{self.inference_layers}")
        asked = [flag for flag, value in (("exit_heads", self.exit_heads != "none"),
                                          ("patience", self.patience is not None),
                                          ("exit_confidence", self.exit_confidence is not None))
                 if value]
        if asked and not self.HAS_EXITS:
            raise ValueError(f"--{asked[0]}: this task's model has no per-layer exits (early "
                             f"exit is built for {self.EXIT_FAMILIES}); "
                             f"--inference_layers works for every task")
        rule = self.early_exit_rule()
        if rule is not None and self.jit_compile:
            raise ValueError("--patience / --exit_confidence cannot run under --jit_compile: "
                             "the early-exit loop drops exited rows, shapes XLA cannot fix")

    def early_exit_rule(self) -> Optional[early_exit.EarlyExit]:
        """--patience, --exit_confidence and --exit_tolerance as one rule (None: no early
        exit); ValueError naming the flag."""
        if self.patience is None and self.exit_confidence is None:
            return None
        try:
            return early_exit.EarlyExit(self.patience, self.exit_confidence, self.exit_tolerance)
        except ValueError as err:
            flag = ("--patience" if "patience" in str(err) else "--exit_confidence"
                    if "confidence" in str(err) else "--exit_tolerance")
            raise ValueError(f"{flag}: {err}") from None

    def light_inference(self) -> Dict:
        """The model constructor's light-inference arguments (exit heads, inference layers,
        early exit rule)."""
        return {"exit_heads": self.exit_heads, "inference_layers": self.inference_layers,
                "early_exit": self.early_exit_rule()}

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
        check_fields(self, flags)

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

    def validate(self, num_replicas: int = 1) -> None:
        """The family's checks (ValueError naming the flag); by default the shared ones."""
        self.validate_task_options()

    def check(self, num_replicas: int, run: bool = True) -> None:
        """Every check before a job runs: the family's (`validate`), every option field's
        declared check (`option(check=...)`), then, with `run`, the run's with the steps as
        given (`finetuning_options`). Raises ValueError naming the flag."""
        self.validate(num_replicas)
        check_fields(self)
        if run:
            self.finetuning_options().validate(num_replicas)

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


# The InitVar's class default (None) would answer a read of the old attribute with a wrong
# value; the dataclass machinery has already taken it, so a property answers instead.
del TaskOptions.dropout_prob
TaskOptions.dropout_prob = renamed_attribute("dropout_prob", "classifier_dropout")
