"""Official checkpoint interoperability: TF1 name-based checkpoints in and out.

The TF1 format (official downloads `model.ckpt-best.*`, TF-Hub module
variables, fine-tuned checkpoints of the original scripts) is the interchange
format; `albert_tf.tf1_names` is the one table between its names and our
variables. This module reads and writes it, and gives every reader a
`LoadReport`:

  * `load_tf1_checkpoint(model, path_or_dir)`   TF1 checkpoint -> any model
  * `save_tf1_checkpoint(model, prefix)`         any model -> official names and 2-D shapes
  * `from_official_dir(directory)`               config + tokenizer + model in one call, from
                                                 an English (SentencePiece) or Chinese
                                                 (WordPiece) download
  * `check_vocab_size(tokenizer, config, ...)`   vocabulary vs config vs checkpoint
  * `restore_for_training(model, path)`          autodetects TF1 prefix/dir, TF-Hub module,
                                                 Hugging Face dir, Keras `.weights.h5`,
                                                 `tf.train.Checkpoint`
Hugging Face import/export lives in `albert_tf.hf_weights` and shares the
assignment and report code below.

Loading is all-or-nothing: every name and shape is checked, and every tensor
read, before the first variable is assigned, so an error leaves the model as it was.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import logging
import os
import re
import uuid
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from albert_tf.checkpoints import names as tf1_names
from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError, UserFileNotFoundError, UserValueError

logger = logging.getLogger(__name__)

TFHUB_PREFIX = "module/"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Optimizer state and counters written by the original (AdamWeightDecay / LAMB slots,
# global_step) and by stock TF1 optimizers; never model weights.
_OPTIMIZER_RE = re.compile(
    r"(^|/)(adam_m|adam_v|lamb_m|lamb_v|Adam|Adam_1|Momentum|ExponentialMovingAverage)$"
    r"|^global_step$|^beta[12]_power(_\d+)?$|AdamWeightDecayOptimizer|LAMBOptimizer"
    r"|^(current_loss_scale|good_steps)$")
# The naming some later TF1 code writes: `group_0_2/layer_2/inner_group_0/layer_normalization_5`.
_LEGACY_RE = re.compile(r"/layer_normalization(_\d+)?/|/transformer/group_\d+_\d+/|"
                        r"/transformer/.*/layer_\d+/")
_GROUP_RE = re.compile(r"/transformer/group_(\d+)/")
_INNER_RE = re.compile(r"/inner_group_(\d+)/")
# Checkpoint prefixes a directory is searched for, in order: Google's downloads (English and
# albert_*_zh) and the community Chinese releases (brightmart/albert_zh).
PREFERRED_PREFIXES = ("model.ckpt-best", "albert_model.ckpt")


class CheckpointMismatchError(UserError, ValueError):
    """The checkpoint does not fit the model: names, shapes or config fields differ."""


@dataclasses.dataclass
class LoadReport:
    """What a load did. Names are TF1 names (the model's, see `albert_tf.tf1_names`).

    loaded:   model variables that received a value
    missing:  model variables left at their initial values (heads absent from the checkpoint)
    unused:   checkpoint variables no model variable took (optimizer state excluded)
    skipped:  optimizer slots, `global_step` and similar, ignored on purpose
    renamed:  model name -> checkpoint name, where they differ (TF-Hub prefix, init_from_group0)
    """

    source: str
    format: str
    loaded: List[str] = dataclasses.field(default_factory=list)
    missing: List[str] = dataclasses.field(default_factory=list)
    unused: List[str] = dataclasses.field(default_factory=list)
    skipped: List[str] = dataclasses.field(default_factory=list)
    renamed: Dict[str, str] = dataclasses.field(default_factory=dict)

    def summary(self, max_names: int = 20) -> str:
        """A human-readable multi-line summary (name lists cut at `max_names`)."""
        def names(items):
            shown = ", ".join(items[:max_names])
            return shown + (f", ... ({len(items) - max_names} more)" if len(items) > max_names
                             else "")
        lines = [f"Loaded {len(self.loaded)} variables from {self.format} checkpoint "
                 f"{self.source}"]
        if self.renamed:
            lines.append(f"  {len(self.renamed)} read under another name "
                         f"(e.g. {next(iter(self.renamed))} <- "
                         f"{next(iter(self.renamed.values()))})")
        lines.append(f"  model variables left at initial values: {len(self.missing)}"
                     + (f" ({names(self.missing)})" if self.missing else ""))
        lines.append(f"  checkpoint variables unused: {len(self.unused)}"
                     + (f" ({names(self.unused)})" if self.unused else ""))
        lines.append(f"  optimizer state / counters ignored: {len(self.skipped)}")
        return "\n".join(lines)

    __str__ = summary


# --- the shared assignment core -----------------------------------------------------------------


def _is_optimizer_state(name: str) -> bool:
    return bool(_OPTIMIZER_RE.search(name))


def _reshape_compatible(have: Tuple[int, ...], want: Tuple[int, ...], name: str) -> bool:
    """True when a kernel only differs by merged/split axes (e.g. [H, N*D] vs [H, N, D])."""
    if have == want:
        return True
    return (name.endswith("kernel") and len(have) != len(want)
            and int(np.prod(have)) == int(np.prod(want))
            and (have[0] == want[0] or have[-1] == want[-1]))


def _shape_hint(name: str) -> str:
    """Which model argument a head variable's shape depends on (encoder shapes are
    diagnosed field by field in `_check_config`)."""
    if name in ("output_weights", "output_bias"):
        return (" (num_labels / the task: run_classifier stores [num_labels, H], "
                "run_race [1, H])")
    if name == "cls/predictions/output_bias":
        return " (vocab_size)"
    if name.startswith("cls/predictions/"):
        return " (embedding_size)"
    return ""


def _infer_fields(shapes: Mapping[str, Tuple[int, ...]]) -> Dict[str, Tuple[int, str]]:
    """Config fields readable from encoder shapes: field -> (value, evidence)."""
    found: Dict[str, Tuple[int, str]] = {}

    def take(field, name, axis):
        if name in shapes and field not in found:
            found[field] = (shapes[name][axis], f"{name} {list(shapes[name])}")

    take("vocab_size", "bert/embeddings/word_embeddings", 0)
    take("embedding_size", "bert/embeddings/word_embeddings", 1)
    take("max_position_embeddings", "bert/embeddings/position_embeddings", 0)
    take("type_vocab_size", "bert/embeddings/token_type_embeddings", 0)
    take("hidden_size", "bert/pooler/dense/kernel", 1)
    for name in sorted(shapes):
        if name.endswith("/attention_1/self/query/kernel"):
            take("hidden_size", name, 1)
        if name.endswith("/ffn_1/intermediate/dense/kernel"):
            take("intermediate_size", name, 1)
    groups = {int(m.group(1)) for n in shapes for m in [_GROUP_RE.search(n)] if m}
    inner = {int(m.group(1)) for n in shapes for m in [_INNER_RE.search(n)] if m}
    if groups:
        found["num_hidden_groups"] = (max(groups) + 1,
                                      f"groups {sorted(groups)} under bert/encoder/transformer")
    if inner:
        found["inner_group_num"] = (max(inner) + 1, f"inner groups {sorted(inner)}")
    return found


def _check_config(config: AlbertConfig, shapes: Mapping[str, Tuple[int, ...]], source: str,
                  init_from_group0: bool) -> None:
    """Raises CheckpointMismatchError naming each config field that contradicts the checkpoint."""
    expected = dict(config.to_dict())
    if config.parameter_sharing == "none":
        expected["num_hidden_groups"] = config.num_hidden_layers
    problems = []
    for field, (value, evidence) in _infer_fields(shapes).items():
        if field == "num_hidden_groups" and init_from_group0:
            continue
        want = expected[field]
        if value != want:
            hint = ("; to initialise every group from the checkpoint's group 0 pass "
                    "init_from_group0=True" if field == "num_hidden_groups" and value < want
                    else "")
            problems.append(f"{field} is {want} in the config but {value} in the checkpoint "
                            f"({evidence}){hint}")
    has_projection = "bert/encoder/embedding_hidden_mapping_in/kernel" in shapes
    if has_projection and config.embedding_size == config.hidden_size:
        problems.append("the checkpoint has bert/encoder/embedding_hidden_mapping_in (so its "
                        "embedding_size != hidden_size) but the config has embedding_size == "
                        f"hidden_size == {config.hidden_size}")
    if problems:
        raise CheckpointMismatchError(
            f"config does not match checkpoint {source}:\n  - " + "\n  - ".join(problems)
            + "\n(num_attention_heads and hidden_act cannot be read from a checkpoint: "
              "check them in albert_config.json)")


def _model_config(model) -> AlbertConfig:
    config = getattr(model, "config", None)
    if not isinstance(config, AlbertConfig):
        raise TypeError(f"{type(model).__name__} has no AlbertConfig `config` attribute")
    return config


def assign_named_arrays(model, shapes: Mapping[str, Tuple[int, ...]],
                        read: Callable[[str], np.ndarray], source: str, fmt: str,
                        init_from_group0: bool = False,
                        optional_encoder: Sequence[str] = ()) -> LoadReport:
    """Assigns checkpoint tensors, keyed by TF1 name, to `model`'s variables.

    Args:
      model: any model with a `tf1_names` layout.
      shapes: every checkpoint name (already stripped of a TF-Hub `module/` prefix) -> shape.
      read: name -> ndarray for a name of `shapes`.
      source, fmt: for messages and the report.
      init_from_group0: read every `group_g` variable from `group_0` (the original's flag).
      optional_encoder: encoder names whose absence is reported instead of raised.
    Raises CheckpointMismatchError (config fields, shapes, missing encoder variables)
    before any variable is changed.
    """
    names = tf1_names.variables_for(model)
    legacy = sorted(n for n in shapes if _LEGACY_RE.search(n))
    if legacy:
        raise CheckpointMismatchError(
            f"{source} uses the `group_X_Y/layer_N/.../layer_normalization_K` naming written by "
            f"later, modified TF1 ALBERT code (e.g. {legacy[0]}); it is not supported: its "
            "numbered layer_normalization_K scopes cannot be matched to the original's "
            "post-attention `LayerNorm` / post-FFN `LayerNorm_1` without that code. Only the "
            "official names (…/inner_group_k/LayerNorm, …/LayerNorm_1) are read.")
    _check_config(_model_config(model), shapes, source, init_from_group0)

    report = LoadReport(source=source, format=fmt)
    plan: List[Tuple[str, str, object]] = []
    missing_encoder, bad_shapes = [], []
    for name, variable in names.items():
        src = _GROUP_RE.sub("/transformer/group_0/", name) if init_from_group0 else name
        if src not in shapes:
            if tf1_names.is_encoder_name(name) and name not in optional_encoder:
                missing_encoder.append(name)
            else:
                report.missing.append(name)
            continue
        have, want = tuple(shapes[src]), tuple(variable.shape)
        if not _reshape_compatible(have, want, name):
            bad_shapes.append(f"{src}: checkpoint shape {list(have)}, model expects "
                              f"{list(want)}{_shape_hint(name)}")
            continue
        plan.append((name, src, variable))
    if missing_encoder:
        raise CheckpointMismatchError(
            f"{source} lacks {len(missing_encoder)} encoder variable(s) the model needs: "
            + ", ".join(missing_encoder[:10]) + (" ..." if len(missing_encoder) > 10 else "")
            + ". Is it an ALBERT checkpoint of the same architecture (num_hidden_groups, "
              "inner_group_num, parameter_sharing)?")
    if bad_shapes:
        raise CheckpointMismatchError(f"{source}: shape mismatch\n  - "
                                      + "\n  - ".join(bad_shapes))

    values = []
    for name, src, variable in plan:
        try:
            value = np.asarray(read(src))
        except Exception as err:  # noqa: BLE001 -- re-raised with the file and variable named
            raise UserValueError(f"cannot read {src} from {source} (truncated or corrupt "
                                 f"checkpoint?): {err}") from err
        values.append(value.reshape(tuple(variable.shape)).astype(variable.dtype))
    for (name, src, variable), value in zip(plan, values):
        variable.assign(value)
        report.loaded.append(name)
        if src != name:
            report.renamed[name] = src
    used = {src for _, src, _ in plan}
    for name in shapes:
        if name in used:
            continue
        (report.skipped if _is_optimizer_state(name) else report.unused).append(name)
    report.unused.sort()
    logger.info("%s", report.summary())
    return report


# --- TF1 reading ----------------------------------------------------------------------------------


def resolve_tf1_checkpoint(path_or_dir: str) -> str:
    """The checkpoint prefix for a prefix, an `.index` file, or a directory.

    A directory is resolved through its `checkpoint` file when it names a
    prefix that exists, else through its `*.index` files: a single one,
    `model.ckpt-best` (official downloads and the original's best export),
    `albert_model.ckpt` (the community Chinese releases), or the highest
    `-<step>`. A TF-Hub module directory resolves to its `variables/variables`.
    """
    import tensorflow as tf

    path = os.fspath(path_or_dir)
    if path.endswith(".index"):
        path = path[:-len(".index")]
    if tf.io.gfile.isdir(path):
        hub_variables = os.path.join(path, "variables", "variables")
        if tf.io.gfile.exists(hub_variables + ".index"):
            return hub_variables
        # A `checkpoint` file naming a prefix that is not there (an absolute path of the
        # machine that wrote it, as some published archives carry) is ignored.
        latest = (tf.train.latest_checkpoint(path)
                  if tf.io.gfile.exists(os.path.join(path, "checkpoint")) else None)
        if latest:
            return latest
        prefixes = sorted(p[:-len(".index")] for p in tf.io.gfile.glob(os.path.join(path,
                                                                                    "*.index")))
        if not prefixes:
            raise UserFileNotFoundError(
                f"{path}: no checkpoint in this directory (looked for a `checkpoint` file and "
                f"*.index files such as {'.index, '.join(PREFERRED_PREFIXES)}.index)")
        if len(prefixes) == 1:
            return prefixes[0]
        for preferred in PREFERRED_PREFIXES:
            best = [p for p in prefixes if os.path.basename(p) == preferred]
            if best:
                return best[0]
        steps = {p: int(m.group(1)) for p in prefixes for m in [re.search(r"-(\d+)$", p)] if m}
        if steps:
            return max(steps, key=steps.get)
        listed = ", ".join(map(os.path.basename, prefixes))
        raise UserValueError(f"{path}: several checkpoints ({listed}); pass the prefix of the one "
                             "to load")
    if not tf.io.gfile.exists(path + ".index"):
        raise UserFileNotFoundError(f"{path}: no such checkpoint ({path}.index not found)")
    return path


def _open_reader(prefix: str):
    import tensorflow as tf

    try:
        return tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as err:
        raise UserValueError(f"cannot read checkpoint {prefix} (truncated or corrupt? missing "
                             f".data file?): {getattr(err, 'message', err)}") from err


def read_tf1_variables(path_or_dir: str):
    """(prefix, {name: shape}, read(name)) of a TF1 name-based checkpoint.

    A TF-Hub `module/` prefix is stripped (when every model name carries it).
    Raises ValueError for an object-based (TF2 `tf.train.Checkpoint`) checkpoint.
    """
    prefix = resolve_tf1_checkpoint(path_or_dir)
    reader = _open_reader(prefix)
    raw = {name: tuple(shape) for name, shape in reader.get_variable_to_shape_map().items()}
    if OBJECT_GRAPH_KEY in raw:
        raise UserValueError(f"{prefix} is an object-based tf.train.Checkpoint (TF2), not a TF1 "
                             "name-based checkpoint; use checkpoints.restore_for_training")
    weights = [n for n in raw if not _is_optimizer_state(n)]
    strip = bool(weights) and all(n.startswith(TFHUB_PREFIX) for n in weights)
    shapes, source_names = {}, {}
    for name, shape in raw.items():
        short = name[len(TFHUB_PREFIX):] if strip and name.startswith(TFHUB_PREFIX) else name
        shapes[short] = shape
        source_names[short] = name
    return prefix, shapes, lambda name: reader.get_tensor(source_names[name])


def load_tf1_checkpoint(model, path_or_dir: str, init_from_group0: bool = False) -> LoadReport:
    """Reads a TF1 name-based checkpoint into an encoder, pretrainer or task model.

    Args:
      model: `AlbertEncoder`, `AlbertPretrainer`, or a fine-tuning model of `albert_tf.models`.
      path_or_dir: a prefix such as `.../model.ckpt-best`, a directory (with or
        without a `checkpoint` file), or a TF-Hub module directory.
      init_from_group0: initialise every group from group 0 (the original's flag).
    Returns the LoadReport (also logged). Heads absent from the checkpoint are
    reported in `missing`; optimizer slots are skipped; unused variables are listed.
    Raises CheckpointMismatchError for a config that does not fit, a shape
    mismatch or a missing encoder variable; ValueError for unreadable files.
    """
    prefix, shapes, read = read_tf1_variables(path_or_dir)
    return assign_named_arrays(model, shapes, read, prefix, "TF1",
                               init_from_group0=init_from_group0)


# --- TF1 writing ----------------------------------------------------------------------------------


def save_tf1_checkpoint(model, prefix: str, global_step: Optional[int] = None) -> str:
    """Writes `model` under the official TF1 names and 2-D shapes (`prefix.index`, `.data-*`).

    The result is read by the original's `init_from_checkpoint`, by
    `tf.train.list_variables` / `load_variable` (Hugging Face's and Model
    Garden's converters) and by `load_tf1_checkpoint`. No `.meta` graph is
    written (none of these readers needs one). `global_step` (int64) is added
    when given.

    Atomicity: the files are written under a temporary prefix in the same
    directory, then renamed: any old `prefix.index` is removed first, the data
    shard is renamed next and the index last, so a reader never finds an index
    whose data file is missing or stale.
    """
    import tensorflow as tf

    names = tf1_names.variables_for(model)
    directory = os.path.dirname(os.fspath(prefix))
    if directory:
        tf.io.gfile.makedirs(directory)
    tmp = os.path.join(directory, f".{os.path.basename(prefix)}.tmp-{uuid.uuid4().hex[:8]}")
    tensor_names = list(names)
    tensors = [tf.convert_to_tensor(np.asarray(var.numpy(), np.float32)) for var in
               names.values()]
    if global_step is not None:
        tensor_names.append("global_step")
        tensors.append(tf.constant(int(global_step), tf.int64))
    try:
        tf.raw_ops.SaveV2(prefix=tmp, tensor_names=tensor_names,
                          shape_and_slices=[""] * len(tensor_names), tensors=tensors)
        if tf.io.gfile.exists(prefix + ".index"):
            tf.io.gfile.remove(prefix + ".index")
        for data in tf.io.gfile.glob(tmp + ".data-*"):
            tf.io.gfile.rename(data, prefix + data[len(tmp):], overwrite=True)
        tf.io.gfile.rename(tmp + ".index", prefix + ".index", overwrite=True)
    finally:
        for leftover in tf.io.gfile.glob(tmp + ".*"):
            tf.io.gfile.remove(leftover)
    logger.info("Wrote %d variables to TF1 checkpoint %s", len(tensor_names), prefix)
    return prefix


# --- autodetecting restore ------------------------------------------------------------------------


def _looks_like_hf_dir(path: str) -> bool:
    return os.path.isdir(path) and os.path.exists(os.path.join(path, "config.json")) and (
        os.path.exists(os.path.join(path, "model.safetensors"))
        or os.path.exists(os.path.join(path, "model.safetensors.index.json")))


def detect_format(path: str) -> str:
    """One of "keras_h5", "huggingface", "tf1", "tf_checkpoint" for a checkpoint path."""
    path = os.fspath(path)
    if path.endswith(".weights.h5") or path.endswith(".h5"):
        return "keras_h5"
    if _looks_like_hf_dir(path):
        return "huggingface"
    prefix = resolve_tf1_checkpoint(path)
    names = _open_reader(prefix).get_variable_to_shape_map()
    return "tf_checkpoint" if OBJECT_GRAPH_KEY in names else "tf1"


def _restore_object_checkpoint(model, path: str, key: str) -> LoadReport:
    """Restores a TF2 `tf.train.Checkpoint(<key>=model, ...)`; reports what matched.

    Restored variables are recognised by TensorFlow's restore bookkeeping
    (`_update_uid`), so a model variable the checkpoint does not cover is
    reported (and raises, for an encoder variable).
    """
    import tensorflow as tf

    prefix = resolve_tf1_checkpoint(path)
    names = tf1_names.variables_for(model)
    before = {name: getattr(var, "_update_uid", None) for name, var in names.items()}
    status = tf.train.Checkpoint(**{key: model}).read(prefix)
    status.expect_partial()
    report = LoadReport(source=prefix, format="tf.train.Checkpoint")
    for name, var in names.items():
        uid = getattr(var, "_update_uid", None)
        (report.loaded if uid is not None and uid != before[name] and uid >= 0
         else report.missing).append(name)
    missing_encoder = [n for n in report.missing if tf1_names.is_encoder_name(n)]
    if missing_encoder:
        raise CheckpointMismatchError(
            f"{prefix} restored no value for {len(missing_encoder)} encoder variable(s) "
            f"(e.g. {', '.join(missing_encoder[:5])}): it is not a checkpoint of this model "
            f"under the key {key!r}, or it was written without those variables")
    logger.info("%s", report.summary())
    return report


def restore_for_training(model, path: str, init_from_group0: bool = False,
                         checkpoint_key: str = "model") -> LoadReport:
    """Initialises `model` from a checkpoint in any supported format (for `--init_checkpoint`).

    Formats, detected from `path`:
      * TF1 name-based prefix or directory, or TF-Hub module directory -> `load_tf1_checkpoint`
      * Hugging Face directory (`config.json` + `model.safetensors`)
        -> `hf_weights.load_hf_checkpoint`
      * Keras `.weights.h5` (saved from the same model class) -> `model.load_weights`
      * TF2 `tf.train.Checkpoint` with the model under `checkpoint_key`
    `init_from_group0` (the original's flag) applies to the TF1 and Hugging Face formats.
    """
    fmt = detect_format(path)
    if init_from_group0 and fmt not in ("tf1", "huggingface"):
        raise UserValueError(f"init_from_group0 applies to TF1 and Hugging Face checkpoints; "
                             f"{path} is a {fmt} checkpoint")
    if fmt == "tf1":
        return load_tf1_checkpoint(model, path, init_from_group0=init_from_group0)
    if fmt == "huggingface":
        from albert_tf.checkpoints import hf as hf_weights

        return hf_weights.load_hf_checkpoint(model, path, init_from_group0=init_from_group0)
    if fmt == "keras_h5":
        if not model.built:
            model.build()
        try:
            model.load_weights(path)
        except (ValueError, KeyError) as err:
            raise UserValueError(
                f"{path}: cannot load these Keras weights into {type(model).__name__} ({err}); a "
                ".weights.h5 file only fits the model class and config that wrote it. To move "
                "weights between model classes, convert through the TF1 format "
                "(python -m albert_tf.convert --output_format=tf1)") from err
        names = list(tf1_names.variables_for(model))
        report = LoadReport(source=path, format="Keras .weights.h5", loaded=names)
        logger.info("%s", report.summary())
        return report
    return _restore_object_checkpoint(model, path, checkpoint_key)


# --- official download directory ------------------------------------------------------------------


MASK_TOKEN = "[MASK]"
CONFIG_FILE = "albert_config.json"
CONFIG_PATTERN = "albert_config_*.json"  # community releases: albert_config_base.json, ..._tiny
SPM_MODEL_FILE = "30k-clean.model"
WORDPIECE_VOCAB_FILES = ("vocab_chinese.txt", "vocab.txt")  # albert_*_zh, community releases


@dataclasses.dataclass
class OfficialModel:
    """What `from_official_dir` returns: config, tokenizer, model with weights, load report."""

    config: AlbertConfig
    tokenizer: object
    model: object
    report: LoadReport

    def encode_with_masks(self, text: str) -> Tuple[List[int], List[int]]:
        """(ids of `[CLS] text [SEP]`, positions of each literal `[MASK]` in `text`).

        Neither tokenizer keeps `[MASK]` whole inside text (SentencePiece does not
        know control symbols; WordPiece's BasicTokenizer splits it into `[`, `mask`,
        `]`), so the text is split at `[MASK]`, each part tokenized on its own and
        the mask id inserted between them. SentencePiece starts every part with a
        word boundary; a lone "▁" piece that this puts between `[MASK]` and text
        written right after it ("[MASK]." -> "▁", ".") is dropped, as the text
        would be tokenized with a word in place of the mask.
        """
        tok = self.tokenizer
        if tok.mask_id < 0:
            raise UserValueError(f"the vocabulary {tok.vocab_file} has no {MASK_TOKEN} token")
        ids, positions = [tok.cls_id], []
        for index, part in enumerate(text.split(MASK_TOKEN)):
            if index:
                positions.append(len(ids))
                ids.append(tok.mask_id)
            if not part.strip():
                continue
            part_ids = tok.encode_ids([tok.preprocess(part)])[0]
            if (index and not part[0].isspace() and tok.kind == "sentencepiece" and part_ids
                    and tok.convert_ids_to_tokens(part_ids[:1]) == ["\u2581"]):
                part_ids = part_ids[1:]
            ids.extend(part_ids)
        ids.append(tok.sep_id)
        limit = self.config.max_position_embeddings
        if len(ids) > limit:
            raise UserValueError(f"{text[:40]!r}...: {len(ids)} tokens with [CLS] and [SEP], more "
                                 f"than max_position_embeddings ({limit})")
        return ids, positions

    def fill_mask(self, text: str, top_k: int = 5) -> List[List[Tuple[str, float]]]:
        """For each `[MASK]` in `text`, the `top_k` (token, probability) of the MLM head.

        Tokens are vocabulary entries ("▁paris", "##ing"); `tokenizer.token_text`
        makes display text of them. Needs a model with an MLM head
        (`AlbertPretrainer`, the default of `from_official_dir`).
        """
        ids, positions = self.encode_with_masks(text)
        if not positions:
            raise UserValueError(f"no {MASK_TOKEN} in {text!r}")
        outputs = self.model({"input_ids": np.array([ids], np.int32),
                              "masked_lm_positions": np.array([positions], np.int32)})
        logits = np.asarray(outputs["mlm_logits"], np.float64)[0]
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        result = []
        for row in probs:
            best = np.argsort(-row, kind="stable")[:top_k]
            tokens = self.tokenizer.convert_ids_to_tokens([int(i) for i in best])
            result.append(list(zip(tokens, row[best].tolist())))
        return result


def _search_dirs(directory: str) -> List[str]:
    """`directory`, then its `assets/` (a TF-Hub module or our SavedModel export)."""
    return [d for d in (directory, os.path.join(directory, "assets")) if os.path.isdir(d)]


def _matching(base: str, names: Sequence[str] = (), pattern: Optional[str] = None) -> List[str]:
    found = [name for name in names if os.path.isfile(os.path.join(base, name))]
    if pattern:
        found += sorted(name for name in os.listdir(base) if fnmatch.fnmatchcase(name, pattern)
                        and name not in found and os.path.isfile(os.path.join(base, name)))
    return [os.path.join(base, name) for name in found]


def find_config_file(directory: str) -> str:
    """The model's config in a download: `albert_config.json` or `albert_config_*.json`.

    Searched in `directory`, then in `directory/assets`. Raises FileNotFoundError
    when there is none and ValueError when a directory holds several.
    """
    for base in _search_dirs(directory):
        found = _matching(base, [CONFIG_FILE], CONFIG_PATTERN)
        if len(found) > 1:
            listed = ", ".join(map(os.path.basename, found))
            raise UserValueError(f"{base}: several config files ({listed}); keep only the one "
                                 "that belongs to the checkpoint")
        if found:
            return found[0]
    raise UserFileNotFoundError(f"{directory}: no config file (looked for {CONFIG_FILE} and "
                                f"{CONFIG_PATTERN}, also under assets/)")


def find_vocabulary(directory: str) -> Tuple[str, str]:
    """("sentencepiece" | "wordpiece", path) of the vocabulary in a download.

    A SentencePiece model (`30k-clean.model`, else the one `*.model`) wins, as
    `--spm_model_file` does in the original; otherwise a WordPiece
    `vocab_chinese.txt` or `vocab.txt`. Searched in `directory`, then in
    `directory/assets`. Raises FileNotFoundError when there is none and
    ValueError when the choice is ambiguous.
    """
    for base in _search_dirs(directory):
        spm = _matching(base, [SPM_MODEL_FILE]) or _matching(base, pattern="*.model")
        if len(spm) > 1:
            raise UserValueError(f"{base}: several SentencePiece models "
                                 f"({', '.join(map(os.path.basename, spm))}); keep only the one "
                                 "that belongs to the checkpoint")
        if spm:
            return "sentencepiece", spm[0]
        vocab = _matching(base, WORDPIECE_VOCAB_FILES)
        if len(vocab) > 1:
            contents = set()
            for path in vocab:
                with open(path, "rb") as handle:
                    contents.add(handle.read())
            if len(contents) > 1:
                names = " and ".join(map(os.path.basename, vocab))
                raise UserValueError(f"{base}: {names} differ; "
                                     "keep only the vocabulary that belongs to the checkpoint")
        if vocab:
            return "wordpiece", vocab[0]
    raise UserFileNotFoundError(
        f"{directory}: no vocabulary (looked for a SentencePiece {SPM_MODEL_FILE} or *.model "
        f"and a WordPiece {' or '.join(WORDPIECE_VOCAB_FILES)}, also under assets/)")


def check_vocab_size(tokenizer, config: AlbertConfig, config_source: str,
                     checkpoint: Optional[str] = None) -> None:
    """Raises CheckpointMismatchError unless the vocabulary, the config's `vocab_size` and
    (when `checkpoint` is a TF1 checkpoint or its directory) the checkpoint's word
    embeddings all have the same number of tokens. The message names each number and
    its file.
    """
    sizes = [(f"the vocabulary {tokenizer.vocab_file}", tokenizer.vocab_size, "tokens"),
             (f"the config {config_source}", config.vocab_size, "vocab_size")]
    if checkpoint is not None and detect_format(checkpoint) == "tf1":
        prefix, shapes, _ = read_tf1_variables(checkpoint)
        embeddings = shapes.get("bert/embeddings/word_embeddings")
        if embeddings:
            sizes.append((f"the checkpoint {prefix}", embeddings[0],
                          f"rows of bert/embeddings/word_embeddings {list(embeddings)}"))
    if len({size for _, size, _ in sizes}) > 1:
        raise CheckpointMismatchError(
            "vocabulary sizes differ: " + "; ".join(f"{what} has {size} {unit}"
                                                   for what, size, unit in sizes)
            + ". The vocabulary, albert_config.json and the checkpoint must come from the same "
              "model.")


def from_official_dir(directory: str, model_class=None, init_from_group0: bool = False,
                      do_lower_case: bool = True, **model_kwargs) -> OfficialModel:
    """Config + tokenizer + model with weights, from an official or community download.

    `directory` holds
      * the config: `albert_config.json`, or one `albert_config_*.json` (community
        Chinese releases: `albert_config_base.json`, `albert_config_tiny.json`, ...);
      * the vocabulary: a SentencePiece `30k-clean.model` (any single `*.model`;
        the English models), else a WordPiece `vocab_chinese.txt` or `vocab.txt`
        (`albert_*_zh` and the community Chinese models);
      * a TF1 checkpoint: `model.ckpt-best.*` or `albert_model.ckpt.*` (any single
        prefix), with or without a `checkpoint` file.
    A TF-Hub module directory (files under `assets/`, weights under `variables/`)
    works too, and so does a SavedModel of `hub_export.export_pretrainer`.
    `model_class` defaults to `AlbertPretrainer` (encoder + MLM + SOP);
    `model_kwargs` go to its constructor (e.g. `num_labels=3`).
    Raises FileNotFoundError naming the directory and what was looked for when
    a file is absent, CheckpointMismatchError when the vocabulary, the config and
    the checkpoint disagree on the vocabulary size (or on any other field).
    """
    from albert_tf.modeling import models
    from albert_tf import tokenization

    model_class = model_class or models.AlbertPretrainer
    if not os.path.isdir(directory):
        raise UserFileNotFoundError(f"{directory}: not a directory (expected a model download "
                                    "with albert_config.json, a vocabulary and a checkpoint)")
    config_file = find_config_file(directory)
    config = AlbertConfig.from_json_file(config_file)
    kind, vocab_file = find_vocabulary(directory)
    tokenizer = tokenization.load_tokenizer(
        spm_model_file=vocab_file if kind == "sentencepiece" else None,
        vocab_file=vocab_file if kind == "wordpiece" else None, do_lower_case=do_lower_case)
    check_vocab_size(tokenizer, config, config_file, checkpoint=directory)
    model = model_class(config, **model_kwargs)
    report = restore_for_training(model, directory, init_from_group0=init_from_group0)
    return OfficialModel(config=config, tokenizer=tokenizer, model=model, report=report)
