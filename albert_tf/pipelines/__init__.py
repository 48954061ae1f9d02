"""One call from text to answers: `albert_tf.pipeline(task, model=PATH, **options)`.

    from albert_tf import pipeline
    tag = pipeline("token-classification", model="hf/albert-ner", aggregation_strategy="simple")
    tag("Anna lives in New York.")

Arguments and outputs are those of `transformers.pipeline` (4.57) for the same task;
docs/pipelines.md lists each task's options and where albert-tf differs on purpose.

  tasks (aliases)                         module                    model head it needs
  text-classification (sentiment-analysis) text_classification      classifier
  token-classification (ner)              token_classification      token classifier
  question-answering                      question_answering        span (SQuAD v1)
  fill-mask                               fill_mask                 masked LM
  feature-extraction                      feature_extraction        any encoder
  zero-shot-classification                zero_shot                 classifier (NLI)
  multiple-choice                         multiple_choice           multiple choice
  sentence-embedding                      sentence_embedding        any encoder (pooled), or a
                                                                    sentence-embedding export

Model sources (`sources.load_source`): Hugging Face ALBERT directories, sentence-transformers
directories, official TF1 / TF-Hub directories, albert-tf exports (SavedModel, ONNX, LiteRT).
  encoding.py  tokens with character offsets, rows, windows
  base.py      the Pipeline every task subclasses: inputs one / many / streamed, batching

May import: everything below the programs (checkpoints, export, tokenization, ...) and
albert_tf.convert (the model classes of Hugging Face architectures).
"""
from __future__ import annotations

import importlib
from typing import Dict, Optional

from albert_tf.errors import UserValueError

TASKS: Dict[str, str] = {
    "text-classification": "text_classification.TextClassificationPipeline",
    "token-classification": "token_classification.TokenClassificationPipeline",
    "question-answering": "question_answering.QuestionAnsweringPipeline",
    "fill-mask": "fill_mask.FillMaskPipeline",
    "feature-extraction": "feature_extraction.FeatureExtractionPipeline",
    "zero-shot-classification": "zero_shot.ZeroShotClassificationPipeline",
    "multiple-choice": "multiple_choice.MultipleChoicePipeline",
    "sentence-embedding": "sentence_embedding.SentenceEmbeddingPipeline",
}
ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}


def pipeline_class(task: str):
    """The Pipeline class of a task name (or alias)."""
    name = ALIASES.get(task, task)
    if name not in TASKS:
        raise UserValueError(f"task {task!r}: one of {', '.join(list(TASKS) + list(ALIASES))}")
    module, cls = TASKS[name].rsplit(".", 1)
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def pipeline(task: str, model: str, batch_size: int = 8, do_lower_case: Optional[bool] = None,
             num_layers: Optional[int] = None, patience: Optional[int] = None,
             exit_confidence: Optional[float] = None, **options):
    """A callable for `task` over the model at `model` (see the module docstring).

    batch_size: model rows per call; do_lower_case: override the tokenizer's casing
    (default: what the model directory says, else lower-case); num_layers: run the
    shared layer this many times instead of all; patience / exit_confidence: early exit
    (PABEE; text and token classification, multiple choice), each result then says its
    `exit_layer` (an export runs as it was exported: other values are refused); options:
    the task's defaults for every call (e.g. aggregation_strategy="simple", top_k=3).
    """
    from albert_tf.pipelines.sources import load_source, set_light_inference

    cls = pipeline_class(task)
    source = set_light_inference(load_source(model, do_lower_case=do_lower_case), num_layers,
                                 patience, exit_confidence)
    return cls(source, batch_size=batch_size, **options)
