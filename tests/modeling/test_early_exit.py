"""Light inference: fewer layers (`inference_layers`), exit heads and PABEE's early exit,
against NumPy references written from the paper's rules."""
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertClassifier, AlbertMultipleChoice
from albert_tf.checkpoints import names as tf1_names
from albert_tf.modeling import models
from albert_tf.modeling.early_exit import EarlyExit
from albert_tf.modeling.token_classifier import AlbertTokenClassifier
from tests.helpers import numpy_reference as ref
from tests.modeling.test_numerics import random_batch, randomize, tiny_config

TOL = 1e-4  # float32 against float64 through six layers with large random weights


def deep_config(**changes):
    """Six layers in two groups (the loop must choose each layer's group), one sub-layer."""
    values = dict(num_hidden_layers=6, num_hidden_groups=2, inner_group_num=1)
    values.update(changes)
    return tiny_config(**values)


def batch_of(config, rows=8, seed=3):
    batch = random_batch(config, batch=rows, seq=11, seed=seed)
    batch["input_mask"][3:, 6:] = 0
    return batch


def classifier(config, exit_heads="none", num_labels=3, seed=5, **kwargs):
    model = AlbertClassifier(config, num_labels=num_labels, exit_heads=exit_heads, **kwargs)
    model.build()
    randomize(model.weights, seed=seed, matrix_scale=0.5)
    return model


def reference_layer_logits(model, batch):
    """float64 logits [L, B, K] of every layer's exit, from the NumPy encoder."""
    model_weights = weights_by_tf1_name(model.encoder)
    _, _, layer_outputs, _ = ref.encoder_forward(model_weights, model.config.to_dict(), **batch)
    inner = model.config.inner_group_num
    pooler_w = model.encoder.pooler.kernel.numpy()
    pooler_b = model.encoder.pooler.bias.numpy()
    logits = []
    for index, sequence in enumerate(layer_outputs[inner - 1::inner]):
        pooled = np.tanh(sequence[:, 0] @ pooler_w + pooler_b)
        head_w, head_b = model.classifier.output_weights.numpy(), model.classifier.output_bias
        if model.exits is not None and index < model.exits.num_exits:
            head_w = model.exits.output_weights.numpy()[index]
            head_b = model.exits.output_bias[index]
        logits.append(pooled @ head_w.T + np.asarray(head_b))
    return np.stack(logits)


def weights_by_tf1_name(encoder):
    return {name: var.numpy() for name, var in tf1_names.variables_for(encoder).items()}


def pabee_reference(layer_logits, patience, regression=False, tolerance=0.0):
    """(exit layer [B] 1-based, logits [B, K]) by PABEE's rule, one row at a time."""
    num_layers, rows = layer_logits.shape[:2]
    exits = []
    for row in range(rows):
        decisions = (layer_logits[:, row, 0] if regression
                     else layer_logits[:, row].argmax(-1))
        counter, exit_at = 0, num_layers
        for layer in range(1, num_layers):
            same = (abs(decisions[layer] - decisions[layer - 1]) <= tolerance if regression
                    else decisions[layer] == decisions[layer - 1])
            counter = counter + 1 if same else 0
            if counter >= patience:
                exit_at = layer + 1
                break
        exits.append(exit_at)
    exits = np.array(exits)
    return exits, layer_logits[exits - 1, np.arange(rows)]


@pytest.mark.parametrize("config", [tiny_config(), deep_config()], ids=["inner2", "deep"])
def test_inference_layers_answer_from_layer_k(config):
    model = classifier(config)
    batch = batch_of(config)
    want = reference_layer_logits(model, batch)
    for k in range(1, config.num_hidden_layers + 1):
        model.inference_layers = k
        np.testing.assert_allclose(model(batch)["logits"].numpy(), want[k - 1], atol=TOL)
    model.inference_layers = None
    np.testing.assert_allclose(model(batch)["logits"].numpy(), want[-1], atol=TOL)
    # Training always runs every layer.
    model.inference_layers = 1
    assert len(model(batch, training=True)["encoder_outputs"]) == (
        config.num_hidden_layers * config.inner_group_num)


