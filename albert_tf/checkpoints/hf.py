"""Hugging Face ALBERT weights (`config.json` + `model.safetensors`) in and out, without torch.

Names are translated to and from the TF1 names (`albert_tf.checkpoints.names` stays
the one table between a format and our variables), following Hugging Face's
`modeling_albert.py` and its `load_tf_weights_in_albert`:

  TF1                                                    Hugging Face (prefix `albert.`)
  bert/embeddings/{word,position,token_type}_embeddings  embeddings.*_embeddings.weight
  bert/embeddings/LayerNorm/{gamma,beta}                 embeddings.LayerNorm.{weight,bias}
  bert/encoder/embedding_hidden_mapping_in               encoder.embedding_hidden_mapping_in
  .../group_g/inner_group_i/attention_1/self/{q,k,v}     encoder.albert_layer_groups.g
                                                           .albert_layers.i.attention.{q,k,v}
  .../attention_1/output/dense                           ....attention.dense
  .../inner_group_i/LayerNorm                            ....attention.LayerNorm
  .../ffn_1/intermediate/dense                           ....ffn
  .../ffn_1/intermediate/output/dense                    ....ffn_output
  .../inner_group_i/LayerNorm_1                          ....full_layer_layer_norm
  bert/pooler/dense                                      pooler
  cls/predictions/transform/{dense,LayerNorm}            predictions.{dense,LayerNorm} (no prefix)
  cls/predictions/output_bias                            predictions.bias
  cls/seq_relationship/output_{weights,bias}             sop_classifier.classifier.{weight,bias}
  output_{weights,bias} (classifier, RACE)               classifier.{weight,bias}
  cls/squad/output_{weights,bias} (SQuAD v1)             qa_outputs.{weight,bias}

`kernel` [in, out] is transposed to torch's `weight` [out, in]; `output_weights`
is already [out, in]. The SQuAD v2 head has no Hugging Face counterpart.
Hugging Face always has `embedding_hidden_mapping_in`; when embedding_size ==
hidden_size this project (like the original) has none: it is written as the
identity and accepted on import only if it is the identity.
"""
from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from albert_tf import fileio
from albert_tf.checkpoints import assign
from albert_tf.checkpoints import names as tf1_names
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserFileNotFoundError, UserValueError

HF_BASE_PREFIX = "albert."
_LAYER_RE = re.compile(r"^bert/encoder/transformer/group_(\d+)/inner_group_(\d+)/(.+)$")
_HF_LAYER_RE = re.compile(r"^encoder\.albert_layer_groups\.(\d+)\.albert_layers\.(\d+)\.(.+)$")
_BLOCK_PARTS = {
    "attention_1/self/query": "attention.query",
    "attention_1/self/key": "attention.key",
    "attention_1/self/value": "attention.value",
    "attention_1/output/dense": "attention.dense",
    "LayerNorm": "attention.LayerNorm",
    "ffn_1/intermediate/dense": "ffn",
    "ffn_1/intermediate/output/dense": "ffn_output",
    "LayerNorm_1": "full_layer_layer_norm",
}
_FIXED = {
    "bert/embeddings/word_embeddings": "albert.embeddings.word_embeddings.weight",
    "bert/embeddings/position_embeddings": "albert.embeddings.position_embeddings.weight",
    "bert/embeddings/token_type_embeddings": "albert.embeddings.token_type_embeddings.weight",
    "bert/embeddings/LayerNorm": "albert.embeddings.LayerNorm",
    "bert/encoder/embedding_hidden_mapping_in": "albert.encoder.embedding_hidden_mapping_in",
    "bert/pooler/dense": "albert.pooler",
    "cls/predictions/transform/dense": "predictions.dense",
    "cls/predictions/transform/LayerNorm": "predictions.LayerNorm",
    "cls/predictions/output_bias": "predictions.bias",
    "cls/seq_relationship/output_weights": "sop_classifier.classifier.weight",
    "cls/seq_relationship/output_bias": "sop_classifier.classifier.bias",
    "output_weights": "classifier.weight",
    "output_bias": "classifier.bias",
    "cls/squad/output_weights": "qa_outputs.weight",
    "cls/squad/output_bias": "qa_outputs.bias",
}
_LEAF = {"kernel": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}
# Parameters Hugging Face stores twice (tied) or as buffers; never model weights of their own.
_HF_IGNORED = re.compile(r"(^|\.)position_ids$|^predictions\.decoder\.(weight|bias)$")


