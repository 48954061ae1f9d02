"""The sentence-embedding job (what run_embeddings.py runs): train, evaluate, predict, export.

Built on `finetuning.run_finetuning`: every saved checkpoint is evaluated on the dev pairs
(Spearman of cosine similarities against the gold scores, the best-checkpoint metric, with
Pearson), the best one is kept as `model.ckpt-best`. Output directory:

  eval_results.txt, best_eval.json, model.ckpt-best.*   (finetuning)
  similarities.tsv, test_metrics.json                   (postprocess.py)
and with `export_dir` a SavedModel (text -> embedding), ONNX / LiteRT files and a
sentence-transformers directory in <export_dir>/sentence-transformers.

Losses (`--loss`, default by the data: cosent for scored pairs, ranking for pairs or
triplets without scores, simcse for single texts), as sentence-transformers defines them
(`modeling.sentence_encoder`): the in-batch negatives are the other rows of a replica's
micro-batch.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from albert_tf import errors, finetuning, tokenization, training
from albert_tf.finetuning import predict
from albert_tf.finetuning.command_line import CommandLine
from albert_tf.finetuning.options import TaskOptions
from albert_tf.modeling.sentence_encoder import (MODES, AlbertSentenceEncoder, cosent_loss,
                                                 ranking_loss)
from albert_tf.option_fields import POSITIVE, option
from albert_tf.training import run_dir
from albert_tf.tasks.embeddings import datasets, export, features, metrics, postprocess

LOSSES = ("auto", "cosent", "ranking", "simcse")


@dataclasses.dataclass(kw_only=True)
class EmbeddingOptions(TaskOptions):
    """run_embeddings.py's settings."""

    task_name: str = option(help="sts-b, lcqmc or custom.")
    data_dir: str = option(help="The task's files (sts-b: <data_dir>/STS-B/*.tsv or "
                                "<data_dir>/*.tsv; lcqmc: <data_dir>/{train,dev,test}.tsv; "
                                "custom: <data_dir>/{split}.tsv, .csv or .txt).")
    output_dir: str = ""
    max_seq_length: int = 128
    cached_dir: Optional[str] = option(None, help="Where the feature caches go (default "
                                                  "--output_dir).")
    pooling: str = option("mean", help="How token vectors become the text's vector: cls, max, "
                                       "mean or mean_sqrt_len, or several comma-separated "
                                       "(concatenated), as sentence-transformers pools.")
    normalize: bool = option(False, help="Scale each embedding to length 1 (a Normalize "
                                         "module).")
    loss: str = option("auto", choices=LOSSES,
                       help="cosent (pairs with scores), ranking (pairs or triplets: in-batch "
                            "negatives), simcse (single texts, unsupervised); auto: by the "
                            "data.")
    scale: float = option(20.0, check=POSITIVE, help="The losses' scale of the cosine "
                                                     "similarities (sentence-transformers' 20).")
    columns: Optional[datasets.EmbeddingColumns] = None
    FLAG_DEFAULTS: ClassVar[Dict[str, Optional[str]]] = {"output_dir": None}

    def pooling_modes(self) -> Tuple[str, ...]:
        modes = tuple(part.strip() for part in self.pooling.split(",") if part.strip())
        if not modes or any(mode not in MODES for mode in modes):
            raise ValueError(f"--pooling {self.pooling!r}: one or more of {', '.join(MODES)}, "
                             "comma-separated")
        return modes

    def validate(self, num_replicas: int) -> None:
        self.check_export()
        for flag in ("data_dir", "output_dir"):
            if not getattr(self, flag):
                raise ValueError(f"--{flag} is required")
        self.check_vocabulary_given()
        self.check_vocabulary_exists()
        self.check_max_seq_length()
        self.check_schedule()
        self.pooling_modes()
        for flag in ("eval_batch_size", "predict_batch_size"):
            if getattr(self, flag) % num_replicas:
                raise ValueError(f"--{flag} {getattr(self, flag)} must be a multiple of the "
                                 f"number of replicas ({num_replicas})")


