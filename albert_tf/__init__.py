"""albert-tf: ALBERT (A Lite BERT) for TensorFlow 2 / Keras 3.

Public API:
  AlbertConfig       official albert_config.json in and out, presets
  AlbertEncoder      embeddings + shared transformer layers + pooler
  AlbertPretrainer   encoder + masked-LM head (tied) + sentence-order head
  pretraining_losses the original's MLM and SOP losses and metrics
"""
from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.models import AlbertPretrainer, pretraining_losses

__all__ = ["AlbertConfig", "AlbertEncoder", "AlbertPretrainer", "pretraining_losses"]
__version__ = "0.1.0"
