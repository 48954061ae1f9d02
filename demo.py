"""The main job: from raw public-domain books to an ALBERT that fills in masked words.

  python demo.py [--output_dir demo_output] [--size full|mini] [--num_train_steps N]

Stages (each shows progress; a re-run skips the stages whose outputs are
complete and were made with the same settings, and pretraining resumes from
its last checkpoint if it was interrupted):
  1. spm       train a SentencePiece model on demo_corpus/train (ALBERT's settings)
  2. data      write train and held-out TFRecords (n-gram MLM + SOP, the original's schema)
  3. pretrain  pretrain a small ALBERT with LAMB, evaluating on the held-out split
  4. export    a SavedModel with the original TF-Hub signatures (tokens, mlm, sop)
  5. plot      loss / MLM accuracy / SOP accuracy against steps (PNG)
  6. report    top-5 fill-in predictions for a few [MASK] sentences and a summary
The output directory is an official-style model directory (albert_config.json,
demo.model, model.ckpt-best.*) that `python -m albert_tf.fill_mask` reads.
"""
import dataclasses
import glob
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags, logging  # noqa: E402

REPO = os.path.dirname(os.path.abspath(__file__))
SENTENCES = [
    "He opened the [MASK] and walked into the room.",
    "It was a cold [MASK] in the middle of winter.",
    "The music was played by a large [MASK].",
    "She [MASK] her head and smiled.",
]


@dataclasses.dataclass
class DemoConfig:
    """Sizes of one demo run. `full` takes about 15 minutes on 2 CPU cores."""

    train_glob: str = os.path.join(REPO, "demo_corpus", "train", "*.txt")
    heldout_glob: str = os.path.join(REPO, "demo_corpus", "heldout", "*.txt")
    vocab_size: int = 8000
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    dupe_factor: int = 10
    heldout_dupe_factor: int = 3
    embedding_size: int = 128
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 2
    intermediate_size: int = 512
    train_batch_size: int = 32
    num_train_steps: int = 3000
    num_warmup_steps: int = 300
    learning_rate: float = 5e-3
    optimizer: str = "lamb"
    mixed_precision: str = "mixed_bfloat16"  # the fastest on this CPU (docs/performance.md)
    save_checkpoints_steps: int = 500
    iterations_per_loop: int = 100
    eval_batch_size: int = 64
    num_workers: int = 2
    seed: int = 12345

    @classmethod
    def mini(cls) -> "DemoConfig":
        """Seconds, not minutes: the same code path on a sliver of the corpus (tests)."""
        return cls(train_glob=os.path.join(REPO, "demo_corpus", "heldout", "pg3*.txt"),
                   heldout_glob=os.path.join(REPO, "demo_corpus", "heldout", "pg972.txt"),
                   vocab_size=400, max_seq_length=32, max_predictions_per_seq=5,
                   dupe_factor=2, heldout_dupe_factor=1, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                   num_attention_heads=2, intermediate_size=64, train_batch_size=8,
                   num_train_steps=20, num_warmup_steps=2, learning_rate=1e-3,
                   save_checkpoints_steps=10, iterations_per_loop=5, eval_batch_size=8,
                   num_workers=1)

    def fingerprint(self, *fields) -> str:
        values = {f: getattr(self, f) for f in fields}
        for key, value in values.items():
            if isinstance(value, str) and "*" in value:  # hash the input files too
                values[key] = [(p, os.path.getsize(p)) for p in sorted(glob.glob(value))]
        return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


