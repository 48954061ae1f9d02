"""Collapse warnings (albert_tf.finetuning.collapse): the detectors on constructed
predictions, the `collapsed` key in eval_results.txt / best_eval.json, and each task
family's evaluation of a model forced to collapse (one label, one choice, no answer, no
entity) against one that is not."""
import json
import logging

import numpy as np
import pytest

from albert_tf.finetuning import collapse

# The tiny models and data helpers of the families' own tests.
from tests.cli.test_run_ner_cli import (CONFIG as NER_CONFIG, CONLL_LABELS, DOCSTART,
                                        MAX_SEQ_LENGTH, blocks_of, write_blocks)
from tests.cli.test_run_race_cli import CONFIG as RACE_CONFIG
from tests.cli.test_run_squad_cli import CONFIG as SQUAD_CONFIG, subset

CLASSIFIER_CONFIG = dict(vocab_size=8000, embedding_size=16, hidden_size=32,
                         num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                         max_position_embeddings=32)


# --- the detectors -------------------------------------------------------------------------


def test_one_label_everywhere_on_a_balanced_gold_is_flagged():
    gold = [0] * 146 + [1] * 131  # RTE dev: 52.7% entailment
    symptom = collapse.label_collapse([1] * 277, gold,
                                      labels=("entailment", "not_entailment"))
    assert symptom == ("predicts 'not_entailment' for 100.0% of 277 dev examples "
                       "(gold majority 52.7%)")
    assert collapse.label_collapse([1] * 277, gold) == (
        "predicts label 1 for 100.0% of 277 dev examples (gold majority 52.7%)")


def test_balanced_predictions_are_not_flagged():
    gold = np.arange(300) % 3
    assert collapse.label_collapse(gold, gold) is None
    assert collapse.label_collapse((gold + 1) % 3, gold) is None  # all wrong, not collapsed


def test_the_95_percent_boundary():
    gold = [0] * 10 + [1] * 10
    assert collapse.label_collapse([1] * 19 + [0], gold) is not None  # 95.0%: flagged
    assert collapse.label_collapse([1] * 18 + [0] * 2, gold) is None  # 90%
    gold = [0] * 100 + [1] * 100
    assert collapse.label_collapse([1] * 189 + [0] * 11, gold) is None  # 94.5%
    assert collapse.label_collapse([0] * 190 + [1] * 10, gold) is not None


def test_a_gold_majority_of_80_percent_or_more_is_not_flagged():
    predicted = [0] * 20
    assert collapse.label_collapse(predicted, [0] * 16 + [1] * 4) is None  # 80.0%
    assert collapse.label_collapse(predicted, [0] * 19 + [1]) is None  # 95%
    assert collapse.label_collapse(predicted, [0] * 15 + [1] * 5) is not None  # 75%
    # The gold majority is that of any label, not only of the one predicted.
    assert collapse.label_collapse(predicted, [1] * 17 + [0] * 3) is None
    # The thresholds are parameters.
    assert collapse.label_collapse(predicted, [0] * 16 + [1] * 4,
                                   gold_majority_limit=0.9) is not None
    assert collapse.label_collapse([0] * 9 + [1], [0] * 5 + [1] * 5, share=0.9) is not None


def test_counts_give_the_same_symptom_as_labels():
    predicted, gold = [2] * 30 + [0], [0] * 10 + [1] * 10 + [2] * 11
    assert collapse.label_collapse_from_counts(
        np.bincount(predicted, minlength=4), np.bincount(gold, minlength=4), "ABCD",
        what="dev questions") == collapse.label_collapse(predicted, gold, labels="ABCD",
                                                         what="dev questions")
    assert collapse.label_collapse_from_counts([0, 0], [0, 0]) is None  # nothing evaluated
    assert collapse.label_collapse([], []) is None
    with pytest.raises(ValueError, match="3 predictions but 2 gold labels"):
        collapse.label_collapse([0, 0, 0], [0, 1])


