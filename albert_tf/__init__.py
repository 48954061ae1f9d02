"""albert-tf: ALBERT (A Lite BERT) for TensorFlow 2 / Keras 3.

Public API:
  AlbertConfig       official albert_config.json in and out, presets
  AlbertEncoder      embeddings + shared transformer layers + pooler
  AlbertPretrainer   encoder + masked-LM head (tied) + sentence-order head
  pretraining_losses the original's MLM and SOP losses and metrics
  AlbertClassifier, AlbertSpanLabeler, AlbertSquadV2, AlbertMultipleChoice
                     the original scripts' fine-tuning models (GLUE, SQuAD v1, v2, RACE)
  load_tf1_checkpoint, save_tf1_checkpoint, from_official_dir, restore_for_training
                     official TF1 checkpoints in and out (albert_tf.checkpoints);
                     Hugging Face weights in albert_tf.checkpoints.hf
  pipeline           text -> answers for every task, as transformers.pipeline
                     (albert_tf.pipelines)
  from_pretrained    a Keras task model on raw text from any source, with compile / fit /
                     evaluate / predict / save (albert_tf.keras_tasks; docs/keras.md)
  AlbertPreprocessor raw text -> token features (a Keras layer)
  AlbertTextClassifier, AlbertTagger, AlbertMultipleChoiceTask, AlbertMaskedLM,
  AlbertFeatureExtractor, AlbertQuestionAnswerer, AlbertSentenceEmbedder
                     the Keras tasks (text classification, NER, multiple choice, fill-mask,
                     feature extraction, question answering, sentence embeddings)
  distill            a smaller student of a fine-tuned classifier, tagger or
                     multiple-choice model, trained with Keras' fit (docs/fast_inference.md)
"""
from albert_tf import _lazy, _moved

_moved.install()

# Public name -> defining module. Imported on first access (PEP 562), so that
# `import albert_tf.tokenization` or `albert_tf.fileio` does not load TensorFlow.
_EXPORTS = {
    "AlbertConfig": "config",
    "AlbertEncoder": "modeling.encoder",
    "AlbertPretrainer": "modeling.models", "AlbertClassifier": "modeling.models",
    "AlbertSpanLabeler": "modeling.models", "AlbertSquadV2": "modeling.models",
    "AlbertMultipleChoice": "modeling.models", "pretraining_losses": "modeling.models",
    "classifier_losses": "modeling.models", "span_losses": "modeling.models",
    "squad_v2_losses": "modeling.models", "multiple_choice_losses": "modeling.models",
    "AlbertTokenClassifier": "modeling.token_classifier",
    "token_classifier_losses": "modeling.token_classifier",
    "LoadReport": "checkpoints", "load_tf1_checkpoint": "checkpoints",
    "save_tf1_checkpoint": "checkpoints", "from_official_dir": "checkpoints",
    "restore_for_training": "checkpoints", "pipeline": "pipelines",
    "from_pretrained": "keras_tasks", "AlbertPreprocessor": "keras_tasks",
    "AlbertTextClassifier": "keras_tasks", "AlbertTagger": "keras_tasks",
    "AlbertMultipleChoiceTask": "keras_tasks", "AlbertMaskedLM": "keras_tasks",
    "AlbertFeatureExtractor": "keras_tasks", "AlbertQuestionAnswerer": "keras_tasks",
    "AlbertSentenceEmbedder": "keras_tasks",
    "distill": "distillation.keras_distiller",
}
__all__ = list(_EXPORTS)


__getattr__, __dir__ = _lazy.lazy_attributes(__name__, _EXPORTS, globals())


__version__ = "0.1.0"

from albert_tf import _keras_names  # noqa: E402  (after the lazy names: it may import them)

_keras_names.install()
