"""keras-hub ALBERT presets: read and written without keras-hub.

A keras-hub preset directory (keras-hub 0.32) holds:

  config.json             the backbone: {"registered_name": "keras_hub>AlbertBackbone",
                          "config": {vocabulary_size, num_layers, num_heads, num_groups,
                          num_inner_repetitions, embedding_dim, hidden_dim,
                          intermediate_dim, dropout, max_sequence_length, num_segments}}
  model.weights.h5        the backbone's weights (Keras 3 layout, below)
  task.json               a task's config ("keras_hub>AlbertTextClassifier" with
                          num_classes, or "keras_hub>AlbertMaskedLM"); absent for a backbone
  task.weights.h5         the task's own layers (the head; not the backbone)
  preprocessor.json       the preprocessor's config (sequence_length)
  tokenizer.json          the tokenizer's config
  assets/tokenizer/vocabulary.spm   the SentencePiece model
  metadata.json           versions and the parameter count

A Keras 3 weights file stores each layer's variables as `layers/<path>/vars/<i>`, the path
made of the layers' automatic names in the model's order (not their `name=`): the
backbone's `reversible_embedding` (tokens), `position_embedding`, `embedding` (segments),
`layer_normalization`, `dense` (embedding projection E -> H), `dense_1` (pooler), and one
`transformer_encoder[_k]` per group and inner layer, k = group * inner_repetitions + inner,
each with `_self_attention_layer/{query,key,value,output}_dense`,
`_self_attention_layer_norm`, `_feedforward_intermediate_dense`,
`_feedforward_output_dense`, `_feedforward_layer_norm`. The heads: `dense` (classifier
logits, [H, K]) and `masked_lm_head/{_intermediate_dense, _intermediate_layer_norm}` and
`masked_lm_head/vars/0` (the output bias; the decoder is the token embedding).

The arithmetic is the original's but for one detail: keras-hub's masked-LM head normalizes
with epsilon 1e-5 where the original (and this library) uses 1e-12, so masked-LM logits
read here differ from keras-hub's by about 1e-4 relative. keras-hub's tokenizer does not
lower-case; this library does, as the original does (`keras_tasks`).

  read_preset(directory) -> Preset      the config, the task, TF1-named arrays
  write_preset(directory, ...)          the files above, for keras-hub's from_preset
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

from albert_tf import fileio
from albert_tf.checkpoints import assign
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserFileNotFoundError, UserValueError

BACKBONE = "keras_hub>AlbertBackbone"
CLASSIFIER = "keras_hub>AlbertTextClassifier"
MASKED_LM = "keras_hub>AlbertMaskedLM"
TASKS = {CLASSIFIER: "classifier", MASKED_LM: "masked_lm"}
VOCABULARY = os.path.join("assets", "tokenizer", "vocabulary.spm")
KERAS_HUB_VERSION = "0.32.0"

# Backbone layer -> TF1 scope, for layers outside the transformer blocks.
_EMBEDDINGS = {
    "reversible_embedding": "bert/embeddings/word_embeddings",
    "position_embedding": "bert/embeddings/position_embeddings",
    "embedding": "bert/embeddings/token_type_embeddings",
}
_DENSE = {"layer_normalization": "bert/embeddings/LayerNorm",
          "dense": assign.PROJECTION, "dense_1": "bert/pooler/dense"}
# Inside a transformer_encoder: keras-hub sublayer -> the original's scope.
_BLOCK = {
    "_self_attention_layer/query_dense": "attention_1/self/query",
    "_self_attention_layer/key_dense": "attention_1/self/key",
    "_self_attention_layer/value_dense": "attention_1/self/value",
    "_self_attention_layer/output_dense": "attention_1/output/dense",
    "_self_attention_layer_norm": "LayerNorm",
    "_feedforward_intermediate_dense": "ffn_1/intermediate/dense",
    "_feedforward_output_dense": "ffn_1/intermediate/output/dense",
    "_feedforward_layer_norm": "LayerNorm_1",
}
# The attention's per-head layers ([H, heads, d] kernels) and its output ([heads, d, H]).
_HEADED = tuple(f"_self_attention_layer/{name}_dense" for name in ("query", "key", "value"))
_ATTENTION_OUTPUT = "_self_attention_layer/output_dense"
_MLM_HEAD = {"masked_lm_head/_intermediate_dense": "cls/predictions/transform/dense",
             "masked_lm_head/_intermediate_layer_norm": "cls/predictions/transform/LayerNorm"}
_BLOCK_RE = re.compile(r"^transformer_encoder(?:_(\d+))?/(.+)$")


@dataclasses.dataclass
class Preset:
    """What a preset holds: the config, the task ("backbone", "classifier", "masked_lm"),
    the weights under the original's TF1 names, the classifier's class count, the
    preprocessor's sequence length and the SentencePiece model's path."""

    config: AlbertConfig
    task: str
    arrays: Dict[str, np.ndarray]
    num_classes: Optional[int]
    sequence_length: Optional[int]
    vocabulary_file: str


def is_preset_dir(path: str) -> bool:
    """A directory with a keras-hub config.json (any architecture) and model.weights.h5."""
    config = os.path.join(path, "config.json")
    if not (os.path.isdir(path) and os.path.exists(os.path.join(path, "model.weights.h5"))
            and os.path.exists(config)):
        return False
    try:
        return str(fileio.read_json(config).get("registered_name", "")).startswith("keras_hub>")
    except (ValueError, AttributeError):
        return False


# --- reading --------------------------------------------------------------------------------


def read_preset(directory: str) -> Preset:
    """The preset in `directory`; one line naming the file for another architecture, a
    task this library does not read, or missing files."""
    backbone = _read_object(os.path.join(directory, "config.json"))
    name = backbone.get("registered_name")
    if name != BACKBONE:
        raise UserValueError(f"{os.path.join(directory, 'config.json')}: a keras-hub preset "
                             f"of {name}, not of ALBERT ({BACKBONE})")
    config = config_from_keras_hub(backbone.get("config") or {})
    task_file = os.path.join(directory, "task.json")
    task, num_classes = "backbone", None
    if os.path.exists(task_file):
        spec = _read_object(task_file)
        task = TASKS.get(spec.get("registered_name"))
        if task is None:
            raise UserValueError(f"{task_file}: task {spec.get('registered_name')}; this "
                                 f"library reads {', '.join(TASKS)}")
        num_classes = (spec.get("config") or {}).get("num_classes")
    arrays = backbone_arrays(_read_weights(os.path.join(directory, "model.weights.h5")), config)
    if task != "backbone":
        head_file = os.path.join(directory, "task.weights.h5")
        try:
            arrays.update(head_arrays(_read_weights(head_file), task))
        except KeyError as missing:
            raise UserValueError(f"{head_file}: no {missing} weights: not the {task} head of "
                                 f"{spec.get('registered_name')}") from None
    vocabulary = os.path.join(directory, VOCABULARY)
    if not os.path.exists(vocabulary):
        raise UserFileNotFoundError(f"{vocabulary}: the preset's SentencePiece model is missing")
    return Preset(config, task, arrays, num_classes, _sequence_length(directory), vocabulary)


def _read_object(path: str) -> Dict:
    """A JSON file holding one object; one line naming the file otherwise."""
    value = fileio.read_json(path)
    if not isinstance(value, dict):
        raise UserValueError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def config_from_keras_hub(values: Mapping) -> AlbertConfig:
    """AlbertBackbone's config -> AlbertConfig (gelu: keras-hub's tanh approximation, the
    original's)."""
    try:
        return AlbertConfig(
            vocab_size=int(values["vocabulary_size"]),
            embedding_size=int(values["embedding_dim"]),
            hidden_size=int(values["hidden_dim"]),
            num_hidden_layers=int(values["num_layers"]),
            num_hidden_groups=int(values.get("num_groups", 1)),
            num_attention_heads=int(values["num_heads"]),
            intermediate_size=int(values["intermediate_dim"]),
            inner_group_num=int(values.get("num_inner_repetitions", 1)),
            hidden_act="gelu",
            hidden_dropout_prob=float(values.get("dropout", 0.0)),
            attention_probs_dropout_prob=float(values.get("dropout", 0.0)),
            max_position_embeddings=int(values.get("max_sequence_length", 512)),
            type_vocab_size=int(values.get("num_segments", 2)))
    except KeyError as missing:
        raise UserValueError(f"config.json: AlbertBackbone config without {missing}") from None