def tf1_to_hf_name(name: str) -> Optional[Tuple[str, bool]]:
    """(Hugging Face parameter name, transpose?) for a TF1 name; None if HF has no such weight."""
    if name in _FIXED:
        return _FIXED[name], False
    match = _LAYER_RE.match(name)
    if match:
        group, inner, rest = match.groups()
        scope, leaf = rest.rsplit("/", 1)
        if scope in _BLOCK_PARTS and leaf in _LEAF:
            return (f"albert.encoder.albert_layer_groups.{group}.albert_layers.{inner}."
                    f"{_BLOCK_PARTS[scope]}.{_LEAF[leaf]}", leaf == "kernel")
        return None
    scope, _, leaf = name.rpartition("/")
    if scope in _FIXED and leaf in _LEAF:
        return f"{_FIXED[scope]}.{_LEAF[leaf]}", leaf == "kernel"
    return None


def _hf_to_tf1_table(names) -> Dict[str, Tuple[str, bool]]:
    """HF name -> (TF1 name, transpose?) for the given TF1 names."""
    table = {}
    for name in names:
        hit = tf1_to_hf_name(name)
        if hit:
            table[hit[0]] = (name, hit[1])
    return table


# --- configs --------------------------------------------------------------------------------------


def config_from_hf(values: Mapping, source: str = "config.json") -> AlbertConfig:
    """An AlbertConfig from a Hugging Face ALBERT `config.json` dict."""
    if values.get("model_type", "albert") != "albert":
        raise UserValueError(f"{source}: model_type is {values.get('model_type')!r}, not 'albert'")
    act = values.get("hidden_act", "gelu_new")
    if act == "gelu":
        raise UserValueError(f"{source}: hidden_act 'gelu' is Hugging Face's exact (erf) GELU; "
                             "ALBERT uses the tanh approximation ('gelu_new'), and this project "
                             "implements only that one")
    acts = {"gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "relu": "relu", "tanh": "tanh",
            "linear": "linear"}
    if act not in acts:
        raise UserValueError(f"{source}: hidden_act {act!r} is not supported")
    eps = values.get("layer_norm_eps", 1e-12)
    if abs(eps - 1e-12) > 1e-15:
        raise UserValueError(f"{source}: layer_norm_eps is {eps}; ALBERT (and this project) "
                             "uses 1e-12")
    if values.get("position_embedding_type", "absolute") != "absolute":
        raise UserValueError(f"{source}: position_embedding_type "
                             f"{values['position_embedding_type']!r} is not supported")
    fields = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
              "num_hidden_groups", "num_attention_heads", "intermediate_size",
              "inner_group_num", "hidden_dropout_prob", "attention_probs_dropout_prob",
              "max_position_embeddings", "type_vocab_size", "initializer_range")
    kwargs = {f: values[f] for f in fields if f in values}
    kwargs["hidden_act"] = acts[act]
    try:
        return AlbertConfig.from_dict(kwargs)
    except ValueError as err:
        raise UserValueError(f"{source}: {err}") from err