class Stages:
    """Remembers which stages completed, with which settings, in <output_dir>/stages.json."""

    def __init__(self, output_dir):
        self.path = os.path.join(output_dir, "stages.json")
        self.done = {}
        if os.path.exists(self.path):
            from albert_tf.errors import UserValueError
            try:
                with open(self.path, encoding="utf-8") as handle:
                    self.done = json.load(handle)
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                raise UserValueError(f"{self.path} is damaged ({err}); delete it to rerun "
                                     "every stage") from err
            if not isinstance(self.done, dict):
                raise UserValueError(f"{self.path} is not this demo's stage record; delete it "
                                     "to rerun every stage")
        self.ran, self.skipped = [], []

    def run(self, name, fingerprint, outputs, fn):
        """Runs `fn` unless it completed before with `fingerprint` and `outputs` all exist."""
        from albert_tf import fileio
        if self.done.get(name) == fingerprint and all(os.path.exists(p) for p in outputs):
            logging.info("[%s] complete, skipped (outputs: %s)", name,
                         ", ".join(os.path.basename(p) for p in outputs))
            self.skipped.append(name)
            return
        logging.info("[%s] running", name)
        start = time.time()
        fn()
        missing = [p for p in outputs if not os.path.exists(p)]
        if missing:
            raise RuntimeError(f"stage {name} finished without writing {missing}")
        self.done[name] = fingerprint
        fileio.atomic_write_text(self.path, json.dumps(self.done, indent=2) + "\n")
        self.ran.append(name)
        logging.info("[%s] done in %.0f s", name, time.time() - start)


def albert_config(cfg: DemoConfig):
    from albert_tf import AlbertConfig
    return AlbertConfig(vocab_size=cfg.vocab_size, embedding_size=cfg.embedding_size,
                        hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
                        num_attention_heads=cfg.num_attention_heads,
                        intermediate_size=cfg.intermediate_size,
                        max_position_embeddings=max(512, cfg.max_seq_length))


def stage_spm(cfg, out):
    from data_prep import train_sentencepiece
    from data_prep.text_input import ReaderOptions
    files = sorted(glob.glob(cfg.train_glob))
    train_sentencepiece.train(files, os.path.join(out, "demo"),
                              ReaderOptions(input_format="raw"),
                              train_sentencepiece.SentencePieceOptions(
                                  vocab_size=cfg.vocab_size))


def stage_data(cfg, out):
    from data_prep import runner, pipeline
    from data_prep.masking import MaskingOptions
    from data_prep.text_input import ReaderOptions
    for split, pattern, dupe in (("train", cfg.train_glob, cfg.dupe_factor),
                                 ("heldout", cfg.heldout_glob, cfg.heldout_dupe_factor)):
        options = runner.RunOptions(
            spm_model_file=os.path.join(out, "demo.model"),
            reader=ReaderOptions(input_format="raw"),
            instances=pipeline.InstanceOptions(
                max_seq_length=cfg.max_seq_length, dupe_factor=dupe,
                random_seed=cfg.seed + (split == "heldout"),
                masking=MaskingOptions(max_predictions_per_seq=cfg.max_predictions_per_seq)),
            num_workers=cfg.num_workers, progress_seconds=10)
        summary = runner.create_pretraining_data(
            sorted(glob.glob(pattern)), [os.path.join(out, "data", f"{split}.tfrecord")],
            options)
        logging.info("[data] %s: %d instances, %d tokens", split, summary.get("instances", 0),
                     summary.get("tokens", 0))


def pretraining_options(cfg, out):
    from albert_tf.pretraining import PretrainingOptions
    return PretrainingOptions(
        albert_config=albert_config(cfg), output_dir=out,
        input_file=os.path.join(out, "data", "train.tfrecord"),
        eval_input_file=os.path.join(out, "data", "heldout.tfrecord"),
        max_seq_length=cfg.max_seq_length, max_predictions_per_seq=cfg.max_predictions_per_seq,
        do_train=True, do_eval=True, train_batch_size=cfg.train_batch_size,
        eval_batch_size=cfg.eval_batch_size, optimizer=cfg.optimizer,
        learning_rate=cfg.learning_rate, num_train_steps=cfg.num_train_steps,
        num_warmup_steps=cfg.num_warmup_steps,
        save_checkpoints_steps=cfg.save_checkpoints_steps, keep_checkpoint_max=2,
        iterations_per_loop=cfg.iterations_per_loop, max_eval_steps=None,
        mixed_precision=cfg.mixed_precision, seed=cfg.seed)


def stage_pretrain(cfg, out):
    from albert_tf.pretraining import run_pretraining
    run_pretraining(pretraining_options(cfg, out))


