"""albert_tf.modeling.crf against numpy brute force: every path enumerated with
itertools.product and scored from the definition

  score(y) = start[y_0] + sum_t e[t, y_t] + sum_{t>0} trans[y_{t-1}, y_t] + end[y_{n-1}]

in float64. Batches mix lengths 0..6 and fill padded positions with garbage (huge values,
NaN, out-of-range tag ids) that must not change any result.
"""
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.modeling.crf import CRF, crf_decode, crf_log_likelihood

MAX_LENGTH = 8  # padded length; true lengths go up to 6
MODES = ["eager", "xla"]


# ----------------------------------------------------------------------------- references

def all_paths(num_tags, length):
    """Every tag sequence of `length`: int [num_tags ** length, length]."""
    return np.array(list(itertools.product(range(num_tags), repeat=length)),
                    dtype=np.int64).reshape(num_tags ** length, length)


def path_scores(emissions, paths, transitions, start, end):
    """Scores float64 [P] of paths [P, n] over emissions [>= n, T]; 0 for n = 0."""
    n = paths.shape[1]
    if n == 0:
        return np.zeros(len(paths))
    e, tr, s, en = (np.asarray(x, np.float64) for x in (emissions, transitions, start, end))
    return (s[paths[:, 0]] + e[np.arange(n), paths].sum(1)
            + tr[paths[:, :-1], paths[:, 1:]].sum(1) + en[paths[:, -1]])


