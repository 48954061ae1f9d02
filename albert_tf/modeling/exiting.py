"""`ExitingModel`: a fine-tuning model with an exit after every layer (`modeling.early_exit`).

What the classifier, the multiple-choice model and the token classifier share: the exit
heads (`exit_heads`: "none", "shared" = the task head at every layer, "per_layer" =
PABEE's head per layer, `heads.ExitHeads`), the early-exit rule used at inference
(`early_exit`), and the per-layer outputs that PABEE's loss reads.
"""
from __future__ import annotations

from typing import Dict, List, Mapping, Optional

from albert_tf.modeling import early_exit as early_exit_module
from albert_tf.modeling import heads
from albert_tf.modeling.base import FineTuningModel


class ExitingModel(FineTuningModel):
    """A `FineTuningModel` whose head (`classifier`, a `heads.ClassificationHead`) can read
    every layer. A subclass calls `init_exits` after making its head."""

    def init_exits(self, exit_heads: str, early_exit, num_outputs: int,
                   dropout_rate: float) -> None:
        self.exit_heads = early_exit_module.check_exit_heads(exit_heads)
        self.exits = None
        if exit_heads == "per_layer" and self.config.num_hidden_layers > 1:
            self.exits = heads.ExitHeads(self.config.num_hidden_layers - 1, num_outputs,
                                         self.config.hidden_size,
                                         self.config.initializer_range, dropout_rate,
                                         name="exits", dtype=self.dtype_policy)
        self.early_exit = early_exit

    @property
    def early_exit(self) -> Optional[early_exit_module.EarlyExit]:
        """The inference exit rule (None: every row runs `inference_layers` or L layers)."""
        return self._early_exit

    @early_exit.setter
    def early_exit(self, rule) -> None:
        if isinstance(rule, Mapping):
            rule = early_exit_module.EarlyExit.from_dict(rule)
        if rule is not None:
            self.check_exit_rule(rule)
        self._early_exit = rule

    def check_exit_rule(self, rule: early_exit_module.EarlyExit) -> None:
        """ValueError when this model cannot exit by `rule` (every rule, by default)."""

    def build(self, input_shape=None):
        if self.built:
            return
        super().build(input_shape)
        if self.exits is not None:
            self.exits.build()

    def exit_early(self, inputs: Mapping, family: early_exit_module.ExitFamily,
                   extras: Optional[Mapping] = None) -> Dict:
        """`early_exit.run_early_exit` of this model's encoder under its rule."""
        return early_exit_module.run_early_exit(self.encoder, inputs, family, self.early_exit,
                                                extras)

    def head_logits(self, layer_index, features, training=False):
        """float32 logits [..., K] of the exit after layer `layer_index` (0-based; a Python
        int or an int32 scalar tensor) on that layer's head features [..., H]."""
        if self.exits is None:
            return self.classifier(features, training=training)
        return self.exits.logits(layer_index, features, self.classifier, training=training)

    def layer_outputs(self, encoder_outputs: Mapping, training=False) -> List:
        """Each layer's output sequence [B, S, H] among the encoder's outputs, for the layers
        a call runs."""
        inner = self.config.inner_group_num
        layers_run = self.encoder.layers_run(training)
        return list(encoder_outputs["encoder_outputs"][inner - 1::inner][:layers_run])

    def get_config(self):
        values = super().get_config()
        if self.exit_heads != "none":
            values["exit_heads"] = self.exit_heads
        if self.early_exit is not None:
            values["early_exit"] = self.early_exit.to_dict()
        return values
