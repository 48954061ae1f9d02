"""Analytic FLOP counts (1 multiply-add = 2 FLOPs) of the benchmarked ALBERT work.

Only matrix products are counted (elementwise work, softmax and LayerNorm are
O(B*S*H) and ignored), so "fraction of peak" = counted FLOPs / time / measured
matmul peak is a model-FLOPs utilisation. Shapes: B batch, S sequence, E
embedding, H hidden, I intermediate, V vocabulary, L layers, P masked positions
per sequence. The pretraining head is counted at the masked positions only
(what the original computes); an implementation that evaluates the vocabulary
projection at every position does more work than is counted here.
"""
from __future__ import annotations

# The matmul probe (bench/ours.py MatmulProbeRunner): ALBERT-base's FFN products at
# batch 16, sequence 128 ([B*S, H] x [H, I] and [B*S, I] x [I, H]), each repeated.
PROBE_SHAPES = ((2048, 768, 3072), (2048, 3072, 768))
PROBE_REPEATS = 5


def probe_step_flops() -> int:
    return sum(2 * m * k * n for m, k, n in PROBE_SHAPES) * PROBE_REPEATS


def encoder_forward_flops(model: dict, batch: int, seq: int) -> int:
    """Forward FLOPs of the encoder: projection E->H, L layers, pooler."""
    e, h, i = model["embedding_size"], model["hidden_size"], model["intermediate_size"]
    layers = model["num_hidden_layers"] * model["inner_group_num"]
    tokens = batch * seq
    projection = 2 * tokens * e * h if e != h else 0
    attention_dense = 4 * 2 * tokens * h * h          # Q, K, V and output projections
    attention_scores = 2 * 2 * batch * seq * seq * h   # QK^T and probs @ V over all heads
    ffn = 2 * 2 * tokens * h * i                       # H->I and I->H
    pooler = 2 * batch * h * h
    return projection + layers * (attention_dense + attention_scores + ffn) + pooler


def pretraining_head_forward_flops(model: dict, batch: int, max_predictions: int) -> int:
    """MLM head at the masked positions (dense H->E, decoder E->V) plus the SOP head."""
    e, h, v = model["embedding_size"], model["hidden_size"], model["vocab_size"]
    masked = batch * max_predictions
    return 2 * masked * h * e + 2 * masked * e * v + 2 * batch * h * 2


def training_step_flops(model: dict, batch: int, seq: int, max_predictions: int) -> int:
    """Forward + backward (twice the forward: input and weight gradients)."""
    forward = (encoder_forward_flops(model, batch, seq)
               + pretraining_head_forward_flops(model, batch, max_predictions))
    return 3 * forward


def case_flops(case: dict) -> int:
    """FLOPs of one unit of a bench case (a training step or an encoder forward pass)."""
    if case["kind"] == "train":
        return training_step_flops(case["model"], case["batch_size"], case["seq_length"],
                                   case["max_predictions"])
    return encoder_forward_flops(case["model"], case["batch_size"], case["seq_length"])