def _sequence_length(directory: str) -> Optional[int]:
    path = os.path.join(directory, "preprocessor.json")
    if not os.path.exists(path):
        return None
    value = (fileio.read_json(path).get("config") or {}).get("sequence_length")
    return int(value) if value else None


def _read_weights(path: str) -> Dict[str, np.ndarray]:
    """Every `layers/<path>/vars/<i>` array of a Keras 3 weights file, keyed "<path>/<i>"."""
    import h5py

    if not os.path.exists(path):
        raise UserFileNotFoundError(f"{path}: no such file")
    arrays = {}

    def visit(name, item):
        if isinstance(item, h5py.Dataset) and name.startswith("layers/"):
            path_, _, index = name[len("layers/"):].rpartition("/vars/")
            arrays[f"{path_}/{index}"] = np.asarray(item)

    with h5py.File(path, "r") as handle:
        handle.visititems(visit)
    return arrays


def backbone_arrays(weights: Mapping[str, np.ndarray], config: AlbertConfig
                    ) -> Dict[str, np.ndarray]:
    """keras-hub backbone weights ("<layer path>/<i>") -> TF1-named arrays."""
    arrays = {}
    hidden = config.hidden_size
    for key, value in weights.items():
        layer, index = key.rsplit("/", 1)
        if layer in _EMBEDDINGS:
            arrays[_EMBEDDINGS[layer]] = value
        elif layer in _DENSE:
            arrays[f"{_DENSE[layer]}/{_leaf(layer, index)}"] = value
        else:
            match = _BLOCK_RE.match(layer)
            if not match or match.group(2) not in _BLOCK:
                continue
            block = int(match.group(1) or 0)
            group, inner = divmod(block, config.inner_group_num)
            scope = (f"bert/encoder/transformer/group_{group}/inner_group_{inner}/"
                     f"{_BLOCK[match.group(2)]}")
            part, leaf = match.group(2), _leaf(match.group(2), index)
            # Multi-head kernels are [H, heads, d] (query, key, value) and [heads, d, H]
            # (output), their biases [heads, d]: the original's are [H, H] and [H].
            if part in _HEADED:
                value = value.reshape(hidden, hidden) if leaf == "kernel" else value.reshape(-1)
            elif part == _ATTENTION_OUTPUT and leaf == "kernel":
                value = value.reshape(hidden, hidden)
            arrays[f"{scope}/{leaf}"] = value
    if config.embedding_size == config.hidden_size:  # keras-hub always projects E -> H
        assign.drop_identity_projection(
            arrays, hidden, "embedding_dim == hidden_dim but the preset's embedding "
            "projection is not the identity; ALBERT (like the original) has no projection "
            "when the sizes are equal")
    return arrays


