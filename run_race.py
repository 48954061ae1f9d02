"""Fine-tune ALBERT on RACE (English) or C3 (Chinese) multiple-choice reading comprehension.

Flags follow the original run_race.py (defaults included: --do_train and
--do_eval are on, lr 1e-5, 12000 steps, 1000 warmup, save every 100).
Additions: --task_name (race or c3), --vocab_file (WordPiece; --spm_model_file
wins when both are given, as the original's FullTokenizer), --init_from_group0,
--predict_split, --export_dir, --strategy, --mixed_precision, --jit_compile,
--gradient_accumulation_steps, --seed.
RACE: --data_dir holds RACE/{train,dev,test}/{middle,high}/ with either the
download's N.txt files or the original's all.txt. C3: --data_dir holds
c3-{m,d}-{train,dev,test}.json (or a folder c3/ or data/ holding them).
Feature caches (--train_file, --eval_file, --predict_file) default to
--output_dir and are rebuilt when the data or the settings change.

Example:
  python run_race.py --data_dir=data --albert_config_file=albert_base/albert_config.json \
    --spm_model_file=albert_base/30k-clean.model --init_checkpoint=albert_base \
    --output_dir=runs/race --max_seq_length=512 --max_qa_length=128 \
    --train_batch_size=32 --learning_rate=1e-5 --train_step=12000 --warmup_step=1000 \
    --save_checkpoints_steps=100 --do_predict --export_dir=runs/race/export
  python run_race.py --task_name=c3 --data_dir=c3/data \
    --albert_config_file=albert_base_zh/albert_config.json \
    --vocab_file=albert_base_zh/vocab_chinese.txt --init_checkpoint=albert_base_zh \
    --output_dir=runs/c3 --max_seq_length=512 --train_batch_size=16 \
    --learning_rate=2e-5 --train_step=6000 --warmup_step=600 --do_predict \
    --export_dir=runs/c3/export
Outputs: eval_results.txt (eval_accuracy for all, eval_accuracy_middle,
eval_accuracy_high; C3: eval_accuracy_m, eval_accuracy_d), model.ckpt-best.*,
predictions.jsonl (C3: also c3_predict.json), predict_results.txt, and the
SavedModel (raw-text signature) in --export_dir.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

from albert_tf import cli, cli_defaults  # noqa: E402

FLAGS = flags.FLAGS
flags.DEFINE_enum("task_name", "race", ["race", "c3"], "race (English RACE) or c3 (Chinese "
                  "C3, 2-4 options per question).")
flags.DEFINE_string("data_dir", None, "race: directory holding RACE/{train,dev,test}/"
                    "{middle,high}; c3: directory holding c3-{m,d}-{train,dev,test}.json.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the model.")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (the English checkpoints). "
                    "Give it or --vocab_file; it wins when both are given.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary of the checkpoint (vocab.txt, "
                    "the Chinese models); used when --spm_model_file is not given.")
flags.DEFINE_string("output_dir", None, "Where checkpoints, results and predictions are written.")
flags.DEFINE_string("init_checkpoint", None, "Checkpoint to initialise from: TF1 prefix or "
                    "directory (official download, TF-Hub module), Hugging Face directory, "
                    "Keras .weights.h5 or tf.train.Checkpoint; read with "
                    "albert_tf.checkpoints.restore_for_training.")
flags.DEFINE_bool("init_from_group0", False, "Initialise every layer group from group 0 "
                  "of --init_checkpoint (the original's flag).")
flags.DEFINE_string("train_file", None, "TFRecord cache of the training features "
                    "(default <output_dir>/race_train.tf_record; built if missing or stale).")
flags.DEFINE_string("eval_file", None, "TFRecord cache of the dev features "
                    "(default <output_dir>/race_dev.tf_record).")
flags.DEFINE_string("predict_file", None, "TFRecord cache of the --predict_split features "
                    "(default <output_dir>/race_<split>.tf_record).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_float("dropout_prob", 0.1, "Dropout on the pooled output before the choice logit.")
flags.DEFINE_integer("max_seq_length", 512, "Maximum sequence length.")
flags.DEFINE_integer("max_qa_length", 128, "race: maximum question+option length in tokens "
                     "(the last tokens are kept); at most max_seq_length - 3. Not used by c3, "
                     "which truncates as C3's baseline.")
flags.DEFINE_integer("num_keep_checkpoint", 5, "Training checkpoints kept.")
flags.DEFINE_bool("high_only", False, "race: use only the high-school passages.")
flags.DEFINE_bool("middle_only", False, "race: use only the middle-school passages.")
flags.DEFINE_bool("do_train", True, "Train on the train split.")
flags.DEFINE_bool("do_eval", True, "Evaluate every checkpoint on the dev split; keep the best.")
flags.DEFINE_bool("do_predict", False, "Predict --predict_split with the best weights.")
flags.DEFINE_enum("predict_split", "test", ["train", "dev", "test"],
                  "Split read by --do_predict.")
flags.DEFINE_integer("train_batch_size", 32, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Global evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Global prediction batch size.")
flags.DEFINE_float("learning_rate", 1e-5, "Peak learning rate (AdamW).")
flags.DEFINE_integer("train_step", 12000, "Optimizer steps.")
flags.DEFINE_integer("warmup_step", 1000, "Linear warmup steps.")
flags.DEFINE_integer("save_checkpoints_steps", 100, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "Steps per host round trip (min with --save_checkpoints_steps).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "Optimizer.")
flags.DEFINE_string("export_dir", None, "Export the best weights here: a SavedModel "
                    "(raw-text and token-id signatures) and/or model.onnx and/or model.tflite, "
                    "as --export_format says.")
cli.define_runtime_flags()
cli.define_finetuning_flags()
cli.define_export_flags()
flags.adopt_module_key_flags(cli)  # list them in --help


def main(argv):
    del argv
    from albert_tf.errors import UserValueError
    from albert_tf.finetuning import hparams, run_seeds
    from albert_tf.tasks.multiple_choice.job import RaceJob, RaceOptions, run_race

    logging.set_verbosity(logging.INFO)
    cli.require("data_dir", "albert_config_file", "output_dir")
    from_hparams = cli.apply_hparams(FLAGS.task_name, hparams.RACE_FLAGS)
    seeds = cli.seeds_from_flags()
    if not FLAGS.spm_model_file and not FLAGS.vocab_file:
        raise UserValueError("--spm_model_file (SentencePiece) or --vocab_file (WordPiece) is "
                             "required")
    if FLAGS.task_name == "c3" and FLAGS["max_qa_length"].present:
        raise UserValueError("--max_qa_length is RACE's; --task_name=c3 truncates context, "
                             "question and option together as C3's baseline")
    albert_config = cli.apply_albert_dropout(cli.load_albert_config(FLAGS.albert_config_file),
                                             FLAGS.albert_dropout)
    cli.check_init_checkpoint(FLAGS.init_checkpoint)
    strategy = cli.strategy_from_flags(FLAGS)
    steps_given = FLAGS.num_train_epochs is None and FLAGS.warmup_proportion is None
    cli_defaults.apply(
        ["eval_batch_size:8", "predict_batch_size:8"]
        + (["warmup_step:race"] if steps_given else [])  # else the epochs give the steps
        + (["max_qa_length:race"] if FLAGS.task_name == "race" else []),
        strategy.num_replicas_in_sync, hparams_set=from_hparams)
    options = RaceOptions(
        data_dir=FLAGS.data_dir,
        albert_config=albert_config, spm_model_file=FLAGS.spm_model_file,
        vocab_file=FLAGS.vocab_file,
        task_name=FLAGS.task_name, output_dir=FLAGS.output_dir,
        init_checkpoint=FLAGS.init_checkpoint, init_from_group0=FLAGS.init_from_group0,
        do_lower_case=FLAGS.do_lower_case, dropout_prob=FLAGS.dropout_prob,
        max_seq_length=FLAGS.max_seq_length, max_qa_length=FLAGS.max_qa_length,
        high_only=FLAGS.high_only, middle_only=FLAGS.middle_only, do_train=FLAGS.do_train,
        do_eval=FLAGS.do_eval, do_predict=FLAGS.do_predict,
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        predict_batch_size=FLAGS.predict_batch_size, learning_rate=FLAGS.learning_rate,
        train_step=FLAGS.train_step, warmup_step=FLAGS.warmup_step,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.num_keep_checkpoint,
        iterations_per_loop=FLAGS.iterations_per_loop, optimizer=FLAGS.optimizer,
        train_file=FLAGS.train_file, eval_file=FLAGS.eval_file,
        predict_file=FLAGS.predict_file, predict_split=FLAGS.predict_split,
        export_dir=FLAGS.export_dir, export_layer_norm=FLAGS.export_layer_norm,
        export_format=tuple(FLAGS.export_format), export_int8=FLAGS.export_int8,
        export_fp16=FLAGS.export_fp16, int8_min_agreement=FLAGS.int8_min_agreement,
        mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        num_train_epochs=FLAGS.num_train_epochs, warmup_proportion=FLAGS.warmup_proportion,
        **cli.runtime_options())
    cli.check_options(options.validate)
    cli.check_options(options.finetuning_options().validate, strategy.num_replicas_in_sync)
    if seeds:
        cli.report_export(run_seeds(RaceJob, options, seeds, strategy), FLAGS.export_format)
        return
    results = run_race(options, strategy)
    logging.info("done at step %s; best: %s; predict: %s", results.get("global_step"),
                 results.get("best"), results.get("predict_accuracy"))
    cli.report_export(results, FLAGS.export_format)


if __name__ == "__main__":
    cli.run(main, interrupted=lambda: cli.resume_hint(FLAGS.output_dir))
