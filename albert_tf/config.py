"""AlbertConfig: the official `albert_config.json`, validated, plus named presets.

The field names, defaults and JSON layout follow the original release, so an
official `albert_config.json` loads unchanged and `to_json_file` writes a file
the original TF1 code reads. Keys that official files carry but the model does
not use (`net_structure_type`, `gap_size`, `num_memory_blocks`,
`layers_to_keep`, ...) are kept in `extra` and written back out.

One field is an extension: `parameter_sharing` selects how transformer layers
share weights (the paper's Table 4):
  * "all"       the original's grouped sharing: layer l uses group
                int(l * num_hidden_groups / num_hidden_layers), and each group
                holds `inner_group_num` attention+FFN blocks;
  * "attention" one attention sub-block shared by every layer, FFN per layer;
  * "ffn"       one FFN sub-block shared by every layer, attention per layer;
  * "none"      BERT-style, every layer has its own weights.
It is written to JSON only when it differs from "all", so configs of the
default kind stay byte-compatible with the official ones.
"""
from __future__ import annotations

import copy
import dataclasses
import json
import math
from typing import Any, Dict, Mapping

from albert_tf import fileio
from albert_tf.errors import UserFileNotFoundError, UserValueError

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "relu", "tanh", "linear")
SHARING_MODES = ("all", "attention", "ffn", "none")


