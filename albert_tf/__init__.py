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
                     Hugging Face weights in albert_tf.hf_weights
"""
from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.models import (AlbertClassifier, AlbertMultipleChoice, AlbertPretrainer,
                              AlbertSpanLabeler, AlbertSquadV2, classifier_losses,
                              multiple_choice_losses, pretraining_losses, span_losses,
                              squad_v2_losses)
from albert_tf.checkpoints import (LoadReport, from_official_dir, load_tf1_checkpoint,
                                   restore_for_training, save_tf1_checkpoint)

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer", "pretraining_losses",
           "AlbertClassifier", "AlbertSpanLabeler", "AlbertSquadV2", "AlbertMultipleChoice",
           "classifier_losses", "span_losses", "squad_v2_losses", "multiple_choice_losses",
           "LoadReport", "load_tf1_checkpoint", "save_tf1_checkpoint", "from_official_dir",
           "restore_for_training"]
__version__ = "0.1.0"