def head_arrays(weights: Mapping[str, np.ndarray], task: str) -> Dict[str, np.ndarray]:
    """keras-hub task weights -> the original's head names."""
    if task == "classifier":
        return {"output_weights": np.ascontiguousarray(weights["dense/0"].T),
                "output_bias": weights["dense/1"]}
    arrays = {"cls/predictions/output_bias": weights["masked_lm_head/0"]}
    for layer, scope in _MLM_HEAD.items():
        arrays[f"{scope}/{_leaf(layer, '0')}"] = weights[f"{layer}/0"]
        arrays[f"{scope}/{_leaf(layer, '1')}"] = weights[f"{layer}/1"]
    return arrays


def _leaf(layer: str, index: str) -> str:
    norm = layer.endswith("layer_norm") or layer.endswith("layer_normalization")
    return (("gamma", "beta") if norm else ("kernel", "bias"))[int(index)]


# --- writing --------------------------------------------------------------------------------


def write_preset(directory: str, config: AlbertConfig, arrays: Mapping[str, np.ndarray],
                 vocabulary_file: str, task: str = "backbone", num_classes: Optional[int] = None,
                 sequence_length: int = 512, dropout: float = 0.1) -> List[str]:
    """Writes a keras-hub preset of `task` ("backbone", "classifier", "masked_lm") from
    TF1-named `arrays`; returns the files written, relative to `directory`."""
    if task not in ("backbone", "classifier", "masked_lm"):
        raise UserValueError(f"task {task!r}: backbone, classifier or masked_lm")
    os.makedirs(os.path.join(directory, "assets", "tokenizer"), exist_ok=True)
    # A backbone over an earlier task preset: that task's files would outlive it.
    for name in ("task.json", "task.weights.h5", "preprocessor.json", "tokenizer.json"):
        if task == "backbone" and os.path.exists(os.path.join(directory, name)):
            os.remove(os.path.join(directory, name))
    backbone = _serialized(BACKBONE, "albert_backbone", "albert_backbone",
                           _backbone_config(config))
    files = {"config.json": backbone}
    _write_weights(os.path.join(directory, "model.weights.h5"), _backbone_weights(arrays, config))
    if task != "backbone":
        tokenizer = _tokenizer_config()
        name = "albert_text_classifier" if task == "classifier" else "albert_masked_lm"
        preprocessor = _serialized(
            f"keras_hub>Albert{'TextClassifier' if task == 'classifier' else 'MaskedLM'}"
            "Preprocessor", f"{name}_preprocessor", f"{name}_preprocessor",
            _preprocessor_config(task, tokenizer, sequence_length))
        head = ({"num_classes": int(num_classes), "activation": None, "dropout": dropout}
                if task == "classifier" else {})
        files["task.json"] = _serialized(
            CLASSIFIER if task == "classifier" else MASKED_LM, name, name,
            dict(backbone=backbone, preprocessor=preprocessor, **head))
        files["preprocessor.json"] = preprocessor
        files["tokenizer.json"] = tokenizer
        _write_weights(os.path.join(directory, "task.weights.h5"),
                       _head_weights(arrays, task), task=True)
    files["metadata.json"] = {
        "keras_version": _keras_version(), "keras_hub_version": KERAS_HUB_VERSION,
        "parameter_count": int(sum(np.asarray(v).size for v in arrays.values())),
        "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        "tasks": ["MaskedLM", "TextClassifier"]}
    for name, value in files.items():
        fileio.atomic_write_text(os.path.join(directory, name), json.dumps(value, indent=4))
    with open(vocabulary_file, "rb") as source, \
            fileio.atomic_open(os.path.join(directory, VOCABULARY), "wb") as target:
        target.write(source.read())
    written = sorted(files) + ["model.weights.h5", VOCABULARY]
    return written + (["task.weights.h5"] if task != "backbone" else [])


def _keras_version() -> str:
    import keras

    return keras.__version__


def _serialized(registered_name: str, class_path: str, name: str, config: Dict) -> Dict:
    module = f"keras_hub.src.models.albert.{class_path}"
    return {"module": module, "class_name": registered_name.split(">")[1],
            "config": dict({"name": name, "trainable": True, "dtype": _policy("float32")},
                           **config),
            "registered_name": registered_name}


def _policy(name: str) -> Dict:
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name},
            "registered_name": None}


