"""`AlbertFeatureExtractor`: raw text -> the encoder's outputs (feature extraction).

    extractor = albert_tf.from_pretrained("albert_base_v2", "feature-extraction")
    features = extractor.predict(["a text", "another"])
    features["sequence_output"]   # float32 [N, S, H]: each token's last hidden state
    features["pooled_output"]     # float32 [N, H]: tanh(dense([CLS]'s state)), as BERT's
    features["input_mask"]        # int32 [N, S]: 1 at real tokens (to mean-pool yourself)

It takes what the text classifier takes (texts, pairs, datasets, token features), packed
by the same preprocessor. It has no training objective of its own: `fit` is refused in one
line. To train the encoder under your own head, build a Keras model over
`extractor.network` (an `AlbertEncoder`, called on token features) and feed it
`extractor.preprocessor(texts)`; or take the task of your head from `from_pretrained`.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks.task import Task

OUTPUTS = ("sequence_output", "pooled_output")


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertFeatureExtractor(Task):
    """An `AlbertEncoder` on raw text (see the module docstring). Calling it on token
    features returns {"sequence_output" float32 [B, S, H], "pooled_output" float32 [B, H],
    "input_mask" int32 [B, S]}."""

    task_name = "feature-extraction"

    def call(self, features, training=False):
        outputs = self.network(features, training=training)
        result = {name: tf.cast(outputs[name], tf.float32) for name in OUTPUTS}
        result["input_mask"] = tf.cast(features["input_mask"], tf.int32)
        return result

    def default_loss(self):
        return None

    def task_loss(self, y, y_pred):
        raise UserValueError("feature-extraction has no training objective")

    def fit(self, *args, **kwargs):
        raise UserValueError("feature-extraction has no training objective: take a task "
                             "from from_pretrained (text-classification, ...), or build a "
                             "Keras model with your head over .network (an AlbertEncoder on "
                             ".preprocessor's token features)")

    def evaluate(self, *args, **kwargs):
        raise UserValueError("feature-extraction has no training objective to evaluate")

    def save_to_preset(self, preset_dir: str) -> list:
        """Writes a keras-hub `AlbertBackbone` preset (the encoder, its tokenizer and
        SentencePiece model); returns the files written. keras-hub's tokenizer does not
        lower-case."""
        from albert_tf.keras_tasks import exporting

        return exporting.save_keras_hub_preset(self, preset_dir, "backbone")