class EmbeddingObjective(training.Objective):
    """The batch losses (CoSENT, ranking, SimCSE), weighted by the micro-batch's examples so
    that their sum over replicas and micro-batches is the global batch's mean."""

    metric_names = ("loss_total", "examples")

    def __init__(self, loss: str, texts: Tuple[str, ...], scale: float):
        self.kind, self.texts, self.scale = loss, texts, scale

    def normalizers(self, features):
        return {"examples": tf.cast(tf.shape(features["input_ids_a"])[0], tf.float32)}

    def batch_loss(self, model, batch, training):
        def embed(name):
            return model(features.text_features(batch, name), training=training)["embedding"]

        if self.kind == "simcse":  # each text twice: two dropout masks, its own positive
            both = {k: tf.concat([v, v], axis=0)
                    for k, v in features.text_features(batch, "a").items()}
            first, second = tf.split(model(both, training=training)["embedding"], 2)
            return ranking_loss(first, second, self.scale)
        if self.kind == "cosent":
            return cosent_loss(embed("a"), embed("b"), batch["score"], self.scale)
        candidates = [embed("b")] + ([embed("n")] if "n" in self.texts else [])
        return ranking_loss(embed("a"), tf.concat(candidates, axis=0), self.scale)

    def loss(self, model, batch, normalizers, training):
        examples = tf.cast(tf.shape(batch["input_ids_a"])[0], tf.float32)
        total = tf.cast(self.batch_loss(model, batch, training), tf.float32) * examples
        return total / normalizers["examples"], {"loss_total": total, "examples": examples}

    def finalize(self, sums):
        return {"eval_loss": sums["loss_total"] / max(sums["examples"], 1.0)}


def choose_loss(requested: str, examples) -> str:
    """--loss, or by the data: cosent (scored pairs), ranking (pairs), simcse (texts)."""
    scored = all(e.score is not None for e in examples)
    paired = all(e.text_b is not None for e in examples)
    chosen = requested if requested != "auto" else (
        "cosent" if paired and scored else "ranking" if paired else "simcse")
    needs = {"cosent": paired and scored, "ranking": paired, "simcse": True}[chosen]
    if not needs:
        what = "pairs with scores" if chosen == "cosent" else "pairs"
        raise errors.UserValueError(f"--loss={chosen} trains on {what}; the training file "
                                    f"({examples[0].source.rsplit(':', 1)[0]}) has not")
    return chosen