def logsumexp(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def violations(paths, allowed):
    """Number of disallowed moves of each path [P, n] under (transitions, start, end) masks."""
    trans_ok, start_ok, end_ok = allowed
    if paths.shape[1] == 0:
        return np.zeros(len(paths), np.int64)
    return ((~start_ok[paths[:, 0]]).astype(np.int64) + (~end_ok[paths[:, -1]])
            + (~trans_ok[paths[:, :-1], paths[:, 1:]]).sum(1))


# ----------------------------------------------------------------------------- inputs

def make_case(seed, num_tags, lengths, scale=1.0, max_length=MAX_LENGTH):
    """Random emissions/tags/scores for a batch; padding holds garbage."""
    rng = np.random.default_rng(seed)
    lengths = np.asarray(lengths, np.int32)
    batch = len(lengths)
    emissions = (scale * rng.normal(size=(batch, max_length, num_tags))).astype(np.float32)
    tags = rng.integers(0, num_tags, size=(batch, max_length)).astype(np.int32)
    pad = np.arange(max_length)[None, :] >= lengths[:, None]
    garbage = rng.uniform(-1e6, 1e6, size=emissions.shape).astype(np.float32)
    garbage[rng.random(emissions.shape) < 0.2] = np.nan
    emissions[pad] = garbage[pad]
    tags[pad] = rng.integers(-5, num_tags + 5, size=tags.shape)[pad]
    transitions = (scale * rng.normal(size=(num_tags, num_tags))).astype(np.float32)
    start = (scale * rng.normal(size=num_tags)).astype(np.float32)
    end = (scale * rng.normal(size=num_tags)).astype(np.float32)
    return emissions, tags, lengths, transitions, start, end


def batch_lengths(seed, size=12):
    """Every length 0..6 once, then random ones, shuffled."""
    rng = np.random.default_rng(seed)
    lengths = np.concatenate([np.arange(7), rng.integers(0, 7, size=size - 7)])
    return rng.permutation(lengths)


XLA_FUNCTIONS = {fn: tf.function(fn, jit_compile=True) for fn in (crf_log_likelihood, crf_decode)}


def in_mode(fn, mode):
    """`fn` itself, or its XLA-compiled version (one compile per input shape; shared by the
    tests, since each XLA compile costs about half a second)."""
    return fn if mode == "eager" else XLA_FUNCTIONS[fn]


def unconstrained_case(num_tags):
    """The batch the log-likelihood and decoding tests share (XLA compiles once per T)."""
    return make_case(num_tags, num_tags, batch_lengths(num_tags))


# ----------------------------------------------------------------------------- log-likelihood

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("num_tags", [1, 2, 3, 4])
def test_log_likelihood_matches_brute_force(num_tags, mode):
    case = emissions, tags, lengths, transitions, start, end = unconstrained_case(num_tags)
    got = in_mode(crf_log_likelihood, mode)(*case)
    assert got.dtype == tf.float32 and got.shape == (len(lengths),)
    for b, n in enumerate(lengths):
        paths = all_paths(num_tags, n)
        scores = path_scores(emissions[b], paths, transitions, start, end)
        gold = path_scores(emissions[b], tags[b:b + 1, :n], transitions, start, end)[0]
        np.testing.assert_allclose(got[b], gold - logsumexp(scores), atol=1e-4,
                                   err_msg=f"sequence {b}, length {n}")
    assert np.all(got.numpy()[lengths == 0] == 0.0)


def test_log_likelihood_is_stable_for_large_scores():
    emissions, tags, lengths, transitions, start, end = make_case(
            7, 3, batch_lengths(7), scale=300.0)
    got = crf_log_likelihood(emissions, tags, lengths, transitions, start, end).numpy()
    assert np.all(np.isfinite(got)) and np.all(got <= 0)
    for b, n in enumerate(lengths):
        scores = path_scores(emissions[b], all_paths(3, n), transitions, start, end)
        gold = path_scores(emissions[b], tags[b:b + 1, :n], transitions, start, end)[0]
        np.testing.assert_allclose(got[b], gold - logsumexp(scores), rtol=1e-5, atol=1e-2)


@pytest.mark.parametrize("num_tags,length", [(1, 4), (2, 5), (3, 4), (4, 5)])
def test_path_probabilities_sum_to_one(num_tags, length):
    """exp(score(y) - logZ) over all T^n paths y, each fed as gold tags, sums to 1."""
    paths = all_paths(num_tags, length).astype(np.int32)
    emissions, _, _, transitions, start, end = make_case(
            length, num_tags, [length], max_length=length + 2)
    batch = len(paths)
    padded_tags = np.concatenate([paths, np.full((batch, 2), 99, np.int32)], axis=1)
    log_probs = crf_log_likelihood(np.repeat(emissions, batch, axis=0), padded_tags,
                                   np.full(batch, length, np.int32), transitions, start, end)
    np.testing.assert_allclose(np.sum(np.exp(log_probs.numpy().astype(np.float64))), 1.0,
                               atol=1e-5)


# ----------------------------------------------------------------------------- decoding

def check_decoded(tags, best, emissions, lengths, transitions, start, end, num_tags):
    """Viterbi result equals the brute-force argmax (tags up to exact ties)."""
    tags, best = tags.numpy(), best.numpy()
    assert tags.dtype == np.int32 and best.dtype == np.float32
    for b, n in enumerate(lengths):
        assert np.all(tags[b, n:] == 0), "padding positions must hold 0"
        paths = all_paths(num_tags, n)
        scores = path_scores(emissions[b], paths, transitions, start, end)
        decoded = path_scores(emissions[b], tags[b:b + 1, :n], transitions, start, end)[0]
        np.testing.assert_allclose(best[b], scores.max(), atol=1e-4)
        np.testing.assert_allclose(decoded, scores.max(), atol=1e-4)
        second = np.sort(scores)[-2] if len(scores) > 1 else -np.inf
        if scores.max() - second > 1e-4:  # no tie: the path itself must match
            np.testing.assert_array_equal(tags[b, :n], paths[np.argmax(scores)])


@pytest.mark.parametrize("num_tags,mode", [(1, "eager"), (2, "eager"), (3, "eager"),
                                            (4, "eager"), (1, "xla"), (4, "xla")])
def test_decode_matches_brute_force(num_tags, mode):
    emissions, _, lengths, transitions, start, end = unconstrained_case(num_tags)
    tags, best = in_mode(crf_decode, mode)(emissions, lengths, transitions, start, end)
    assert tags.shape == emissions.shape[:2]
    check_decoded(tags, best, emissions, lengths, transitions, start, end, num_tags)


@pytest.mark.parametrize("mode", MODES)
def test_empty_time_axis(mode):
    """L = 0 (static): log-likelihood 0, empty decode, also under XLA."""
    emissions = np.zeros((3, 0, 4), np.float32)
    lengths = np.zeros(3, np.int32)
    scores = (np.ones((4, 4), np.float32), np.ones(4, np.float32), np.ones(4, np.float32))
    ll = in_mode(crf_log_likelihood, mode)(emissions, np.zeros((3, 0), np.int32), lengths,
                                           *scores)
    tags, best = in_mode(crf_decode, mode)(emissions, lengths, *scores)
    np.testing.assert_array_equal(ll, np.zeros(3))
    assert tags.shape == (3, 0)
    np.testing.assert_array_equal(best, np.zeros(3))


def test_graph_mode_with_unknown_shapes():
    spec = tf.TensorSpec
    ll_fn = tf.function(crf_log_likelihood, input_signature=[
            spec([None, None, None]), spec([None, None], tf.int32), spec([None], tf.int32),
            spec([None, None]), spec([None]), spec([None])])
    decode_fn = tf.function(crf_decode, input_signature=[
            spec([None, None, None]), spec([None], tf.int32), spec([None, None]), spec([None]),
            spec([None])])
    emissions, tags, lengths, transitions, start, end = make_case(5, 3, batch_lengths(5))
    np.testing.assert_allclose(
            ll_fn(emissions, tags, lengths, transitions, start, end),
            crf_log_likelihood(emissions, tags, lengths, transitions, start, end), atol=1e-6)
    tags_out, best = decode_fn(emissions, lengths, transitions, start, end)
    check_decoded(tags_out, best, emissions, lengths, transitions, start, end, 3)


# ----------------------------------------------------------------------------- constraints

def random_allowed(rng, num_tags, plant_path):
    """Random masks (about half allowed); with `plant_path`, one tag may start, end and
    follow itself, so every length has at least one allowed path."""
    trans_ok = rng.random((num_tags, num_tags)) < 0.5
    start_ok = rng.random(num_tags) < 0.5
    end_ok = rng.random(num_tags) < 0.5
    if plant_path:
        tag = rng.integers(num_tags)
        trans_ok[tag, tag] = start_ok[tag] = end_ok[tag] = True
    return trans_ok, start_ok, end_ok


@pytest.mark.parametrize("num_tags,mode", [(2, "eager"), (3, "eager"), (4, "eager"),
                                            (3, "xla")])
def test_constrained_decode_matches_brute_force(num_tags, mode):
    seen = {"allowed path": 0, "no allowed path": 0}
    for seed in range(6):
        rng = np.random.default_rng(10 * num_tags + seed)
        allowed = random_allowed(rng, num_tags, plant_path=seed % 2 == 0)
        scale = 1000.0 if seed == 4 else 1.0  # the penalty must scale with the scores
        emissions, _, lengths, transitions, start, end = make_case(
                10 * num_tags + seed, num_tags, batch_lengths(seed), scale=scale)
        tags, best = in_mode(crf_decode, mode)(emissions, lengths, transitions, start, end,
                                               allowed=allowed)
        tags, best = tags.numpy(), best.numpy()
        for b, n in enumerate(lengths):
            assert np.all(tags[b, n:] == 0)
            paths = all_paths(num_tags, n)
            scores = path_scores(emissions[b], paths, transitions, start, end)
            counts = violations(paths, allowed)
            decoded = tags[b:b + 1, :n]
            decoded_score = path_scores(emissions[b], decoded, transitions, start, end)[0]
            fewest = counts.min()
            target = scores[counts == fewest].max()
            tolerance = 1e-4 * max(1.0, abs(target))
            assert violations(decoded, allowed)[0] == fewest, (seed, b, n)
            np.testing.assert_allclose(decoded_score, target, atol=tolerance)
            if fewest == 0:
                seen["allowed path"] += 1
                np.testing.assert_allclose(best[b], target, atol=tolerance)
            else:  # best_score carries the penalties
                seen["no allowed path"] += 1
                assert best[b] < scores.min() - 1.0
    assert min(seen.values()) > 0, seen


# ----------------------------------------------------------------------------- ONNX

def test_decode_converts_to_onnx_with_the_path_in_order():
    """ONNX Runtime runs tf2onnx's conversion of crf_decode to TensorFlow's tags and scores,
    with and without constraints, on every length 0..6 (tf2onnx 1.17 stacks a reverse=True
    scan's outputs in the order it runs them, so a backtracking reverse scan came out
    reversed: the backtracking is a forward scan over the reversed back-pointers). The
    padding's garbage is finite here: tf2onnx turns a float tf.where into multiply-adds."""
    pytest.importorskip("tf2onnx")
    ort = pytest.importorskip("onnxruntime")
    from albert_tf.export import onnx as onnx_export

    num_tags = 4
    emissions, _, lengths, transitions, start, end = make_case(7, num_tags, batch_lengths(7))
    emissions = np.nan_to_num(emissions, nan=-1e6)
    allowed = random_allowed(np.random.default_rng(7), num_tags, plant_path=True)
    signature = {"emissions": tf.TensorSpec([None, None, num_tags], tf.float32),
                 "lengths": tf.TensorSpec([None], tf.int32)}
    for constraints in (None, allowed):
        def decode(features, constraints=constraints):
            tags, best = crf_decode(features["emissions"], features["lengths"], transitions,
                                    start, end, allowed=constraints)
            return {"tags": tags, "best": best}

        proto = onnx_export.to_onnx_proto(decode, signature)
        session = ort.InferenceSession(proto.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        tags, best = session.run(["tags", "best"], {"emissions": emissions, "lengths": lengths})
        want = decode({"emissions": emissions, "lengths": lengths})
        np.testing.assert_array_equal(tags, want["tags"].numpy())
        np.testing.assert_allclose(best, want["best"].numpy(), rtol=1e-5, atol=1e-5)
        if constraints is None:
            check_decoded(tf.constant(tags), tf.constant(best), emissions, lengths, transitions,
                          start, end, num_tags)


# ----------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("mode", MODES)
def test_gradients_match_brute_force_marginals(mode):
    """d(-mean LL)/d(scores) = (expected counts - gold counts) / B, expectations over the
    CRF's path distribution (brute force); padded positions get exactly zero gradient."""
    num_tags = 3
    emissions, tags, lengths, transitions, start, end = make_case(
            21, num_tags, [0, 1, 2, 4, 5], max_length=6)
    batch = len(lengths)

    def loss_and_grads(emissions, tags, lengths, transitions, start, end):
        variables = [emissions, transitions, start, end]
        with tf.GradientTape() as tape:
            tape.watch(variables)
            loss = -tf.reduce_mean(crf_log_likelihood(emissions, tags, lengths, *variables[1:]))
        return loss, tape.gradient(loss, variables)

    args = [tf.constant(x) for x in (emissions, tags, lengths, transitions, start, end)]
    if mode == "xla":
        loss_and_grads = tf.function(loss_and_grads, jit_compile=True)
    _, grads = loss_and_grads(*args)
    grads = [g.numpy() for g in grads]
    for g in grads:
        assert np.all(np.isfinite(g))

    expected = [np.zeros_like(emissions, np.float64), np.zeros((num_tags, num_tags)),
                np.zeros(num_tags), np.zeros(num_tags)]
    for b, n in enumerate(lengths):
        if n == 0:
            continue
        paths = all_paths(num_tags, n)
        scores = path_scores(emissions[b], paths, transitions, start, end)
        probs = np.exp(scores - logsumexp(scores))
        for weights, ys in ((probs, paths), (-np.ones(1), tags[b:b + 1, :n])):  # E[.] - gold
            for t in range(n):
                np.add.at(expected[0][b, t], ys[:, t], weights / batch)
            np.add.at(expected[1], (ys[:, :-1].ravel(), ys[:, 1:].ravel()),
                      np.repeat(weights, n - 1) / batch)
            np.add.at(expected[2], ys[:, 0], weights / batch)
            np.add.at(expected[3], ys[:, -1], weights / batch)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, atol=1e-5)
    pad = np.arange(6)[None, :] >= lengths[:, None]
    assert np.all(grads[0][pad] == 0.0)


# ----------------------------------------------------------------------------- precision

@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_low_precision_emissions_compute_in_float32(dtype):
    emissions, tags, lengths, transitions, start, end = make_case(31, 4, batch_lengths(31))
    emissions = np.nan_to_num(emissions, nan=0.0, posinf=0.0, neginf=0.0)  # fit float16
    emissions = np.clip(emissions, -1e4, 1e4)
    low = tf.cast(emissions, dtype)
    rounded = tf.cast(low, tf.float32).numpy()  # the same values, in float32

    ll_low = crf_log_likelihood(low, tags, lengths, transitions, start, end)
    assert ll_low.dtype == tf.float32
    np.testing.assert_allclose(
            ll_low, crf_log_likelihood(rounded, tags, lengths, transitions, start, end),
            atol=1e-5)
    np.testing.assert_allclose(  # against the unrounded float32 emissions
            ll_low, crf_log_likelihood(emissions, tags, lengths, transitions, start, end),
            atol=0.1)
    tags_low, best_low = crf_decode(low, lengths, transitions, start, end)
    tags_ref, best_ref = crf_decode(rounded, lengths, transitions, start, end)
    assert best_low.dtype == tf.float32
    np.testing.assert_array_equal(tags_low, tags_ref)
    np.testing.assert_allclose(best_low, best_ref, atol=1e-5)


# ----------------------------------------------------------------------------- Keras layer

def test_crf_layer_config_round_trip_and_weights():
    layer = CRF(5, name="ner_crf")
    config = layer.get_config()
    assert config["num_tags"] == 5 and config["name"] == "ner_crf"
    clone = CRF.from_config(config)
    assert clone.num_tags == 5 and clone.name == "ner_crf"
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is CRF and restored.get_config() == config
    assert keras.saving.get_registered_name(CRF) == "albert_tf>CRF"

    shapes = {w.path.split("/")[-1]: tuple(w.shape) for w in layer.trainable_weights}
    assert shapes == {"transitions": (5, 5), "start_transitions": (5,),
                      "end_transitions": (5,)}
    assert all(w.trainable and w.dtype == "float32" for w in layer.weights)
    assert all(np.all(w.numpy() == 0) for w in layer.weights)


def test_crf_layer_methods_use_its_weights():
    emissions, tags, lengths, transitions, start, end = make_case(41, 3, batch_lengths(41))
    layer = CRF(3)
    layer.set_weights([transitions, start, end])
    np.testing.assert_allclose(
            layer.log_likelihood(emissions, tags, lengths),
            crf_log_likelihood(emissions, tags, lengths, transitions, start, end), atol=1e-6)
    tags_out, best = layer(tf.cast(emissions, tf.bfloat16), lengths)  # cast up by the layer
    assert best.dtype == tf.float32
    rounded = tf.cast(tf.cast(emissions, tf.bfloat16), tf.float32)
    ref_tags, ref_best = layer.decode(rounded, lengths)
    np.testing.assert_array_equal(tags_out, ref_tags)
    np.testing.assert_allclose(best, ref_best, atol=1e-6)


def test_crf_layer_learns_alternating_pattern():
    """Zero emissions, gold tags 0,1,0,1,...: only the transitions can explain the data."""
    num_tags, lengths = 3, np.array([1, 2, 3, 5, 7, 7], np.int32)
    gold = np.tile(np.arange(7) % 2, (len(lengths), 1)).astype(np.int32)
    emissions = tf.zeros((len(lengths), 7, num_tags))
    layer = CRF(num_tags)
    optimizer = keras.optimizers.Adam(learning_rate=0.1)

    def train_step():
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(layer.log_likelihood(emissions, gold, lengths))
        optimizer.apply_gradients(zip(tape.gradient(loss, layer.trainable_weights),
                                      layer.trainable_weights))
        return loss

    losses = [float(train_step()) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0], losses
    tags, _ = layer.decode(emissions, lengths)
    np.testing.assert_array_equal(tags, np.where(np.arange(7) < lengths[:, None], gold, 0))
