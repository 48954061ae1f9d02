"""What an `AlbertTagger`'s fit / evaluate / predict take, as run_ner.py's windows.

    x: sentences as words          [["EU", "rejects", "German", "call"], ...]
       or raw texts                ["EU rejects German call", ...], split into words as
                                   the tagger's export splits them (`word_split`: "basic",
                                   BERT's BasicTokenizer split of `readers.split_words`;
                                   "characters": every character a word, for CLUENER / MSRA)
    y: one tag per word            [["B-ORG", "O", "B-MISC", "O"], ...] (label names of
                                   the tagger, or label ids)

A sentence becomes one or more windows of `max_seq_length` tokens exactly as run_ner.py
makes them (`tasks.tagging.features.convert`: each word tokenized on its own, windows at
word boundaries moved by at most `doc_stride`, the max-context rule); so a long sentence is
never truncated, and fit trains on windows, as the CLI does. This runs in Python, before
the dataset: the windows of a sentence depend on the whole sentence.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf

from albert_tf.errors import UserValueError
from albert_tf.tasks.tagging import features, readers, schemes
from albert_tf.tasks.tagging.readers import TaggedSentence

WORD_SPLITS = ("basic", "characters")
# The features the model is called on (`word_mask`: 1 at each word's first sub-token).
MODEL_FEATURES = ("input_ids", "input_mask", "segment_ids", "word_mask")


def split_words(text: str, word_split: str = "basic") -> List[str]:
    """The words of a raw text, as the tagger's export splits it (see the module
    docstring)."""
    if word_split == "characters":
        return list(text)
    return [text[start:end] for start, end in readers.split_words(text)]


def sentences_of(x, y, labels: Sequence[str], word_split: str,
                 scheme: str = "iob2") -> List[TaggedSentence]:
    """x (and y) as `TaggedSentence`s, tags as label names valid in `scheme`; one line
    naming the sentence otherwise."""
    if isinstance(x, tf.data.Dataset):
        raise UserValueError("token-classification takes sentences in memory (lists of words "
                             "and of tags): its windows are made in Python, as "
                             "run_ner.py's; read a dataset into lists first")
    if isinstance(x, (str, bytes)) or not isinstance(x, (list, tuple, np.ndarray)):
        raise UserValueError("x is a list of sentences: each a list of words, or a text, "
                             f"got {type(x).__name__}")
    words = [_words(sentence, index, word_split) for index, sentence in enumerate(x)]
    if y is None:
        return [TaggedSentence(w, None, f"sentence {i}") for i, w in enumerate(words)]
    if isinstance(y, (str, bytes)) or len(y) != len(words):
        raise UserValueError(f"{len(words)} sentences but "
                             f"{'a string' if isinstance(y, (str, bytes)) else len(y)} tag "
                             "lists: give one list of tags per sentence")
    return [TaggedSentence(w, _tags(tags, len(w), index, labels, scheme), f"sentence {index}")
            for index, (w, tags) in enumerate(zip(words, y))]


def _words(sentence, index: int, word_split: str) -> List[str]:
    if isinstance(sentence, bytes):
        sentence = _utf8(sentence, index)
    if isinstance(sentence, str):
        return split_words(sentence, word_split)
    if not isinstance(sentence, (list, tuple, np.ndarray)):
        raise UserValueError(f"sentence {index}: a list of words or a text, got "
                             f"{type(sentence).__name__}")
    words = [_utf8(w, index) if isinstance(w, bytes) else w for w in sentence]
    bad = next((w for w in words if not isinstance(w, str)), None)
    if bad is not None:
        raise UserValueError(f"sentence {index}: words are strings, got {bad!r}")
    return words


def _utf8(value: bytes, index: int) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserValueError(f"sentence {index}: bytes that are not UTF-8 ({error})") from None


def _tags(tags, count: int, index: int, labels: Sequence[str], scheme: str) -> List[str]:
    if isinstance(tags, (str, bytes)) or not isinstance(tags, (list, tuple, np.ndarray)):
        raise UserValueError(f"sentence {index}: tags are a list, one per word, got "
                             f"{type(tags).__name__}")
    if len(tags) != count:
        raise UserValueError(f"sentence {index}: {count} words but {len(tags)} tags")
    names = []
    for tag in tags:
        if isinstance(tag, bytes):
            tag = _utf8(tag, index)
        if isinstance(tag, (int, np.integer)) and not isinstance(tag, bool):
            if not 0 <= tag < len(labels):
                raise UserValueError(f"sentence {index}: label id {tag} is outside "
                                     f"0..{len(labels) - 1}")
            tag = labels[tag]
        if not isinstance(tag, str):
            raise UserValueError(f"sentence {index}: a tag is a label name or id, got {tag!r}")
        if tag not in labels:
            raise UserValueError(f"sentence {index}: tag {tag!r} is not one of the tagger's "
                                 f"labels ({', '.join(labels)})")
        names.append(tag)
    if not schemes.is_valid(names, scheme):
        # run_ner.py converts a file's scheme and repairs it, with a log line; a caller's
        # tags are taken as given, so a sequence the decoder can never produce is refused.
        fixed = schemes.repair(names, scheme)[0]
        at = next(i for i, (a, b) in enumerate(zip(names, fixed)) if a != b)
        raise UserValueError(
            f"sentence {index}: tag {names[at]!r} at word {at} is not valid {scheme} (IOB1 "
            f"tags?): convert with albert_tf.tasks.tagging.schemes.convert(tags, 'iob1', "
            f"'{scheme}'), or repair with schemes.repair(tags, '{scheme}')")
    return names


def windows(sentences: Sequence[TaggedSentence], tokenizer, labels: Sequence[str],
            max_seq_length: int, doc_stride: int) -> Dict[str, np.ndarray]:
    """run_ner.py's windows of `sentences` (`features.convert`) as int64 arrays
    (`features.features_to_arrays`: input_ids, input_mask, segment_ids, label_ids,
    word_index, max_context [N, S]; sentence_index, window_index [N])."""
    label_to_id = {label: i for i, label in enumerate(labels)}
    found, _ = features.convert(sentences, tokenizer, label_to_id, max_seq_length, doc_stride,
                                log_every=0)
    if not found:
        return {name: np.zeros((0, max_seq_length) if name in features.SEQUENCE_FIELDS
                               else (0,), np.int64)
                for name in features.SEQUENCE_FIELDS + features.SCALAR_FIELDS}
    return features.features_to_arrays(found)


def model_features(arrays: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The windows' int32 model inputs (`MODEL_FEATURES`)."""
    out = {name: arrays[name].astype(np.int32) for name in MODEL_FEATURES[:3]}
    out["word_mask"] = (arrays["word_index"] >= 0).astype(np.int32)
    return out


