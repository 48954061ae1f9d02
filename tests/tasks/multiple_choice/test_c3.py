"""C3 through run_race.py: reading the C3 JSON, the baseline's features and truncation (Python
and in-graph), masked padding options, per-subset accuracy, predictions, the raw-text
SavedModel served with only TensorFlow, data and flag errors; RACE with a WordPiece vocab."""
import itertools
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import checkpoints, tokenization
from albert_tf.config import AlbertConfig
from albert_tf.training import best_checkpoint
from albert_tf.tasks.multiple_choice import c3, race, export as race_export, job as race_job
from tests.conftest import REPO_ROOT

CONFIG = {"vocab_size": 21128, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64,
          "hidden_act": "relu", "initializer_range": 0.5}
SEQ = 64
# Document slices of the shared dev files: (C3-M, C3-D) per split. The test slice has
# 5 questions with 2 options and 10 with 3 (and 57 with 4).
SLICES = {"train": ((0, 12), (0, 12)), "dev": ((12, 20), (12, 20)),
          "test": ((20, 40), (20, 50))}


@pytest.fixture(scope="module")
def c3_dir(shared_data):
    path = shared_data / "chinese" / "c3"
    if not (path / "c3-m-dev.json").exists():
        pytest.skip(f"{path}/c3-m-dev.json not found (C3 dev files)")
    return path


@pytest.fixture(scope="module")
def dev_documents(c3_dir):
    return {s: json.loads((c3_dir / f"c3-{s}-dev.json").read_text(encoding="utf-8"))
            for s in ("m", "d")}


@pytest.fixture(scope="module")
def wordpiece(chinese_vocab_file):
    return tokenization.load_tokenizer(vocab_file=chinese_vocab_file)


def write_split(directory, documents, split, slices=SLICES):
    directory.mkdir(parents=True, exist_ok=True)
    for subset, (start, stop) in zip(("m", "d"), slices[split]):
        (directory / f"c3-{subset}-{split}.json").write_text(
            json.dumps(documents[subset][start:stop], ensure_ascii=False), encoding="utf-8")


def baseline_truncate(a, b, c, budget):
    """C3's baseline `_truncate_seq_tuple`, literally (lengths only)."""
    while a + b + c > budget:
        if a >= b and a >= c:
            a -= 1
        elif b >= a and b >= c:
            b -= 1
        else:
            c -= 1
    return [a, b, c]


# --- truncation ----------------------------------------------------------------------------------


def test_truncate_lengths_equal_the_baselines_loop_in_python_and_graph():
    grid = np.array(list(itertools.product(range(10), repeat=3)))
    for budget in range(1, 30):
        expected = [baseline_truncate(*row, budget) for row in grid.tolist()]
        assert [c3.truncate_lengths(row, budget) for row in grid.tolist()] == expected
        np.testing.assert_array_equal(race_export.truncate_lengths(grid, budget).numpy(),
                                      expected)
    rng = np.random.default_rng(0)
    big = rng.integers(0, 3000, size=(500, 3))
    expected = [baseline_truncate(*row, 508) for row in big.tolist()]
    assert [c3.truncate_lengths(row, 508) for row in big.tolist()] == expected
    np.testing.assert_array_equal(race_export.truncate_lengths(big, 508).numpy(), expected)


# --- reading -------------------------------------------------------------------------------------


def test_read_shared_dev_files(c3_dir):
    examples = c3.read_examples(str(c3_dir), "dev")
    m = [e for e in examples if e.subset == "m"]
    d = [e for e in examples if e.subset == "d"]
    assert (len(m), len(d)) == (1991, 1825)
    assert examples[:len(m)] == m  # C3-M first, then C3-D
    counts = {n: sum(len(e.options) == n for e in examples) for n in (2, 3, 4)}
    assert counts == {2: 170, 3: 152 + 313, 4: 1669 + 1512}
    first = m[0]
    assert (first.example_id, first.question_index, first.question) == (
        "11-67", 0, "梅兰芳是一个什么样的人?")
    assert first.label == 2 and first.options[2] == "他是一个很虚心的人"
    assert first.submission_id == "11-67-0"
    dialogue = d[0]
    assert dialogue.context == ("男：听说你们公司要派你去南方工作?\n"
                                "女：是呀，虽说那边环境好，待遇也不错，可我还是觉得在家里最好。")
    assert dialogue.options[dialogue.label] == "工作"
    # A text that appears twice among the choices (not the answer here).
    twice = next(e for e in d if e.example_id == "47-277")
    assert twice.options == ("可爱", "认真", "马虎", "认真") and twice.label == 2