def config_to_hf(config: AlbertConfig, architectures: List[str],
                 extra: Optional[Mapping] = None) -> Dict:
    """A Hugging Face ALBERT `config.json` dict for `config`."""
    if config.parameter_sharing not in ("all", "none"):
        raise UserValueError(f"parameter_sharing={config.parameter_sharing!r} has no Hugging Face "
                             "layout (only 'all' and 'none' do)")
    groups = (config.num_hidden_layers if config.parameter_sharing == "none"
              else config.num_hidden_groups)
    act = {"gelu": "gelu_new", "gelu_new": "gelu_new"}.get(config.hidden_act, config.hidden_act)
    values = {
        "architectures": architectures, "model_type": "albert",
        "vocab_size": config.vocab_size, "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size, "num_hidden_layers": config.num_hidden_layers,
        "num_hidden_groups": groups, "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size, "inner_group_num": config.inner_group_num,
        "hidden_act": act, "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size, "initializer_range": config.initializer_range,
        "layer_norm_eps": 1e-12, "classifier_dropout_prob": 0.1,
        "position_embedding_type": "absolute", "pad_token_id": 0, "bos_token_id": 2,
        "eos_token_id": 3,
    }
    values.update(extra or {})
    return values


# --- reading --------------------------------------------------------------------------------------


def _safetensors_files(directory: str) -> List[str]:
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index, encoding="utf-8") as handle:
            weight_map = json.load(handle)["weight_map"]
        return sorted({os.path.join(directory, f) for f in weight_map.values()})
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        return [single]
    raise UserFileNotFoundError(f"{directory}: no model.safetensors (only the safetensors "
                                "format is read; convert a pytorch_model.bin with Hugging Face "
                                "first)")


def read_hf_tensors(directory: str) -> Dict[str, np.ndarray]:
    """Every tensor of a Hugging Face checkpoint directory, as NumPy arrays."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    tensors = {}
    for path in _safetensors_files(directory):
        try:
            tensors.update(load_file(path))
        except (SafetensorError, OSError, ValueError, TypeError) as err:
            raise UserValueError(f"cannot read {path} (truncated, corrupt, or a dtype NumPy lacks "
                                 f"such as bfloat16?): {err}") from err
    return tensors


def read_hf_config(directory: str) -> Dict:
    path = os.path.join(directory, "config.json")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def read_hf_tokenizer_config(directory: str) -> Dict:
    """`tokenizer_config.json` of a Hugging Face directory ({} when absent): casing,
    `model_max_length`."""
    return fileio.read_json(os.path.join(directory, "tokenizer_config.json"))


def config_from_hf_dir(directory: str) -> AlbertConfig:
    """The AlbertConfig of a Hugging Face ALBERT directory's `config.json`."""
    return config_from_hf(read_hf_config(directory), os.path.join(directory, "config.json"))


def hf_to_tf1_arrays(tensors: Mapping[str, np.ndarray], model_names) -> Tuple[
        Dict[str, np.ndarray], List[str], List[str]]:
    """(TF1-named arrays, HF names left unused, HF names ignored) for the given TF1 names.

    A base-model checkpoint (keys without `albert.`) is accepted too.
    """
    table = _hf_to_tf1_table(model_names)
    base_only = not any(k.startswith(HF_BASE_PREFIX) for k in tensors)
    arrays, unused, ignored = {}, [], []
    for key, value in tensors.items():
        full = HF_BASE_PREFIX + key if base_only else key
        if _HF_IGNORED.search(full):
            ignored.append(key)
        elif full in table:
            name, transpose = table[full]
            arrays[name] = np.ascontiguousarray(value.T if transpose else value)
        else:
            unused.append(key)
    return arrays, unused, ignored


