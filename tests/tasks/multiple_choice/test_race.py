"""RACE reading, features, TFRecord caches, the task's metrics and predictions files."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig
from albert_tf.finetuning import feature_cache
from albert_tf.tasks.multiple_choice import race, job as race_job
from albert_tf.tokenization import SentencePieceTokenizer

SPM = "spm/albert_style_pd8k.model"
CLS, SEP = 2, 3


@pytest.fixture(scope="module")
def tokenizer(shared_data):
    return SentencePieceTokenizer(str(shared_data / SPM))


def passage(pid, questions, options, answers, article="The cat sat on the mat."):
    return {"id": pid, "article": article, "questions": questions, "options": options,
            "answers": answers}


HAND = {
    ("train", "middle"): [passage("middle1.txt", ["Where did the cat sit? _", "Who sat?"],
                                  [["mat", "sofa", "bed", "roof"], ["cat", "dog", "ant", "cow"]],
                                  ["A", "A"])],
    ("train", "high"): [passage("high7.txt", ["The  _  sat on the _."],
                                [["Cat", "dog", "ant", "cow"]], ["A"],
                                article="A Café   story.\nThe cat sat."),
                        passage("high10.txt", ["Q?"], [["a", "b", "c", "d"]], ["D"])],
}


def write_layout(root, passages=HAND, all_txt=False):
    """The download's layout (one JSON per N.txt) or the original's all.txt."""
    for (split, level), items in passages.items():
        directory = root / "RACE" / split / level
        directory.mkdir(parents=True, exist_ok=True)
        if all_txt:
            (directory / "all.txt").write_text("".join(json.dumps(p) + "\n" for p in items))
        else:
            for item in items:
                name = item["id"].replace(level, "")
                (directory / name).write_text(json.dumps(item))
    return root


# --- reading -------------------------------------------------------------------------------------


def test_question_option_text_rules():
    assert race.question_option_text("the _ sat on the _ .", "cat") == "the cat sat on the cat ."
    assert race.question_option_text("who sat?", "the cat") == "who sat? the cat"
    assert race.question_option_text("_", "x") == "x"
    assert race.question_option_text("", "x") == " x"


def test_read_both_layouts_same_examples(tmp_path):
    files = race.read_examples(str(write_layout(tmp_path / "a")), "train")
    lines = race.read_examples(str(write_layout(tmp_path / "b", all_txt=True)), "train")
    strip = [(e.example_id, e.question_index, e.level, e.article, e.question, e.options, e.label)
             for e in files]
    assert strip == [(e.example_id, e.question_index, e.level, e.article, e.question, e.options,
                      e.label) for e in lines]
    # Levels middle then high; files in numeric order (7 before 10), questions in order.
    assert [(e.example_id, e.question_index) for e in files] == [
        ("middle1.txt", 0), ("middle1.txt", 1), ("high7.txt", 0), ("high10.txt", 0)]
    first, high = files[0], files[2]
    assert first.qa_texts() == ["where did the cat sit? mat", "where did the cat sit? sofa",
                                "where did the cat sit? bed", "where did the cat sit? roof"]
    assert files[1].qa_texts()[2] == "who sat? ant"
    # Normalisation before the "_" replacement: whitespace collapsed, accents stripped,
    # lower-cased (the original's preprocess_text with do_lower_case).
    assert high.article == "a cafe story. the cat sat."
    assert high.qa_texts()[0] == "the cat sat on the cat."
    assert [e.label for e in files] == [0, 0, 0, 3]
    assert files[0].source.endswith(os.path.join("middle", "1.txt") + ":1")
    assert lines[3].source.endswith(os.path.join("high", "all.txt") + ":2")
    cased = race.read_examples(str(tmp_path / "a"), "train", do_lower_case=False)
    assert cased[2].options[0] == "Cat" and cased[2].article == "A Cafe story. The cat sat."


def test_all_txt_takes_precedence_and_level_flags(tmp_path):
    root = write_layout(tmp_path)
    (root / "RACE/train/high/all.txt").write_text(json.dumps(HAND[("train", "high")][1]) + "\n")
    examples = race.read_examples(str(root), "train")
    assert [e.example_id for e in examples] == ["middle1.txt", "middle1.txt", "high10.txt"]
    assert [e.level for e in race.read_examples(str(root), "train", high_only=True)] == ["high"]
    assert {e.level for e in race.read_examples(str(root), "train", middle_only=True)} == {
        "middle"}
    with pytest.raises(ValueError, match="--high_only and --middle_only"):
        race.read_examples(str(root), "train", high_only=True, middle_only=True)


def test_unlabelled_passages_have_no_label(tmp_path):
    item = passage("high1.txt", ["q"], [["a", "b", "c", "d"]], None)
    del item["answers"]
    root = write_layout(tmp_path, {("test", "high"): [item]})
    [example] = race.read_examples(str(root), "test", high_only=True)
    assert example.label is None


@pytest.mark.parametrize("change, message", [
    (lambda p: p["options"][1].pop(), r"2\.txt:1 \(id middle2\.txt\) question 1: expected 4 "
                                      r"options, got 3"),
    (lambda p: p["answers"].__setitem__(0, "E"), r"question 0: answer 'E' is not one of A, B"),
    (lambda p: p["answers"].pop(), r"2\.txt:1 \(id middle2\.txt\): mismatched list lengths: 2 "
                                   r"questions, 2 option lists, 1 answers"),
    (lambda p: p["questions"].append("extra"), r"mismatched list lengths: 3 questions"),
    (lambda p: p.pop("article"), r"2\.txt:1: missing field 'article'"),
    (lambda p: p.__setitem__("questions", "q"), r"field 'questions' must be a list"),
])
def test_malformed_files_name_file_and_question(tmp_path, change, message):
    item = passage("middle2.txt", ["q1", "q2"], [["a", "b", "c", "d"], ["e", "f", "g", "h"]],
                   ["A", "B"])
    change(item)
    root = write_layout(tmp_path, {("dev", "middle"): [item]})
    with pytest.raises(race.RaceDataError, match=message):
        race.read_examples(str(root), "dev", middle_only=True)


def test_bad_json_line_and_missing_directories(tmp_path):
    directory = tmp_path / "RACE/dev/high"
    directory.mkdir(parents=True)
    good = json.dumps(passage("high1.txt", ["q"], [["a", "b", "c", "d"]], ["A"]))
    (directory / "all.txt").write_text(good + "\n\n" + good + "\n{not json\n")
    with pytest.raises(race.RaceDataError, match=r"all\.txt:4: not valid JSON"):
        race.read_examples(str(tmp_path), "dev", high_only=True)
    with pytest.raises(race.RaceDataError, match=r"dev/middle does not exist.*--data_dir.*"
                                                 r"--high_only or --middle_only"):
        race.read_examples(str(tmp_path), "dev")
    with pytest.raises(race.RaceDataError, match="train/high does not exist"):
        race.read_examples(str(tmp_path), "train", high_only=True)


def test_shared_race_samples(shared_data):
    dev = race.read_examples(str(shared_data / "race"), "dev")
    train = race.read_examples(str(shared_data / "race"), "train")
    assert len(dev) == 17 and len(train) == 22
    assert [e.level for e in dev].count("middle") == 11
    assert [e.example_id for e in dev][:5] == ["middle13.txt"] * 5
    assert [(e.example_id, e.question_index) for e in dev][-6:] == [
        ("high73.txt", 0)] + [("high80.txt", i) for i in range(5)]
    raw = json.loads((shared_data / "race/RACE/dev/high/80.txt").read_text())
    assert [e.label for e in dev[-5:]] == ["ABCD".index(a) for a in raw["answers"]]
    assert dev[-5].options[0] == race.preprocess_text(raw["options"][0][0], lower=True)
    # 21 of the 39 shared questions have a blank: every blank is filled, the others get
    # " option" appended.
    blanks = [e for e in dev + train if "_" in e.question]
    assert len(blanks) == 21
    for example in dev + train:
        for qa, option in zip(example.qa_texts(), example.options):
            assert qa == (example.question.replace("_", option) if example in blanks
                          else example.question + " " + option)
            assert "_" not in qa


# --- features ------------------------------------------------------------------------------------


def test_choice_ids_hand_computed():
    ids, mask, seg = race.choice_ids([10, 11, 12, 13, 14, 15], [20, 21, 22, 23], 10, 3, CLS, SEP)
    # qa keeps its last 3 ids; the context keeps 10 - 3 - 3 = 4.
    assert ids.tolist() == [2, 10, 11, 12, 13, 3, 21, 22, 23, 3]
    assert mask.tolist() == [1] * 10
    assert seg.tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 1, 1]
    ids, mask, seg = race.choice_ids([10, 11], [20], 8, 3, CLS, SEP)
    assert ids.tolist() == [2, 10, 11, 3, 20, 3, 0, 0]
    assert mask.tolist() == [1, 1, 1, 1, 1, 1, 0, 0]
    assert seg.tolist() == [0, 0, 0, 0, 1, 1, 0, 0]
    ids, _, seg = race.choice_ids([], [], 5, 2, CLS, SEP)
    assert ids.tolist() == [2, 3, 3, 0, 0] and seg.tolist() == [0, 0, 1, 0, 0]


def test_length_flags_validated():
    with pytest.raises(ValueError, match="--max_qa_length 62 leaves no room in --max_seq_length "
                                         "64: it must be at most max_seq_length - 3 = 61"):
        race.validate_lengths(64, 62)
    race.validate_lengths(64, 61)


def test_featurize_hand_passages(tmp_path, tokenizer):
    article = " ".join(f"word{i}" for i in range(40))
    question = "Which of these words comes after the number " + "one two three " * 6 + "_ ?"
    item = passage("high3.txt", [question, "Short?"],
                   [["alpha", "beta", "gamma", "delta"], ["a", "b", "c", "d"]], ["B", "C"],
                   article=article)
    examples = race.read_examples(str(write_layout(tmp_path, {("dev", "high"): [item]})), "dev",
                                  high_only=True)
    seq, qa_max = 48, 12
    features = list(race.featurize(examples, tokenizer, seq, qa_max))
    context = tokenizer.encode_ids([race.preprocess_text(article, lower=True)])[0]
    assert len(context) > seq
    for example, feats in zip(examples, features):
        assert feats["input_ids"].shape == (4, seq)
        assert int(feats["label_ids"]) == example.label and int(feats["level_ids"]) == 1
        for choice, qa_text in enumerate(example.qa_texts()):
            qa = tokenizer.encode_ids([qa_text])[0]
            kept = qa[-qa_max:]
            expected = [CLS] + context[:seq - 3 - len(kept)] + [SEP] + kept + [SEP]
            row = feats["input_ids"][choice]
            assert row[:len(expected)].tolist() == expected
            assert feats["input_mask"][choice].sum() == len(expected)
            assert feats["segment_ids"][choice].tolist() == (
                [0] * (seq - 1 - len(kept)) + [1] * (len(kept) + 1) + [0] * (seq - len(expected)))
    long_qa = examples[0].qa_texts()[1]
    assert long_qa.endswith("beta ?")  # the blank is filled, and the suffix survives truncation
    assert tokenizer.convert_ids_to_tokens(features[0]["input_ids"][1][seq - 4:seq - 1]) == \
        tokenizer.tokenize(" beta ?")[-3:]
    # the first question's qa is longer than max_qa_length: exactly 12 qa ids are kept.
    assert (features[0]["segment_ids"][0] == 1).sum() == qa_max + 1
    assert (features[1]["segment_ids"][0] == 1).sum() < qa_max + 1


def test_shared_data_features_are_well_formed(shared_data, tokenizer):
    examples = race.read_examples(str(shared_data / "race"), "dev")
    for feats in race.featurize(examples, tokenizer, 96, 30):
        ids, mask, seg = feats["input_ids"], feats["input_mask"], feats["segment_ids"]
        length = mask.sum(axis=1)
        assert (length == 96).all()  # the articles are longer than 96 pieces
        assert (ids[:, 0] == CLS).all() and (ids == SEP).sum(axis=1).tolist() == [2] * 4
        first_sep = np.argmax(ids == SEP, axis=1)
        assert (seg[np.arange(4), first_sep] == 0).all() and (seg[:, -1] == 1).all()
        # the same article prefix precedes every option's qa when qa lengths are equal
        assert (ids[:, :10] == ids[0, :10]).all()


# --- TFRecord cache and datasets -----------------------------------------------------------------


def test_cache_round_trip_reuse_rebuild_and_padding(tmp_path, tokenizer, shared_data):
    examples = race.read_examples(str(shared_data / "race"), "dev")
    path = str(tmp_path / "dev.tf_record")
    meta = race.prepare_cache(path, examples, tokenizer, 32, 8)
    assert meta["num_examples"] == 17 and json.loads(open(path + ".json").read()) == meta
    expected = list(race.featurize(examples, tokenizer, 32, 8))
    batches = list(race.dataset(path, 32, 5, is_training=False, num_examples=17))
    assert [len(b["label_ids"]) for b in batches] == [5, 5, 5, 5]
    got = {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}
    assert got["input_ids"].shape == (20, 4, 32) and got["input_ids"].dtype == np.int32
    for name in expected[0]:
        np.testing.assert_array_equal(got[name][:17], np.stack([e[name] for e in expected]))
    assert got["is_real_example"].tolist() == [1] * 17 + [0] * 3
    assert got["example_index"][17:].tolist() == [-1] * 3
    # Reused when nothing changed (same bytes, no rewrite), rebuilt when a setting changes.
    stamp = os.stat(path).st_mtime_ns
    race.prepare_cache(path, examples, tokenizer, 32, 8)
    assert os.stat(path).st_mtime_ns == stamp
    rebuilt = race.prepare_cache(path, examples, tokenizer, 32, 6)
    assert rebuilt["max_qa_length"] == 6
    os.remove(path + ".json")
    with pytest.raises(feature_cache.FeatureCacheError, match="exists without dev.tf_record.json"):
        race.prepare_cache(path, examples, tokenizer, 32, 8)


def test_training_cache_is_shuffled_deterministically(tmp_path, tokenizer, shared_data):
    examples = race.read_examples(str(shared_data / "race"), "train")
    orders = []
    for name in ("a", "b"):
        path = str(tmp_path / f"{name}.tf_record")
        race.prepare_cache(path, examples, tokenizer, 32, 8, shuffle_seed=race.TRAIN_SHUFFLE_SEED)
        ds = race.dataset(path, 32, 22, is_training=False, num_examples=22)
        orders.append(next(iter(ds))["example_index"].numpy().tolist())
    assert orders[0] == orders[1] == race.record_order(22, race.TRAIN_SHUFFLE_SEED)
    assert sorted(orders[0]) == list(range(22)) and orders[0] != list(range(22))
    train = race.dataset(str(tmp_path / "a.tf_record"), 32, 8, is_training=True, seed=3)
    shapes = [b["input_ids"].shape for b in train.take(4)]
    assert shapes == [(8, 4, 32)] * 4  # repeats, fixed batch


# --- task metrics and predictions ---------------------------------------------------------------

CONFIG = AlbertConfig(vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=16,
                      initializer_range=0.5)


def test_race_task_sums_match_numpy():
    model = race_job.build_model(CONFIG, 0.1)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50, (6, 4, 16)).astype("int32")
    features = {"input_ids": ids, "input_mask": np.ones_like(ids),
                "segment_ids": np.zeros_like(ids),
                "label_ids": np.array([0, 1, 2, 3, 1, 0], "int32"),
                "is_real_example": np.array([1, 1, 1, 1, 1, 0], "int32"),
                "level_ids": np.array([0, 1, 0, 1, 1, -1], "int32")}
    task = race_job.MultipleChoiceObjective()
    normalizers = task.normalizers(features)
    loss, sums = task.loss(model, features, normalizers, training=False)
    logits = model(features)["logits"].numpy().astype("float64")
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    nll = -log_probs[np.arange(6), features["label_ids"]]
    real = features["is_real_example"] == 1
    correct = (logits.argmax(-1) == features["label_ids"]) & real
    assert float(normalizers["examples"]) == 5
    np.testing.assert_allclose(float(loss), nll[real].mean(), rtol=1e-5)
    sums = {k: float(v) for k, v in sums.items()}
    np.testing.assert_allclose(sums["loss_total"], nll[real].sum(), rtol=1e-5)
    middle, high = features["level_ids"] == 0, features["level_ids"] == 1
    assert sums["correct"] == correct.sum()
    assert sums["examples_middle"] == 2 and sums["examples_high"] == 3
    assert sums["correct_middle"] == (correct & middle).sum()
    assert sums["correct_high"] == (correct & high).sum()
    assert not np.allclose(model(features)["probabilities"].numpy(), 0.25, atol=0.01)
    metrics = task.finalize(dict(sums, correct=3.0, correct_middle=2.0, correct_high=1.0))
    assert metrics["eval_accuracy"] == 3 / 5 and metrics["eval_accuracy_middle"] == 1.0
    assert metrics["eval_accuracy_high"] == 1 / 3 and metrics["eval_examples"] == 5
    only_high = task.finalize(dict(sums, examples_middle=0.0, correct_middle=0.0))
    assert "eval_accuracy_middle" not in only_high


def _example(eid, qi, level, label):
    return race.RaceExample(eid, qi, level, "a", "q", ("w", "x", "y", "z"), label, "f:1")


def test_accuracy_by_level_and_prediction_files(tmp_path):
    examples = [_example("m1", 0, "middle", 0), _example("m1", 1, "middle", 2),
                _example("h1", 0, "high", 3)]
    probs = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1], [0.1, 0.1, 0.1, 0.7]],
                     np.float32)
    accuracies = race_job.write_predictions(str(tmp_path), examples, probs)
    assert accuracies == {"accuracy": 2 / 3, "examples": 3, "accuracy_middle": 0.5,
                          "examples_middle": 2, "accuracy_high": 1.0, "examples_high": 1}
    lines = (tmp_path / "predictions.jsonl").read_text().splitlines()
    assert json.loads(lines[1]) == {"id": "m1", "question_index": 1, "level": "middle",
                                    "prediction": "B",
                                    "probabilities": [float(p) for p in probs[1]],
                                    "answer": "C"}
    results = (tmp_path / "predict_results.txt").read_text().splitlines()
    assert "accuracy_middle = 0.5" in results and "examples = 3" in results
    unlabelled = [dataclass_replace(e, label=None) for e in examples]
    os.remove(tmp_path / "predict_results.txt")
    assert race_job.write_predictions(str(tmp_path), unlabelled, probs) == {}
    assert json.loads((tmp_path / "predictions.jsonl").read_text().splitlines()[2])[
        "answer"] is None
    assert not (tmp_path / "predict_results.txt").exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".")] == []  # no temp files left


def dataclass_replace(example, **changes):
    import dataclasses

    return dataclasses.replace(example, **changes)


def test_predict_probabilities_in_example_order(tmp_path, tokenizer, shared_data):
    examples = race.read_examples(str(shared_data / "race"), "train")
    path = str(tmp_path / "train.tf_record")
    race.prepare_cache(path, examples, tokenizer, 16, 6, shuffle_seed=race.TRAIN_SHUFFLE_SEED)
    config = AlbertConfig.from_dict(dict(CONFIG.to_dict(), vocab_size=8000))
    model = race_job.build_model(config, 0.1)
    got = race_job.predict_probabilities(tf.distribute.get_strategy(), model, path, 16, 5, 22)
    features = list(race.featurize(examples, tokenizer, 16, 6))
    batch = {k: np.stack([f[k] for f in features]) for k in ("input_ids", "input_mask",
                                                            "segment_ids")}
    # Batches of 5 against one batch of all: oneDNN blocks the products differently,
    # so float32 rounding differs slightly (seen up to ~1e-6).
    np.testing.assert_allclose(got, model(batch)["probabilities"].numpy(), atol=1e-5)
