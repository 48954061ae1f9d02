"""`AlbertMultipleChoiceTask`: a question, its article and its options -> the answer,
run_race.py's model and packing (RACE's, or C3's).

    chooser = albert_tf.from_pretrained("albert_base_v2", "multiple-choice",
                                        sequence_length=512)
    chooser.compile()                       # the original's AdamW, warmup and decay
    chooser.fit({"article": articles, "question": questions, "options": options}, answers)
    chooser.predict({...})                  # logits float32 [N, 4]

The 4 rows of a question are run_race.py's (`choice_inputs.py`: `packing` "race", or "c3"
for C3's 2-4 options and three segments); the model scores each row from its pooled
output and the loss is the softmax cross-entropy over the 4 scores (an absent C3 option
masked out), the mean over the batch's questions (run_race.py's).
"""
from __future__ import annotations

from typing import Optional

import keras
import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.keras_tasks import choice_inputs
from albert_tf.keras_tasks.inputs import DEFAULT_BATCH_SIZE
from albert_tf.keras_tasks.exits import ExitTraining
from albert_tf.keras_tasks.task import Task
from albert_tf.modeling.models import AlbertMultipleChoice


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoiceTask(ExitTraining, Task):
    """An `AlbertMultipleChoice` network (4 choices) on questions (see the module
    docstring).

    Args:
      network: an `AlbertMultipleChoice` with num_choices=4.
      preprocessor: an `AlbertPreprocessor` (its vocabulary, casing and sequence_length
        make the rows).
      max_qa_length: RACE's question+option tokens kept (its last ones); default
        run_race.py's (128, or half the row where 128 does not fit).
      packing: "race" (4 options) or "c3" (2-4 options; run_race.py --task_name=c3).
    Calling it on token features int32 [B, 4, S] returns float32 logits [B, 4].
    """

    task_name = "multiple-choice"
    inputs_in_python = True  # a tf.data.Dataset is read into memory (dataset_rows)
    default_learning_rate = 1e-5  # run_race.py's --learning_rate

    def __init__(self, network: AlbertMultipleChoice, preprocessor=None,
                 max_qa_length: Optional[int] = None, packing: str = "race", **kwargs):
        super().__init__(network, preprocessor, **kwargs)
        if packing not in choice_inputs.PACKINGS:
            raise UserValueError(f"packing={packing!r}: one of "
                                 f"{', '.join(choice_inputs.PACKINGS)}")
        self.packing = packing
        if network.num_choices != choice_inputs.features.NUM_CHOICES:
            raise UserValueError(f"multiple-choice packs RACE's 4 options; this network has "
                                 f"{network.num_choices} choices")
        length = preprocessor.sequence_length if preprocessor is not None else \
            network.config.max_position_embeddings
        self.max_qa_length = choice_inputs.check_qa_length(max_qa_length, length)

    def call(self, features, training=False):
        return tf.cast(self.exit_outputs(features, training)["logits"], tf.float32)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def packed(self, x, y=None):
        """run_race.py's features of x (and answers y): token features int32 [N, 4, S],
        label_ids int32 [N] (and C3's choice_mask int32 [N, 4])."""
        tokenizer = self.python_tokenizer
        examples = choice_inputs.examples_of(x, y, tokenizer.preprocess, self.packing)
        return choice_inputs.packed(examples, tokenizer, self.preprocessor.sequence_length,
                                    self.max_qa_length, self.packing)

    def dataset(self, x, y=None, batch_size=None, needs_labels=False, shuffle=False):
        if needs_labels and y is None:
            raise UserValueError("multiple-choice: fit and evaluate need answers: fit(x="
                                 "questions, y=answers), one option index per question")
        return choice_inputs.choice_dataset(self.packed(x, y), y is not None,
                                            batch_size or DEFAULT_BATCH_SIZE, shuffle)

    def predict(self, x, batch_size=None, **kwargs) -> np.ndarray:
        """Logits float32 [N, 4]; softmax gives the options' probabilities."""
        arrays = self.packed(self.in_memory(x)[0])
        if not len(arrays["input_ids"]):
            return np.zeros((0, choice_inputs.features.NUM_CHOICES), np.float32)
        dataset = choice_inputs.choice_dataset(arrays, False, batch_size or DEFAULT_BATCH_SIZE,
                                               False)
        return keras.Model.predict(self, dataset, **kwargs)

    def export(self, filepath, format="saved_model", verbose=None, input_signature=None, *,
               int8: bool = False, fp16: bool = False, check_data=None, **kwargs):
        """Writes run_race.py's export to `filepath`: a SavedModel on raw text (article or
        C3's context, question, options) and token ids, and / or "onnx", "tflite" ("litert") on token
        features, with the vocabulary and albert_tf_export.json. `check_data`: questions
        the int8 files are checked on."""
        from albert_tf.keras_tasks import exporting

        exporting.check_arguments(input_signature, kwargs, "raw text and token ids",
                                  "format, int8, fp16, check_data, int8_min_agreement")
        return exporting.export_multiple_choice(self, filepath, format, int8=int8, fp16=fp16,
                                                check_data=check_data, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(max_qa_length=self.max_qa_length, packing=self.packing)
        return config