def stage_export(cfg, out):
    from albert_tf import AlbertPretrainer, checkpoints, hub_export
    model = AlbertPretrainer(albert_config(cfg))
    checkpoints.load_tf1_checkpoint(model, os.path.join(out, "model.ckpt-best"))
    hub_export.export_pretrainer(model, os.path.join(out, "albert_config.json"),
                                 os.path.join(out, "demo.model"),
                                 os.path.join(out, "saved_model"))


def read_jsonl(path):
    """Records by step; a resumed run's repeated steps keep the newest record."""
    records = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    record = json.loads(line)
                    records[record["step"]] = record
    return [records[step] for step in sorted(records)]


def read_eval_results(path):
    """The blocks of eval_results.txt (`key = value` lines) as dicts, by step."""
    blocks, current = {}, {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if " = " not in line:
                    continue
                key, value = line.strip().split(" = ", 1)
                current[key] = float(value)
                if key == "sentence_order_loss" and "global_step" in current:
                    blocks[int(current["global_step"])] = current
                    current = {}
    return [blocks[step] for step in sorted(blocks)]


def stage_plot(cfg, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from albert_tf import fileio
    train = read_jsonl(os.path.join(out, "train", "metrics.jsonl"))
    evals = read_eval_results(os.path.join(out, "eval_results.txt"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = (("loss", "loss (MLM + SOP)"), ("masked_lm_accuracy", "MLM accuracy"),
              ("sentence_order_accuracy", "SOP accuracy"))
    for ax, (key, title) in zip(axes, panels):
        ax.plot([r["step"] for r in train], [r[key] for r in train], label="train")
        ax.plot([int(r["global_step"]) for r in evals], [r[key] for r in evals], "o-",
                label="held-out")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[2].axhline(0.5, color="grey", linestyle=":", label="chance")
    axes[0].legend()
    axes[2].legend()
    fig.suptitle("ALBERT pretraining on the demo corpus")
    fig.tight_layout()
    with fileio.atomic_open(os.path.join(out, "pretraining.png"), "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


def chance_levels(out):
    """Majority-class baselines on the held-out data: most frequent masked token, SOP label."""
    import collections
    import tensorflow as tf
    token_counts, sop_counts = collections.Counter(), collections.Counter()
    for record in tf.data.TFRecordDataset(os.path.join(out, "data", "heldout.tfrecord")):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        ids = example["masked_lm_ids"].int64_list.value
        weights = example["masked_lm_weights"].float_list.value
        token_counts.update(i for i, w in zip(ids, weights) if w > 0)
        sop_counts.update(example["next_sentence_labels"].int64_list.value)
    mlm = token_counts.most_common(1)[0][1] / max(sum(token_counts.values()), 1)
    sop = sop_counts.most_common(1)[0][1] / max(sum(sop_counts.values()), 1)
    return mlm, sop


def report(cfg, out, elapsed):
    from albert_tf import fill_mask
    results = fill_mask.predict(out, SENTENCES, top_k=5)
    print("\nFill-in predictions (top 5, from the pretrained model in", out + "):")
    for sentence, predictions in zip(SENTENCES, results):
        print(fill_mask.format_predictions(sentence, predictions))
    with open(os.path.join(out, "best_eval.json"), encoding="utf-8") as handle:
        best = json.load(handle)
    train = read_jsonl(os.path.join(out, "train", "metrics.jsonl"))
    rates = [r["sequences_per_sec"] for r in train[1:]] or [r["sequences_per_sec"] for r in train]
    mlm_chance, sop_chance = chance_levels(out)
    summary = {
        "steps": cfg.num_train_steps,
        "train_batch_size": cfg.train_batch_size,
        "sequences_per_sec": sum(rates) / len(rates) if rates else 0.0,
        "best_step": best["global_step"],
        "heldout_masked_lm_accuracy": best["masked_lm_accuracy"],
        "masked_lm_chance": mlm_chance,
        "heldout_sentence_order_accuracy": best["sentence_order_accuracy"],
        "sentence_order_chance": sop_chance,
        "wall_seconds": elapsed,
    }
    print(f"\nSummary: {summary['steps']} steps of {cfg.train_batch_size} sequences "
          f"({summary['sequences_per_sec']:.1f} sequences/s, {cfg.mixed_precision}); best "
          f"held-out checkpoint at step {summary['best_step']}:\n"
          f"  masked-LM accuracy     {summary['heldout_masked_lm_accuracy']:.3f}  "
          f"(chance: always the most frequent token = {mlm_chance:.3f}; "
          f"uniform = {1 / cfg.vocab_size:.5f})\n"
          f"  sentence-order accuracy {summary['heldout_sentence_order_accuracy']:.3f}  "
          f"(chance: majority label = {sop_chance:.3f})\n"
          f"Outputs in {out}: albert_config.json, demo.model, model.ckpt-best.* "
          f"(official layout), saved_model/, pretraining.png, train/ and eval/ TensorBoard "
          f"logs. Try: python -m albert_tf.fill_mask --model_dir {out} "
          f"\"The [MASK] was very quiet.\"")
    from albert_tf import fileio
    fileio.atomic_write_text(os.path.join(out, "summary.json"),
                             json.dumps(summary, indent=2) + "\n")
    return summary


def run(cfg: DemoConfig, out: str):
    """Runs every stage; returns (summary dict, Stages)."""
    start = time.time()
    os.makedirs(out, exist_ok=True)
    stages = Stages(out)
    spm_fp = cfg.fingerprint("train_glob", "vocab_size")
    stages.run("spm", spm_fp, [os.path.join(out, "demo.model")], lambda: stage_spm(cfg, out))
    data_fp = cfg.fingerprint("train_glob", "heldout_glob", "max_seq_length",
                              "max_predictions_per_seq", "dupe_factor", "heldout_dupe_factor",
                              "seed") + spm_fp
    stages.run("data", data_fp, [os.path.join(out, "data", f"{s}.tfrecord")
                                 for s in ("train", "heldout")], lambda: stage_data(cfg, out))
    model_fields = [f.name for f in dataclasses.fields(cfg)
                    if f.name not in ("num_workers", "train_glob", "heldout_glob")]
    train_fp = cfg.fingerprint(*model_fields) + data_fp
    stages.run("pretrain", train_fp, [os.path.join(out, "model.ckpt-best.index"),
                                      os.path.join(out, "best_eval.json")],
               lambda: stage_pretrain(cfg, out))
    stages.run("export", train_fp, [os.path.join(out, "saved_model", "saved_model.pb")],
               lambda: stage_export(cfg, out))
    stages.run("plot", train_fp, [os.path.join(out, "pretraining.png")],
               lambda: stage_plot(cfg, out))
    summary = report(cfg, out, time.time() - start)
    return summary, stages


FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", os.path.join(REPO, "demo_output"), "Where everything goes.")
flags.DEFINE_enum("size", "full", ["full", "mini"],
                  "full: ~15 minutes on 2 cores; mini: the same pipeline in seconds.")
flags.DEFINE_integer("num_train_steps", None, "Override the number of pretraining steps.")


def main(argv):
    from albert_tf.errors import UserValueError, check_writable

    if len(argv) > 1:
        raise UserValueError(f"unexpected arguments: {' '.join(argv[1:])} (see --help)")
    if FLAGS.num_train_steps is not None and FLAGS.num_train_steps < 1:
        raise UserValueError(f"--num_train_steps must be positive, got {FLAGS.num_train_steps}")
    check_writable(FLAGS.output_dir, "--output_dir", "directory")
    logging.set_verbosity(logging.INFO)
    cfg = DemoConfig() if FLAGS.size == "full" else DemoConfig.mini()
    if FLAGS.num_train_steps:
        cfg.num_train_steps = FLAGS.num_train_steps
        cfg.num_warmup_steps = min(cfg.num_warmup_steps, cfg.num_train_steps // 10)
    sys.path.insert(0, REPO)
    run(cfg, FLAGS.output_dir)


if __name__ == "__main__":
    from albert_tf import cli

    cli.run(main, interrupted=lambda: f"the completed stages in {FLAGS.output_dir} are kept "
            "(pretraining from its last checkpoint); rerun the same command to resume")
