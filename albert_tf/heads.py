"""Task heads on top of the ALBERT encoder.

B = batch, S = sequence length, P = masked positions per sequence, H = hidden,
E = embedding size, V = vocabulary size. Logits are returned in float32 under
every dtype policy so that losses and softmaxes are computed in float32.
"""
from __future__ import annotations

import keras
from keras import ops

from albert_tf import layers


@keras.saving.register_keras_serializable(package="albert_tf")
class MaskedLMHead(keras.layers.Layer):
    """The original's `cls/predictions`: dense H->E with the config activation, LayerNorm,
    then a decoder tied to the word embeddings plus an output bias.

    Call: `hidden` [B, P, H], `embedding_table` [V, E] -> logits [B, P, V] (float32).
    The embedding table is passed at call time (not owned), so it is trained and
    saved once, by the encoder.
    """

    def __init__(self, vocab_size, embedding_size, hidden_size, hidden_act, initializer_range,
                 **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform = layers.dense(embedding_size, initializer_range, "transform",
                                      activation=layers.get_activation(hidden_act),
                                      dtype=self.dtype_policy)
        self.layer_norm = layers.layer_norm("LayerNorm")

    def build(self, input_shape=None):
        self.transform.build((None, None, self.hidden_size))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,),
                                           initializer="zeros")
        self.built = True

    def call(self, hidden, embedding_table):
        h = self.layer_norm(self.transform(hidden))
        table = ops.cast(embedding_table, self.compute_dtype)
        logits = ops.einsum("bpe,ve->bpv", ops.cast(h, self.compute_dtype), table)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(vocab_size=self.vocab_size, embedding_size=self.embedding_size,
                      hidden_size=self.hidden_size, hidden_act=self.hidden_act,
                      initializer_range=self.initializer_range)
        return config


@keras.saving.register_keras_serializable(package="albert_tf")
class SentenceOrderHead(keras.layers.Layer):
    """The original's `cls/seq_relationship`: logits = pooled W^T + b, W stored [2, H].

    Call: `pooled` [B, H] -> logits [B, 2] (float32); label 1 means "swapped".
    """

    def __init__(self, hidden_size, initializer_range, **kwargs):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.initializer_range = initializer_range

    def build(self, input_shape=None):
        self.output_weights = self.add_weight(
            name="output_weights", shape=(2, self.hidden_size),
            initializer=layers.kernel_initializer(self.initializer_range))
        self.output_bias = self.add_weight(name="output_bias", shape=(2,), initializer="zeros")
        self.built = True

    def call(self, pooled):
        logits = ops.matmul(ops.cast(pooled, self.compute_dtype),
                            ops.transpose(ops.cast(self.output_weights, self.compute_dtype)))
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def get_config(self):
        config = super().get_config()
        config.update(hidden_size=self.hidden_size, initializer_range=self.initializer_range)
        return config
