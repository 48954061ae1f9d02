"""`AlbertMaskedLM.fit`: continued pretraining on documents. Pass k's instances are
create_pretraining_data.py's duplicate pass k on the same documents and seed; epoch k
trains on pass k; the loss is the original's; the settings survive a .keras round trip;
bad input gets one line."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf.errors import UserValueError
from albert_tf.instances.masking import MaskingOptions
from albert_tf.keras_tasks import masked_lm as masked_lm_module
from albert_tf.modeling.models import pretraining_losses
from albert_tf.pretraining.inputs import feature_spec, pretraining_schema
from tests.helpers.hf_models import write_hf_dir

LENGTH = 32
DOCUMENTS = [
    "The cat sat on the mat.\nIt was a sunny day in the small town.\n"
    "The dog barked loudly at the cat.\nThen everyone went home for dinner.\n"
    "Night fell and the stars came out.",
    ["Paris is the capital of France.", "It has many museums and old bridges.",
     "The Louvre is the largest museum in the world.", "Millions visit it every year."],
    "One sentence only here, and it is a rather long one that goes on for a while.",
]


@pytest.fixture(scope="module")
def masked_lm(tmp_path_factory, official_spm):
    directory = write_hf_dir(str(tmp_path_factory.mktemp("hf") / "mlm"), "masked_lm",
                             official_spm, seed=7)
    return albert_tf.from_pretrained(directory, sequence_length=LENGTH)


def data_prep_records(tmp_path, spm, passes):
    """create_pretraining_data.py's instances of DOCUMENTS ({name: [N, ...] arrays}), all
    documents in one block, `passes` duplicate passes, the task's default settings."""
    from data_prep import pipeline, runner
    from data_prep.text_input import ReaderOptions

    text = "\n\n".join(d if isinstance(d, str) else "\n".join(d) for d in DOCUMENTS)
    source = tmp_path / "documents.txt"
    source.write_text(text + "\n", encoding="utf-8")
    options = runner.RunOptions(
        spm_model_file=spm, reader=ReaderOptions(do_lower_case=True),
        instances=pipeline.InstanceOptions(max_seq_length=LENGTH, dupe_factor=passes,
                                           random_seed=12345, masking=MaskingOptions()),
        layout=pipeline.LayoutOptions(num_files=1))
    output = str(tmp_path / "train.tfrecord")
    runner.create_pretraining_data([str(source)], [output], options, log=lambda _: None)
    spec = feature_spec(pretraining_schema(LENGTH, 20))
    rows = [tf.io.parse_single_example(r, spec) for r in tf.data.TFRecordDataset(output)]
    return {name: np.stack([row[name].numpy() for row in rows]) for name in spec}


def row_keys(arrays):
    """Each instance as a hashable tuple of its ids, segments, targets and label."""
    labels = arrays["next_sentence_labels"].reshape(-1)
    return sorted(tuple(arrays["input_ids"][i].tolist() + arrays["segment_ids"][i].tolist()
                        + arrays["masked_lm_positions"][i].tolist()
                        + arrays["masked_lm_ids"][i].tolist() + [int(labels[i])])
                  for i in range(len(labels)))


def test_each_pass_is_create_pretraining_datas_pass(masked_lm, tmp_path, official_spm):
    """Pass k of fit's instances is data_prep's duplicate pass k, instance for instance
    (data_prep shuffles them, so as sets); the passes differ (dynamic masking)."""
    records = data_prep_records(tmp_path, official_spm, passes=2)
    ours = [masked_lm.instances(DOCUMENTS, k) for k in (0, 1)]
    both = {name: np.concatenate([p[name] for p in ours]) for name in ours[0]}
    assert row_keys(both) == row_keys(records)
    assert row_keys(ours[0]) != row_keys(ours[1])
    np.testing.assert_array_equal(both["masked_lm_weights"].sum(), records[
        "masked_lm_weights"].sum())
    assert len(both["input_ids"]) >= 6 and set(both["next_sentence_labels"].tolist()) <= {0, 1}


