"""The one table between the official TF1 variable names and this project's variables.

TF1 names are the interchange format (official downloads, TF-Hub modules,
Hugging Face's and Model Garden's converters all read them). Every kernel has
the same 2-D shape in both worlds, so conversion is a rename.

Sharing "none" is written as the original's grouped layout with one group per
layer (`group_l`), which the original code reads with num_hidden_groups = L.
Sharing "attention" and "ffn" have no TF1 layout.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Dict

from albert_tf.encoder import AlbertEncoder

ENCODER_SCOPE = "bert"


def _dense(prefix: str, layer) -> Dict:
    return {f"{prefix}/kernel": layer.kernel, f"{prefix}/bias": layer.bias}


def _layer_norm(prefix: str, layer) -> Dict:
    return {f"{prefix}/gamma": layer.gamma, f"{prefix}/beta": layer.beta}


def _block_prefix(group: int, inner: int) -> str:
    return f"{ENCODER_SCOPE}/encoder/transformer/group_{group}/inner_group_{inner}"


def encoder_variables(encoder: AlbertEncoder) -> "OrderedDict[str, object]":
    """Maps each official `bert/...` name to the encoder variable it corresponds to."""
    config = encoder.config
    if config.parameter_sharing in ("attention", "ffn"):
        raise ValueError(f"parameter_sharing={config.parameter_sharing!r} has no layout in the "
                         "official TF1 checkpoint format (only 'all' and 'none' do)")
    if config.parameter_sharing == "none":
        layers = config.num_hidden_layers
        if any(int(l / layers * layers) != l for l in range(layers)):
            raise ValueError(
                f"parameter_sharing='none' with num_hidden_layers={layers} cannot be written as "
                "the original's one-group-per-layer layout: its float group index "
                "int(l / L * G) skips a group for this L")
    if not encoder.built:
        encoder.build()
    emb = encoder.embeddings
    names = OrderedDict()
    names[f"{ENCODER_SCOPE}/embeddings/word_embeddings"] = emb.word_embeddings
    names[f"{ENCODER_SCOPE}/embeddings/token_type_embeddings"] = emb.token_type_embeddings
    names[f"{ENCODER_SCOPE}/embeddings/position_embeddings"] = emb.position_embeddings
    names.update(_layer_norm(f"{ENCODER_SCOPE}/embeddings/LayerNorm", emb.layer_norm))
    if encoder.embedding_projection is not None:
        names.update(_dense(f"{ENCODER_SCOPE}/encoder/embedding_hidden_mapping_in",
                            encoder.embedding_projection))
    inner_num = config.inner_group_num
    for index, (attention, ffn) in enumerate(zip(encoder.attention_blocks, encoder.ffn_blocks)):
        prefix = _block_prefix(index // inner_num, index % inner_num)
        for part in ("query", "key", "value"):
            names.update(_dense(f"{prefix}/attention_1/self/{part}", getattr(attention, part)))
        names.update(_dense(f"{prefix}/attention_1/output/dense", attention.output_dense))
        names.update(_layer_norm(f"{prefix}/LayerNorm", attention.layer_norm))
        names.update(_dense(f"{prefix}/ffn_1/intermediate/dense", ffn.intermediate))
        names.update(_dense(f"{prefix}/ffn_1/intermediate/output/dense", ffn.output_dense))
        names.update(_layer_norm(f"{prefix}/LayerNorm_1", ffn.layer_norm))
    names.update(_dense(f"{ENCODER_SCOPE}/pooler/dense", encoder.pooler))
    return names


def pretrainer_variables(pretrainer) -> "OrderedDict[str, object]":
    """Encoder names plus the `cls/predictions` (MLM) and `cls/seq_relationship` (SOP) heads."""
    if not pretrainer.built:
        pretrainer.build()
    names = encoder_variables(pretrainer.encoder)
    mlm = pretrainer.masked_lm
    names.update(_dense("cls/predictions/transform/dense", mlm.transform))
    names.update(_layer_norm("cls/predictions/transform/LayerNorm", mlm.layer_norm))
    names["cls/predictions/output_bias"] = mlm.output_bias
    sop = pretrainer.sentence_order
    names["cls/seq_relationship/output_weights"] = sop.output_weights
    names["cls/seq_relationship/output_bias"] = sop.output_bias
    return names