def load_hf_checkpoint(model, directory: str,
                       init_from_group0: bool = False) -> assign.LoadReport:
    """Loads Hugging Face ALBERT weights (`model.safetensors`) into any model of this project.

    Encoder and heads (MLM, SOP, sequence and token classification, QA, multiple
    choice) are read; the config in `config.json` must agree with the model's (checked
    field by field). Hugging Face task models drop the pooler, so a missing
    pooler is reported, not raised. Returns the LoadReport (names are TF1 names;
    unused Hugging Face keys are listed under `unused`).
    """
    config = assign.model_config(model)
    hf_config = read_hf_config(directory)
    _check_hf_config(config, hf_config, directory, init_from_group0)
    hf_groups = hf_config.get("num_hidden_groups", config.num_hidden_groups)
    tensors = read_hf_tensors(directory)
    names = tf1_names.variables_for(model)
    arrays, unused, ignored = hf_to_tf1_arrays(tensors, list(names) + [
        assign.PROJECTION + "/kernel", assign.PROJECTION + "/bias"] + _all_group_names(
            names, hf_groups))
    if config.embedding_size == config.hidden_size and assign.drop_identity_projection(
            arrays, config.hidden_size,
            f"{directory}: embedding_size == hidden_size == {config.hidden_size} but the "
            "checkpoint's albert.encoder.embedding_hidden_mapping_in is not the identity; "
            "this project (like the original) has no projection when the sizes are equal"):
        ignored.append("albert.encoder.embedding_hidden_mapping_in (identity)")
    shapes = {name: tuple(value.shape) for name, value in arrays.items()}
    report = assign.assign_named_arrays(
        model, shapes, arrays.__getitem__, directory, "Hugging Face",
        init_from_group0=init_from_group0,
        optional_encoder=("bert/pooler/dense/kernel", "bert/pooler/dense/bias"))
    report.unused = sorted(set(report.unused) | set(unused))
    report.skipped = sorted(set(report.skipped) | set(ignored))
    return report


def _check_hf_config(config: AlbertConfig, hf_config: Mapping, directory: str,
                     init_from_group0: bool) -> None:
    """Raises CheckpointMismatchError naming each field where config.json and `config` differ.

    This catches what shapes cannot show (num_attention_heads, hidden_act, num_hidden_layers).
    """
    theirs = config_from_hf(hf_config, os.path.join(directory, "config.json")).to_dict()
    ours = config.to_dict()
    if config.parameter_sharing == "none":
        ours["num_hidden_groups"] = config.num_hidden_layers
    fields = ["vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
              "num_attention_heads", "intermediate_size", "inner_group_num",
              "max_position_embeddings", "type_vocab_size", "hidden_act"]
    if not init_from_group0:
        fields.append("num_hidden_groups")
    norm = {"gelu_new": "gelu"}
    problems = [f"{f} is {ours[f]} in the config but {theirs[f]} in config.json"
                for f in fields if norm.get(ours[f], ours[f]) != norm.get(theirs[f], theirs[f])]
    if problems:
        raise assign.CheckpointMismatchError(
            f"config does not match Hugging Face checkpoint {directory}:\n  - "
            + "\n  - ".join(problems))


def _all_group_names(names, groups: int) -> List[str]:
    """TF1 names of every group 0..groups-1 (so extra HF groups are translated, then unused)."""
    out = []
    for name in names:
        match = _LAYER_RE.match(name)
        if match:
            out += [f"bert/encoder/transformer/group_{g}/inner_group_{match.group(2)}/"
                    f"{match.group(3)}" for g in range(groups)]
    return out


# --- writing --------------------------------------------------------------------------------------


# Hugging Face builds these without the pooler (`AlbertModel(config, add_pooling_layer=False)`):
# their files hold no `albert.pooler.*`.
_WITHOUT_POOLER = ("AlbertForTokenClassification",)


# What each Hugging Face ALBERT class is in convert's --model terms.
ARCHITECTURE_MODELS = {
    "AlbertForPreTraining": "pretrainer", "AlbertForMaskedLM": "pretrainer",
    "AlbertModel": "encoder", "AlbertForSequenceClassification": "classifier",
    "AlbertForTokenClassification": "token_classifier",
    "AlbertForQuestionAnswering": "span_labeler", "AlbertForMultipleChoice": "multiple_choice",
}