def _backbone_config(config: AlbertConfig) -> Dict:
    return {"vocabulary_size": config.vocab_size, "num_layers": config.num_hidden_layers,
            "num_heads": config.num_attention_heads, "num_groups": config.num_hidden_groups,
            "num_inner_repetitions": config.inner_group_num,
            "embedding_dim": config.embedding_size, "hidden_dim": config.hidden_size,
            "intermediate_dim": config.intermediate_size,
            "dropout": float(config.hidden_dropout_prob),
            "max_sequence_length": config.max_position_embeddings,
            "num_segments": config.type_vocab_size}


def _tokenizer_config() -> Dict:
    tokenizer = _serialized("keras_hub>AlbertTokenizer", "albert_tokenizer", "albert_tokenizer",
                            {"config_file": "tokenizer.json", "proto": None,
                             "sequence_length": None, "add_bos": False, "add_eos": False})
    tokenizer["config"]["dtype"] = _policy("int32")
    return tokenizer


def _preprocessor_config(task: str, tokenizer: Dict, sequence_length: int) -> Dict:
    config = {"tokenizer": tokenizer, "config_file": "preprocessor.json",
              "sequence_length": int(sequence_length), "truncate": "round_robin"}
    if task == "masked_lm":  # keras-hub's defaults (its masking, not the original's n-grams)
        config.update(mask_selection_rate=0.15, mask_selection_length=96,
                      mask_token_rate=0.8, random_token_rate=0.1)
    return config


