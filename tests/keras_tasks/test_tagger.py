"""`AlbertTagger`: fit on words leaves run_ner.py's weights (softmax and CRF); predictions
are the CLI's windows merged by max context; `.keras` round trips; the export serves what
the model predicts; bad input gets one line."""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import albert_tf
from albert_tf import tokenization
from albert_tf.errors import UserValueError
from albert_tf.keras_tasks import tagging_inputs
from albert_tf.tasks.tagging import features, readers, schemes
from albert_tf.tasks.tagging.job import TaggingJob, TaggingOptions
from albert_tf.tasks.tagging.readers import TaggedSentence
from tests.helpers.hf_models import NER_LABELS, small_config, write_hf_dir

STEPS, BATCH, LENGTH = 4, 8, 32
WORDS = [["Alice", "lives", "in", "Paris", "."],
         ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]]
TAGS = [["B-PER", "O", "O", "B-LOC", "O"],
        ["B-ORG", "O", "B-LOC", "O", "O", "O", "B-LOC", "O", "O"]]


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory, official_spm):
    return write_hf_dir(str(tmp_path_factory.mktemp("hf") / "ner"), "token_classifier",
                        official_spm, labels=NER_LABELS, seed=5)


@pytest.fixture(scope="module")
def tagger(ner_dir):
    return albert_tf.from_pretrained(ner_dir, sequence_length=16)


# --- the two doors agree --------------------------------------------------------------------


def conll_blocks(path, count):
    """The first `count` sentences of a CoNLL-2003 file (after -DOCSTART-), as line blocks."""
    blocks, block = [], []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    return [b for b in blocks if not b[0].startswith("-DOCSTART-")][:count]


def cli_job(tmp_path, shared_data, init_checkpoint, spm, use_crf, **options):
    source = shared_data / "ner" / "conll2003" / "eng.train"
    if not source.exists():
        pytest.skip(f"{source} not found (shared NER samples)")
    data = tmp_path / "conll"
    data.mkdir(exist_ok=True)
    # Sentences of one window each (<= LENGTH - 2 sub-tokens: the CLI then shuffles
    # sentences, which fit can be given in the same order).
    tokenizer = tokenization.load_tokenizer(spm_model_file=spm)
    short = [b for b in conll_blocks(source, 200)
             if sum(len(ids) for ids in features.word_ids([line.split()[0] for line in b],
                                                          tokenizer)) <= LENGTH - 2]
    with open(data / "eng.train", "w", encoding="utf-8") as handle:
        handle.writelines("".join(block) + "\n" for block in short[:STEPS * BATCH])
    options = TaggingOptions(
        task_name="conll2003", data_dir=str(data), spm_model_file=spm,
        albert_config=small_config(64), max_seq_length=LENGTH, doc_stride=16,
        classifier_dropout=0.0, use_crf=use_crf, **options,
        output_dir=str(tmp_path / "run"), do_train=True, init_checkpoint=str(init_checkpoint),
        train_batch_size=BATCH, learning_rate=1e-3, train_step=STEPS, warmup_step=1,
        save_checkpoints_steps=STEPS, iterations_per_loop=STEPS, optimizer="adamw", seed=3)
    return TaggingJob(options)