def test_epoch_k_reads_pass_k_every_step_full(masked_lm):
    built = [masked_lm.instances(DOCUMENTS, k) for k in (2, 3)]
    steps = max(int(np.ceil(len(p["input_ids"]) / 2)) for p in built)
    stream = list(masked_lm_module._pass_batches(built, 2, steps, True, 1, 2)
                  .as_numpy_iterator())
    assert len(stream) == 2 * steps and all(len(f["input_ids"]) == 2 for f, _ in stream)
    for k, arrays in enumerate(built):
        seen = {tuple(ids) for features, _ in stream[k * steps:(k + 1) * steps]
                for ids in features["input_ids"].tolist()}
        assert seen == {tuple(ids) for ids in arrays["input_ids"].tolist()}


def test_the_loss_is_the_originals(masked_lm):
    arrays = masked_lm.instances(DOCUMENTS, 0)
    features, labels = masked_lm_module._split(arrays)
    want = pretraining_losses(masked_lm.network(features), labels)
    masked_lm.compile()
    got = masked_lm.evaluate(DOCUMENTS, verbose=0, return_dict=True, batch_size=64)
    assert got["loss"] == pytest.approx(float(want["loss"]), rel=1e-5)
    assert got["masked_lm_accuracy"] == pytest.approx(float(want["masked_lm_accuracy"]),
                                                      abs=1e-6)


@pytest.mark.slow  # 12 s on AMD EPYC Zen 3: four epochs and a save
def test_fit_learns_and_a_saved_model_keeps_its_settings(masked_lm, tmp_path):
    keras.utils.set_random_seed(0)
    learner = albert_tf.from_pretrained(masked_lm, masked_lm_prob=0.3, random_seed=3)
    learner.compile(learning_rate=3e-3)
    history = learner.fit(DOCUMENTS * 4, epochs=4, batch_size=4, verbose=0,
                          validation_data=DOCUMENTS).history
    assert set(history) == {"loss", "masked_lm_accuracy", "sentence_order_accuracy",
                            "val_loss", "val_masked_lm_accuracy",
                            "val_sentence_order_accuracy"}
    assert history["loss"][-1] < 0.8 * history["loss"][0]

    path = str(tmp_path / "mlm.keras")
    learner.save(path)
    loaded = keras.saving.load_model(path)
    assert (loaded.masking, loaded.random_seed) == (learner.masking, 3)
    np.testing.assert_array_equal(loaded.instances(DOCUMENTS, 5)["input_ids"],
                                  learner.instances(DOCUMENTS, 5)["input_ids"])
    loaded.fit(DOCUMENTS, epochs=1, batch_size=4, verbose=0)  # the task loss, restored


def test_bad_input_gets_one_line(masked_lm):
    masked_lm.compile()
    cases = [
        (lambda: masked_lm.fit(DOCUMENTS, [1, 2, 3]), "fit takes documents alone"),
        (lambda: masked_lm.fit("one document"), "x is one text"),
        (lambda: masked_lm.fit(["", "  \n "]), "the documents hold no token"),
        (lambda: masked_lm.fit([["a", 3]]), "document 0: a text or a list of sentences"),
        (lambda: masked_lm.fit(DOCUMENTS, steps_per_epoch=3), "steps_per_epoch is not taken"),
        (lambda: masked_lm.fit(DOCUMENTS, epochs=1, initial_epoch=1), "leaves nothing to run"),
        (lambda: masked_lm.compile(metrics=["accuracy"]), "the metrics are masked_lm_accuracy"),
        (lambda: albert_tf.from_pretrained(masked_lm, masked_lm_prob=0), "masked_lm_prob must"),
    ]
    for call, message in cases:
        with pytest.raises(UserValueError, match=message):
            call()