def _backbone_weights(arrays: Mapping[str, np.ndarray], config: AlbertConfig
                      ) -> Dict[str, List[np.ndarray]]:
    """TF1-named arrays -> {keras-hub layer path: [vars]}."""
    heads, width = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    layers = {layer: [arrays[scope]] for layer, scope in _EMBEDDINGS.items()}
    layers["layer_normalization"] = _pair(arrays, _DENSE["layer_normalization"],
                                          "layer_normalization")
    layers["dense_1"] = _pair(arrays, _DENSE["dense_1"], "dense_1")
    projection = _DENSE["dense"]
    if f"{projection}/kernel" in arrays:
        layers["dense"] = _pair(arrays, projection, "dense")
    else:  # E == H: the identity keras-hub's layer needs
        layers["dense"] = [np.eye(config.hidden_size, dtype=np.float32),
                           np.zeros([config.hidden_size], np.float32)]
    for group in range(config.num_hidden_groups):
        for inner in range(config.inner_group_num):
            block = group * config.inner_group_num + inner
            prefix = "transformer_encoder" + (f"_{block}" if block else "")
            scope = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
            for part, original in _BLOCK.items():
                kernel, bias = _pair(arrays, f"{scope}/{original}", part)
                if part in _HEADED:
                    kernel = kernel.reshape(config.hidden_size, heads, width)
                    bias = bias.reshape(heads, width)
                elif part == _ATTENTION_OUTPUT:
                    kernel = kernel.reshape(heads, width, config.hidden_size)
                layers[f"{prefix}/{part}"] = [kernel, bias]
    return layers


def _head_weights(arrays: Mapping[str, np.ndarray], task: str) -> Dict[str, List[np.ndarray]]:
    if task == "classifier":
        return {"dense": [np.ascontiguousarray(arrays["output_weights"].T),
                          arrays["output_bias"]]}
    layers = {layer: _pair(arrays, scope, layer) for layer, scope in _MLM_HEAD.items()}
    layers["masked_lm_head"] = [arrays["cls/predictions/output_bias"]]
    return layers


def _pair(arrays, scope: str, layer: str) -> List[np.ndarray]:
    """The TF1 arrays at `scope` of keras-hub `layer`'s vars 0 and 1 (kernel and bias, or a
    LayerNorm's gamma and beta)."""
    return [arrays[f"{scope}/{_leaf(layer, index)}"] for index in "01"]


def _write_weights(path: str, layers: Mapping[str, List[np.ndarray]],
                   task: bool = False) -> None:
    """A Keras 3 weights file: `layers/<path>/vars/<i>` datasets; a task's also holds the
    state of its compiled, untrained optimizer (keras-hub's default Adam: iterations 0,
    learning rate 1e-5), as keras-hub writes it."""
    import h5py

    with fileio.atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as handle:
            handle.require_group("vars")
            for layer, values in layers.items():
                group = handle.require_group(f"layers/{layer}/vars")
                for index, value in enumerate(values):
                    group.create_dataset(str(index), data=np.asarray(value, np.float32))
            if task:
                optimizer = handle.require_group("optimizer/vars")
                optimizer.create_dataset("0", data=np.int64(0))
                optimizer.create_dataset("1", data=np.float32(1e-5))
                handle.require_group("preprocessor/vars")


def tf1_arrays(model) -> Dict[str, np.ndarray]:
    """A model's weights under the original's TF1 names."""
    from albert_tf.checkpoints import names

    return {name: np.asarray(variable.numpy())
            for name, variable in names.variables_for(model).items()}


def shapes_of(arrays: Mapping[str, np.ndarray]) -> Dict[str, Tuple[int, ...]]:
    return {name: tuple(value.shape) for name, value in arrays.items()}
