"""Fine-tune ALBERT on SQuAD v1.1 or v2.0 (the original run_squad_v1.py / run_squad_v2.py).

Flags follow the original scripts; --version_2_with_negative selects v2.0 (the
XLNet-style head with answerability). Additions: --vocab_file (a WordPiece
vocabulary: the Chinese models, CMRC 2018; --spm_model_file wins when both are
given), --metric, --null_score_diff_threshold, --export_dir, --strategy,
--mixed_precision, --jit_compile, --gradient_accumulation_steps, --seed.
Feature caches are plain TFRecords (--train_feature_file /
--predict_feature_file, default in --output_dir).

Example (SQuAD v2.0):
  python run_squad.py --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base \
    --train_file=train-v2.0.json --predict_file=dev-v2.0.json \
    --output_dir=runs/squad2 --version_2_with_negative --do_train --do_predict \
    --max_seq_length=384 --train_batch_size=48 --learning_rate=3e-5
Example (CMRC 2018 with a Chinese model; the CMRC metric is chosen automatically):
  python run_squad.py --albert_config_file=albert_base_zh/albert_config.json \
    --vocab_file=albert_base_zh/vocab_chinese.txt --init_checkpoint=albert_base_zh \
    --train_file=cmrc2018_train.json --predict_file=cmrc2018_dev.json \
    --output_dir=runs/cmrc --do_train --do_predict --max_seq_length=512 \
    --doc_stride=128 --max_answer_length=50 --train_batch_size=32 --learning_rate=3e-5
Score any predictions file with the official metrics:
  python -m albert_tf.tasks.squad evaluate --data_file=dev-v2.0.json \
    --prediction_file=runs/squad2/predictions.json --na_prob_file=runs/squad2/null_odds.json
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

from albert_tf import cli, cli_defaults  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the checkpoint "
                    "(30k-clean.model). Give it or --vocab_file; it wins when both are given.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the checkpoint (vocab.txt, "
                    "vocab_chinese.txt: the Chinese models, CMRC 2018), used when "
                    "--spm_model_file is not given.")
flags.DEFINE_enum("metric", "auto", ["auto", "squad", "cmrc2018"], "Metric of --do_predict "
                  "(and of choosing the best checkpoint): the official SQuAD v1.1/v2.0 script, "
                  "or the official CMRC 2018 definitions. auto: cmrc2018 when more than half "
                  "of the predict file's non-whitespace context characters are CJK ideographs "
                  "(and not --version_2_with_negative), else squad.")
flags.DEFINE_string("output_dir", None, "Where checkpoints and predictions are written.")
flags.DEFINE_string("train_file", None, "SQuAD JSON for training.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON for prediction (and evaluation when "
                    "it has answers).")
flags.DEFINE_string("train_feature_file", None, "Training feature cache (TFRecord; built when "
                    "missing). Default: <output_dir>/train.tf_record.")
flags.DEFINE_string("predict_feature_file", None, "Prediction feature cache (TFRecord; built "
                    "when missing). Default: <output_dir>/predict.tf_record.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to initialise from: TF1 prefix or "
                    "directory (official download, TF-Hub module), Hugging Face directory, "
                    "Keras .weights.h5 or tf.train.Checkpoint; read with "
                    "albert_tf.checkpoints.restore_for_training.")
flags.DEFINE_bool("init_from_group0", False, "Initialise every layer group from group 0 "
                  "of --init_checkpoint (the original's flag).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_integer("max_seq_length", 384, "Maximum sequence length.")
flags.DEFINE_integer("doc_stride", 128, "Stride of the sliding document windows.")
flags.DEFINE_integer("max_query_length", 64, "Maximum question length in tokens.")
flags.DEFINE_bool("do_train", False, "Fine-tune on --train_file.")
flags.DEFINE_bool("do_predict", False, "Predict --predict_file (evaluating every checkpoint "
                  "when training and the file has answers).")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (AdamW).")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs: steps = int(#examples / batch * epochs).")
flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of the steps used for linear warmup.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Training checkpoints kept.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per host round trip (logging period).")
flags.DEFINE_integer("n_best_size", 20, "Answers kept in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in tokens.")
flags.DEFINE_bool("version_2_with_negative", False, "SQuAD v2.0: questions may have no answer.")
flags.DEFINE_integer("start_n_top", 5, "v2: beam size for the start position.")
flags.DEFINE_integer("end_n_top", 5, "v2: beam size for the end position.")
flags.DEFINE_float("dropout_prob", 0.1, "v2: dropout of the answerability head.")
flags.DEFINE_float("null_score_diff_threshold", None, "v2: answer \"\" when null_odds is above "
                   "this. Default: tuned on --predict_file itself, as the original (reported "
                   "as null_threshold_source = tuned_on_eval_set).")
flags.DEFINE_string("export_dir", None, "Export the trained model here: a SavedModel (raw "
                    "question + context -> answer) and/or model.onnx and/or model.tflite, as "
                    "--export_format says.")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
cli.define_runtime_flags()
cli.define_finetuning_flags(epochs=False)  # run_squad defines its own
cli.define_export_flags()
flags.adopt_module_key_flags(cli)  # list them in --help


def hparams_task() -> str:
    """The --hparams=paper table's task: CMRC 2018 for --metric=cmrc2018 (or the Chinese
    WordPiece vocabulary with --metric=auto), else SQuAD v1.1 / v2.0."""
    if FLAGS.metric == "cmrc2018" or (FLAGS.metric == "auto" and FLAGS.vocab_file
                                      and not FLAGS.spm_model_file):
        return "cmrc2018"
    return "squad_v2" if FLAGS.version_2_with_negative else "squad_v1"


def main(argv):
    del argv
    import json

    from albert_tf.errors import UserValueError
    from albert_tf.finetuning import FinetuningOptions
    from albert_tf.finetuning import hparams, run_seeds
    from albert_tf.tasks.span_qa.job import SquadJob, SquadOptions, run_squad

    logging.set_verbosity(logging.INFO)
    cli.require("albert_config_file", "output_dir")
    from_hparams = cli.apply_hparams(hparams_task(), hparams.SQUAD_FLAGS)
    seeds = cli.seeds_from_flags()
    if not FLAGS.spm_model_file and not FLAGS.vocab_file:
        raise UserValueError("--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is "
                             "required")
    albert_config = cli.apply_albert_dropout(cli.load_albert_config(FLAGS.albert_config_file),
                                             FLAGS.albert_dropout)
    cli.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = cli.strategy_from_flags(FLAGS)
    cli_defaults.apply(["max_query_length:squad", "doc_stride:squad", "predict_batch_size:8"],
                       strategy.num_replicas_in_sync, hparams_set=from_hparams)
    names = ("spm_model_file", "output_dir", "train_file", "predict_file", "train_feature_file",
             "predict_feature_file", "init_checkpoint", "init_from_group0", "do_lower_case",
             "max_seq_length", "doc_stride", "max_query_length", "do_train", "do_predict",
             "train_batch_size", "predict_batch_size", "learning_rate", "num_train_epochs",
             "warmup_proportion", "save_checkpoints_steps", "keep_checkpoint_max",
             "iterations_per_loop", "n_best_size", "max_answer_length",
             "version_2_with_negative", "start_n_top", "end_n_top", "dropout_prob",
             "null_score_diff_threshold", "optimizer", "mixed_precision", "jit_compile",
             "gradient_accumulation_steps", "export_dir", "export_layer_norm",
             "vocab_file", "metric", "export_int8", "export_fp16", "int8_min_agreement")
    options = SquadOptions(albert_config=albert_config, export_format=tuple(FLAGS.export_format),
                           **{name: getattr(FLAGS, name) for name in names},
                           **cli.runtime_options())
    cli.check_options(options.validate)
    cli.check_options(FinetuningOptions.from_fields(
        options, do_eval=False, train_step=1, warmup_step=0).validate,
        strategy.num_replicas_in_sync)  # the steps come from the data later
    if seeds:
        cli.report_export(run_seeds(SquadJob, options, seeds, strategy), FLAGS.export_format)
        return
    results = run_squad(options, strategy)
    if results.get("predict_metrics"):
        print(json.dumps(results["predict_metrics"]))
    logging.info("done at step %d; best: %s", results["global_step"], results.get("best"))
    cli.report_export(results, FLAGS.export_format)


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