def test_squad_v2_no_answer_and_answer_everywhere():
    gold = np.array([True] * 10 + [False] * 10)  # half unanswerable
    assert collapse.answerability_collapse([True] * 20, gold) == (
        "predicts no answer for 100.0% of 20 dev questions (gold: 50.0% unanswerable)")
    assert collapse.answerability_collapse([False] * 20, gold) == (
        "predicts an answer for 100.0% of 20 dev questions (gold: 50.0% answerable)")
    assert collapse.answerability_collapse([True] * 19 + [False], gold) is not None  # 95%
    assert collapse.answerability_collapse([True] * 18 + [False] * 2, gold) is None
    assert collapse.answerability_collapse(gold, gold) is None
    # A gold set that is itself 80% unanswerable (or answerable) is not flagged.
    mostly_none = np.array([True] * 16 + [False] * 4)
    assert collapse.answerability_collapse([True] * 20, mostly_none) is None
    assert collapse.answerability_collapse([False] * 20, ~mostly_none) is None
    assert collapse.answerability_collapse([False] * 20, mostly_none) is not None
    # Without gold, the 95% alone.
    assert collapse.answerability_collapse([True] * 20) == (
        "predicts no answer for 100.0% of 20 dev questions")
    assert collapse.answerability_collapse([True] * 10 + [False] * 10) is None


def test_ner_no_entity_while_the_gold_has_some():
    assert collapse.entity_collapse(0, 87, num_sentences=40) == (
        "predicts no entity in 40 dev sentences (the gold has 87 entities)")
    assert collapse.entity_collapse(1, 87) is None
    assert collapse.entity_collapse(0, 0) is None  # nothing to find


def test_mark_adds_a_bool_and_warns_in_one_line(caplog):
    with caplog.at_level(logging.WARNING, logger="absl"):
        metrics = collapse.mark({"f1": 0.0}, collapse.entity_collapse(0, 5, num_sentences=3),
                                "NER conll2003", step=20)
        assert collapse.mark({"f1": 0.5}, None, "NER conll2003")["collapsed"] is False
    assert metrics == {"f1": 0.0, "collapsed": True}
    [record] = caplog.records
    line = record.getMessage()
    assert "\n" not in line and line.startswith(
        "NER conll2003: the evaluation at step 20 looks collapsed: the model predicts no "
        "entity in 3 dev sentences (the gold has 5 entities)")
    for remedy in ("--hparams=paper", "--warmup_step", "--seed"):
        assert remedy in line


# --- eval_results.txt and best_eval.json ---------------------------------------------------


def test_eval_results_write_bools_lowercase_and_read_them_back(tmp_path):
    from albert_tf.training import best_checkpoint

    tracker = best_checkpoint.BestCheckpointTracker(str(tmp_path), "eval_accuracy")
    tracker.best = {"eval_accuracy": 1.0, "global_step": 1}  # no new best: no export
    assert not tracker.record(5, {"eval_accuracy": 0.5, "collapsed": np.bool_(True),
                                  "note": "text"}, model=None)
    assert not tracker.record(10, {"eval_accuracy": 0.75, "collapsed": False}, model=None)
    text = (tmp_path / "eval_results.txt").read_text()
    assert text == ("collapsed = true\neval_accuracy = 0.5\nglobal_step = 5\nnote = text\n"
                    "collapsed = false\neval_accuracy = 0.75\nglobal_step = 10\n")
    assert tracker.evaluated_steps() == {5, 10}
    assert best_checkpoint.read_eval_results(str(tmp_path)) == [
        {"collapsed": True, "eval_accuracy": 0.5, "global_step": 5, "note": "text"},
        {"collapsed": False, "eval_accuracy": 0.75, "global_step": 10}]
    assert best_checkpoint.parse_value("nan") != best_checkpoint.parse_value("nan")
    # A bool is never the metric that picks the best checkpoint.
    flagged = best_checkpoint.BestCheckpointTracker(str(tmp_path / "other"), "collapsed")
    with pytest.raises(TypeError, match="must be a number"):
        flagged.record(5, {"collapsed": True}, model=None)


# --- end to end: each family's evaluation ---------------------------------------------------


def forced_checkpoint(model, path, **weights):
    """model (built) with its classifier head's weights replaced, saved as TF1 at path."""
    from albert_tf import checkpoints

    model.build()
    for name, value in weights.items():
        variable = getattr(model.classifier, name)
        variable.assign(np.broadcast_to(value, variable.shape).astype("float32"))
    checkpoints.save_tf1_checkpoint(model, str(path))
    return str(path)


