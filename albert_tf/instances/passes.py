"""One pass of pretraining instances over tokenized documents, as feature arrays in memory.

A pass is what data_prep's duplicate pass `pass_index` makes of the same documents in one
block (`data_prep.pipeline`): document d's pairs and masks are drawn from its own
`random.Random(derive_seed(random_seed, "pairs+masks", d, pass_index))`, so pass k of a
document is the same instances whoever builds it. The Keras masked LM trains epoch k on
pass k: masks and pairs drawn anew each epoch (dynamic masking, with the original's rules).
"""
from __future__ import annotations

import random
from typing import Dict, List, NamedTuple, Sequence

import numpy as np

from albert_tf.instances.masking import MaskingOptions, MaskStats, mask_pair
from albert_tf.instances.pairing import DocView, create_pairs
from albert_tf.instances.seeds import derive_seed


class SpecialIds(NamedTuple):
    """The vocabulary's ids the instances use."""
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_size: int


def document_view(sentence_ids: Sequence[Sequence[int]], is_start: Sequence[bool]
                  ) -> DocView:
    """A document's sentences (token ids each; empty ones dropped) as a DocView, with the
    word-start flags of `is_start` (bool per vocabulary id: whole-word masking)."""
    ids: List[int] = []
    bounds = [0]
    for sentence in sentence_ids:
        if len(sentence):
            ids.extend(int(i) for i in sentence)
            bounds.append(len(ids))
    return DocView(ids, [bool(is_start[i]) for i in ids], bounds)


def pass_features(documents: Sequence[DocView], document_indices: Sequence[int],
                  special: SpecialIds, max_seq_length: int, short_seq_prob: float,
                  masking: MaskingOptions, random_seed: int, pass_index: int
                  ) -> Dict[str, np.ndarray]:
    """The instances of pass `pass_index` over `documents` (non-empty DocViews; their
    ordinals in the input, `document_indices`, seed their draws), in document order:
    input_ids, input_mask, segment_ids int32 [N, S]; masked_lm_positions, masked_lm_ids
    int32 and masked_lm_weights float32 [N, P] (P = max_predictions_per_seq);
    next_sentence_labels int32 [N] (1: the segments are swapped)."""
    cumulative = masking.ngram_cumulative()
    stats = MaskStats(masking.ngram)
    rows = []
    for position, (document, index) in enumerate(zip(documents, document_indices)):
        rng = random.Random(derive_seed(random_seed, "pairs+masks", int(index), pass_index))
        for pair in create_pairs(document, position, len(documents), documents.__getitem__,
                                 max_seq_length, short_seq_prob, False, rng):
            ids, _, positions, targets = mask_pair(
                pair.a_ids, pair.a_flags, pair.b_ids, pair.b_flags, special.cls_id,
                special.sep_id, special.mask_id, special.vocab_size, masking, cumulative,
                rng, stats)
            rows.append((ids, len(pair.a_ids) + 2, positions, targets,
                         int(pair.is_random_next)))
    return _arrays(rows, max_seq_length, masking.max_predictions_per_seq)


def _arrays(rows, max_seq_length: int, max_predictions: int) -> Dict[str, np.ndarray]:
    count = len(rows)
    out = {name: np.zeros((count, max_seq_length), np.int32)
           for name in ("input_ids", "input_mask", "segment_ids")}
    out.update(masked_lm_positions=np.zeros((count, max_predictions), np.int32),
               masked_lm_ids=np.zeros((count, max_predictions), np.int32),
               masked_lm_weights=np.zeros((count, max_predictions), np.float32),
               next_sentence_labels=np.zeros((count,), np.int32))
    for row, (ids, b_start, positions, targets, label) in enumerate(rows):
        out["input_ids"][row, :len(ids)] = ids
        out["input_mask"][row, :len(ids)] = 1
        out["segment_ids"][row, b_start:len(ids)] = 1
        out["masked_lm_positions"][row, :len(positions)] = positions
        out["masked_lm_ids"][row, :len(targets)] = targets
        out["masked_lm_weights"][row, :len(targets)] = 1.0
        out["next_sentence_labels"][row] = label
    return out