@pytest.mark.parametrize("bad", [0, 7, -1, 2.5, True])
def test_inference_layers_out_of_range_is_one_line(bad):
    with pytest.raises(ValueError, match=r"inference_layers must be a whole number from 1 to "
                                         r"the model's num_hidden_layers \(6\); got"):
        AlbertClassifier(deep_config(), num_labels=2, inference_layers=bad)
    model = classifier(deep_config())
    with pytest.raises(ValueError, match=r"num_hidden_layers \(6\)"):
        model.inference_layers = bad


@pytest.mark.parametrize("exit_heads", ["shared", "per_layer"])
def test_exit_logits_and_pabee_loss(exit_heads):
    config = deep_config()
    model = classifier(config, exit_heads)
    batch = batch_of(config)
    want = reference_layer_logits(model, batch)
    outputs = model(batch)
    np.testing.assert_allclose(outputs["exit_logits"].numpy(), want, atol=TOL)
    np.testing.assert_allclose(outputs["logits"].numpy(), want[-1], atol=TOL)
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1])
    per_exit = -np.stack([ref.log_softmax(logits)[np.arange(8), labels] for logits in want])
    depth = np.arange(1, 7)
    expected = (depth[:, None] * per_exit).sum(0) / depth.sum()
    losses = models.classifier_losses(outputs, {"label_ids": labels})
    np.testing.assert_allclose(losses["per_example_loss"].numpy(), expected, rtol=1e-4)
    np.testing.assert_allclose(float(losses["loss"]), expected.mean(), rtol=1e-4)
    # Per-layer heads are PABEE's: L - 1 new [K, H] heads; shared adds no weight.
    added = len(model.weights) - len(classifier(config).weights)
    assert added == (2 if exit_heads == "per_layer" else 0)


@pytest.mark.parametrize("exit_heads", ["shared", "per_layer"])
def test_early_exit_follows_pabee(exit_heads):
    config = deep_config()
    model = classifier(config, exit_heads, seed=6)
    batch = batch_of(config, rows=16, seed=4)
    layer_logits = reference_layer_logits(model, batch)
    seen = set()
    for patience in (1, 2, 3, 5):
        model.early_exit = EarlyExit(patience=patience)
        outputs = tf.function(model)(batch)
        exits, logits = pabee_reference(layer_logits, patience)
        np.testing.assert_array_equal(outputs["exit_layer"].numpy(), exits)
        np.testing.assert_allclose(outputs["logits"].numpy(), logits, atol=TOL)
        np.testing.assert_array_equal(outputs["predictions"].numpy(), logits.argmax(-1))
        seen.update(exits.tolist())
    assert len(seen) >= 3, f"the weights gave too few distinct exits to test: {seen}"


def test_a_mixed_batch_equals_each_row_alone():
    config = deep_config()
    model = classifier(config, "per_layer", seed=6)
    model.early_exit = EarlyExit(patience=1)
    batch = batch_of(config, rows=16, seed=4)
    run = tf.function(model)
    together = run(batch)
    assert len(set(together["exit_layer"].numpy().tolist())) > 1, "no mix of exits"
    for row in range(16):
        alone = run({name: value[row:row + 1] for name, value in batch.items()})
        assert int(alone["exit_layer"][0]) == int(together["exit_layer"][row])
        np.testing.assert_allclose(alone["logits"].numpy()[0], together["logits"].numpy()[row],
                                   atol=TOL, rtol=TOL)


@pytest.mark.parametrize("exit_heads", ["none", "shared", "per_layer"])
def test_patience_beyond_the_depth_is_the_full_model_bit_for_bit(exit_heads):
    config = deep_config()
    model = classifier(config, exit_heads)
    batch = batch_of(config)
    full = tf.function(lambda features: model(features)["logits"])(batch).numpy()
    model.early_exit = EarlyExit(patience=config.num_hidden_layers + 1)
    outputs = tf.function(model)(batch)
    np.testing.assert_array_equal(outputs["logits"].numpy(), full)
    assert outputs["exit_layer"].numpy().tolist() == [6] * 8