@pytest.mark.parametrize("use_crf", [False, True], ids=["softmax", "crf"])
def test_fit_on_words_leaves_the_cli_weights(tmp_path, shared_data, official_spm, use_crf):
    """After the same 4 steps on the same batches (the original's AdamW, warmup and decay,
    clipping at 1.0; dropout 0; IOB1 tags read as IOB2), every weight is the CLI's but the
    pooler's: the tagger never reads it, Keras leaves it alone (as the original's optimizer
    skips a variable without gradient) while run_ner.py's loop applies a zero gradient, so
    weight decay shrinks it."""
    probe = cli_job(tmp_path, shared_data, "unused", official_spm, use_crf)
    labels = probe.labels  # run_ner.py's label list of the training data
    hf_dir = write_hf_dir(str(tmp_path / "hf"), "token_classifier", official_spm,
                          labels=labels, seed=2)
    job = cli_job(tmp_path, shared_data, hf_dir, official_spm, use_crf)
    sentences = job.read("train").sentences
    trained = job.run()["model"]
    cli_batches = list(job.train_dataset(None).take(STEPS).as_numpy_iterator())
    order = [int(i) for batch in cli_batches for i in batch["sentence_index"]]
    assert sorted(order) == list(range(len(sentences)))

    tagger = albert_tf.from_pretrained(hf_dir, sequence_length=LENGTH, dropout=0.0,
                                       use_crf=use_crf)
    assert tagger.labels == labels and tagger.tag_scheme == "iob2"
    windows = tagger.windows(sentences)
    for batch in cli_batches:  # the tagger's windows of a sentence are the CLI's
        for row, index in enumerate(batch["sentence_index"]):
            for name in ("input_ids", "input_mask", "label_ids", "word_index"):
                np.testing.assert_array_equal(windows[name][index], batch[name][row])
    tagger.compile(optimizer="adamw", learning_rate=1e-3, num_train_steps=STEPS,
                   warmup_steps=1)
    tagger.fit([sentences[i].words for i in order], [sentences[i].tags for i in order],
               batch_size=BATCH, shuffle=False, verbose=0)
    start = albert_tf.from_pretrained(hf_dir, use_crf=use_crf).network.weights
    moved = 0
    for mine, cli, initial in zip(tagger.network.weights, trained.weights, start):
        assert mine.path.split("/", 1)[1] == cli.path.split("/", 1)[1]
        if "pooler" in mine.path:
            continue
        np.testing.assert_allclose(mine.numpy(), cli.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=mine.path)
        moved += not np.array_equal(mine.numpy(), initial.numpy())
    assert moved > len(start) // 2  # training changed the weights
    if use_crf:
        assert any("crf" in w.path for w in tagger.network.weights)

    # The tagger predicts each word from its max-context window, as run_ner.py does.
    dev = job.read("train")
    job.options.predict_batch_size = 8
    data = job.featurized("train")
    want = job.predicted_tags(trained, data)
    got = tagger.predict_tags([s.words for s in dev.sentences], verbose=0)
    assert got == want


@pytest.mark.slow  # ~40 s on AMD EPYC Zen 3: a CLI run with its export
def test_a_run_ner_directory_is_a_source(tmp_path, shared_data, official_spm, ner_dir):
    """from_pretrained(run_dir): the run's best weights, labels, scheme, CRF, stride and
    vocabulary; it tags as the run's own export does."""
    probe = cli_job(tmp_path, shared_data, "unused", official_spm, True, tag_scheme="bioes")
    hf_dir = write_hf_dir(str(tmp_path / "hf"), "token_classifier", official_spm,
                          labels=probe.labels, seed=2)
    export_dir = tmp_path / "run" / "export"
    job = cli_job(tmp_path, shared_data, hf_dir, official_spm, True, tag_scheme="bioes",
                  export_dir=str(export_dir))
    job.run()
    tagger = albert_tf.from_pretrained(str(tmp_path / "run"))
    assert isinstance(tagger, albert_tf.AlbertTagger) and tagger.use_crf
    assert (tagger.tag_scheme, tagger.doc_stride, tagger.preprocessor.sequence_length) == (
        "bioes", 16, LENGTH)
    assert tagger.labels == job.labels
    sentences = [s.words for s in job.read("train").sentences[:6]]
    served = tf.saved_model.load(str(export_dir)).signatures["serve_words"]
    width = max(map(len, sentences))
    tags = served(words=tf.constant([w + [""] * (width - len(w)) for w in sentences]))["tags"]
    assert tagger.predict_tags(sentences, verbose=0) == [
        [t.decode() for t in row if t] for row in tags.numpy()]


# --- prediction -----------------------------------------------------------------------------


def test_long_sentences_are_windowed_and_every_word_gets_a_tag(tagger):
    """A sentence of more sub-tokens than a window: its words' tags come from their
    max-context windows (the CLI's `merge_predictions` of the network's own decoding)."""
    long = (WORDS[1] * 4)[:30]
    sentences = [TaggedSentence(w, None, "x")
                 for w in (WORDS[0], long)]
    arrays = tagger.windows(sentences)
    assert (arrays["sentence_index"] == 1).sum() > 2  # several windows
    inputs = {name: arrays[name].astype(np.int32) for name in
              ("input_ids", "input_mask", "segment_ids")}
    inputs["word_mask"] = (arrays["word_index"] >= 0).astype(np.int32)
    decoded = tagger.network(inputs, training=False)["predictions"].numpy()
    want = features.merge_predictions(arrays, decoded, [5, 30], NER_LABELS.index("O"))
    got = tagger.predict([WORDS[0], long], batch_size=3, verbose=0)
    assert got.shape == (2, 30) and (got[0, 5:] == -1).all()
    assert got[0, :5].tolist() == want[0] and got[1].tolist() == want[1]
    assert tagger.predict_tags([WORDS[0]], verbose=0) == [[NER_LABELS[i] for i in want[0]]]