def test_data_dir_may_hold_a_c3_folder_and_one_subset(dev_documents, tmp_path):
    write_split(tmp_path / "c3", dev_documents, "dev")
    (tmp_path / "c3" / "c3-d-dev.json").unlink()
    examples = c3.read_examples(str(tmp_path), "dev")
    assert {e.subset for e in examples} == {"m"} and len(examples) == 14
    with pytest.raises(c3.C3DataError, match=r"no c3-m-test.json or c3-d-test.json in .*"
                                             r" or .*c3 or .*data \(--data_dir\)"):
        c3.read_examples(str(tmp_path), "test")


def bad_file(tmp_path, documents):
    (tmp_path / "c3-m-train.json").write_text(json.dumps(documents, ensure_ascii=False),
                                              encoding="utf-8")
    return str(tmp_path)


GOOD = [["第一行。", "第二行。"], [{"question": "问?", "choice": ["甲", "乙"], "answer": "乙"}], "7-1"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d[1][0].update(answer="丙"),
     "document 1 (id 7-1) question 0: the answer '丙' is not one of its choices [\"甲\", \"乙\"]"),
    (lambda d: d[1][0].update(choice=["甲", "乙", "丙", "丁", "戊"]),
     "document 1 (id 7-1) question 0: expected 2 to 4 choices, got 5"),
    (lambda d: d[1][0].update(choice=["乙"]),
     "document 1 (id 7-1) question 0: expected 2 to 4 choices, got 1"),
    (lambda d: d[1][0].update(choice=["甲", " "], answer="甲"),
     "document 1 (id 7-1) question 0: a choice is empty"),
    (lambda d: d[1][0].pop("question"), "document 1 (id 7-1) question 0: missing field "
                                        "'question'"),
    (lambda d: d.pop(), "document 1: expected [context lines, questions, id], got "
                        + json.dumps(GOOD[:2], ensure_ascii=False)),
])
def test_malformed_documents_name_file_document_and_question(tmp_path, change, message):
    bad = json.loads(json.dumps(GOOD))
    change(bad)
    with pytest.raises(c3.C3DataError) as err:
        c3.read_examples(bad_file(tmp_path, [GOOD, bad]), "train")
    assert str(err.value) == f"{tmp_path}/c3-m-train.json: {message}"


def test_an_answer_repeated_among_the_choices_is_its_last_position(tmp_path):
    """C3's baseline loops over the choices and keeps the last one equal to the answer."""
    doc = [["文。"], [{"question": "问?", "choice": ["甲", "乙", "甲"], "answer": "甲"}], "7-2"]
    (example,) = c3.read_examples(bad_file(tmp_path, [doc]), "train")
    assert example.label == 2


def test_invalid_json_names_the_line(tmp_path):
    (tmp_path / "c3-d-train.json").write_text('[\n[["a"], [], "1"],\n oops]')
    with pytest.raises(c3.C3DataError, match=r"c3-d-train.json:3: not valid JSON"):
        c3.read_examples(str(tmp_path), "train")


# --- features ------------------------------------------------------------------------------------


def test_features_hand_computed(wordpiece):
    example = c3.C3Example("9-9", 0, "d", "男：你好\n女：好", "谁?", ("男", "女", "狗"), 1, None,
                           "hand")
    feats = list(c3.featurize([example], wordpiece, 16))[0]
    ids = wordpiece.convert_tokens_to_ids
    context = ids(["男", "：", "你", "好", "女", "：", "好"])
    question, cls, sep = ids(["谁", "?"]), 101, 102
    for choice, option in enumerate(["男", "女", "狗"]):
        row = [cls] + context + [sep] + question + [sep] + ids([option]) + [sep]
        assert feats["input_ids"][choice].tolist() == row + [0] * (16 - len(row))
        assert feats["segment_ids"][choice].tolist() == [0] * 9 + [1] * 5 + [0] * 2
        assert feats["input_mask"][choice].tolist() == [1] * 14 + [0] * 2
    # The padding option is the baseline's empty option, masked out.
    padding = [cls] + context + [sep] + question + [sep, sep]
    assert feats["input_ids"][3].tolist() == padding + [0] * 3
    assert feats["choice_mask"].tolist() == [1, 1, 1, 0]
    assert (feats["label_ids"], feats["level_ids"]) == (1, 1)
    # Truncated to 12 = 8 + [CLS] and 3 [SEP]: context 7 -> 4, question 2 and option 1 kept
    # (the baseline cuts the longest first).
    short = list(c3.featurize([example], wordpiece, 12))[0]
    kept = c3.truncate_lengths([7, 1, 2], 8)
    assert kept == baseline_truncate(7, 1, 2, 8) == [5, 1, 2]
    assert short["input_ids"][0].tolist() == [cls] + context[:5] + [sep] + question + [
        sep] + ids(["男"]) + [sep]