def window_dataset(arrays: Dict[str, np.ndarray], labelled: bool, batch_size: int,
                   shuffle: bool) -> tf.data.Dataset:
    """Batches of (features, label_ids int32 [B, S]), or of features alone; `shuffle`:
    the windows reshuffled each epoch (as run_ner.py shuffles its windows)."""
    inputs = model_features(arrays)
    dataset = tf.data.Dataset.from_tensor_slices(
        (inputs, arrays["label_ids"].astype(np.int32)) if labelled else inputs)
    count = len(arrays["input_ids"])
    if shuffle and count:
        dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def merged_word_ids(arrays: Dict[str, np.ndarray], predictions: np.ndarray,
                    sentences: Sequence[TaggedSentence], outside_id: int) -> np.ndarray:
    """Each word's predicted label id from its max-context window, as int32 [N, W] (W the
    most words of a sentence; -1 past a sentence's words). A word without sub-tokens is
    'O' (`outside_id`), as run_ner.py predicts it."""
    per_word = features.merge_predictions(arrays, predictions,
                                          [len(s.words) for s in sentences], outside_id)
    width = max((len(words) for words in per_word), default=0)
    out = np.full((len(per_word), width), -1, np.int32)
    for row, ids in enumerate(per_word):
        out[row, :len(ids)] = ids
    return out