def test_regression_exits_within_the_tolerance():
    config = deep_config()
    model = classifier(config, "per_layer", num_labels=1, seed=2)
    batch = batch_of(config, rows=16)
    layer_logits = reference_layer_logits(model, batch)
    steps = np.abs(np.diff(layer_logits[:, :, 0], axis=0))
    tolerance = float(np.median(steps))
    model.early_exit = EarlyExit(patience=1, tolerance=tolerance)
    outputs = tf.function(model)(batch)
    exits, logits = pabee_reference(layer_logits, 1, regression=True, tolerance=tolerance)
    np.testing.assert_array_equal(outputs["exit_layer"].numpy(), exits)
    np.testing.assert_allclose(outputs["predictions"].numpy(), logits[:, 0], atol=TOL)


def test_confidence_exit():
    config = deep_config()
    model = classifier(config, "per_layer", seed=6)
    batch = batch_of(config, rows=16, seed=4)
    probabilities = ref.softmax(reference_layer_logits(model, batch))  # [L, B, K]
    threshold = float(np.median(probabilities.max(-1)))
    model.early_exit = EarlyExit(confidence=threshold)
    outputs = tf.function(model)(batch)
    confident = probabilities.max(-1) >= threshold
    confident[-1] = True
    np.testing.assert_array_equal(outputs["exit_layer"].numpy(), confident.argmax(0) + 1)
    with pytest.raises(ValueError, match="single-label"):
        classifier(config, num_labels=1).early_exit = EarlyExit(confidence=0.9)


@pytest.mark.parametrize("values, message", [
    ({"patience": 0}, "patience must be a whole number of layers >= 1, got 0"),
    ({}, "early exit needs a patience"),
    ({"confidence": 1.5}, r"confidence must be in \(0, 1\]"),
    ({"patience": 2, "tolerance": -1.0}, "tolerance must be >= 0"),
])
def test_bad_exit_rules_are_one_line(values, message):
    with pytest.raises(ValueError, match=message):
        EarlyExit(**values)


def test_exit_settings_survive_get_config():
    model = classifier(deep_config(), "per_layer", inference_layers=4,
                       early_exit={"patience": 2})
    rebuilt = AlbertClassifier.from_config(model.get_config())
    assert rebuilt.exit_heads == "per_layer" and rebuilt.inference_layers == 4
    assert rebuilt.early_exit == EarlyExit(patience=2)
    plain = AlbertClassifier(deep_config(), num_labels=2).get_config()
    assert "exit_heads" not in plain and "inference_layers" not in plain
    with pytest.raises(ValueError, match="exit_heads must be one of none, shared, per_layer"):
        AlbertClassifier(deep_config(), num_labels=2, exit_heads="every")


# --- multiple choice and token classification ---------------------------------------------


def choice_batch(config, questions=6, choices=4, seed=4):
    flat = batch_of(config, rows=questions * choices, seed=seed)
    return {name: value.reshape(questions, choices, -1) for name, value in flat.items()}


@pytest.mark.parametrize("exit_heads", [  # 15 s each: per_layer in the slow suite
    "shared", pytest.param("per_layer", marks=pytest.mark.slow)])