def graph_features(module, examples):
    out = module.features(
        tf.constant([e.context for e in examples]), tf.constant([e.question for e in examples]),
        tf.constant([c3.padded_options(e.options) for e in examples]))
    return {k: v.numpy() for k, v in out.items()}


def test_graph_features_equal_python_features_on_dev(c3_dir, wordpiece, chinese_vocab_file):
    examples = c3.read_examples(str(c3_dir), "dev")
    # every 2- and 3-option question and a share of the others, mixed Chinese/English
    sample = [e for i, e in enumerate(examples) if len(e.options) < 4 or i % 7 == 0]
    sample.append(c3.C3Example("x", 0, "m", "  ＡＬＢＥＲＴ Café，RÉSUMÉ！\n第二行\t 12,000 ", "what？",
                               ("Ａ", "b c", "ü"), None, None, "hand"))
    graph = race_export.C3ServingModule(None, tokenization.in_graph_tokenizer(
        vocab_file=chinese_vocab_file), SEQ)
    for seq in (SEQ, 24):  # 24 truncates nearly every row, option and question included
        graph.max_seq_length = seq
        python = list(c3.featurize(sample, wordpiece, seq))
        got = graph_features(graph, sample)
        for name in ("input_ids", "input_mask", "segment_ids", "choice_mask"):
            np.testing.assert_array_equal(got[name], np.stack([f[name] for f in python]),
                                          err_msg=f"{name} at {seq}")
    assert (got["input_mask"].sum(axis=2) == 24).mean() > 0.95  # nearly every row was cut


def test_race_features_with_a_wordpiece_vocabulary(wordpiece, chinese_vocab_file, shared_data):
    """run_race --task_name=race --vocab_file: texts are not preprocess_text-ed (WordPiece
    normalises itself) and the graph gives the Python features."""
    examples = race.read_examples(str(shared_data / "race"), "dev",
                                  normalize=wordpiece.preprocess)
    assert examples[0].article == json.loads(
        (shared_data / "race/RACE/dev/middle/13.txt").read_text())["article"]
    python = list(race.featurize(examples, wordpiece, 96, 30))
    module = race_export.RaceServingModule(None, tokenization.in_graph_tokenizer(
        vocab_file=chinese_vocab_file), 96, 30)
    out = module.features(tf.constant([e.article for e in examples]),
                          tf.constant([e.question for e in examples]),
                          tf.constant([list(e.options) for e in examples]))
    for name in ("input_ids", "input_mask", "segment_ids"):
        np.testing.assert_array_equal(out[name].numpy(), np.stack([f[name] for f in python]))
    assert python[0]["input_ids"][0][0] == 101
    settings = race.cache_identity(examples, wordpiece, 96, 30, None)
    assert settings["vocabulary"].startswith("wordpiece:") and "spm_model_sha256" not in settings


# --- masking, task metrics, options --------------------------------------------------------------


def test_masked_outputs_never_choose_padding():
    logits = tf.constant([[0.0, 1.0, 5.0, 9.0], [3.0, 2.0, 8.0, 1.0]])
    out = race_export.masked_outputs({"logits": logits}, tf.constant([[1, 1, 0, 0],
                                                                       [1, 1, 1, 0]]))
    assert out["predictions"].numpy().tolist() == [1, 2]
    probs = out["probabilities"].numpy()
    assert probs[0, 2:].tolist() == [0.0, 0.0] and probs[1, 3] == 0.0
    np.testing.assert_allclose(probs[0, :2], np.exp([0, 1]) / np.exp([0, 1]).sum(), rtol=1e-6)


@pytest.mark.parametrize("changes, message", [
    ({"high_only": True}, "--high_only and --middle_only are RACE's levels"),
    ({"max_seq_length": 4}, "--max_seq_length must be at least 5 for C3"),
    ({"task_name": "dream"}, "--task_name must be one of race, c3, got 'dream'"),
    ({"vocab_file": None}, "give --spm_model_file (SentencePiece) or --vocab_file (WordPiece)"),
])
def test_option_errors(changes, message, chinese_vocab_file):
    values = dict(data_dir="unused", albert_config=AlbertConfig.from_dict(CONFIG),
                  spm_model_file=None, vocab_file=chinese_vocab_file, output_dir="unused",
                  max_seq_length=SEQ, task_name="c3")
    values.update(changes)
    with pytest.raises(ValueError) as err:
        race_job.MultipleChoiceOptions(**values).validate()
    assert message in str(err.value)