def evaluations(out):
    from albert_tf.training import best_checkpoint

    return best_checkpoint.read_eval_results(str(out))


WORDS = {"pos": ["good", "great", "fine", "nice", "lovely"],
         "neg": ["bad", "awful", "poor", "terrible", "nasty"]}


def test_classifier_collapsed_and_not(spm_model, tmp_path, caplog):
    """A custom two-label task: a trained model (not collapsed), then the same evaluation
    with the output bias forced to one label (collapsed: one warning)."""
    from albert_tf.config import AlbertConfig
    from albert_tf.finetuning import FinetuningOptions
    from albert_tf.modeling.models import AlbertClassifier
    from albert_tf.tasks.classification import glue
    from albert_tf.tasks.classification.job import ClassificationOptions, run_glue

    data = tmp_path / "data"
    data.mkdir()
    rows = "".join(f"{word},{label}\n" for label, words in WORDS.items() for word in words)
    (data / "train.csv").write_text("text,tag\n" + rows)
    (data / "dev.csv").write_text("text,tag\n" + rows)
    config = AlbertConfig(**CLASSIFIER_CONFIG)

    def options(out, **run):
        return ClassificationOptions(
            task_name="custom", data_dir=str(data), spm_model_file=spm_model, albert_config=config,
            max_seq_length=8, eval_batch_size=8,
            custom=glue.CustomTaskOptions(text_a_column="text", label_column="tag"),
            finetuning=FinetuningOptions(output_dir=str(out), do_eval=True, seed=1, **run))

    trained = tmp_path / "trained"
    results = run_glue(options(trained, do_train=True, train_step=40, train_batch_size=10,
                               learning_rate=3e-3, save_checkpoints_steps=40,
                               iterations_per_loop=40))
    assert results["eval"]["eval_accuracy"] >= 0.8
    [block] = evaluations(trained)
    assert block["collapsed"] is False and block["global_step"] == 40
    assert json.loads((trained / "best_eval.json").read_text())["collapsed"] is False

    model = AlbertClassifier(config, num_labels=2)
    prefix = forced_checkpoint(model, tmp_path / "forced" / "model.ckpt",
                               output_bias=[-50.0, 50.0])  # label 1, "pos", everywhere
    forced = tmp_path / "forced_eval"
    with caplog.at_level(logging.WARNING, logger="absl"):
        results = run_glue(options(forced, init_checkpoint=prefix))
    assert results["eval"]["eval_accuracy"] == 0.5 and results["eval"]["collapsed"] is True
    [block] = evaluations(forced)
    assert block["collapsed"] is True and block["global_step"] == 0
    assert "collapsed = true" in (forced / "eval_results.txt").read_text().splitlines()
    assert json.loads((forced / "best_eval.json").read_text())["collapsed"] is True
    warnings = [r.getMessage() for r in caplog.records if "looks collapsed" in r.getMessage()]
    assert warnings == [
        "custom: the evaluation at step 0 looks collapsed: the model predicts 'pos' for "
        "100.0% of 10 dev examples (gold majority 50.0%). Usual remedies: the paper's "
        "learning rate for the task (--hparams=paper, or a lower --learning_rate), more "
        "warmup (--warmup_step), another seed (--seed)"]


def test_race_one_choice_everywhere(shared_data, spm_model, tmp_path, caplog):
    """Equal scores for the four options (a zero output layer): the argmax is A everywhere."""
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.multiple_choice import job as race_job

    config = AlbertConfig(**RACE_CONFIG)
    prefix = forced_checkpoint(race_job.build_model(config, 0.1), tmp_path / "zero" / "model.ckpt",
                               output_weights=0.0, output_bias=0.0)
    out = tmp_path / "out"
    options = race_job.MultipleChoiceOptions(
        data_dir=str(shared_data / "race"), spm_model_file=spm_model, albert_config=config,
        output_dir=str(out), init_checkpoint=prefix, do_train=False, do_eval=True,
        max_seq_length=64, max_qa_length=24, eval_batch_size=5)
    with caplog.at_level(logging.WARNING, logger="absl"):
        results = race_job.run_race(options)
    assert results["eval"]["eval_examples"] == 17 and results["eval"]["collapsed"] is True
    [block] = evaluations(out)
    assert block["collapsed"] is True
    [warning] = [r.getMessage() for r in caplog.records if "looks collapsed" in r.getMessage()]
    assert warning.startswith("RACE: the evaluation looks collapsed: the model predicts 'A' "
                              "for 100.0% of 17 dev questions (gold majority ")


