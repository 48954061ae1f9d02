"""What int8 costs in accuracy: a classifier fine-tuned on real SST-2 sentences, exported
as model.onnx and model.int8.onnx, scored on held-out sentences by ONNX Runtime.

    .venv/bin/python bench/int8_accuracy.py [--init_checkpoint DIR --spm_model_file F
                                             --albert_config_file F] [--train_step N]

SST-2's dev.tsv (872 labelled movie-review sentences, ../shared/data/glue) is split into
600 training and 272 held-out sentences; the train split of SST-2 is not in the shared
data. Without --init_checkpoint the model (H=128, 4 layers sharing one block) starts
from random weights with the shared 8k SentencePiece model, so its accuracy is that of a
small model trained on 600 sentences; the int8 figures are measured against it. With the
demo's output directory (`--init_checkpoint=demo_out --spm_model_file=demo_out/demo.model
--albert_config_file=demo_out/albert_config.json`) it starts from that pretraining.

Prints and writes (--output, JSON) held-out accuracy of the Keras model (best checkpoint),
of model.onnx and of model.int8.onnx, their agreement, the largest probability change,
file sizes and ONNX Runtime's time per batch of 32 for each.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHARED = REPO.parent / "shared" / "data"
SMALL_CONFIG = {"vocab_size": 8000, "embedding_size": 64, "hidden_size": 128,
                "num_hidden_layers": 4, "num_hidden_groups": 1, "num_attention_heads": 4,
                "intermediate_size": 512, "max_position_embeddings": 128,
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
TRAIN_ROWS = 600


def split_sst2(source: pathlib.Path, root: pathlib.Path) -> None:
    lines = source.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    (root / "SST-2").mkdir(parents=True)
    (root / "SST-2" / "train.tsv").write_text("\n".join([header] + rows[:TRAIN_ROWS]) + "\n")
    (root / "SST-2" / "dev.tsv").write_text("\n".join([header] + rows[TRAIN_ROWS:]) + "\n")


def onnx_scores(path: str, features: dict, labels, batch: int = 32):
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = ("input_ids", "input_mask", "segment_ids")
    probabilities, seconds = [], []
    for start in range(0, len(labels), batch):
        feeds = {n: features[n][start:start + batch] for n in names}
        begin = time.perf_counter()
        probabilities.append(session.run(["probabilities"], feeds)[0])
        seconds.append(time.perf_counter() - begin)
    probabilities = np.concatenate(probabilities)
    accuracy = float((probabilities.argmax(1) == labels).mean())
    return probabilities, accuracy, statistics.median(seconds)


def main(argv=None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    source = SHARED / "glue" / "SST-2" / "dev.tsv"
    if not source.exists():
        parser.error(f"{source} not found (the shared GLUE data)")

    # Imported only now that the arguments are good, and all of them before the
    # fine-tuning run, so that a broken install fails before it.
    import numpy as np  # noqa: F401

    from albert_tf import tokenization  # noqa: F401
    from albert_tf.kernels import precision  # noqa: F401
    from albert_tf.config import AlbertConfig  # noqa: F401
    from albert_tf.finetuning import FinetuningOptions  # noqa: F401
    from albert_tf.tasks.classification import glue  # noqa: F401
    from albert_tf.tasks.classification.job import ClassificationOptions, run_glue  # noqa: F401

    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="albert_int8_"))
    split_sst2(source, work / "data")
    out = work / "run"
    run_glue(glue_options(args, work / "data", out))
    best = json.loads((out / "best_eval.json").read_text())
    result = heldout_figures(args, work / "data", out / "export", best)
    print_report(result, args)
    if args.output:
        pathlib.Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def argument_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init_checkpoint", default=None)
    parser.add_argument("--spm_model_file", default=str(SHARED / "spm" / "albert_style_pd8k.model"))
    parser.add_argument("--albert_config_file", default=None)
    parser.add_argument("--train_step", type=int, default=400)
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="default 5e-4 from scratch, 1e-4 from --init_checkpoint")
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--output", default=None, help="also write the figures as JSON")
    parser.add_argument("--keep", default=None, help="keep the run directory here")
    return parser


def glue_options(args: argparse.Namespace, data_dir: pathlib.Path, out: pathlib.Path):
    """SST-2 fine-tuning of --train_step steps into `out`, exported to `out`/export as
    model.onnx and model.int8.onnx; the small config unless --albert_config_file."""
    from albert_tf.config import AlbertConfig
    from albert_tf.finetuning import FinetuningOptions
    from albert_tf.tasks.classification.job import ClassificationOptions

    config = (AlbertConfig.from_json_file(args.albert_config_file) if args.albert_config_file
              else AlbertConfig.from_dict(SMALL_CONFIG))
    learning_rate = args.learning_rate or (1e-4 if args.init_checkpoint else 5e-4)
    return ClassificationOptions(
        task_name="sst-2", data_dir=str(data_dir), spm_model_file=args.spm_model_file,
        albert_config=config, max_seq_length=args.max_seq_length, eval_batch_size=32,
        export_dir=str(out / "export"), export_format=("onnx",), export_int8=True,
        finetuning=FinetuningOptions(
            output_dir=str(out), init_checkpoint=args.init_checkpoint, do_train=True,
            do_eval=True, train_batch_size=32, learning_rate=learning_rate,
            train_step=args.train_step, warmup_step=args.train_step // 10,
            save_checkpoints_steps=max(args.train_step // 4, 1),
            iterations_per_loop=max(args.train_step // 4, 1), seed=1))


def heldout_figures(args: argparse.Namespace, data_dir: pathlib.Path, export_dir: pathlib.Path,
                    best: dict) -> dict:
    """Both exports scored by ONNX Runtime on the held-out split (dev.tsv of `data_dir`),
    with the Keras model's best evaluation `best`: accuracies, agreement, sizes (MB) and
    times (ms per batch of 32)."""
    import numpy as np

    from albert_tf.kernels import precision
    from albert_tf import tokenization
    from albert_tf.tasks.classification import glue

    spec = glue.TASKS["sst-2"]
    tokenizer = tokenization.FullTokenizer(spm_model_file=args.spm_model_file)
    examples = glue.read_examples(spec, str(data_dir), "dev")
    features = glue.convert_examples(examples, tokenizer, args.max_seq_length, spec.labels)
    labels = features["label_ids"]
    fp32, fp32_accuracy, fp32_seconds = onnx_scores(str(export_dir / "model.onnx"),
                                                    features, labels)
    int8, int8_accuracy, int8_seconds = onnx_scores(str(export_dir / "model.int8.onnx"),
                                                    features, labels)
    cpu = precision.read_cpu_info()
    return {
        "cpu": cpu.model, "cpu_flags": cpu.shown_flags(),
        "init_checkpoint": args.init_checkpoint, "train_step": args.train_step,
        "heldout_examples": int(len(labels)),
        "majority_accuracy": float(max(labels.mean(), 1 - labels.mean())),
        "keras_best_accuracy": best["eval_accuracy"], "best_step": best["global_step"],
        "onnx_fp32_accuracy": fp32_accuracy, "onnx_int8_accuracy": int8_accuracy,
        "int8_agreement": float((fp32.argmax(1) == int8.argmax(1)).mean()),
        "int8_max_probability_change": float(np.abs(fp32 - int8).max()),
        "fp32_mb": os.path.getsize(export_dir / "model.onnx") / 1e6,
        "int8_mb": os.path.getsize(export_dir / "model.int8.onnx") / 1e6,
        "fp32_ms_per_batch32": 1000 * fp32_seconds, "int8_ms_per_batch32": 1000 * int8_seconds,
    }


def print_report(result: dict, args: argparse.Namespace) -> None:
    """The figures of `heldout_figures` as a short table on stdout."""
    print(f"\nSST-2, {result['heldout_examples']} held-out sentences, "
          f"{'from ' + args.init_checkpoint if args.init_checkpoint else 'from random weights'}"
          f", {args.train_step} steps; CPU: {result['cpu']}\n"
          f"  majority label        {result['majority_accuracy']:.3f}\n"
          f"  Keras (best, step {result['best_step']}) {result['keras_best_accuracy']:.3f}\n"
          f"  model.onnx            {result['onnx_fp32_accuracy']:.3f}  "
          f"({result['fp32_mb']:.1f} MB, {result['fp32_ms_per_batch32']:.1f} ms/batch of 32)\n"
          f"  model.int8.onnx       {result['onnx_int8_accuracy']:.3f}  "
          f"({result['int8_mb']:.1f} MB, {result['int8_ms_per_batch32']:.1f} ms/batch of 32)\n"
          f"  int8 agrees with fp32 on {result['int8_agreement']:.1%} of the sentences; "
          f"largest probability change {result['int8_max_probability_change']:.3f}")


if __name__ == "__main__":
    sys.exit(main())