def test_vocabulary_size_must_match_the_config(tmp_path, chinese_vocab_file, dev_documents):
    write_split(tmp_path / "data", dev_documents, "dev")
    options = race_job.MultipleChoiceOptions(
        data_dir=str(tmp_path / "data"), albert_config=AlbertConfig.from_dict(
            dict(CONFIG, vocab_size=30000)), spm_model_file=None, vocab_file=chinese_vocab_file,
        output_dir=str(tmp_path / "out"), max_seq_length=SEQ, task_name="c3", do_train=False)
    with pytest.raises(checkpoints.CheckpointMismatchError,
                       match=r"vocab_chinese.txt has 21128 tokens; the config "
                             r"--albert_config_file has 30000 vocab_size"):
        race_job.run_race(options)
    assert not (tmp_path / "out").exists()


# --- end to end ----------------------------------------------------------------------------------


def read_blocks(path):
    blocks, current = [], {}
    for line in path.read_text().splitlines():
        key, value = line.split(" = ")
        current[key] = best_checkpoint.parse_value(value)
        if key == "global_step":
            blocks.append(current)
            current = {}
    return blocks


LOADER = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)
    served = tf.saved_model.load(sys.argv[1])
    items = json.load(open(sys.argv[2], encoding="utf-8"))
    out = served.signatures["serving_default"](
        context=tf.constant([i["context"] for i in items]),
        question=tf.constant([i["question"] for i in items]),
        options=tf.constant([i["options"] for i in items]))
    print("RESULT" + json.dumps({
        "probabilities": out["probabilities"].numpy().tolist(),
        "prediction_ids": out["prediction_ids"].numpy().tolist(),
        "predictions": [p.decode() for p in out["predictions"].numpy()],
        "albert_tf": any(m.startswith("albert_tf") for m in sys.modules)}))