def test_raw_texts_are_split_into_words_as_the_export_splits_them(tagger):
    assert tagger.predict_tags(["Alice lives in Paris."], verbose=0) == \
        tagger.predict_tags([WORDS[0]], verbose=0)
    assert tagger.predict([b"Alice lives in Paris."], verbose=0).shape == (1, 5)
    assert tagger.predict([], verbose=0).shape == (0, 0)


def test_score_reads_entities_as_conlleval(tagger):
    predicted = tagger.predict_tags(WORDS, verbose=0)
    found = schemes.entities(predicted[0]) + schemes.entities(predicted[1])
    perfect = tagger.score(WORDS, predicted, verbose=0)
    assert perfect["token_accuracy"] == 1.0
    assert perfect["f1"] == (1.0 if found else 0.0)
    nothing = tagger.score(WORDS, [["O"] * len(w) for w in WORDS], verbose=0)
    assert nothing["recall"] == 0.0 and nothing["precision"] == 0.0
    assert nothing["token_accuracy"] == pytest.approx(
        sum(t == "O" for tags in predicted for t in tags) / sum(map(len, WORDS)))


# --- compile, fit, save ---------------------------------------------------------------------


@pytest.mark.parametrize("use_crf", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["softmax", "crf"])
def test_fit_learns_and_a_saved_tagger_predicts_the_same(ner_dir, tmp_path, use_crf):
    keras.utils.set_random_seed(0)
    tagger = albert_tf.from_pretrained(ner_dir, "ner", labels=NER_LABELS, use_crf=use_crf,
                                       tag_scheme="iob2", sequence_length=16, dropout=0.0)
    tagger.compile(learning_rate=3e-3)
    history = tagger.fit(WORDS * 4, TAGS * 4, batch_size=4, epochs=4, verbose=0,
                         validation_data=(WORDS, TAGS)).history
    assert history["loss"][-1] < 0.5 * history["loss"][0]
    assert set(history) == {"loss", "word_accuracy", "val_loss", "val_word_accuracy"}
    assert history["val_loss"][-1] == pytest.approx(
        tagger.evaluate(WORDS, TAGS, verbose=0, return_dict=True)["loss"], rel=1e-5)
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, albert_tf.AlbertTagger)
    assert (loaded.labels, loaded.tag_scheme, loaded.doc_stride, loaded.use_crf) == (
        NER_LABELS, "iob2", 14, use_crf)
    np.testing.assert_array_equal(loaded.predict(WORDS, verbose=0),
                                  tagger.predict(WORDS, verbose=0))
    assert loaded.evaluate(WORDS, TAGS, verbose=0, return_dict=True)["loss"] == pytest.approx(
        tagger.evaluate(WORDS, TAGS, verbose=0, return_dict=True)["loss"], rel=1e-5)
    loaded.fit(WORDS, TAGS, batch_size=2, verbose=0)  # the task's own loss, restored
    again = albert_tf.from_pretrained(path)  # a .keras source keeps the tagger as it is
    assert isinstance(again, albert_tf.AlbertTagger) and again.use_crf == use_crf
    assert again.network is not loaded.network


def test_the_task_loss_is_run_ner_mean_per_labelled_word(tagger):
    """compile()'s loss is the summed cross-entropy over the labelled words over their
    number (not over positions, not per row): checked against numpy on one batch."""
    sentences = [TaggedSentence(w, t, "x")
                 for w, t in zip(WORDS, TAGS)]
    arrays = tagger.windows(sentences)
    inputs = {name: arrays[name].astype(np.int32) for name in
              ("input_ids", "input_mask", "segment_ids")}
    inputs["word_mask"] = (arrays["word_index"] >= 0).astype(np.int32)
    logits = tagger(inputs).numpy().astype(np.float64)
    labels = arrays["label_ids"]
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    rows, positions = np.nonzero(labels >= 0)
    want = -log_probs[rows, positions, labels[rows, positions]].mean()
    tagger.compile()
    got = tagger.evaluate(WORDS, TAGS, verbose=0, return_dict=True)["loss"]
    assert got == pytest.approx(want, rel=1e-5)
    assert len(rows) == sum(map(len, WORDS))


# --- export ---------------------------------------------------------------------------------


