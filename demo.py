"""The main job: from raw public-domain books to an ALBERT that fills in masked words.

  python demo.py [--output_dir demo_output] [--size full|mini] [--pretrain_minutes M]
                 [--num_train_steps N] [--mixed_precision auto|float32|mixed_bfloat16]
                 [--recipe auto|standard|short]

Stages (each shows progress; a re-run skips the stages whose outputs are
complete and were made with the same settings, and pretraining resumes from
its last checkpoint if it was interrupted; with other settings it starts afresh):
  1. spm       train a SentencePiece model on demo_corpus/train (ALBERT's settings)
  2. data      write train and held-out TFRecords (whole-word MLM + SOP, the original's schema)
  3. calibrate time a few steps and one evaluation on this machine: the number of steps
               that fits in --pretrain_minutes (calibration.json; skipped with --num_train_steps).
               Where fewer than SHORT_RUN_STEPS fit (a slow CPU), the short-budget recipe
               takes over (--recipe=auto): sequences of 32, whose data and calibration
               (data_s32/, calibration_short.json) come out of the same budget
  4. pretrain  pretrain a small ALBERT with LAMB, evaluating on the held-out split, with the
               fill-ins of a few sentences at each evaluation (fillins.jsonl)
  5. export    a SavedModel with the original TF-Hub signatures (tokens, mlm, sop), and the
               mlm graph for ONNX Runtime (onnx/model.onnx) and LiteRT (tflite/model.tflite)
  6. plot      loss / MLM accuracy / SOP accuracy against steps, and the fill-ins (PNG)
  7. report    the fill-ins as they improved, top-5 fill-ins now, and a summary
The output directory is an official-style model directory (albert_config.json,
demo.model, model.ckpt-best.*) that `python -m albert_tf.fill_mask` reads.
"""
import dataclasses
import functools
import glob
import hashlib
import json
import os
import shutil
import statistics
import sys
import time
from typing import Dict, Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from albert_tf.kernels import onednn  # noqa: E402

onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once

from absl import flags, logging  # noqa: E402

REPO = os.path.dirname(os.path.abspath(__file__))
TIME_LIMIT_SLACK = 1.15
# Below this many calibrated steps of the standard recipe, `--recipe=auto` takes the
# short-budget one: at sequence 64 a run of about 2,000 steps ends on the unigram plateau
# (docs/pretraining.md, "The demo's recipe").
SHORT_RUN_STEPS = 3000
RECIPES = ("auto", "standard", "short")
SENTENCES = [
    "He opened the [MASK] and walked into the room.",
    "It was a cold [MASK] in the middle of winter.",
    "The music was played by a large [MASK].",
    "She [MASK] her head and smiled.",
]