""")


@pytest.mark.slow  # ~18s: keeps the default suite under 10 minutes on slower CPUs (11 min on a Zen 4)
def test_run_race_c3_train_eval_predict_export(dev_documents, tmp_path, chinese_vocab_file,
                                               wordpiece):
    data = tmp_path / "data"
    for split in ("train", "dev", "test"):
        write_split(data, dev_documents, split)
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    out = tmp_path / "out"
    args = {"task_name": "c3", "data_dir": data, "albert_config_file": config,
            "vocab_file": chinese_vocab_file, "output_dir": out, "export_dir": out / "export",
            "max_seq_length": SEQ, "train_batch_size": 4, "eval_batch_size": 5,
            "predict_batch_size": 3, "learning_rate": 1e-3, "train_step": 4, "warmup_step": 1,
            "save_checkpoints_steps": 2, "seed": 3}
    done = subprocess.run([sys.executable, str(REPO_ROOT / "run_race.py"), "--do_predict"]
                          + [f"--{k}={v}" for k, v in args.items()],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    for split, (m, d) in (("train", (17, 16)), ("dev", (14, 13)), ("test", (42, 30))):
        assert f"C3 {split}: read {data}/c3-m-{split}.json: {m} questions" in done.stderr
        assert f"C3 {split}: read {data}/c3-d-{split}.json: {d} questions" in done.stderr
    assert "(padding, masked)" in done.stderr  # the logged first example has 2 options

    # Dev accuracy at steps 2 and 4 for C3-M, C3-D and both.
    blocks = read_blocks(out / "eval_results.txt")
    assert [b["global_step"] for b in blocks] == [2, 4]
    for block in blocks:
        assert (block["eval_examples"], block["eval_examples_m"],
                block["eval_examples_d"]) == (27, 14, 13)
        both = (14 * block["eval_accuracy_m"] + 13 * block["eval_accuracy_d"]) / 27
        assert block["eval_accuracy"] == pytest.approx(both)
        assert isinstance(block["collapsed"], bool)
    best = json.loads((out / "best_eval.json").read_text())
    assert best["eval_accuracy"] == max(b["eval_accuracy"] for b in blocks)

    # Predictions of the test split from model.ckpt-best.
    examples = c3.read_examples(str(data), "test")
    records = [json.loads(l) for l in (out / "predictions.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert [(r["id"], r["question_index"], r["subset"]) for r in records] == [
        (e.example_id, e.question_index, e.subset) for e in examples]
    for record, example in zip(records, examples):
        assert len(record["probabilities"]) == len(example.options)
        assert record["prediction"] < len(example.options)
        assert record["prediction_text"] == example.options[record["prediction"]]
        assert record["answer"] == example.label
        assert sum(record["probabilities"]) == pytest.approx(1.0, abs=1e-5)
    short = [i for i, e in enumerate(examples) if len(e.options) < 4]
    assert len(short) == 15
    submission = [json.loads(l) for l in (out / "c3_predict.json").read_text().splitlines()]
    assert submission == [{"id": f"{e.example_id}-{e.question_index}", "label": r["prediction"]}
                          for e, r in zip(examples, records)]
    results = dict(l.split(" = ") for l in (out / "predict_results.txt").read_text().splitlines())
    for key, subset in (("accuracy", None), ("accuracy_m", "m"), ("accuracy_d", "d")):
        chosen = [r for r in records if subset in (None, r["subset"])]
        assert float(results[key]) == pytest.approx(
            sum(r["prediction"] == r["answer"] for r in chosen) / len(chosen))

    # The Python path again: the best weights on the features give these probabilities, and
    # without the mask some 2- or 3-option question would have picked a padding option.
    model = race_job.build_model(AlbertConfig.from_dict(CONFIG), 0.1)
    checkpoints.load_tf1_checkpoint(model, str(out / "model.ckpt-best"))
    feats = list(c3.featurize(examples, wordpiece, SEQ))
    batch = {k: np.stack([f[k] for f in feats]) for k in feats[0]}
    raw = model({k: v for k, v in batch.items() if k != "choice_mask"})["logits"].numpy()
    masked = race_export.masked_outputs({"logits": raw}, batch["choice_mask"])
    padded_probs = [r["probabilities"] + [0.0] * (4 - len(r["probabilities"])) for r in records]
    np.testing.assert_allclose(masked["probabilities"].numpy(), padded_probs, atol=1e-5)
    unmasked_choice = raw.argmax(1)
    assert any(unmasked_choice[i] >= len(examples[i].options) for i in short), \
        "the check is vacuous: no short question would pick a padding option unmasked"

    # The SavedModel, loaded with TensorFlow only, serves the raw texts ("" = no option;
    # every other example pads with a blank " ", which is absent too).
    items = [{"context": e.context, "question": e.question,
              "options": [o or " " * (i % 2) for o in c3.padded_options(e.options)]}
             for i, e in enumerate(examples)]
    assert any(" " in item["options"] for item in items)
    (tmp_path / "items.json").write_text(json.dumps(items, ensure_ascii=False),
                                         encoding="utf-8")
    served = subprocess.run([sys.executable, "-c", LOADER, str(out / "export"),
                             str(tmp_path / "items.json")], capture_output=True, text=True,
                            cwd="/", env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin"})
    assert served.returncode == 0, served.stderr[-3000:]
    result = json.loads([l for l in served.stdout.splitlines()
                         if l.startswith("RESULT")][-1][len("RESULT"):])
    assert result["albert_tf"] is False
    np.testing.assert_allclose(result["probabilities"], padded_probs, atol=1e-5)
    assert result["prediction_ids"] == [r["prediction"] for r in records]
    assert result["predictions"] == [r["prediction_text"] for r in records]
    assert all(result["probabilities"][i][len(examples[i].options):] == [0.0] * (
        4 - len(examples[i].options)) for i in short)


@pytest.mark.slow  # 10 s
def test_cli_errors(tmp_path, chinese_vocab_file, dev_documents):
    bad = json.loads(json.dumps(dev_documents["m"][:3]))
    bad[2][1][0]["answer"] = "不在选项里"
    (tmp_path / "c3-m-train.json").write_text(json.dumps(bad, ensure_ascii=False),
                                              encoding="utf-8")
    config = tmp_path / "c.json"
    config.write_text(json.dumps(CONFIG))
    base = [sys.executable, str(REPO_ROOT / "run_race.py"), "--task_name=c3",
            f"--data_dir={tmp_path}", f"--output_dir={tmp_path / 'out'}",
            f"--albert_config_file={config}", f"--vocab_file={chinese_vocab_file}",
            "--max_seq_length=32", "--nodo_eval"]
    done = subprocess.run(base, capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode != 0
    doc_id = bad[2][2]
    assert (f"c3-m-train.json: document 2 (id {doc_id}) question 0: the answer '不在选项里' "
            "is not one of its choices") in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    qa = subprocess.run(base + ["--max_qa_length=20"], capture_output=True, text=True,
                        cwd=REPO_ROOT)
    assert qa.returncode != 0 and "--max_qa_length is RACE's" in qa.stderr
