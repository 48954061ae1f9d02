"""feature-extraction: the encoder's last hidden states (Hugging Face's arguments and outputs).

    features = albert_tf.pipeline("feature-extraction", model="albert_base_v2")
    features("A sentence.")            # nested lists [1, tokens, hidden] ([CLS] ... [SEP])
    features("A sentence.", return_tensors=True)   # a float32 numpy array [1, tokens, hidden]

Any model source with an encoder serves (a task model's encoder too). A text longer than
the model is an error unless `truncation=True`.
"""
from __future__ import annotations

from typing import Dict, List, Mapping

import numpy as np

from albert_tf.errors import UserValueError
from albert_tf.pipelines import base
from albert_tf.pipelines.encoding import Packed


class FeatureExtractionPipeline(base.Pipeline):
    task = "feature-extraction"
    OUTPUTS = ("sequence_output",)
    OPTIONS = {"truncation": False, "return_tensors": False}

    def __init__(self, source, batch_size: int = 8, **options):
        if source.kind not in ("huggingface", "official"):
            raise UserValueError(f"{source.path}: a {source.kind} export holds a task's outputs, "
                                 "not the encoder's hidden states; use a Hugging Face or "
                                 "official model directory")
        super().__init__(source, batch_size, **options)

    def rows(self, item, options: Mapping) -> List[Packed]:
        return [self.text_row(item, options["truncation"])]

    def answer(self, item, rows, outputs: Dict[str, np.ndarray], options: Mapping):
        hidden = outputs["sequence_output"][:1, :len(rows[0].input_ids)]
        return hidden.astype(np.float32) if options["return_tensors"] else hidden.tolist()