@dataclasses.dataclass
class DemoConfig:
    """Sizes of one demo run: the recipe that learned the most in a few minutes of two
    CPU cores (docs/pretraining.md, "The demo's recipe"); pretraining is sized by time."""

    train_glob: str = os.path.join(REPO, "demo_corpus", "train", "*.txt")
    recipe: str = "standard"  # or "short" (`short_budget`)
    data_dir: str = "data"  # under the output directory
    heldout_glob: str = os.path.join(REPO, "demo_corpus", "heldout", "*.txt")
    vocab_size: int = 4000
    max_seq_length: int = 64
    max_predictions_per_seq: int = 10
    masked_lm_prob: float = 0.15
    ngram: int = 1  # single whole words: every mask keeps its neighbours as context
    dupe_factor: int = 10
    heldout_dupe_factor: int = 3
    embedding_size: int = 128
    hidden_size: int = 128
    num_hidden_layers: int = 2  # one shared block, applied twice
    num_attention_heads: int = 2
    intermediate_size: int = 512
    initializer_range: float = 0.05
    train_batch_size: int = 32  # more updates in the budget: see docs/pretraining.md
    # 0: as many steps as fit in `pretrain_minutes` on this machine, from a short
    # calibration run (stage `calibrate`, remembered in calibration.json).
    num_train_steps: int = 0
    pretrain_minutes: float = 6.5
    warmup_fraction: float = 0.1
    learning_rate: float = 0.01
    optimizer: str = "lamb"
    mixed_precision: str = "auto"  # bf16 where the CPU multiplies it faster, else float32
    evaluations: int = 6  # held-out evaluations (with fill-in snapshots) over the run
    calibrated: bool = False  # num_train_steps came from calibration.json (set by run)
    iterations_per_loop: int = 50
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
                   num_train_steps=20, learning_rate=1e-3, evaluations=2,
                   iterations_per_loop=5, eval_batch_size=8, num_workers=1)

    def short_budget(self) -> "DemoConfig":
        """The recipe for a CPU that fits fewer than SHORT_RUN_STEPS standard steps in the
        budget: sequences of 32 (5 predictions each), 1.6x the steps per second, and a
        plateau left after fewer updates (local context is all the first patterns use)."""
        return dataclasses.replace(self, recipe="short", max_seq_length=32,
                                   max_predictions_per_seq=5, data_dir="data_s32")

    def data_file(self, out: str, split: str) -> str:
        return os.path.join(out, self.data_dir, f"{split}.tfrecord")

    def time_limit_seconds(self) -> Optional[float]:
        """With a calibrated step count: stop at 1.15x the budget should the machine slow
        down after calibration (shared machines do), keeping the best evaluated weights."""
        return self.pretrain_minutes * 60 * TIME_LIMIT_SLACK if self.calibrated else None

    def schedule(self) -> Dict[str, int]:
        """Warmup and checkpoint (= evaluation) intervals for `num_train_steps`."""
        steps = self.num_train_steps
        every = max(self.iterations_per_loop,
                    steps // self.evaluations // self.iterations_per_loop
                    * self.iterations_per_loop)
        return {"num_warmup_steps": int(steps * self.warmup_fraction),
                "save_checkpoints_steps": every}

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
        self.seconds = {}  # wall seconds of the stages that ran in this process

    def run(self, name, fingerprint, outputs, fn, clear_stale=None):
        """Runs `fn` unless it completed before with `fingerprint` and `outputs` all exist.

        `clear_stale()`, if given, runs first when the stage last started (or
        completed) with another fingerprint: a stage that resumes its own partial
        outputs (pretraining) must not resume another settings' run.
        """
        from albert_tf import fileio
        if self.done.get(name) == fingerprint and all(os.path.exists(p) for p in outputs):
            logging.info("[%s] complete, skipped (outputs: %s)", name,
                         ", ".join(os.path.basename(p) for p in outputs))
            self.skipped.append(name)
            return
        started = f"{name} (started)"  # until it completes: what a rerun would resume
        if clear_stale is not None:
            previous = self.done.get(started, self.done.get(name))
            if previous not in (None, fingerprint):
                clear_stale()
            # No longer complete: the outputs are being replaced, and a rerun of the old
            # settings must not skip over this run's partial ones.
            self.done.pop(name, None)
            self.done[started] = fingerprint
            fileio.atomic_write_text(self.path, json.dumps(self.done, indent=2) + "\n")
        logging.info("[%s] running", name)
        start = time.time()
        fn()
        missing = [p for p in outputs if not os.path.exists(p)]
        if missing:
            raise RuntimeError(f"stage {name} finished without writing {missing}")
        self.done.pop(started, None)
        self.done[name] = fingerprint
        fileio.atomic_write_text(self.path, json.dumps(self.done, indent=2) + "\n")
        self.ran.append(name)
        self.seconds[name] = time.time() - start
        logging.info("[%s] done in %.0f s", name, self.seconds[name])


def albert_config(cfg: DemoConfig):
    from albert_tf import AlbertConfig
    return AlbertConfig(vocab_size=cfg.vocab_size, embedding_size=cfg.embedding_size,
                        hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
                        num_attention_heads=cfg.num_attention_heads,
                        intermediate_size=cfg.intermediate_size,
                        initializer_range=cfg.initializer_range,
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
                masking=MaskingOptions(masked_lm_prob=cfg.masked_lm_prob,
                                       max_predictions_per_seq=cfg.max_predictions_per_seq,
                                       ngram=cfg.ngram)),
            num_workers=cfg.num_workers, progress_seconds=10)
        summary = runner.create_pretraining_data(
            sorted(glob.glob(pattern)), [cfg.data_file(out, split)], options)
        logging.info("[data] %s: %d instances, %d tokens", split, summary.get("instances", 0),
                     summary.get("tokens", 0))


