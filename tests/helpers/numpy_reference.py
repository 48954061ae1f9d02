"""A NumPy ALBERT forward pass written from the original's formulas, for tests.

It reads weights by their official TF1 names (a dict name -> ndarray) so the
same reference checks the Keras model and, later, checkpoint loading. It is
deliberately independent of albert_tf: plain float64 NumPy, the original's
float expression for the group index, its LayerNorm and tanh-GELU.
"""
import math

import numpy as np


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


ACTIVATIONS = {"gelu": gelu, "gelu_new": gelu, "relu": lambda x: np.maximum(x, 0),
               "tanh": np.tanh, "linear": lambda x: x}


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def encoder_forward(w, cfg, input_ids, input_mask=None, segment_ids=None):
    """Returns (sequence_output [B,S,H], pooled [B,H], all_layers list, embedding_output [B,S,E]).

    `cfg` is a dict with the albert_config.json fields.
    """
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    input_ids = np.asarray(input_ids)
    b, s = input_ids.shape
    input_mask = np.ones((b, s)) if input_mask is None else np.asarray(input_mask, np.float64)
    segment_ids = np.zeros((b, s), int) if segment_ids is None else np.asarray(segment_ids)
    act = ACTIVATIONS[cfg["hidden_act"]]
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d = h // heads

    emb = (w["bert/embeddings/word_embeddings"][input_ids]
           + w["bert/embeddings/token_type_embeddings"][segment_ids]
           + w["bert/embeddings/position_embeddings"][:s][None])
    emb = layer_norm(emb, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    x = emb
    if cfg["embedding_size"] != h:
        x = x @ w["bert/encoder/embedding_hidden_mapping_in/kernel"] + \
            w["bert/encoder/embedding_hidden_mapping_in/bias"]
    adder = (1.0 - input_mask[:, None, None, :]) * -10000.0  # [B,1,1,T]
    layers_out = []
    num_layers, num_groups = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
    for layer_idx in range(num_layers):
        group_idx = int(layer_idx / num_layers * num_groups)
        for inner in range(cfg["inner_group_num"]):
            p = f"bert/encoder/transformer/group_{group_idx}/inner_group_{inner}/"

            def dense(t, name):
                return t @ w[p + name + "/kernel"] + w[p + name + "/bias"]

            q = dense(x, "attention_1/self/query").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
            k = dense(x, "attention_1/self/key").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
            v = dense(x, "attention_1/self/value").reshape(b, s, heads, d).transpose(0, 2, 1, 3)
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + adder
            ctx = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
            attn = layer_norm(x + dense(ctx, "attention_1/output/dense"),
                              w[p + "LayerNorm/gamma"], w[p + "LayerNorm/beta"])
            inter = act(dense(attn, "ffn_1/intermediate/dense"))
            x = layer_norm(attn + dense(inter, "ffn_1/intermediate/output/dense"),
                           w[p + "LayerNorm_1/gamma"], w[p + "LayerNorm_1/beta"])
            layers_out.append(x)
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    return x, pooled, layers_out, emb


def pretrainer_forward(w, cfg, input_ids, input_mask, segment_ids, positions):
    """Returns (mlm_logits [B,P,V], sop_logits [B,2]) as the original's heads compute them."""
    seq, pooled, _, _ = encoder_forward(w, cfg, input_ids, input_mask, segment_ids)
    w = {k: np.asarray(v, np.float64) for k, v in w.items()}
    positions = np.asarray(positions)
    gathered = np.take_along_axis(seq, positions[:, :, None], axis=1)
    t = ACTIVATIONS[cfg["hidden_act"]](gathered @ w["cls/predictions/transform/dense/kernel"]
                                       + w["cls/predictions/transform/dense/bias"])
    t = layer_norm(t, w["cls/predictions/transform/LayerNorm/gamma"],
                   w["cls/predictions/transform/LayerNorm/beta"])
    mlm = t @ w["bert/embeddings/word_embeddings"].T + w["cls/predictions/output_bias"]
    sop = pooled @ w["cls/seq_relationship/output_weights"].T + w["cls/seq_relationship/output_bias"]
    return mlm, sop


def pretraining_losses(mlm_logits, sop_logits, masked_lm_ids, masked_lm_weights, sop_labels):
    """The original's losses: weighted MLM nll / (sum w + 1e-5), mean SOP nll."""
    lp = log_softmax(np.asarray(mlm_logits, np.float64))
    nll = -np.take_along_axis(lp, np.asarray(masked_lm_ids)[..., None], -1)[..., 0]
    wts = np.asarray(masked_lm_weights, np.float64)
    mlm = (wts * nll).sum() / (wts.sum() + 1e-5)
    slp = log_softmax(np.asarray(sop_logits, np.float64))
    sop = -np.take_along_axis(slp, np.asarray(sop_labels).reshape(-1, 1), -1).mean()
    return mlm, sop


# --- fine-tuning heads, from the original scripts' formulas (weights by TF1 name) ---------------


def classifier_logits(w, pooled):
    """run_classifier / run_race: pooled [N, H] @ output_weights[K, H]^T + output_bias -> [N, K]."""
    return (np.asarray(pooled, np.float64) @ np.asarray(w["output_weights"], np.float64).T
            + np.asarray(w["output_bias"], np.float64))


def squad_v1_logits(w, sequence):
    """cls/squad: per-token [B, S, H] @ [2, H]^T + b -> (start [B, S], end [B, S])."""
    logits = (np.asarray(sequence, np.float64)
              @ np.asarray(w["cls/squad/output_weights"], np.float64).T
              + np.asarray(w["cls/squad/output_bias"], np.float64))
    return logits[..., 0], logits[..., 1]


def _dense(w, scope, x, bias=True):
    y = x @ np.asarray(w[scope + "/kernel"], np.float64)
    return y + np.asarray(w[scope + "/bias"], np.float64) if bias else y


def squad_v2_forward(w, sequence, p_mask, start_positions=None, start_n_top=5, end_n_top=5):
    """SQuAD v2's XLNet-style head, loop by loop (no vectorised tricks), float64.

    Returns a dict with start_log_probs [B,S], cls_logits [B] and either
    end_log_probs [B,S] (given start_positions) or the beam outputs.
    """
    h = np.asarray(sequence, np.float64)
    p = np.asarray(p_mask, np.float64)
    b, s, _ = h.shape

    def masked(x, pm):
        return x * (1 - pm) - 1e30 * pm

    start_logits = _dense(w, "start_logits/dense", h)[..., 0]
    start_masked = masked(start_logits, p)
    out = {"start_log_probs": log_softmax(start_masked)}

    def end_log_probs(row, start_vec):
        feats = np.concatenate([h[row], np.tile(start_vec, (s, 1))], axis=-1)  # [S, 2H]
        x = np.tanh(_dense(w, "end_logits/dense_0", feats))
        x = layer_norm(x, w["end_logits/LayerNorm/gamma"], w["end_logits/LayerNorm/beta"])
        logits = _dense(w, "end_logits/dense_1", x)[:, 0]
        return log_softmax(masked(logits, p[row]))

    if start_positions is not None:
        out["end_log_probs"] = np.stack([end_log_probs(r, h[r, int(start_positions[r])])
                                         for r in range(b)])
    else:
        top_idx = np.argsort(-out["start_log_probs"], axis=-1, kind="stable")[:, :start_n_top]
        out["start_top_index"] = top_idx
        out["start_top_log_probs"] = np.take_along_axis(out["start_log_probs"], top_idx, -1)
        end_lp, end_idx = [], []
        for r in range(b):
            row_lp, row_idx = [], []
            for i in top_idx[r]:
                lp = end_log_probs(r, h[r, i])
                order = np.argsort(-lp, kind="stable")[:end_n_top]
                row_idx.extend(order)
                row_lp.extend(lp[order])
            end_lp.append(row_lp)
            end_idx.append(row_idx)
        out["end_top_log_probs"] = np.array(end_lp)
        out["end_top_index"] = np.array(end_idx)
    probs = softmax(start_masked)
    start_feature = np.einsum("bs,bsh->bh", probs, h)
    answer = np.tanh(_dense(w, "answer_class/dense_0",
                            np.concatenate([start_feature, h[:, 0]], axis=-1)))
    out["cls_logits"] = _dense(w, "answer_class/dense_1", answer, bias=False)[:, 0]
    return out