def model_of_hf_config(values: Mapping, source: str = "config.json") -> Tuple[str, int]:
    """(convert's --model, its number of labels) of a Hugging Face config: from its
    `architectures` (a config without one is the bare `encoder`) and `id2label` (or
    `num_labels`; 2 when neither is given, as Hugging Face's default)."""
    architectures = values.get("architectures") or ["AlbertModel"]
    model = ARCHITECTURE_MODELS.get(architectures[0])
    if model is None:
        raise UserValueError(f"{source}: architectures {architectures} is not an ALBERT class "
                             f"this library reads ({', '.join(ARCHITECTURE_MODELS)})")
    num_labels = len(values["id2label"]) if values.get("id2label") else int(
        values.get("num_labels", 2))
    return model, num_labels


def label_maps(num_labels: int, labels: Optional[Sequence[str]] = None) -> Dict:
    """config.json's `id2label` / `label2id` for `labels` (in the order of the model's
    outputs; default Hugging Face's `LABEL_<i>`)."""
    names = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(num_labels)]
    if len(names) != num_labels or len(set(names)) != num_labels:
        raise UserValueError(f"labels {names}: the model has {num_labels} outputs; give "
                             f"{num_labels} distinct label names")
    return {"id2label": {str(i): name for i, name in enumerate(names)},
            "label2id": {name: i for i, name in enumerate(names)}}


def labels_from_hf_config(values: Mapping, source: str = "config.json"
                          ) -> Optional[List[str]]:
    """The label names of a Hugging Face config (`id2label`, in output order), or None when
    it has none or only Hugging Face's placeholders `LABEL_<i>`."""
    id2label = values.get("id2label")
    if not id2label:
        return None
    try:
        indices = sorted(int(i) for i in id2label)
    except ValueError:
        raise UserValueError(f"{source}: id2label keys must be output indices, got "
                             f"{sorted(id2label)}") from None
    if indices != list(range(len(indices))):
        raise UserValueError(f"{source}: id2label must number the outputs 0..{len(indices) - 1}, "
                             f"got {indices}")
    names = [str(id2label[str(i)] if str(i) in id2label else id2label[i]) for i in indices]
    return None if names == [f"LABEL_{i}" for i in indices] else names


PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")


def _architecture(model, labels: Optional[Sequence[str]] = None,
                  problem_type: Optional[str] = None) -> Tuple[str, Dict]:
    from albert_tf.modeling import models
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.sentence_encoder import AlbertSentenceEncoder
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    if isinstance(model, models.AlbertPretrainer):
        return "AlbertForPreTraining", {}
    if isinstance(model, models.AlbertMultipleChoice):
        return "AlbertForMultipleChoice", {}
    if isinstance(model, models.AlbertClassifier):
        k = model.num_labels
        if problem_type is not None and problem_type not in PROBLEM_TYPES:
            raise UserValueError(f"problem_type {problem_type!r}: one of {PROBLEM_TYPES}")
        if problem_type is None:
            problem_type = "regression" if k == 1 else "single_label_classification"
        return "AlbertForSequenceClassification", dict(label_maps(k, labels),
                                                       problem_type=problem_type)
    if isinstance(model, AlbertTokenClassifier):
        if model.crf is not None:
            raise UserValueError("a CRF tagging head (--use_crf) has no Hugging Face "
                                 "counterpart: AlbertForTokenClassification decodes each token "
                                 "on its own")
        return "AlbertForTokenClassification", label_maps(model.num_labels, labels)
    if isinstance(model, models.AlbertSpanLabeler):
        return "AlbertForQuestionAnswering", {}
    if isinstance(model, (AlbertEncoder, AlbertSentenceEncoder)):
        return "AlbertModel", {}  # a sentence encoder's pooling has no weights
    raise UserValueError(f"{type(model).__name__} has no Hugging Face counterpart "
                         "(the SQuAD v2 beam head has none)")