def pretraining_options(cfg, out, output_dir=None):
    """Pretraining on `out`/data, written to `output_dir` (default `out`)."""
    from albert_tf.pretraining import PretrainingOptions
    schedule = cfg.schedule()
    return PretrainingOptions(
        albert_config=albert_config(cfg), output_dir=output_dir or out,
        input_file=cfg.data_file(out, "train"),
        eval_input_file=cfg.data_file(out, "heldout"),
        max_seq_length=cfg.max_seq_length, max_predictions_per_seq=cfg.max_predictions_per_seq,
        do_train=True, do_eval=True, train_batch_size=cfg.train_batch_size,
        eval_batch_size=cfg.eval_batch_size, optimizer=cfg.optimizer,
        learning_rate=cfg.learning_rate, num_train_steps=cfg.num_train_steps,
        num_warmup_steps=schedule["num_warmup_steps"],
        save_checkpoints_steps=schedule["save_checkpoints_steps"], keep_checkpoint_max=2,
        iterations_per_loop=cfg.iterations_per_loop, max_eval_steps=None,
        mixed_precision=cfg.mixed_precision, seed=cfg.seed, deterministic_input=True,
        max_train_seconds=cfg.time_limit_seconds())


CALIBRATION_WINDOWS = 3  # of CALIBRATION_WINDOW_STEPS steps; the first one also traces
CALIBRATION_WINDOW_STEPS = 40


