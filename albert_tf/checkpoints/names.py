"""The one table between the official TF1 variable names and this project's variables.

TF1 names are the interchange format (official downloads, TF-Hub modules,
Hugging Face's and Model Garden's converters all read them). Every kernel has
the same 2-D shape in both worlds, so conversion is a rename.

Sharing "none" is written as the original's grouped layout with one group per
layer (`group_l`), which the original code reads with num_hidden_groups = L.
Sharing "attention" and "ffn" have no TF1 layout.

Heads use the scopes of the original scripts (checked against
google-research/albert): run_classifier and run_race create the unscoped
`output_weights` [K, H] / `output_bias` [K] (K = 1 per choice for RACE);
SQuAD v1 `cls/squad/output_weights` [2, H] / `output_bias` [2]; SQuAD v2 the
`tf.layers.dense` scopes `start_logits/dense`, `end_logits/dense_0`,
`end_logits/LayerNorm`, `end_logits/dense_1`, `answer_class/dense_0` and
`answer_class/dense_1` (kernel only). Every model class registers its layout
with `register`; `variables_for(model)` returns the map of any model.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Dict

from albert_tf.modeling import models, sentence_encoder, token_classifier
from albert_tf.modeling.encoder import AlbertEncoder

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


def _built(model):
    if not model.built:
        model.build()
    return model


def classifier_variables(model) -> "OrderedDict[str, object]":
    """Encoder names plus run_classifier's unscoped `output_weights` [K, H], `output_bias` [K]
    (and with per-layer exit heads `exits/output_weights` [L-1, K, H], `exits/output_bias`
    [L-1, K], a name of albert-tf's own)."""
    names = encoder_variables(_built(model).encoder)
    names["output_weights"] = model.classifier.output_weights
    names["output_bias"] = model.classifier.output_bias
    if getattr(model, "exits", None) is not None:  # PABEE's per-layer exits (not original)
        names["exits/output_weights"] = model.exits.output_weights
        names["exits/output_bias"] = model.exits.output_bias
    return names


def span_labeler_variables(model) -> "OrderedDict[str, object]":
    """Encoder names plus SQuAD v1's `cls/squad/output_weights` [2, H], `output_bias` [2]."""
    names = encoder_variables(_built(model).encoder)
    names["cls/squad/output_weights"] = model.span.output_weights
    names["cls/squad/output_bias"] = model.span.output_bias
    return names


def squad_v2_variables(model) -> "OrderedDict[str, object]":
    """Encoder names plus SQuAD v2's start / end / answer_class dense layers."""
    names = encoder_variables(_built(model).encoder)
    head = model.squad
    names.update(_dense("start_logits/dense", head.start_dense))
    names.update(_dense("end_logits/dense_0", head.end_dense_0))
    names.update(_layer_norm("end_logits/LayerNorm", head.end_layer_norm))
    names.update(_dense("end_logits/dense_1", head.end_dense_1))
    names.update(_dense("answer_class/dense_0", head.answer_dense_0))
    names["answer_class/dense_1/kernel"] = head.answer_dense_1.kernel
    return names


def multiple_choice_variables(model) -> "OrderedDict[str, object]":
    """Encoder names plus run_race's `output_weights` [1, H], `output_bias` [1]."""
    return classifier_variables(model)


def token_classifier_variables(model) -> "OrderedDict[str, object]":
    """Encoder names plus the per-token `output_weights` [K, H], `output_bias` [K] (named as
    run_classifier's: the original has no tagging head) and, with a CRF, `crf/transitions`
    [K, K], `crf/start_transitions` [K], `crf/end_transitions` [K]."""
    names = classifier_variables(model)
    if model.crf is not None:
        for name in ("transitions", "start_transitions", "end_transitions"):
            names[f"crf/{name}"] = getattr(model.crf, name)
    return names


_LAYOUTS: Dict[type, Callable] = {}


def register(model_class: type, layout: Callable) -> None:
    """Declares `layout(model) -> OrderedDict[tf1_name, variable]` for a model class."""
    _LAYOUTS[model_class] = layout


def variables_for(model) -> "OrderedDict[str, object]":
    """The TF1 name -> variable map of any registered model (looked up along the class MRO)."""
    for cls in type(model).__mro__:
        if cls in _LAYOUTS:
            return _LAYOUTS[cls](model)
    raise TypeError(f"{type(model).__name__} has no TF1 variable layout; register one with "
                    "albert_tf.checkpoints.names.register(cls, layout)")


def is_encoder_name(name: str) -> bool:
    """True for the encoder's `bert/...` variables (the rest are heads)."""
    return name.startswith(ENCODER_SCOPE + "/")


register(AlbertEncoder, encoder_variables)
register(models.AlbertPretrainer, pretrainer_variables)
register(models.AlbertClassifier, classifier_variables)
register(models.AlbertSpanLabeler, span_labeler_variables)
register(models.AlbertSquadV2, squad_v2_variables)
register(models.AlbertMultipleChoice, multiple_choice_variables)
register(token_classifier.AlbertTokenClassifier, token_classifier_variables)
# A sentence encoder's pooling has no weights: its checkpoint is the encoder's.
register(sentence_encoder.AlbertSentenceEncoder,
         lambda model: encoder_variables(_built(model).encoder))