def save_hf_tokenizer(directory: str, spm_model_file: Optional[str] = None,
                      vocab_file: Optional[str] = None, do_lower_case: bool = True,
                      model_max_length: int = 512) -> Optional[str]:
    """Copies the vocabulary as Hugging Face's tokenizers read it: a SentencePiece model as
    `spiece.model` (AlbertTokenizer), a WordPiece vocabulary as `vocab.txt` (BertTokenizer,
    as the Chinese ALBERT models on the Hub have), with `tokenizer_config.json` (casing,
    `model_max_length`). Returns the file written (None when neither is given)."""
    import shutil

    source = spm_model_file or vocab_file
    if not source:
        return None
    name = "spiece.model" if spm_model_file else "vocab.txt"
    settings = {"tokenizer_class": "AlbertTokenizer" if spm_model_file else "BertTokenizer",
                "do_lower_case": bool(do_lower_case), "model_max_length": int(model_max_length)}
    if spm_model_file:
        settings.update(keep_accents=False, remove_space=True)
    target = os.path.join(directory, name)
    os.makedirs(directory, exist_ok=True)
    if os.path.abspath(source) != os.path.abspath(target):
        with fileio.atomic_path(target) as tmp:
            shutil.copyfile(source, tmp)
    fileio.atomic_write_text(os.path.join(directory, "tokenizer_config.json"),
                             json.dumps(settings, indent=2, sort_keys=True) + "\n")
    return target


def save_hf_checkpoint(model, directory: str,
                       labels: Optional[Sequence[str]] = None,
                       spm_model_file: Optional[str] = None, vocab_file: Optional[str] = None,
                       do_lower_case: bool = True,
                       problem_type: Optional[str] = None) -> List[str]:
    """Writes `config.json` + `model.safetensors` that Hugging Face's ALBERT classes load,
    and the tokenizer when a vocabulary is given (`save_hf_tokenizer`). `problem_type`: a
    classifier's (default regression for one output, else single-label).

    `labels`: the label names of a classifier's or token classifier's outputs, in order
    (config.json's `id2label`; default `LABEL_<i>`). Returns the TF1 names that have no
    Hugging Face parameter (none for the supported models; a token classifier's pooler,
    which it never reads, is left out as Hugging Face's model has none). Both files are
    written atomically.
    """
    from safetensors.numpy import save

    config = assign.model_config(model)
    architecture, extra = _architecture(model, labels, problem_type)
    names = tf1_names.variables_for(model)
    tensors, left_out = {}, []
    for name, variable in names.items():
        hit = tf1_to_hf_name(name)
        if hit is None:
            left_out.append(name)
            continue
        value = np.asarray(variable.numpy(), np.float32)
        tensors[hit[0]] = np.ascontiguousarray(value.T if hit[1] else value)
    if config.embedding_size == config.hidden_size:
        tensors["albert.encoder.embedding_hidden_mapping_in.weight"] = np.eye(
            config.hidden_size, dtype=np.float32)
        tensors["albert.encoder.embedding_hidden_mapping_in.bias"] = np.zeros(
            config.hidden_size, np.float32)
    if architecture in _WITHOUT_POOLER:  # the task never reads it
        tensors = {k: v for k, v in tensors.items()
                   if not k.startswith(HF_BASE_PREFIX + "pooler.")}
    if architecture == "AlbertModel":  # the bare model's keys carry no `albert.` prefix
        tensors = {k[len(HF_BASE_PREFIX):]: v for k, v in tensors.items()}
    os.makedirs(directory, exist_ok=True)
    with fileio.atomic_open(os.path.join(directory, "model.safetensors"), "wb") as handle:
        handle.write(save(tensors, metadata={"format": "pt"}))
    fileio.atomic_write_text(os.path.join(directory, "config.json"), json.dumps(
        config_to_hf(config, [architecture], extra), indent=2, sort_keys=True) + "\n")
    save_hf_tokenizer(directory, spm_model_file, vocab_file, do_lower_case,
                      config.max_position_embeddings)
    return left_out
