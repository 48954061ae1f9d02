"""Fine-tune ALBERT for named-entity recognition (token classification).

Tasks (--task_name): conll2003 (eng.train/eng.testa/eng.testb or train.txt/valid.txt/
test.txt, 4 columns, IOB1 or IOB2 as they come), cluener (CLUENER2020's
{train,dev,test}.json), msra (one character and its tag per line: {train,dev,test}.txt)
and custom ({train,dev,test}.{txt,tsv,conll} column files with --token_column,
--label_column, --delimiter, or .json/.jsonl lines with character spans). A word's label
goes on its first sub-token; long sentences are split into overlapping windows
(--doc_stride) and each word is predicted from the window where it has most context.
--use_crf adds a linear-chain CRF; decoding keeps to the tag scheme unless
--noconstrain_decoding. Entity F1 is seqeval's (default mode).

Example:
  python run_ner.py --task_name=conll2003 --data_dir=conll2003 \
    --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base \
    --output_dir=runs/conll --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=5e-5 --train_step=3000 --warmup_step=300 --do_train --do_eval --do_predict
  python run_ner.py --task_name=cluener --data_dir=cluener --use_crf \
    --albert_config_file=albert_base_zh/albert_config.json \
    --vocab_file=albert_base_zh/vocab_chinese.txt --init_checkpoint=albert_base_zh \
    --output_dir=runs/cluener --do_train --do_eval --do_predict --predict_split=test
Outputs: eval_results.txt (f1, precision, recall, token_accuracy, and per type),
model.ckpt-best.*, labels.txt, predictions.txt (column formats: word gold predicted) or
cluener_predict.json (CLUE's submission format) or entities.jsonl, predict_results.json.
--export_dir writes the best weights as a SavedModel (`serving_default`: raw text ->
entities with character offsets; `serve_tokens`: token ids -> tag ids) and/or model.onnx
(logits; `albert_tf.tasks.tagging.export.decode_onnx_logits` decodes them), as
--export_format says.
Score a predictions file: python -m albert_tf.tasks.tagging evaluate --task_name ...
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

from albert_tf import cli, cli_defaults  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum("task_name", None, ["conll2003", "cluener", "msra", "custom"],
                  "The data format (see the module docstring).")
flags.DEFINE_string("data_dir", None, "Directory holding the task's train/dev/test files.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (the English checkpoints). "
                    "Give it or --vocab_file; it wins when both are given.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (vocab.txt, the Chinese "
                    "models); used when --spm_model_file is not given.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, results and predictions are written.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to initialise from (TF1 prefix or "
                    "directory, TF-Hub module, Hugging Face directory, .weights.h5, "
                    "tf.train.Checkpoint).")
flags.DEFINE_bool("init_from_group0", False, "Initialise every layer group from group 0.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length in sub-tokens.")
flags.DEFINE_integer("doc_stride", 64, "Stride in sub-tokens between the windows of a "
                     "sentence longer than max_seq_length - 2.")
flags.DEFINE_enum("tag_scheme", "iob2", ["iob2", "bio", "bioes", "iobes"],
                  "The scheme the model is trained in (files are converted; predictions are "
                  "written in the file's own scheme).")
flags.DEFINE_bool("use_crf", False, "A linear-chain CRF on top (trained by its negative "
                  "log-likelihood, decoded by Viterbi).")
flags.DEFINE_bool("constrain_decoding", True, "Decode only tag sequences valid in "
                  "--tag_scheme (no I-X after O), for both heads.")
flags.DEFINE_list("labels", None, "The label list (default: the training data's).")
flags.DEFINE_integer("token_column", None, "custom column files: the word's column (0).")
flags.DEFINE_integer("label_column", None, "custom column files: the tag's column (-1).")
flags.DEFINE_string("delimiter", None, "custom column files: the separator (whitespace).")
flags.DEFINE_bool("skip_bad_lines", False, "Skip bad lines (and, in column files, the "
                  "sentences holding them), count them in the log, and train on the rest.")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout before the per-token classifier.")
flags.DEFINE_bool("do_train", False, "Train on the train split.")
flags.DEFINE_bool("do_eval", False, "Evaluate every checkpoint on the dev split; keep the "
                  "best by entity F1.")
flags.DEFINE_bool("do_predict", False, "Predict --predict_split with the best weights.")
flags.DEFINE_enum("predict_split", "test", ["train", "dev", "test"],
                  "Split read by --do_predict.")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (AdamW).")
flags.DEFINE_integer("train_step", 1000, "Optimizer steps.")
flags.DEFINE_integer("warmup_step", 0, "Linear warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Training checkpoints kept.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "Steps per host round trip (min with --save_checkpoints_steps).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_string("export_dir", None, "Export the best weights here: a SavedModel (raw text "
                    "-> entities, and token ids) and/or model.onnx and/or model.tflite, as "
                    "--export_format says.")
cli.define_runtime_flags()
cli.define_finetuning_flags()
cli.define_export_flags()
flags.adopt_module_key_flags(cli)  # list them in --help


def main(argv):
    del argv
    from albert_tf.errors import UserValueError
    from albert_tf.finetuning import hparams, run_seeds
    from albert_tf.tasks.tagging.job import TaggingJob, TaggingOptions, run_ner

    logging.set_verbosity(logging.INFO)
    cli.require("task_name", "data_dir", "albert_config_file", "output_dir")
    from_hparams = cli.apply_hparams(FLAGS.task_name, hparams.NER_FLAGS)
    seeds = cli.seeds_from_flags()
    if not FLAGS.spm_model_file and not FLAGS.vocab_file:
        raise UserValueError("--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is "
                             "required")
    albert_config = cli.apply_albert_dropout(cli.load_albert_config(FLAGS.albert_config_file),
                                             FLAGS.albert_dropout)
    cli.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = cli.strategy_from_flags(FLAGS)
    cli_defaults.apply(["doc_stride:ner", "predict_batch_size:8"],  # (evaluates at this one)
                       strategy.num_replicas_in_sync, hparams_set=from_hparams)
    names = ("task_name", "data_dir", "spm_model_file", "vocab_file", "output_dir",
             "init_checkpoint", "init_from_group0", "do_lower_case", "max_seq_length",
             "doc_stride", "tag_scheme", "use_crf", "constrain_decoding", "token_column",
             "label_column", "delimiter", "skip_bad_lines", "classifier_dropout", "do_train",
             "do_eval", "do_predict", "predict_split", "train_batch_size", "eval_batch_size",
             "predict_batch_size", "learning_rate", "train_step", "warmup_step",
             "save_checkpoints_steps", "keep_checkpoint_max", "iterations_per_loop",
             "optimizer", "mixed_precision", "jit_compile", "gradient_accumulation_steps",
             "export_dir", "export_layer_norm", "export_int8", "export_fp16",
             "int8_min_agreement", "num_train_epochs", "warmup_proportion")
    options = TaggingOptions(albert_config=albert_config,
                             labels=tuple(FLAGS.labels) if FLAGS.labels else None,
                             export_format=tuple(FLAGS.export_format),
                             **{name: getattr(FLAGS, name) for name in names},
                             **cli.runtime_options())
    cli.check_options(options.validate, strategy.num_replicas_in_sync)
    cli.check_options(options.finetuning_options().validate, strategy.num_replicas_in_sync)
    if seeds:
        cli.report_export(run_seeds(TaggingJob, options, seeds, strategy), FLAGS.export_format)
        return
    results = run_ner(options, strategy)
    logging.info("done at step %s; best: %s", results.get("global_step"), results.get("best"))
    cli.report_export(results, FLAGS.export_format)


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