def test_ner_no_entity_everywhere(shared_data, spm_model, tmp_path, caplog):
    """The output bias forces O on every word: no entity, while the dev gold has many."""
    from albert_tf.config import AlbertConfig
    from albert_tf.tasks.tagging.job import TaggingJob, TaggingOptions

    source = shared_data / "ner" / "conll2003" / "eng.train"
    if not source.exists():
        pytest.skip(f"{source} not found (shared NER samples)")
    data = tmp_path / "conll2003"
    data.mkdir()
    write_blocks(data / "eng.testa", blocks_of(source)[120:160], DOCSTART)  # as test_run_ner_cli
    options = TaggingOptions(
        task_name="conll2003", data_dir=str(data), spm_model_file=spm_model,
        albert_config=AlbertConfig.from_dict(NER_CONFIG),
        output_dir=str(tmp_path / "out"), do_eval=True, labels=tuple(CONLL_LABELS),
        max_seq_length=MAX_SEQ_LENGTH, doc_stride=16, eval_batch_size=16)
    job = TaggingJob(options)
    job.labels = list(CONLL_LABELS)
    bias = np.full(len(CONLL_LABELS), -50.0)
    bias[CONLL_LABELS.index("O")] = 50.0
    options.init_checkpoint = forced_checkpoint(job.build_model(), tmp_path / "o" / "model.ckpt",
                                                output_bias=bias)
    with caplog.at_level(logging.WARNING, logger="absl"):
        results = TaggingJob(options).run()
    assert results["eval"]["f1"] == 0.0 and results["eval"]["collapsed"] is True
    [block] = evaluations(tmp_path / "out")
    assert block["collapsed"] is True
    [warning] = [r.getMessage() for r in caplog.records if "looks collapsed" in r.getMessage()]
    assert warning.startswith("NER conll2003: the evaluation at step 0 looks collapsed: the "
                              "model predicts no entity in 40 dev sentences (the gold has ")


@pytest.mark.slow  # 10 s
def test_squad_v2_no_answer_everywhere(shared_data, tmp_path, caplog):
    """A null threshold below every null score writes "" for every question: collapsed,
    against a gold with answerable questions."""
    from albert_tf.tasks.span_qa import job as squad_job

    path = subset(shared_data, tmp_path, "dev-v2.0.sample2.json", paragraphs=1)
    out = tmp_path / "out"
    options = squad_job.SpanQaOptions(
        albert_config=SQUAD_CONFIG, spm_model_file=str(shared_data / "spm" /
                                                       "albert_style_pd8k.model"),
        output_dir=str(out), train_file=path, predict_file=path, do_train=True,
        do_predict=True, version_2_with_negative=True, max_seq_length=64, doc_stride=32,
        max_query_length=16, train_batch_size=8, predict_batch_size=16, num_train_epochs=1,
        learning_rate=1e-3, start_n_top=2, end_n_top=2, null_score_diff_threshold=-1e9,
        seed=1)
    with caplog.at_level(logging.WARNING, logger="absl"):
        results = squad_job.run_squad(options)
    answers = json.loads((out / "predictions.json").read_text())
    assert set(answers.values()) == {""}
    blocks = evaluations(out)
    assert blocks and all(block["collapsed"] is True for block in blocks)
    assert results["predict_metrics"]["exact"] < 100.0  # some questions have answers
    [warning, *_] = [r.getMessage() for r in caplog.records
                     if "looks collapsed" in r.getMessage()]
    assert warning.startswith("SQuAD v2.0: the evaluation at step ")
    assert "the model predicts no answer for 100.0% of " in warning
    assert "more warmup (--warmup_proportion)" in warning