@dataclasses.dataclass
class AlbertConfig:
    """Hyperparameters of an ALBERT encoder (defaults = the original constructor's).

    Sizes are counts (tokens, units, heads); dropout values are probabilities.
    """

    vocab_size: int
    embedding_size: int = 128
    hidden_size: int = 4096
    num_hidden_layers: int = 12
    num_hidden_groups: int = 1
    num_attention_heads: int = 64
    intermediate_size: int = 16384
    inner_group_num: int = 1
    down_scale_factor: int = 1  # stored by the original, unused by its model
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    parameter_sharing: str = "all"
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self.validate()

    # --- validation -----------------------------------------------------------------

    def validate(self) -> None:
        """Raises ValueError naming the first invalid field."""
        positive_ints = ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                         "num_hidden_groups", "num_attention_heads", "intermediate_size",
                         "inner_group_num", "max_position_embeddings", "type_vocab_size")
        for name in positive_ints:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"AlbertConfig.{name} must be an integer, got {value!r}")
            if value <= 0:
                raise ValueError(f"AlbertConfig.{name} must be positive, got {value}")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"AlbertConfig.{name} must be a probability in [0, 1), "
                                 f"got {value!r}")
        if (not isinstance(self.initializer_range, (int, float))
                or not math.isfinite(self.initializer_range) or self.initializer_range <= 0):
            raise ValueError("AlbertConfig.initializer_range must be a positive number, got "
                             f"{self.initializer_range!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"AlbertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})")
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups ({self.num_hidden_groups}) cannot exceed "
                f"num_hidden_layers ({self.num_hidden_layers})")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(f"AlbertConfig.hidden_act {self.hidden_act!r} is not supported; "
                             f"choose one of {', '.join(SUPPORTED_ACTIVATIONS)}")
        if self.parameter_sharing not in SHARING_MODES:
            raise ValueError(f"AlbertConfig.parameter_sharing {self.parameter_sharing!r} is "
                             f"unknown; choose one of {', '.join(SHARING_MODES)}")
        if self.parameter_sharing != "all":
            for name in ("num_hidden_groups", "inner_group_num"):
                if getattr(self, name) != 1:
                    raise ValueError(
                        f"AlbertConfig.{name} must be 1 when parameter_sharing is "
                        f"{self.parameter_sharing!r} (groups apply only to sharing 'all')")

    # --- derived sizes ----------------------------------------------------------------

    @property
    def attention_head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def num_sublayers(self) -> int:
        """Number of attention+FFN blocks applied in a forward pass (L * inner_group_num)."""
        return self.num_hidden_layers * self.inner_group_num

    def group_index(self, layer_index: int) -> int:
        """The group used by layer `layer_index`: the original's int(l / L * G).

        The float expression is kept on purpose: it differs from the exact
        integer l * G // L for some (l, L, G) (e.g. l=15, L=G=22 gives 14, not 15),
        and checkpoints trained with the original follow the float one.
        """
        return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

    # --- dict / JSON ------------------------------------------------------------------

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "AlbertConfig":
        """Builds a config from an `albert_config.json`-style dict; unknown keys go to `extra`."""
        if "vocab_size" not in values:
            raise ValueError("AlbertConfig needs 'vocab_size' (absent from the given dict)")
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in values.items() if k in known}
        extra = {k: copy.deepcopy(v) for k, v in values.items() if k not in known}
        extra.update(copy.deepcopy(values.get("extra", {})))
        extra.pop("extra", None)
        return cls(**kwargs, extra=extra)

    def to_dict(self) -> Dict[str, Any]:
        """The flat dict of `albert_config.json` (extension fields only when non-default)."""
        out = {f.name: copy.deepcopy(getattr(self, f.name))
               for f in dataclasses.fields(self) if f.name != "extra"}
        if out["parameter_sharing"] == "all":
            del out["parameter_sharing"]
        for key, value in self.extra.items():
            out.setdefault(key, copy.deepcopy(value))
        return out

    @classmethod
    def from_json_file(cls, path: str) -> "AlbertConfig":
        """Reads an `albert_config.json`; errors name the file."""
        try:
            with open(path, encoding="utf-8") as handle:
                values = json.load(handle)
        except FileNotFoundError as err:
            raise UserFileNotFoundError(f"{path}: no such config file") from err
        except IsADirectoryError as err:
            raise UserFileNotFoundError(f"{path} is a directory; give its albert_config.json "
                                        "file") from err
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise UserValueError(f"{path}: not valid JSON ({err})") from err
        if not isinstance(values, dict):
            raise UserValueError(f"{path}: expected a JSON object, got {type(values).__name__}")
        try:
            return cls.from_dict(values)
        except (TypeError, ValueError) as err:
            raise UserValueError(f"{path}: {err}") from err

    def to_json_string(self) -> str:
        """JSON with 2-space indent and sorted keys, as the original writes it."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str) -> None:
        """Writes `to_json_string()` to `path` atomically."""
        fileio.atomic_write_text(path, self.to_json_string())

    def replace(self, **changes: Any) -> "AlbertConfig":
        """A validated copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_preset(cls, name: str) -> "AlbertConfig":
        """The configuration of a published model, e.g. "albert_base_v2"."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        return cls.from_dict(PRESETS[name])


def _published(hidden: int, layers: int, heads: int, intermediate: int, dropout: float):
    # Keys exactly as in the official albert_config.json files (v2 downloads).
    return {
        "attention_probs_dropout_prob": dropout,
        "hidden_act": "gelu",
        "hidden_dropout_prob": dropout,
        "embedding_size": 128,
        "hidden_size": hidden,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "max_position_embeddings": 512,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_hidden_groups": 1,
        "net_structure_type": 0,
        "gap_size": 0,
        "num_memory_blocks": 0,
        "inner_group_num": 1,
        "down_scale_factor": 1,
        "type_vocab_size": 2,
        "vocab_size": 30000,
    }


_SIZES = {
    "base": (768, 12, 12, 3072),
    "large": (1024, 24, 16, 4096),
    "xlarge": (2048, 24, 16, 8192),
    "xxlarge": (4096, 12, 64, 16384),
}

# v1: dropout 0.1 except xxlarge (0); v2: no dropout.
PRESETS: Dict[str, Dict[str, Any]] = {}
for _size, _dims in _SIZES.items():
    PRESETS[f"albert_{_size}_v1"] = _published(*_dims, dropout=0.0 if _size == "xxlarge" else 0.1)
    PRESETS[f"albert_{_size}_v2"] = _published(*_dims, dropout=0.0)
