"""The Keras user's workflow: task models on raw text, with compile / fit / evaluate /
predict / save (keras-hub's Preprocessor + Task split, for ALBERT).

    import albert_tf
    classifier = albert_tf.from_pretrained("albert_base_v2", "text-classification",
                                           num_classes=2, sequence_length=128)
    classifier.compile()                       # the original's AdamW, warmup and decay
    classifier.fit(texts, labels, epochs=3, batch_size=32)
    classifier.predict(["a fine film"])        # logits [1, 2]
    classifier.save("sst2.keras")              # keras.saving.load_model after import albert_tf
    classifier.export("sst2_export")           # albert_tf.pipeline(..., model="sst2_export")

  preprocessor.py     AlbertPreprocessor: raw text -> token features, in the graph
  inputs.py           what fit / evaluate / predict take, as a batched tf.data.Dataset
  task.py             Task: the base (network + preprocessor, compile defaults, raw text)
  exits.py            ExitTraining: per-layer exits in fit (PABEE's depth-weighted loss)
  text_classifier.py  AlbertTextClassifier: single-label, multi-label, regression
  tagger.py           AlbertTagger: a label per word (NER), softmax or CRF
  tagging_inputs.py   what the tagger takes: words and tags -> run_ner.py's windows
  multiple_choice.py  AlbertMultipleChoiceTask: article, question, 4 options -> the answer
  choice_inputs.py    what it takes: questions -> run_race.py's 4 rows each
  masked_lm.py        AlbertMaskedLM: fill-mask, and continued pretraining on documents
  feature_extractor.py  AlbertFeatureExtractor: texts -> the encoder's outputs
  question_answerer.py  AlbertQuestionAnswerer: question + context -> answer (SQuAD v1.1)
  sentence_embedder.py  AlbertSentenceEmbedder: texts -> embeddings (bi-encoder losses)
  from_pretrained.py  from_pretrained: any source -> a task model
  exporting.py        model.export(dir): the CLI's export (SavedModel, ONNX, LiteRT)
docs/keras.md is the user's guide.

May import: everything below the programs, and albert_tf.pipelines (its model sources).
"""
from __future__ import annotations

from albert_tf import _lazy

_EXPORTS = {
    "AlbertPreprocessor": "preprocessor", "Task": "task",
    "AlbertTextClassifier": "text_classifier", "AlbertTagger": "tagger",
    "AlbertMultipleChoiceTask": "multiple_choice", "AlbertMaskedLM": "masked_lm",
    "AlbertFeatureExtractor": "feature_extractor",
    "AlbertQuestionAnswerer": "question_answerer",
    "AlbertSentenceEmbedder": "sentence_embedder",
    "from_pretrained": "from_pretrained",
}
__all__ = list(_EXPORTS)

__getattr__, __dir__ = _lazy.lazy_attributes(__name__, _EXPORTS, globals())