def test_multiple_choice_questions_exit_together(exit_heads):
    config = deep_config()
    model = AlbertMultipleChoice(config, num_choices=4, exit_heads=exit_heads)
    model.build()
    randomize(model.weights, seed=6, matrix_scale=0.5)
    batch = choice_batch(config)
    batch["choice_mask"] = np.ones((6, 4), np.int32)
    batch["choice_mask"][1, 3] = 0
    full = tf.function(model)(batch)
    layer_logits = full["exit_logits"].numpy()  # [L, B, C]
    assert (layer_logits[:, 1, 3] == models.MASKED_CHOICE_LOGIT).all()  # at every layer
    labels = np.array([0, 1, 2, 3, 0, 1])
    per_exit = -np.stack([ref.log_softmax(logits)[np.arange(6), labels]
                          for logits in layer_logits])
    depth = np.arange(1, 7)
    losses = models.multiple_choice_losses(full, {"label_ids": labels})
    np.testing.assert_allclose(losses["per_example_loss"].numpy(),
                               (depth[:, None] * per_exit).sum(0) / depth.sum(), rtol=1e-4)
    for patience in (1, 2, 7):
        model.early_exit = EarlyExit(patience=patience)
        outputs = tf.function(model)(batch)
        exits, logits = pabee_reference(layer_logits, patience)
        np.testing.assert_array_equal(outputs["exit_layer"].numpy(), exits)
        np.testing.assert_allclose(outputs["logits"].numpy(), logits, atol=TOL, rtol=TOL)
        if patience == 7:
            np.testing.assert_array_equal(outputs["logits"].numpy(), full["logits"].numpy())
        for question in (1, 4):
            alone = tf.function(model)({k: v[question:question + 1] for k, v in batch.items()})
            assert int(alone["exit_layer"][0]) == exits[question]


def tagger_reference_exits(layer_predictions, patience):
    """PABEE over whole tag sequences: [L, B, S] decoded tags -> exit layers [B]."""
    num_layers, rows = layer_predictions.shape[:2]
    exits = []
    for row in range(rows):
        counter, exit_at = 0, num_layers
        for layer in range(1, num_layers):
            same = (layer_predictions[layer, row] == layer_predictions[layer - 1, row]).all()
            counter = counter + 1 if same else 0
            if counter >= patience:
                exit_at = layer + 1
                break
        exits.append(exit_at)
    return np.array(exits)


@pytest.mark.parametrize("use_crf", [False, True])
def test_tagger_exits_when_the_tag_sequence_is_stable(use_crf):
    config = deep_config()
    model = AlbertTokenClassifier(config, num_labels=3, use_crf=use_crf, exit_heads="shared")
    model.build()
    randomize(model.weights, seed=3, matrix_scale=0.5)
    batch = batch_of(config, rows=12, seed=5)
    batch["word_mask"] = batch["input_mask"].copy()
    batch["word_mask"][:, 0] = 0
    full = tf.function(model)(batch)
    layer_logits = full["exit_logits"]  # [L, B, S, K]
    layer_predictions = np.stack([model.decode(logits, batch["word_mask"]).numpy()
                                  for logits in layer_logits])
    seen = set()
    for patience in (1, 2):
        model.early_exit = EarlyExit(patience=patience)
        outputs = tf.function(model)(batch)
        exits = tagger_reference_exits(layer_predictions, patience)
        np.testing.assert_array_equal(outputs["exit_layer"].numpy(), exits)
        np.testing.assert_array_equal(outputs["predictions"].numpy(),
                                      layer_predictions[exits - 1, np.arange(12)])
        seen.update(exits.tolist())
    assert len(seen) > 1
    # Training with exits: each layer's loss, weighted by depth.
    labels = np.where(batch["word_mask"] == 1, np.arange(11)[None] % 3, -1)
    model.early_exit = None
    with_labels = model(dict(batch, label_ids=labels))
    per_layer = np.stack([model.loss_terms(logits, labels)["loss_sum"].numpy()
                          for logits in with_labels["exit_logits"]])
    depth = np.arange(1, 7)
    np.testing.assert_allclose(with_labels["loss_sum"].numpy(),
                               (depth[:, None] * per_layer).sum(0) / depth.sum(), rtol=1e-4)
    if use_crf:
        with pytest.raises(ValueError, match="exit confidence needs the softmax head"):
            model.early_exit = EarlyExit(confidence=0.9)
