"""Fine-tune ALBERT on GLUE-style classification and regression (the original's flags).

Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, qnli, rte, wnli (files and
columns as the original's processors); the CLUE tasks afqmc, tnews, iflytek,
ocnli, cmnli, csl (JSON lines as CLUE's baseline reads them; --do_predict also
writes the CLUE submission <task>_predict.json); or `custom` for your own
TSV/CSV/TXT files (--text_a_column, --text_b_column, --label_column).

The vocabulary is --spm_model_file (SentencePiece, the English models) or
--vocab_file (WordPiece vocab.txt, the Chinese models); SentencePiece wins
when both are given, as in the original. Every saved checkpoint is
evaluated on the dev set; the best (matthew_corr for CoLA, pearson for STS-B,
eval_accuracy otherwise) is kept as model.ckpt-best and used for prediction
and for the SavedModel written to --export_dir (signatures `serving_default`
on raw text and `serve_tokens` on token ids).

Additions to the original's flags: --classifier_dropout, --strategy,
--mixed_precision, --jit_compile, --gradient_accumulation_steps, --seed,
--export_dir's raw-text signature, the custom-task flags.

Example (MRPC with the run_glue.sh hyperparameters):
  python run_classifier.py --task_name=mrpc --data_dir=glue_data \
    --spm_model_file=albert_base/30k-clean.model \
    --albert_config_file=albert_base/albert_config.json \
    --init_checkpoint=albert_base/model.ckpt-best --output_dir=runs/mrpc \
    --do_train --do_eval --do_predict --max_seq_length=512 --train_batch_size=32 \
    --learning_rate=2e-5 --train_step=800 --warmup_step=200 --save_checkpoints_steps=100 \
    --export_dir=runs/mrpc/export

Example (AFQMC with the official albert_base_zh, WordPiece):
  python run_classifier.py --task_name=afqmc --data_dir=clue_data \
    --vocab_file=albert_base_zh/vocab_chinese.txt \
    --albert_config_file=albert_base_zh/albert_config.json \
    --init_checkpoint=albert_base_zh --output_dir=runs/afqmc \
    --do_train --do_eval --do_predict --max_seq_length=128 --train_batch_size=32 \
    --learning_rate=2e-5 --train_step=3000 --warmup_step=300 --save_checkpoints_steps=500
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

from albert_tf import cli, cli_defaults  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_string("data_dir", None, "Directory with the task's files (GLUE layout: "
                    "<data_dir>/MRPC/train.tsv, ...; CLUE: <data_dir>/<task>/train.json or "
                    "<data_dir>/train.json; custom: <data_dir>/train.tsv, .csv or .txt).")
flags.DEFINE_string("task_name", None, "GLUE: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli, "
                    "qnli, rte, wnli; CLUE: afqmc, tnews, iflytek, ocnli, cmnli, csl; or custom.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the checkpoint "
                    "(30k-clean.model). Give it or --vocab_file; it wins when both are given.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the checkpoint (vocab.txt, "
                    "vocab_chinese.txt: the Chinese models), used when --spm_model_file is "
                    "not given.")
flags.DEFINE_string("output_dir", None, "Checkpoints, results and predictions are written here.")
flags.DEFINE_string("cached_dir", None, "Where the TFRecord feature caches go (default "
                    "--output_dir); a cache is reused when task, split, sequence length, "
                    "vocabulary and data match.")
flags.DEFINE_string("init_checkpoint", None, "Initial weights: TF1 checkpoint (prefix or "
                    "directory: official download, TF-Hub module), Hugging Face directory, "
                    "Keras .weights.h5 or tf.train.Checkpoint.")
flags.DEFINE_bool("init_from_group0", False, "Initialise every layer group from group 0 "
                  "of --init_checkpoint (the original's flag).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the text (uncased models).")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length after tokenization (pairs are "
                     "truncated longest-first, then padded).")
flags.DEFINE_bool("do_train", False, "Train on the train split.")
flags.DEFINE_bool("do_eval", False, "Evaluate every saved checkpoint on the dev split.")
flags.DEFINE_bool("do_predict", False, "Predict the test split with the best checkpoint.")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("train_step", 1000, "Optimizer steps.")
flags.DEFINE_integer("warmup_step", 0, "Linear warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Training checkpoints kept (the best one is "
                     "always kept as model.ckpt-best).")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per host round trip (also the "
                     "logging period).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout on the pooled output (the original "
                   "fixes it at 0.1).")
flags.DEFINE_string("export_dir", None, "Export the best weights here: a SavedModel "
                    "(signatures serving_default: raw text; serve_tokens: token ids) and/or "
                    "model.onnx and/or model.tflite, as --export_format says.")
flags.DEFINE_string("text_a_column", None, "custom task: column of the first text (header "
                    "name or 0-based index).")
flags.DEFINE_string("text_b_column", None, "custom task: column of the second text, for "
                    "sentence pairs.")
flags.DEFINE_string("label_column", None, "custom task: column of the label.")
flags.DEFINE_string("id_column", None, "custom task: column of the example id written to the "
                    "predictions (default: row number).")
flags.DEFINE_bool("has_header", True, "custom task: the files start with a header row.")
flags.DEFINE_bool("regression", False, "custom task: float labels, squared-error loss.")
cli.define_runtime_flags()
cli.define_finetuning_flags()
cli.define_export_flags()
flags.adopt_module_key_flags(cli)  # list them in --help


def main(argv):
    del argv
    from albert_tf.errors import UserValueError
    from albert_tf.tasks.classification.glue import CustomTaskOptions
    from albert_tf.finetuning import hparams, run_seeds
    from albert_tf.tasks.classification.job import GlueJob, GlueOptions, run_glue

    logging.set_verbosity(logging.INFO)
    cli.require("data_dir", "task_name", "albert_config_file", "output_dir")
    from_hparams = cli.apply_hparams(FLAGS.task_name, hparams.CLASSIFIER_FLAGS)
    seeds = cli.seeds_from_flags()
    if not FLAGS.spm_model_file and not FLAGS.vocab_file:
        raise UserValueError("--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is "
                             "required")
    albert_config = cli.apply_albert_dropout(cli.load_albert_config(FLAGS.albert_config_file),
                                             FLAGS.albert_dropout)
    custom = None
    if FLAGS.task_name.lower() == "custom":
        if not FLAGS.text_a_column or not FLAGS.label_column:
            raise UserValueError("--task_name=custom needs --text_a_column and --label_column")
        custom = CustomTaskOptions(
            text_a_column=FLAGS.text_a_column, text_b_column=FLAGS.text_b_column,
            label_column=FLAGS.label_column, id_column=FLAGS.id_column,
            has_header=FLAGS.has_header, regression=FLAGS.regression)
    cli.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = cli.strategy_from_flags(FLAGS)
    cli_defaults.apply(["eval_batch_size:8", "predict_batch_size:8"],
                       strategy.num_replicas_in_sync, hparams_set=from_hparams)
    options = GlueOptions(
        task_name=FLAGS.task_name, data_dir=FLAGS.data_dir, albert_config=albert_config,
        spm_model_file=FLAGS.spm_model_file, vocab_file=FLAGS.vocab_file, custom=custom,
        output_dir=FLAGS.output_dir, cached_dir=FLAGS.cached_dir,
        init_checkpoint=FLAGS.init_checkpoint, init_from_group0=FLAGS.init_from_group0,
        do_train=FLAGS.do_train, do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict,
        do_lower_case=FLAGS.do_lower_case, max_seq_length=FLAGS.max_seq_length,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, learning_rate=FLAGS.learning_rate,
        train_step=FLAGS.train_step, warmup_step=FLAGS.warmup_step,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        iterations_per_loop=FLAGS.iterations_per_loop, optimizer=FLAGS.optimizer,
        mixed_precision=FLAGS.mixed_precision, jit_compile=FLAGS.jit_compile,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        num_train_epochs=FLAGS.num_train_epochs, warmup_proportion=FLAGS.warmup_proportion,
        **cli.runtime_options(), classifier_dropout=FLAGS.classifier_dropout, export_dir=FLAGS.export_dir,
        export_layer_norm=FLAGS.export_layer_norm, export_format=tuple(FLAGS.export_format),
        export_int8=FLAGS.export_int8, export_fp16=FLAGS.export_fp16,
        int8_min_agreement=FLAGS.int8_min_agreement)
    cli.check_options(options.validate, strategy.num_replicas_in_sync)
    cli.check_options(options.finetuning_options().validate, strategy.num_replicas_in_sync)
    if seeds:
        cli.report_export(run_seeds(GlueJob, options, seeds, strategy), FLAGS.export_format)
        return
    results = run_glue(options, strategy)
    logging.info("done at step %d; best: %s", results["global_step"], results.get("best"))
    cli.report_export(results, FLAGS.export_format)


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
