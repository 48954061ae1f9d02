"""AlbertEncoder: embeddings -> projection E->H (only if E != H) -> L shared layers -> pooler.

Parameter sharing follows `AlbertConfig.parameter_sharing`:
  * "all" (the original): `num_hidden_groups` groups of `inner_group_num`
    attention+FFN blocks; layer l applies every block of group int(l*G/L).
  * "attention" / "ffn": that sub-block is one object called by every layer,
    the other sub-block is created per layer.
  * "none": one block per layer.
Sharing is plain object reuse: the same Keras layer is called several times.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import keras
import tensorflow as tf
from keras import ops

from albert_tf.modeling import layers
from albert_tf.config import AlbertConfig


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(keras.Model):
    """The ALBERT encoder.

    Call with a dict:
      `input_ids`   int32 [B, S] (required)
      `input_mask`  int32 [B, S], 1 for real tokens, 0 for padding (default: ones)
      `segment_ids` int32 [B, S], token type 0/1 (default: zeros)
    Returns a dict:
      `sequence_output` [B, S, H] (the last sub-layer's output)
      `pooled_output`   [B, H]    tanh(dense(sequence_output[:, 0]))
      `encoder_outputs` list of L * inner_group_num tensors [B, S, H], one per applied sub-layer
      `embedding_output` [B, S, E] (after LayerNorm and dropout, before the projection)

    `recompute_layers=True` wraps each layer in `tf.recompute_grad` when training:
    only the layer inputs are kept for the backward pass, and each layer's forward
    is run again there (except the last layer's, which the backward needs at once).
    Activation memory drops from O(L * B * S * (I + N * S)) to
    O(L * B * S * H) plus one layer's, for about a third more compute: an option for
    long sequences (bench/memory.py measures it). The block weights enter each
    recomputed layer as arguments (so their gradients join the chain of
    `layers.ResidentWeights`); tf.recompute_grad's backward makes one transient copy
    of them per layer (28 MB for base in float32).

    `inference_layers=k` (1 <= k <= L) runs the shared layers k times instead of L when not
    training: `sequence_output` and `pooled_output` are then the k-th layer's (ALBERT's
    sharing makes depth a choice at inference; training always runs all L). `embed` and
    `apply_layer` run the encoder one layer at a time (the early-exit loop,
    `modeling.early_exit`).
    """

    def __init__(self, config: AlbertConfig, recompute_layers: bool = False,
                 inference_layers: Optional[int] = None, **kwargs):
        # No autocast scope in call(): the resident weights are read as float32 there;
        # every sub-layer still autocasts in its own __call__.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        if isinstance(config, dict):
            config = AlbertConfig.from_dict(config)
        self.config = config
        self.recompute_layers = bool(recompute_layers)
        self.inference_layers = check_inference_layers(inference_layers, config)
        c = config
        self.embeddings = layers.FactorizedEmbedding(
            c.vocab_size, c.embedding_size, c.max_position_embeddings, c.type_vocab_size,
            c.initializer_range, c.hidden_dropout_prob, name="embeddings",
            dtype=self.dtype_policy)
        self.embedding_projection = None
        if c.embedding_size != c.hidden_size:
            self.embedding_projection = layers.dense(c.hidden_size, c.initializer_range,
                                                     "embedding_hidden_mapping_in",
                                                     dtype=self.dtype_policy)
        # Unique sub-layers, each an attribute of its own (so both Keras saving and
        # tf.train.Checkpoint track it), and for each layer the (attention, ffn)
        # indices it applies. Lists of layers would be Keras TrackedLists, which
        # tf.train.Checkpoint does not follow.
        sharing = c.parameter_sharing
        if sharing == "all":
            attention_names = [f"group_{g}_inner_group_{k}_attention"
                               for g in range(c.num_hidden_groups)
                               for k in range(c.inner_group_num)]
            plan = []
            for l in range(c.num_hidden_layers):
                first = c.group_index(l) * c.inner_group_num
                plan.append([(first + k, first + k) for k in range(c.inner_group_num)])
        else:
            num_attention = 1 if sharing == "attention" else c.num_hidden_layers
            num_ffn = 1 if sharing == "ffn" else c.num_hidden_layers
            attention_names = (["shared_attention"] if num_attention == 1 else
                               [f"layer_{i}_attention" for i in range(num_attention)])
            ffn_names = (["shared_ffn"] if num_ffn == 1 else
                         [f"layer_{i}_ffn" for i in range(num_ffn)])
            plan = [[(0 if num_attention == 1 else l, 0 if num_ffn == 1 else l)]
                    for l in range(c.num_hidden_layers)]
        if sharing == "all":
            ffn_names = [name.replace("_attention", "_ffn") for name in attention_names]
        for name in attention_names:
            setattr(self, name, self._attention(name))
        for name in ffn_names:
            setattr(self, name, self._ffn(name))
        self._attention_names = tuple(attention_names)
        self._ffn_names = tuple(ffn_names)
        self._plan = tuple(tuple(layer) for layer in plan)
        self.pooler = layers.dense(c.hidden_size, c.initializer_range, "pooler",
                                   activation="tanh", dtype=self.dtype_policy)

    def _attention(self, name):
        c = self.config
        return layers.AttentionSublayer(c.hidden_size, c.num_attention_heads, c.initializer_range,
                                        c.hidden_dropout_prob, c.attention_probs_dropout_prob,
                                        name=name, dtype=self.dtype_policy)

    def _ffn(self, name):
        c = self.config
        return layers.FeedForwardSublayer(c.hidden_size, c.intermediate_size, c.hidden_act,
                                          c.initializer_range, c.hidden_dropout_prob, name=name,
                                          dtype=self.dtype_policy)

    def build(self, input_shape=None):
        c = self.config
        self.embeddings.build()
        if self.embedding_projection is not None:
            self.embedding_projection.build((None, None, c.embedding_size))
        for block in self.attention_blocks + self.ffn_blocks:
            block.build((None, None, c.hidden_size))
        self.pooler.build((None, c.hidden_size))
        self.built = True

    @property
    def attention_blocks(self) -> List[layers.AttentionSublayer]:
        """The unique attention sub-layers, in group / inner-group (or layer) order."""
        return [getattr(self, name) for name in self._attention_names]

    @property
    def ffn_blocks(self) -> List[layers.FeedForwardSublayer]:
        """The unique FFN sub-layers, in group / inner-group (or layer) order."""
        return [getattr(self, name) for name in self._ffn_names]

    def layer_blocks(self, layer_index: int):
        """The (attention, ffn) sub-layers applied by layer `layer_index`, in order."""
        return [(self.attention_blocks[a], self.ffn_blocks[f]) for a, f in self._plan[layer_index]]

    @property
    def embedding_table(self):
        """The [V, E] word-embedding variable (shared with the masked-LM decoder)."""
        return self.embeddings.embedding_table

    def layers_run(self, training=False) -> int:
        """How many layers a call runs: L when training, else `inference_layers` (or L)."""
        if training or self.inference_layers is None:
            return self.config.num_hidden_layers
        return self.inference_layers

    def embed(self, inputs: Dict, training=False):
        """(x [B, S, H]: the first layer's input, input_mask int32 [B, S], embedding_output
        [B, S, E]) of the encoder's input dict."""
        input_ids, input_mask, segment_ids = unpack_inputs(inputs)
        embedding_output = self.embeddings(input_ids, segment_ids, training=training)
        x = embedding_output
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        return x, input_mask, embedding_output

    def apply_layer(self, layer_index: int, x, input_mask, training=False) -> List:
        """The outputs [B, S, H] of layer `layer_index` applied to x [B, S, H]: one per
        inner-group sub-layer, the last is the layer's output. Float32 inference only
        reads the variables directly (no resident weights), as `call` does then."""
        return self._run_blocks(self.layer_blocks(layer_index), x, input_mask, training)

    def same_layer_runs(self, num_layers: int) -> List[range]:
        """The layers 0..num_layers-1 cut into runs of consecutive layers that apply the
        same sub-layers (ALBERT's groups: one run per group; one run for the original's
        single group), for loops whose body is one layer."""
        runs, start = [], 0
        for index in range(1, num_layers + 1):
            if index == num_layers or self._plan[index] != self._plan[start]:
                runs.append(range(start, index))
                start = index
        return runs

    @staticmethod
    def _run_blocks(blocks, x, input_mask, training, residents=None) -> List:
        """Each (attention, ffn) of `blocks` applied in turn to x [B, S, H]; their outputs.
        residents: per block the (attention, ffn) `layers.ResidentWeights` uses, or None."""
        outputs = []
        for index, (attention, ffn) in enumerate(blocks):
            attention_use, ffn_use = residents[index] if residents else (None, None)
            x = attention(x, input_mask, training=training, resident=attention_use)
            x = ffn(x, training=training, resident=ffn_use)
            outputs.append(x)
        return outputs

    def call(self, inputs: Dict, training=False):
        x, input_mask, embedding_output = self.embed(inputs, training=training)
        num_layers = self.layers_run(training)
        recompute = self.recompute_layers and training
        unique_blocks = self.attention_blocks + self.ffn_blocks
        shared = {}
        # Training: each block's weights reach its applications through a chain that
        # sums their gradients as the backward pass produces them (one partial sum per
        # weight alive, not L gradients). Mixed precision: the weights are cast to the
        # compute dtype once per pass, not once per application.
        if training or self.compute_dtype != self.variable_dtype:
            uses = {block.name: 0 for block in unique_blocks}
            for layer_index in range(num_layers):
                for attention, ffn in self.layer_blocks(layer_index):
                    uses[attention.name] += 1
                    uses[ffn.name] += 1
            shared = {block.name: block.resident_weights(self.compute_dtype, uses[block.name],
                                                         chained=bool(training))
                      for block in unique_blocks if uses[block.name]}

        def next_use(block):
            weights = shared.get(block.name)
            return None if weights is None else weights.next_use()

        encoder_outputs = []
        for layer_index in range(num_layers):
            blocks = self.layer_blocks(layer_index)
            weights = [(next_use(attention), next_use(ffn)) for attention, ffn in blocks]
            flat = [t for pair in weights for use in pair if use is not None
                    for t in use.tensors()]

            def run_layer(h, *tensors, blocks=blocks, weights=weights):
                # The weights come in as tensors, not read from the variables in here,
                # so that tf.recompute_grad hands their gradients back to the chain.
                tensors = iter(tensors)

                def rebuilt(use):
                    return None if use is None else use.with_tensors(
                        [next(tensors) for _ in use.tensors()])

                return self._run_blocks(blocks, h, input_mask, training,
                                        [(rebuilt(attention), rebuilt(ffn))
                                         for attention, ffn in weights])

            # The last layer is not recomputed: the backward pass starts there, so its
            # activations would be rebuilt at once and live at the same moment anyway.
            last = layer_index == num_layers - 1
            outputs = (tf.recompute_grad(run_layer)(x, *flat) if recompute and not last
                       else run_layer(x, *flat))
            encoder_outputs.extend(outputs)
            x = outputs[-1]
        pooled_output = self.pooler(x[:, 0])
        return {
            "sequence_output": x,
            "pooled_output": pooled_output,
            "encoder_outputs": encoder_outputs,
            "embedding_output": embedding_output,
        }

    def get_config(self):
        return serialize_model_config(self)

    @classmethod
    def from_config(cls, config):
        return cls(**deserialize_model_config(config))


def serialize_model_config(model) -> Dict:
    """`get_config` of a model whose constructor is (AlbertConfig, name, dtype)."""
    values = {"config": model.config.to_dict(), "name": model.name,
              "dtype": keras.dtype_policies.serialize(model.dtype_policy)}
    if getattr(model, "recompute_layers", False):
        values["recompute_layers"] = True
    if getattr(model, "inference_layers", None) is not None:
        values["inference_layers"] = model.inference_layers
    return values


def check_inference_layers(inference_layers: Optional[int], config: AlbertConfig
                           ) -> Optional[int]:
    """`inference_layers` itself (None: all L), or ValueError in one line when it is not a
    whole number in 1..L."""
    if inference_layers is None:
        return None
    limit = config.num_hidden_layers
    if (isinstance(inference_layers, bool) or int(inference_layers) != inference_layers
            or not 1 <= inference_layers <= limit):
        raise ValueError(f"inference_layers must be a whole number from 1 to the model's "
                         f"num_hidden_layers ({limit}); got {inference_layers!r}")
    return int(inference_layers)


def deserialize_model_config(config: Dict) -> Dict:
    """Constructor kwargs from `serialize_model_config` output."""
    kwargs = dict(config)
    kwargs["config"] = AlbertConfig.from_dict(kwargs["config"])
    if isinstance(kwargs.get("dtype"), dict):
        kwargs["dtype"] = keras.dtype_policies.deserialize(kwargs["dtype"])
    return kwargs


def unpack_inputs(inputs):
    """Returns (input_ids, input_mask, segment_ids) from a dict, filling the defaults.

    Missing `input_mask` becomes ones and missing `segment_ids` zeros, as the original.
    """
    if not isinstance(inputs, dict):
        raise TypeError("ALBERT models are called with a dict holding 'input_ids' "
                        f"(and optionally 'input_mask', 'segment_ids'); got {type(inputs).__name__}")
    if "input_ids" not in inputs:
        raise KeyError("the input dict has no 'input_ids' (keys: "
                       f"{', '.join(sorted(inputs))})")
    input_ids = ops.cast(inputs["input_ids"], "int32")
    input_mask = inputs.get("input_mask")
    input_mask = ops.ones_like(input_ids) if input_mask is None else ops.cast(input_mask, "int32")
    segment_ids = inputs.get("segment_ids")
    segment_ids = (ops.zeros_like(input_ids) if segment_ids is None
                   else ops.cast(segment_ids, "int32"))
    return input_ids, input_mask, segment_ids
