"""`FineTuningModel`: what every fine-tuning model shares (an AlbertEncoder named `encoder`
plus a head; constructor and config plumbing; the layers run at inference)."""
from __future__ import annotations

from typing import Optional

import keras

from albert_tf.config import AlbertConfig
from albert_tf.modeling import heads
from albert_tf.modeling.encoder import (AlbertEncoder, check_inference_layers,
                                        deserialize_model_config, serialize_model_config)


class FineTuningModel(keras.Model):
    """The base of the fine-tuning models (here and `token_classifier.AlbertTokenClassifier`):
    shared constructor/config plumbing, an AlbertEncoder named `encoder` plus a head.
    A subclass names its constructor's own arguments in `_EXTRA_ARGS` (kept by get_config)
    and the attribute holding its head in `_HEAD` (built after the encoder).
    """

    _EXTRA_ARGS: tuple = ()
    _HEAD: str = "classifier"

    def __init__(self, config: AlbertConfig, inference_layers: Optional[int] = None,
                 **kwargs):
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        self.encoder = AlbertEncoder(config, inference_layers=inference_layers, name="encoder",
                                     dtype=self.dtype_policy)

    @property
    def inference_layers(self) -> Optional[int]:
        """The layers run at inference (None: all L); see `AlbertEncoder`."""
        return self.encoder.inference_layers

    @inference_layers.setter
    def inference_layers(self, value: Optional[int]) -> None:
        self.encoder.inference_layers = check_inference_layers(value, self.config)

    def classification_head(self, num_outputs: int, dropout_rate: float
                            ) -> heads.ClassificationHead:
        """dropout -> dense [H, num_outputs] named `classifier` (the original's
        `output_weights` / `output_bias`)."""
        return heads.ClassificationHead(num_outputs, self.config.hidden_size,
                                        self.config.initializer_range, dropout_rate,
                                        name="classifier", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        if self.built:  # built already (a distillation student gets its weights first)
            return
        self.encoder.build()
        getattr(self, self._HEAD).build()
        self.built = True

    def get_config(self):
        values = serialize_model_config(self)
        values.update({name: getattr(self, name) for name in self._EXTRA_ARGS})
        return values

    @classmethod
    def from_config(cls, config):
        return cls(**deserialize_model_config(config))