class EmbeddingJob(finetuning.FinetuningJob):
    """run_embeddings.py's job (see the module docstring)."""

    OPTIONS = EmbeddingOptions
    COMMAND_LINE = CommandLine(
        required=("data_dir", "task_name", "albert_config_file", "output_dir"),
        # No published hyperparameters: the paper's STS-B row is a regression classifier's.
        hparams_task=lambda values: f"embeddings {values.task_name}",
        default_rules=lambda values: ["eval_batch_size:8", "predict_batch_size:8"],
        flag_groups=(datasets.EmbeddingColumns,))
    metric = "spearman"

    @classmethod
    def options_from_command_line(cls, values) -> Dict:
        return {"columns": datasets.EmbeddingColumns(
            values.text_a_column, values.text_b_column, values.label_column,
            values.negative_column)}

    @functools.cached_property
    def task(self) -> datasets.EmbeddingData:
        return datasets.open_task(self.options)

    def identity(self):
        return run_dir.RunIdentity.of(run_dir.FINETUNING, f"embeddings {self.options.task_name}",
                                      self.options.albert_config,
                                      pooling=sorted(self.options.pooling_modes(),
                                                     key=MODES.index),
                                      loss=self.options.loss,
                                      normalize=self.options.normalize)

    def build_model(self, dtype_policy: str = "float32"):
        return AlbertSentenceEncoder(self.options.albert_config, self.options.pooling_modes(),
                                     self.options.normalize, dtype=dtype_policy,
                                     inference_layers=self.options.inference_layers)

    def objective(self):
        examples, _ = self.split("train")
        loss = choose_loss(self.options.loss, examples)
        config = self.options.albert_config
        if loss == "simcse" and not (config.hidden_dropout_prob or
                                     config.attention_probs_dropout_prob):
            raise errors.UserValueError(
                "--loss=simcse needs dropout (each text is its own positive under two dropout "
                "masks) and the model config's dropouts are 0: pass --albert_dropout=0.1")
        return EmbeddingObjective(loss, features.texts_of(examples), self.options.scale)

    def split(self, split: str):
        return self.once(split, lambda: self._read_split(split))

    def _read_split(self, split: str):
        examples = self.task.read(split)
        if not examples:
            raise datasets.EmbeddingDataError(f"the {split} split of {self.options.task_name} "
                                              "has no example")
        options = self.options
        if split in ("dev", "test") and any(e.text_b is None for e in examples):
            raise errors.UserValueError(f"{examples[0].source.rsplit(':', 1)[0]}: the {split} "
                                        "file holds single texts; it is read as pairs (their "
                                        "similarities are what is scored)")
        if split == "dev" and options.do_eval and any(e.score is None for e in examples):
            missing = next(e for e in examples if e.score is None)
            raise errors.UserValueError(f"{missing.source}: no score; --do_eval scores the dev "
                                        "pairs against theirs (--label_column)")
        path = features.prepare_features(options.cached_dir or options.output_dir,
                                         options.task_name, split, examples, self.tokenizer,
                                         options.max_seq_length,
                                         tokenization.vocabulary_fingerprint(self.tokenizer))
        return examples, path

    def data(self, purpose: str):
        return self.split({"train": "train", "eval": "dev", "predict": "test"}[purpose])

    def dataset(self, split: str, batch_size: int, is_training: bool, input_context=None):
        examples, path = self.split(split)
        return features.dataset(path, self.options.max_seq_length, features.texts_of(examples),
                                batch_size, is_training, len(examples), self.options.seed,
                                input_context)

    def num_train_examples(self) -> int:
        return len(self.split("train")[0])

    def train_dataset(self, input_context):
        return self.dataset("train", self.per_replica_train_batch(input_context), True,
                            input_context)

    def eval_features(self):
        if not self.options.do_eval:
            return None
        rows = {}
        for batch in self.dataset("dev", 32, False).as_numpy_iterator():
            keep = batch["is_real_example"] == 1
            for name in ("input_ids", "input_mask"):
                rows.setdefault(name, []).append(batch[f"{name}_a"][keep])
        out = {name: np.concatenate(parts) for name, parts in rows.items()}
        out["segment_ids"] = np.zeros_like(out["input_ids"])
        return out

    def similarities(self, model, split: str, batch_size: int):
        """(examples, float64 cosine similarities [N]) of a split's pairs."""
        examples, _ = self.split(split)
        if any(e.text_b is None for e in examples):
            raise errors.UserValueError(f"the {split} file ({examples[0].source.rsplit(':', 1)[0]})"
                                        " holds single texts: its pairs are what is scored")

        def outputs_of(model, batch):
            return {name: tf.cast(model(features.text_features(batch, name),
                                        training=False)["embedding"], tf.float32)
                    for name in ("a", "b")}

        data = self.dataset(split, batch_size, False)
        vectors = predict.predict_outputs(self.strategy, model, data, outputs_of,
                                          f"of {len(examples)} {split} pairs")
        return examples, metrics.cosine_similarities(vectors["a"][:len(examples)],
                                                     vectors["b"][:len(examples)])

    def evaluate(self, model, step):
        examples, similarities = self.similarities(model, "dev", self.options.eval_batch_size)
        if any(e.score is None for e in examples):
            raise errors.UserValueError(f"the dev file ({examples[0].source.rsplit(':', 1)[0]}) "
                                        "has no scores to evaluate against")
        return metrics.similarity_metrics(similarities, [e.score for e in examples])

    def predict(self, model):
        examples, similarities = self.similarities(model, "test",
                                                   self.options.predict_batch_size)
        if not self.chief:
            return {"similarities": similarities}
        files = [postprocess.write_similarities(self.options.output_dir, examples,
                                                similarities)]
        result = {"similarities": similarities, "files": files}
        if all(e.score is not None for e in examples):
            result["metrics"] = postprocess.write_test_metrics(
                self.options.output_dir,
                metrics.similarity_metrics(similarities, [e.score for e in examples]))
        return result

    def export_saved_model(self, model) -> Dict:
        export.export_saved_model(model, self.options)
        return {"sentence_transformers_dir":
                export.save_sentence_transformers_export(model, self.options)}

    def portable_model(self, model):
        return export.portable_model(model, self.options)


def run_embeddings(options: EmbeddingOptions,
                   strategy: Optional[tf.distribute.Strategy] = None) -> Dict:
    return EmbeddingJob(options, strategy).run()