@pytest.mark.slow  # 15 s on AMD EPYC Zen 3: a SavedModel, ONNX and its int8 check
def test_the_export_finds_the_entities_the_tagger_predicts(tagger, tmp_path):
    texts = ["Alice lives in Paris.", "EU rejects German call to boycott British lamb."]
    result = tagger.export(str(tmp_path / "export"), format=("saved_model", "onnx"),
                           int8=True, check_data=texts)
    record = json.load(open(tmp_path / "export" / "albert_tf_export.json"))
    assert record["labels"] == NER_LABELS and record["doc_stride"] == tagger.doc_stride
    assert result["onnx"].endswith("model.onnx")
    served = tf.saved_model.load(str(tmp_path / "export"))
    words = served.signatures["serve_words"](words=tf.constant([
        w + [""] * (9 - len(w)) for w in WORDS]))
    tags = [[t.decode() for t in row if t] for row in words["tags"].numpy()]
    assert tags == tagger.predict_tags(WORDS, verbose=0)
    # serving_default: raw text -> entities at character offsets, the tagger's.
    found = served.signatures["serving_default"](text=tf.constant(texts))
    for row, (text, predicted) in enumerate(zip(texts, tagger.predict_tags(texts, verbose=0))):
        offsets = readers.split_words(text)
        want = [(e.type, offsets[e.start][0], offsets[e.end - 1][1])
                for e in schemes.entities(predicted)]
        count = int(found["num_entities"][row])
        got = [(found["entity_type"][row, k].numpy().decode(), int(found["start"][row, k]),
                int(found["end"][row, k])) for k in range(count)]
        assert got == want
    # The export is a source: the same tagger, with its labels, scheme and windows.
    again = albert_tf.from_pretrained(str(tmp_path / "export"))
    assert (again.labels, again.tag_scheme, again.doc_stride, again.word_split) == (
        tagger.labels, tagger.tag_scheme, tagger.doc_stride, tagger.word_split)
    assert again.predict_tags(texts, verbose=0) == tagger.predict_tags(texts, verbose=0)
    np.testing.assert_array_equal(again.network.get_weights()[-1],
                                  tagger.network.get_weights()[-1])


# --- bad input ------------------------------------------------------------------------------


def test_bad_input_gets_one_line(tagger, ner_dir, tmp_path, official_spm):
    with pytest.raises(UserValueError, match="sentence 1: 9 words but 2 tags"):
        tagger.fit(WORDS, [TAGS[0], ["O", "O"]], verbose=0)
    with pytest.raises(UserValueError, match="sentence 0: tag 'B-MISC' is not one of"):
        tagger.fit([["Bonn"]], [["B-MISC"]], verbose=0)
    with pytest.raises(UserValueError, match="sentence 0: tag 'I-PER' at word 0 is not valid "
                                             "iob2 \\(IOB1 tags\\?\\): convert with"):
        tagger.fit([["Peter", "Blackburn"]], [["I-PER", "I-PER"]], verbose=0)
    with pytest.raises(UserValueError, match="label id 9 is outside 0..6"):
        tagger.fit([["Bonn"]], [[9]], verbose=0)
    with pytest.raises(UserValueError, match="2 sentences but 1 tag lists"):
        tagger.fit(WORDS, TAGS[:1], verbose=0)
    with pytest.raises(UserValueError, match="need tags"):
        tagger.fit(WORDS, verbose=0)
    with pytest.raises(UserValueError, match="a dataset of single examples: batch it first"):
        tagger.predict(tf.data.Dataset.from_tensor_slices(["a"]), verbose=0)
    with pytest.raises(UserValueError, match="sentence 0: words are strings, got 3"):
        tagger.predict([["a", 3]], verbose=0)
    with pytest.raises(UserValueError, match="not a number of labels"):
        albert_tf.from_pretrained(ner_dir, "token-classification", num_labels=9)
    with pytest.raises(UserValueError, match="the labels have no 'O'"):
        albert_tf.from_pretrained(ner_dir, labels=[f"LABEL_{i}" for i in range(7)])
    with pytest.raises(UserValueError, match="'X-PER' is not a named-entity tag"):
        albert_tf.from_pretrained(ner_dir, labels=["O", "B-PER", "X-PER"])
    mlm_dir = write_hf_dir(str(tmp_path / "mlm"), "masked_lm", official_spm)
    with pytest.raises(UserValueError, match="needs labels"):
        albert_tf.from_pretrained(mlm_dir, "token-classification", use_crf=True)