def stage_calibrate(cfg, out, path, spent_since=None):
    """Times a few training steps and one evaluation of this very model and data, then
    writes `path` (JSON) with the number of steps that fit in `pretrain_minutes`, less
    the time since `spent_since` (time.time(): the short recipe's own data and
    calibration come out of the budget).

    The count is rounded down to a multiple of 50 steps and kept on re-runs, so a
    re-run (or a resumed run) trains the same steps under the same seed.
    """
    from albert_tf import fileio
    from albert_tf.kernels import precision
    from albert_tf.pretraining import run_pretraining
    scratch = os.path.join(out, "calibration_run")
    shutil.rmtree(scratch, ignore_errors=True)
    probe = dataclasses.replace(
        cfg, num_train_steps=CALIBRATION_WINDOWS * CALIBRATION_WINDOW_STEPS, evaluations=1,
        iterations_per_loop=CALIBRATION_WINDOW_STEPS)
    run_pretraining(pretraining_options(probe, out, scratch),
                    on_evaluation=Snapshots(cfg, out, record_dir=scratch))
    windows = read_jsonl(os.path.join(scratch, "train", "metrics.jsonl"))
    rate = statistics.median(w["sequences_per_sec"] for w in windows[1:])
    window_sequences = CALIBRATION_WINDOW_STEPS * cfg.train_batch_size
    tracing = max(window_sequences / windows[0]["sequences_per_sec"] - window_sequences / rate,
                  0.0)
    evaluation = read_jsonl(os.path.join(scratch, "fillins.jsonl"))[-1]["evaluation_seconds"]
    shutil.rmtree(scratch, ignore_errors=True)
    # Evaluations come every num_train_steps // evaluations steps and at the end.
    spent = time.time() - spent_since if spent_since else 0.0
    usable = (cfg.pretrain_minutes * 60 * 0.97 - spent - tracing
              - (cfg.evaluations + 1) * evaluation)
    steps = max(100, int(max(usable, 0.0) * rate / cfg.train_batch_size) // 50 * 50)
    cpu = precision.read_cpu_info()
    record = {"sequences_per_sec": round(rate, 1), "tracing_seconds": round(tracing, 1),
              "evaluation_seconds": round(evaluation, 1), "num_train_steps": steps,
              "pretrain_minutes": cfg.pretrain_minutes, "recipe": cfg.recipe,
              "max_seq_length": cfg.max_seq_length, "budget_seconds_spent": round(spent, 1),
              "mixed_precision": cfg.mixed_precision, "cpu": cpu.name,
              "cpu_flags": cpu.shown_flags()}
    fileio.atomic_write_text(path, json.dumps(record, indent=2) + "\n")
    spent_text = f" (less {spent:.0f} s spent on its data and calibration)" if spent else ""
    logging.info("[calibrate] %s recipe (sequences of %d): %.1f sequences/s on %s (%s, %s), "
                 "%.1f s per evaluation: %d steps of %d sequences fit in the %.1f-minute "
                 "pretraining budget%s", cfg.recipe, cfg.max_seq_length, rate, cpu.name,
                 cpu.shown_flags(), cfg.mixed_precision, evaluation, steps,
                 cfg.train_batch_size, cfg.pretrain_minutes, spent_text)


FREQUENT_TOKENS = 100  # accuracy is also reported on the tokens outside these


def frequent_token_ids(path, count=FREQUENT_TOKENS):
    """The `count` most frequent masked-LM targets of the training data at `path` (ids).

    Counted once per version of the file in a process (calibration and pretraining
    both ask): the cache is keyed by the file's size and modification time.
    """
    stat = os.stat(path)
    return _frequent_token_ids(path, (stat.st_size, stat.st_mtime_ns), count).copy()


@functools.lru_cache(maxsize=4)
def _frequent_token_ids(path, version, count):
    del version  # part of the cache key only
    import numpy as np
    import tensorflow as tf
    spec = {"masked_lm_ids": tf.io.VarLenFeature(tf.int64),
            "masked_lm_weights": tf.io.VarLenFeature(tf.float32)}
    targets = []
    dataset = tf.data.TFRecordDataset(path).batch(1024)
    for batch in dataset.map(lambda r: tf.io.parse_example(r, spec)):
        ids = batch["masked_lm_ids"].values.numpy()
        targets.append(ids[batch["masked_lm_weights"].values.numpy() > 0])
    counts = np.bincount(np.concatenate(targets))
    return np.argsort(-counts, kind="stable")[:count]


class Snapshots:
    """At each held-out evaluation: accuracy on the tokens outside the most frequent
    ones, and the fill-ins of SENTENCES; one JSON line per evaluation in fillins.jsonl."""

    def __init__(self, cfg, out, record_dir=None):
        from albert_tf import checkpoints
        from albert_tf.tokenization import load_tokenizer
        self.cfg, self.out = cfg, out
        self.path = os.path.join(record_dir or out, "fillins.jsonl")
        self.frequent = frequent_token_ids(cfg.data_file(out, "train"))
        self.tokenizer = load_tokenizer(spm_model_file=os.path.join(out, "demo.model"))
        self.make_official = lambda model: checkpoints.OfficialModel(
            albert_config(cfg), self.tokenizer, model, None)
        self._traced_for, self._predict = None, None

    def rare_accuracy(self, model) -> float:
        import numpy as np
        import tensorflow as tf
        from albert_tf.pretraining import inputs
        config = inputs.PretrainingInputConfig(
            self.cfg.data_file(self.out, "heldout"), self.cfg.max_seq_length,
            self.cfg.max_predictions_per_seq, is_training=False)
        correct = total = 0
        if model is not self._traced_for:  # one traced call per model, not eager batches
            self._traced_for = model
            self._predict = tf.function(lambda batch: tf.argmax(
                model(batch, training=False)["mlm_logits"], axis=-1, output_type=tf.int32))
        for batch in inputs.pretraining_dataset(config, self.cfg.eval_batch_size):
            predicted = self._predict(batch).numpy()
            ids = batch["masked_lm_ids"].numpy()
            rare = (batch["masked_lm_weights"].numpy() > 0) & ~np.isin(ids, self.frequent)
            correct += int(((predicted == ids) & rare).sum())
            total += int(rare.sum())
        return correct / max(total, 1)

    def __call__(self, model, step, metrics, eval_seconds=0.0):
        from albert_tf import fileio
        started = time.time()
        official = self.make_official(model)
        record = {"step": int(step), "masked_lm_accuracy": float(metrics["masked_lm_accuracy"]),
                  "rare_masked_lm_accuracy": self.rare_accuracy(model),
                  "fillins": {s: [self.tokenizer.token_text(token)
                                  for token, _ in official.fill_mask(s, top_k=3)[0]]
                              for s in SENTENCES}}
        # What an evaluation costs (held-out pass + this snapshot): calibration budgets it.
        record["evaluation_seconds"] = eval_seconds + time.time() - started
        logging.info("[pretrain] step %d: held-out MLM accuracy %.3f (%.3f outside the %d most "
                     "frequent tokens); fill-ins: %s", step, record["masked_lm_accuracy"],
                     record["rare_masked_lm_accuracy"], FREQUENT_TOKENS,
                     "; ".join(v[0] for v in record["fillins"].values()))
        kept = [r for r in read_jsonl(self.path) if r["step"] < step]
        fileio.atomic_write_text(self.path, "".join(json.dumps(r) + "\n"
                                                    for r in kept + [record]))


def clear_pretraining(out):
    """Removes a previous pretraining's outputs from `out`, so that the next one starts
    at step 0 instead of resuming a run of other settings: what `albert_tf.training.run_dir`
    counts as a run's outputs and its record, plus the best checkpoint's data, the
    TensorBoard logs and the demo's fill-ins."""
    from albert_tf.training import run_dir
    patterns = run_dir.RUN_OUTPUTS + (run_dir.RECORD, "model.ckpt-best.*", "train", "eval",
                                      "fillins.jsonl")
    paths = sorted({p for pattern in patterns for p in glob.glob(os.path.join(out, pattern))})
    if not paths:
        return
    logging.info("[pretrain] settings changed since the pretraining in %s: removing its "
                 "outputs (%s) and starting afresh", out,
                 ", ".join(os.path.basename(p) for p in paths))
    for path in paths:
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def stage_pretrain(cfg, out):
    from albert_tf.pretraining import run_pretraining
    run_pretraining(pretraining_options(cfg, out), on_evaluation=Snapshots(cfg, out))


def stage_export(cfg, out):
    from albert_tf import AlbertPretrainer, checkpoints
    from albert_tf.export import hub as hub_export
    model = AlbertPretrainer(albert_config(cfg))
    checkpoints.load_tf1_checkpoint(model, os.path.join(out, "model.ckpt-best"))
    hub_export.export_pretrainer(model, os.path.join(out, "albert_config.json"),
                                 os.path.join(out, "demo.model"),
                                 os.path.join(out, "saved_model"))
    # The same model for ONNX Runtime and for LiteRT (token ids in), each with its
    # SentencePiece model beside it; the LiteRT conversion takes about 2 s at the demo's size.
    hub_export.export_pretrainer_onnx(model, os.path.join(out, "onnx"),
                                      vocab_file=os.path.join(out, "demo.model"))
    hub_export.export_pretrainer_tflite(model, os.path.join(out, "tflite"),
                                        vocab_file=os.path.join(out, "demo.model"))


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
    snapshots = read_jsonl(os.path.join(out, "fillins.jsonl"))
    fig = plt.figure(figsize=(13, 7.6))
    grid = fig.add_gridspec(2, 6, height_ratios=(1.0, 0.95))
    axes = [fig.add_subplot(grid[0, 2 * i:2 * i + 2]) for i in range(3)]
    panels = (("loss", "loss (MLM + SOP)"), ("masked_lm_accuracy", "MLM accuracy"),
              ("sentence_order_accuracy", "SOP accuracy"))
    for ax, (key, title) in zip(axes, panels):
        ax.plot([r["step"] for r in train], [r[key] for r in train], label="train")
        ax.plot([int(r["global_step"]) for r in evals], [r[key] for r in evals], "o-",
                label="held-out")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    if snapshots:
        axes[1].plot([s["step"] for s in snapshots],
                     [s["rare_masked_lm_accuracy"] for s in snapshots], "s--",
                     label=f"held-out, outside the\n{FREQUENT_TOKENS} most frequent tokens")
        axes[1].legend(fontsize=8)
    axes[2].axhline(0.5, color="grey", linestyle=":", label="chance")
    axes[0].legend()
    axes[2].legend()
    half = (len(SENTENCES) + 1) // 2
    for column, sentences in enumerate((SENTENCES[:half], SENTENCES[half:])):
        text = fig.add_subplot(grid[1, 3 * column:3 * column + 3])
        text.axis("off")
        if column == 0:
            text.set_title("top-3 fill-ins at each held-out evaluation", loc="left")
        text.text(0.0, 1.0, fill_in_history(snapshots, sentences) or "(no evaluations)",
                  va="top", family="monospace", fontsize=7.5, transform=text.transAxes)
    fig.suptitle("ALBERT pretraining on the demo corpus")
    fig.tight_layout()
    with fileio.atomic_open(os.path.join(out, "pretraining.png"), "wb") as handle:
        fig.savefig(handle, format="png", dpi=110)
    plt.close(fig)


def chance_levels(cfg, out):
    """Majority-class baselines on the held-out data: most frequent masked token, SOP label."""
    import collections
    import tensorflow as tf
    token_counts, sop_counts = collections.Counter(), collections.Counter()
    for record in tf.data.TFRecordDataset(cfg.data_file(out, "heldout")):
        example = tf.train.Example.FromString(record.numpy()).features.feature
        ids = example["masked_lm_ids"].int64_list.value
        weights = example["masked_lm_weights"].float_list.value
        token_counts.update(i for i, w in zip(ids, weights) if w > 0)
        sop_counts.update(example["next_sentence_labels"].int64_list.value)
    mlm = token_counts.most_common(1)[0][1] / max(sum(token_counts.values()), 1)
    sop = sop_counts.most_common(1)[0][1] / max(sum(sop_counts.values()), 1)
    return mlm, sop


def fill_in_history(snapshots, sentences=SENTENCES) -> str:
    """Per sentence, one line per evaluation: "  step  N (held-out accuracy 0.xxx): a | b | c"."""
    if not snapshots:
        return ""
    lines = []
    for sentence in sentences:
        lines.append(sentence)
        for snap in snapshots:
            if sentence in snap["fillins"]:
                lines.append(f"  step {snap['step']:>5} (held-out accuracy "
                             f"{snap['masked_lm_accuracy']:.3f}): "
                             f"{' | '.join(snap['fillins'][sentence])}")
    return "\n".join(lines)


def report(cfg, out, elapsed, stage_seconds):
    from albert_tf import fill_mask
    results = fill_mask.predict(out, SENTENCES, top_k=5)
    print("\nFill-in predictions (top 5, from the pretrained model in", out + "):")
    for sentence, predictions in zip(SENTENCES, results):
        print(fill_mask.format_predictions(sentence, predictions))
    with open(os.path.join(out, "best_eval.json"), encoding="utf-8") as handle:
        best = json.load(handle)
    train = read_jsonl(os.path.join(out, "train", "metrics.jsonl"))
    rates = [r["sequences_per_sec"] for r in train[1:]] or [r["sequences_per_sec"] for r in train]
    mlm_chance, sop_chance = chance_levels(cfg, out)
    snapshots = read_jsonl(os.path.join(out, "fillins.jsonl"))
    best_snapshot = next((s for s in snapshots if s["step"] == best["global_step"]), {})
    history = fill_in_history(snapshots)
    if history:
        print("\nFill-ins as pretraining went on (top 3 at each held-out evaluation):")
        print(history)
    from albert_tf.kernels import precision
    trained = train[-1]["step"] if train else 0
    summary = {
        "steps": trained,
        "planned_steps": cfg.num_train_steps,
        "train_batch_size": cfg.train_batch_size,
        "recipe": cfg.recipe,
        "max_seq_length": cfg.max_seq_length,
        "sequences_per_sec": sum(rates) / len(rates) if rates else 0.0,
        "mixed_precision": cfg.mixed_precision,
        "cpu": precision.read_cpu_info().name,
        "best_step": best["global_step"],
        "heldout_masked_lm_accuracy": best["masked_lm_accuracy"],
        "heldout_rare_masked_lm_accuracy": best_snapshot.get("rare_masked_lm_accuracy"),
        "masked_lm_chance": mlm_chance,
        "heldout_sentence_order_accuracy": best["sentence_order_accuracy"],
        "sentence_order_chance": sop_chance,
        "pretrain_seconds": stage_seconds.get("pretrain"),
        "wall_seconds": elapsed,
        "fillins": {str(s["step"]): s["fillins"] for s in snapshots},
    }
    rare = summary["heldout_rare_masked_lm_accuracy"]
    rare_line = (f"  masked-LM accuracy outside the {FREQUENT_TOKENS} most frequent tokens "
                 f"{rare:.3f}\n" if rare is not None else "")
    stopped = (f" (the time limit stopped it before the planned {cfg.num_train_steps}: the "
               f"machine ran slower than when it was calibrated)"
               if trained < cfg.num_train_steps else "")
    print(f"\nSummary: {summary['steps']} steps{stopped} of {cfg.train_batch_size} sequences "
          f"of {cfg.max_seq_length} tokens ({cfg.recipe} recipe; "
          f"{summary['sequences_per_sec']:.1f} sequences/s, {cfg.mixed_precision}, "
          f"{summary['cpu']}); best held-out checkpoint at step {summary['best_step']}:\n"
          f"  masked-LM accuracy     {summary['heldout_masked_lm_accuracy']:.3f}  "
          f"(chance: always the most frequent token = {mlm_chance:.3f}; "
          f"uniform = {1 / cfg.vocab_size:.5f})\n{rare_line}"
          f"  sentence-order accuracy {summary['heldout_sentence_order_accuracy']:.3f}  "
          f"(chance: majority label = {sop_chance:.3f})\n"
          f"Outputs in {out}: albert_config.json, demo.model, model.ckpt-best.* "
          f"(official layout), saved_model/, onnx/model.onnx, tflite/model.tflite, "
          f"pretraining.png, train/ and eval/ TensorBoard "
          f"logs. Try: python -m albert_tf.fill_mask --model_dir {out} "
          f"\"The [MASK] was very quiet.\"")
    from albert_tf import fileio
    fileio.atomic_write_text(os.path.join(out, "summary.json"),
                             json.dumps(summary, indent=2) + "\n")
    return summary


def resolved_precision(requested: str, out: str) -> str:
    """The dtype policy of `requested`, "auto" measured once per output directory.

    auto times the CPU's bf16 and float32 GEMMs; on a CPU whose ratio lies near the
    threshold (or on a busy machine) two measurements can disagree, which would make a
    rerun of the same command a run of other settings. The first choice is kept in
    <out>/precision.json; delete it to measure again.
    """
    from albert_tf import fileio
    from albert_tf.kernels import precision
    if requested != "auto":
        return precision.resolve(requested)
    path = os.path.join(out, "precision.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            chosen = json.load(handle)["auto"]
        logging.info("--mixed_precision=auto: %s, as measured by the first run in %s (delete "
                     "%s to measure again)", chosen, out, os.path.basename(path))
        return chosen
    chosen = precision.resolve("auto")
    fileio.atomic_write_text(path, json.dumps({"auto": chosen}) + "\n")
    return chosen


def run(cfg: DemoConfig, out: str, recipe: str = "standard"):
    """Runs every stage; returns (summary dict, Stages). `recipe`: "standard", "short", or
    "auto" (`--recipe`'s default: the short-budget recipe where calibration fits fewer
    than SHORT_RUN_STEPS standard steps; the standard one with a fixed `num_train_steps`)."""
    start = time.time()
    os.makedirs(out, exist_ok=True)
    cfg = dataclasses.replace(cfg, mixed_precision=resolved_precision(cfg.mixed_precision, out))
    stages = Stages(out)
    spm_fp = cfg.fingerprint("train_glob", "vocab_size")
    stages.run("spm", spm_fp, [os.path.join(out, "demo.model")], lambda: stage_spm(cfg, out))
    if recipe == "short":
        cfg = cfg.short_budget()
    cfg, data_fp = data_and_steps(cfg, out, stages, spm_fp)
    if recipe == "auto" and cfg.calibrated and cfg.num_train_steps < SHORT_RUN_STEPS:
        logging.info("[calibrate] %d steps of the standard recipe fit, fewer than %d: this "
                     "run takes the short-budget recipe (sequences of 32), which leaves the "
                     "unigram plateau in fewer steps (docs/pretraining.md)",
                     cfg.num_train_steps, SHORT_RUN_STEPS)
        short = dataclasses.replace(cfg.short_budget(), num_train_steps=0, calibrated=False)
        cfg, data_fp = data_and_steps(short, out, stages, spm_fp, spent_since=time.time())
    model_fields = [f.name for f in dataclasses.fields(cfg)
                    if f.name not in ("num_workers", "train_glob", "heldout_glob",
                                      "pretrain_minutes")]
    train_fp = cfg.fingerprint(*model_fields) + data_fp
    stages.run("pretrain", train_fp, [os.path.join(out, "model.ckpt-best.index"),
                                      os.path.join(out, "best_eval.json")],
               lambda: stage_pretrain(cfg, out),
               clear_stale=lambda: clear_pretraining(out))
    stages.run("export", train_fp, [os.path.join(out, "saved_model", "saved_model.pb"),
                                    os.path.join(out, "onnx", "model.onnx"),
                                    os.path.join(out, "tflite", "model.tflite")],
               lambda: stage_export(cfg, out))
    stages.run("plot", train_fp, [os.path.join(out, "pretraining.png")],
               lambda: stage_plot(cfg, out))
    summary = report(cfg, out, time.time() - start, stages.seconds)
    return summary, stages


def data_and_steps(cfg, out, stages, spm_fp, spent_since=None):
    """The recipe's data stage and, without a fixed step count, its calibration (the
    short recipe's stages and files carry its name). Returns (cfg with num_train_steps,
    the data's fingerprint)."""
    suffix = "" if cfg.recipe == "standard" else f" ({cfg.recipe})"
    data_fp = cfg.fingerprint("train_glob", "heldout_glob", "max_seq_length",
                              "max_predictions_per_seq", "masked_lm_prob", "ngram",
                              "dupe_factor", "heldout_dupe_factor", "seed") + spm_fp
    stages.run("data" + suffix, data_fp, [cfg.data_file(out, s) for s in ("train", "heldout")],
               lambda: stage_data(cfg, out))
    if cfg.num_train_steps:
        return cfg, data_fp
    calibration = os.path.join(out, "calibration.json" if not suffix
                               else f"calibration_{cfg.recipe}.json")
    fields = [f.name for f in dataclasses.fields(cfg) if f.name not in
              ("num_workers", "train_glob", "heldout_glob", "num_train_steps")]
    stages.run("calibrate" + suffix, cfg.fingerprint(*fields) + data_fp, [calibration],
               lambda: stage_calibrate(cfg, out, calibration, spent_since))
    with open(calibration, encoding="utf-8") as handle:
        steps = json.load(handle)["num_train_steps"]
    return dataclasses.replace(cfg, num_train_steps=steps, calibrated=True), data_fp


FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", os.path.join(REPO, "demo_output"), "Where everything goes.")
flags.DEFINE_enum("size", "full", ["full", "mini"],
                  "full: under 10 minutes on 2 cores (6.5 of pretraining); mini: the same "
                  "pipeline in seconds.")
flags.DEFINE_integer("num_train_steps", None,
                     "Pretraining steps; default: as many as fit in --pretrain_minutes on this "
                     "machine (timed by a short calibration run, kept in calibration.json).")
flags.DEFINE_float("pretrain_minutes", None, "Pretraining time budget (full: 6.5 minutes).")
flags.DEFINE_enum("recipe", "auto", list(RECIPES),
                  f"auto: the standard recipe (sequences of 64), or the short-budget one "
                  f"(sequences of 32) where calibration fits fewer than {SHORT_RUN_STEPS} "
                  "standard steps in the budget (a slow CPU); with --num_train_steps, auto "
                  "is the standard recipe.")
flags.DEFINE_enum("mixed_precision", "auto", ["auto", "float32", "mixed_bfloat16"],
                  "auto: bf16 where the CPU multiplies it faster than float32 (AMX, or "
                  "AVX512-BF16 whose GEMMs measure at least 1.3x float32), float32 elsewhere.")


def main(argv):
    from albert_tf.errors import UserValueError, check_writable

    if len(argv) > 1:
        raise UserValueError(f"unexpected arguments: {' '.join(argv[1:])} (see --help)")
    if FLAGS.num_train_steps is not None and FLAGS.num_train_steps < 1:
        raise UserValueError(f"--num_train_steps must be positive, got {FLAGS.num_train_steps}")
    if FLAGS.size == "mini" and FLAGS.recipe == "short":
        raise UserValueError("--recipe=short applies to --size=full (the miniature run "
                             "already uses sequences of 32)")
    check_writable(FLAGS.output_dir, "--output_dir", "directory")
    logging.set_verbosity(logging.INFO)
    cfg = DemoConfig() if FLAGS.size == "full" else DemoConfig.mini()
    if FLAGS.num_train_steps:
        cfg.num_train_steps = FLAGS.num_train_steps
    if FLAGS.pretrain_minutes is not None:
        if FLAGS.pretrain_minutes <= 0:
            raise UserValueError(f"--pretrain_minutes must be positive, got "
                                 f"{FLAGS.pretrain_minutes}")
        cfg.pretrain_minutes = FLAGS.pretrain_minutes
    cfg.mixed_precision = FLAGS.mixed_precision
    sys.path.insert(0, REPO)
    run(cfg, FLAGS.output_dir, FLAGS.recipe if FLAGS.size == "full" else "standard")


if __name__ == "__main__":
    from albert_tf import cli

    cli.run(main, interrupted=lambda: f"the completed stages in {FLAGS.output_dir} are kept "
            "(pretraining from its last checkpoint); rerun the same command to resume")
