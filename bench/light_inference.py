"""Quality and speed of ALBERT light at inference: fewer layers and early exit (PABEE),
measured on the exported files of one fine-tuned classifier.

    .venv/bin/python bench/light_inference.py --init_dir /tmp/teacher \
        [--exit_heads shared] [--train_step 600] [--patience 1,2,3,4,5] [--output x.json]

1. SST-2 (the shared dev.tsv split into 600 training / 272 held-out sentences, as
   bench/int8_accuracy.py) is fine-tuned by run_classifier.py (a subprocess: the real CLI)
   with --exit_heads from --init_dir (bench/teacher_pretrain.py's or demo.py's output: an
   official-style directory), or from random weights without it.
2. From its best weights, one export per setting: every layer; --inference_layers=k for
   each k < L; --patience=t for each t of --patience. Each writes the SavedModel and
   model.onnx, as `run_classifier.py --export_dir` does (`export_classifier`,
   `classifier_portable_model`).
3. Each export runs the 272 held-out sentences: accuracy and the mean exit layer (from
   model.onnx; the SavedModel's serve_tokens must give the same labels and exit layers),
   batch-1 latency (each sentence alone, its row as long as its tokens, as the pipelines
   send it; median over the sentences) and batch-32 throughput (rows padded to the longest
   of their batch), for ONNX Runtime and the SavedModel, each with the machine's cores.

4. With --students (e.g. layers:2,layers:1), run_distill.py trains each student from the
   fine-tuned teacher (the same schedule) and its export is measured the same way.

Prints the table with the CPU named, the speed-ups against every layer, and writes --output
(JSON) with every figure.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from int8_accuracy import SHARED, SMALL_CONFIG, split_sst2  # noqa: E402

SEQ = 128
BATCH = 32


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--init_dir", help="pretrained official-style directory "
                        "(albert_config.json, *.model, model.ckpt-best)")
    parser.add_argument("--work", help="working directory (default: a temporary one)")
    parser.add_argument("--exit_heads", default="shared", choices=("shared", "per_layer"))
    parser.add_argument("--train_step", type=int, default=600)
    parser.add_argument("--learning_rate", type=float, default=5e-4)
    parser.add_argument("--patience", default="1,2,3,4,5")
    parser.add_argument("--students", default="",
                        help="run_distill.py students to train from the fine-tuned teacher "
                             "and measure, comma-separated (e.g. layers:2,layers:1)")
    parser.add_argument("--student_learning_rate", type=float, default=1e-4,
                        help="the students' peak learning rate (a layers:k student starts "
                             "from the teacher's weights)")
    parser.add_argument("--hidden_weight", type=float, default=0.0,
                        help="run_distill.py --hidden_weight of the students")
    parser.add_argument("--distill_alpha", type=float, default=0.5,
                        help="run_distill.py --distill_alpha of the students")
    parser.add_argument("--only_students", action="store_true",
                        help="measure the students alone (the teacher's rows come from "
                             "--output's earlier figures)")
    parser.add_argument("--output", help="JSON file of every figure")
    return parser.parse_args(argv)


def model_flags(args, work: pathlib.Path) -> Dict[str, str]:
    if args.init_dir:
        init = pathlib.Path(args.init_dir)
        spm = next(init.glob("*.model"))
        return {"albert_config_file": str(init / "albert_config.json"),
                "spm_model_file": str(spm), "init_checkpoint": str(init / "model.ckpt-best")}
    config = work / "albert_config.json"
    config.write_text(json.dumps(dict(SMALL_CONFIG, num_hidden_layers=6)))
    return {"albert_config_file": str(config),
            "spm_model_file": str(SHARED / "spm" / "albert_style_pd8k.model")}


def fine_tune(args, work: pathlib.Path, data: pathlib.Path, flags: Dict[str, str]) -> float:
    """Runs run_classifier.py; returns its wall time in seconds."""
    command = [sys.executable, str(REPO / "run_classifier.py"), "--task_name=sst-2",
               f"--data_dir={data}", f"--output_dir={work / 'run'}", "--do_train",
               "--do_eval", f"--max_seq_length={SEQ}", "--train_batch_size=32",
               f"--learning_rate={args.learning_rate}", f"--train_step={args.train_step}",
               f"--warmup_step={args.train_step // 10}",
               f"--save_checkpoints_steps={max(args.train_step // 4, 1)}",
               "--iterations_per_loop=50", "--seed=7", f"--exit_heads={args.exit_heads}"]
    command += [f"--{name}={value}" for name, value in flags.items()]
    start = time.time()
    subprocess.run(command, check=True)
    return time.time() - start


def cpu_name() -> str:
    from albert_tf.kernels import cpu

    info = cpu.read_cpu_info()
    return f"{info.name}, {info.shown_flags()}, {os.cpu_count()} cores"


def held_out(options):
    import numpy as np

    from albert_tf import tokenization
    from albert_tf.tasks.classification import glue

    examples = glue.read_examples(glue.TASKS["sst-2"], options.data_dir, "dev")
    tokenizer = tokenization.FullTokenizer(spm_model_file=options.spm_model_file)
    features = glue.convert_examples(examples, tokenizer, SEQ, ["0", "1"])
    labels = np.array([int(e.label) for e in examples])
    return {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}, labels


def trimmed_batches(features, size: int):
    """The features in batches of `size`, each padded only to its longest row."""
    count = len(features["input_ids"])
    lengths = features["input_mask"].sum(-1)
    for start in range(0, count, size):
        width = int(lengths[start:start + size].max())
        yield {k: v[start:start + size, :width] for k, v in features.items()}


def measure(run, features) -> Dict[str, float]:
    """Batch-1 latency (median ms) and batch-32 throughput (sentences/s) of run(batch)."""
    for batch in trimmed_batches(features, BATCH):  # warm up every shape family once
        run(batch)
    singles = []
    for batch in trimmed_batches(features, 1):
        start = time.perf_counter()
        run(batch)
        singles.append(time.perf_counter() - start)
    start = time.perf_counter()
    rows = 0
    for _ in range(2):
        for batch in trimmed_batches(features, BATCH):
            run(batch)
            rows += len(batch["input_ids"])
    return {"batch1_ms": 1000 * statistics.median(singles),
            "batch32_per_s": rows / (time.perf_counter() - start)}


def export_setting(model, options, spec, directory: pathlib.Path):
    from albert_tf.export import onnx as onnx_export
    from albert_tf.tasks.classification.export import (classifier_portable_model,
                                                       export_classifier)

    directory.mkdir(parents=True)
    options.export_dir = str(directory)
    export_classifier(model, options, spec)
    portable = classifier_portable_model(model, options, spec)
    onnx_export.write_onnx(portable.fn, portable.input_signature,
                           str(directory / "model.onnx"), portable.metadata)


def run_setting(model, options, spec, features, labels, directory) -> Dict:
    import numpy as np
    import onnxruntime
    import tensorflow as tf

    export_setting(model, options, spec, directory)
    session = onnxruntime.InferenceSession(str(directory / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]

    def onnx_run(batch):
        return dict(zip(names, session.run(None, batch)))

    serve = tf.saved_model.load(str(directory)).signatures["serve_tokens"]

    def saved_run(batch):
        return {k: v.numpy() for k, v in serve(**{n: tf.constant(v) for n, v in
                                                   batch.items()}).items()}

    onnx_out = [onnx_run(b) for b in trimmed_batches(features, BATCH)]
    saved_out = [saved_run(b) for b in trimmed_batches(features, BATCH)]
    predicted = np.concatenate([o["predictions"] for o in onnx_out])
    exits = (np.concatenate([o["exit_layer"] for o in onnx_out]) if "exit_layer" in names
             else np.full(len(predicted), model.inference_layers or model.config.num_hidden_layers))
    saved_labels = np.concatenate([o["predictions"] for o in saved_out]).astype(str)
    agree = bool((saved_labels == predicted.astype(str)).all())
    if "exit_layer" in names:
        agree = agree and bool((np.concatenate([o["exit_layer"] for o in saved_out])
                                == exits).all())
    return {"accuracy": float((predicted == labels).mean()), "mean_exit_layer":
            float(exits.mean()), "exit_histogram": np.bincount(exits).tolist(),
            "saved_model_agrees_with_onnx": agree, "onnx": measure(onnx_run, features),
            "saved_model": measure(saved_run, features)}


def distil(args, work: pathlib.Path, data: pathlib.Path, spec: str) -> pathlib.Path:
    """Trains the student `spec` from the teacher run with run_distill.py (the teacher's
    own schedule); returns its export directory."""
    out = work / (f"student_{spec.replace(':', '_')}"
                  + (f"_hidden{args.hidden_weight:g}" if args.hidden_weight else ""))
    if not (out / "export" / "model.onnx").exists():
        command = [sys.executable, str(REPO / "run_distill.py"), f"--teacher={work / 'run'}",
                   f"--student={spec}", "--task_name=sst-2", f"--data_dir={data}",
                   f"--output_dir={out}", "--do_train", "--do_eval",
                   f"--max_seq_length={SEQ}", "--train_batch_size=32",
                   f"--learning_rate={args.student_learning_rate}",
                   f"--train_step={args.train_step}", f"--warmup_step={args.train_step // 10}",
                   f"--save_checkpoints_steps={max(args.train_step // 4, 1)}",
                   "--iterations_per_loop=50", "--seed=7", f"--export_dir={out / 'export'}",
                   "--export_format=saved_model,onnx",
                   f"--hidden_weight={args.hidden_weight}",
                   f"--distill_alpha={args.distill_alpha}",
                   f"--spm_model_file={SHARED / 'spm' / 'albert_style_pd8k.model'}"
                   if not args.init_dir else
                   f"--spm_model_file={next(pathlib.Path(args.init_dir).glob('*.model'))}"]
        subprocess.run(command, check=True)
    return out / "export"


def run_student(export_dir: pathlib.Path, features, labels) -> Dict:
    import numpy as np
    import onnxruntime
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the raw-text signature's ops)

    session = onnxruntime.InferenceSession(str(export_dir / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    serve = tf.saved_model.load(str(export_dir)).signatures["serve_tokens"]

    def onnx_run(batch):
        return session.run(["predictions"], batch)[0]

    def saved_run(batch):
        return serve(**{n: tf.constant(v) for n, v in batch.items()})

    predicted = np.concatenate([onnx_run(b) for b in trimmed_batches(features, BATCH)])
    config = json.loads((export_dir / "albert_tf_export.json").read_text())["albert_config"]
    return {"accuracy": float((predicted == labels).mean()),
            "mean_exit_layer": float(config["num_hidden_layers"]),
            "hidden_size": config["hidden_size"], "onnx": measure(onnx_run, features),
            "saved_model": measure(saved_run, features)}


def settings(num_layers: int, patience: List[int]):
    yield "every layer", {}
    for k in range(1, num_layers):
        yield f"{k} layers", {"inference_layers": k}
    for t in patience:
        yield f"patience {t}", {"early_exit": {"patience": t}}


def main(argv=None) -> int:
    args = parse_args(argv)
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="light_inference_"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    if not (data / "SST-2").exists():
        split_sst2(SHARED / "glue" / "SST-2" / "dev.tsv", data)
    flags = model_flags(args, work)
    seconds = None
    if not (work / "run" / "model.ckpt-best.index").exists():
        seconds = fine_tune(args, work, data, flags)

    from albert_tf.config import AlbertConfig
    from albert_tf.finetuning import load_best_weights
    from albert_tf.modeling.early_exit import EarlyExit
    from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions

    options = ClassificationOptions(
        task_name="sst-2", data_dir=str(data), output_dir=str(work / "run"),
        spm_model_file=flags["spm_model_file"], max_seq_length=SEQ,
        albert_config=AlbertConfig.from_json_file(flags["albert_config_file"]),
        exit_heads=args.exit_heads, export_format=("saved_model", "onnx"))
    job = ClassificationJob(options)
    model = job.build_model()
    model.build()
    assert load_best_weights(model, options.output_dir)
    features, labels = held_out(options)
    rows = {}
    if args.only_students:
        rows = json.loads(pathlib.Path(args.output).read_text())["rows"]
        rows = {name: row for name, row in rows.items() if not name.startswith("student")}
    for name, setting in settings(model.config.num_hidden_layers,
                                  [int(t) for t in args.patience.split(",")]):
        if args.only_students:
            break
        model.inference_layers = setting.get("inference_layers")
        model.early_exit = (EarlyExit(**setting["early_exit"]) if "early_exit" in setting
                            else None)
        rows[name] = run_setting(model, options, job.spec, features, labels,
                                 work / "exports" / name.replace(" ", "_"))
        print(name, json.dumps(rows[name]), flush=True)
    for spec in filter(None, args.students.split(",")):
        name = f"student {spec}" + (f" hidden {args.hidden_weight:g}"
                                      if args.hidden_weight else "")
        rows[name] = run_student(distil(args, work, data, spec), features, labels)
        print(name, json.dumps(rows[name]), flush=True)
    report = {"cpu": cpu_name(), "init_dir": args.init_dir, "exit_heads": args.exit_heads,
              "train_step": args.train_step, "fine_tune_seconds": seconds,
              "majority": float(max(labels.mean(), 1 - labels.mean())), "rows": rows}
    print_table(report)
    if args.output:
        pathlib.Path(args.output).write_text(json.dumps(report, indent=1))
    return 0


def print_table(report: Dict) -> None:
    rows = report["rows"]
    base = rows["every layer"]
    print(f"\nCPU: {report['cpu']}; SST-2 held-out 272 sentences (majority "
          f"{report['majority']:.3f}); exit heads: {report['exit_heads']}")
    print("| setting | accuracy | mean exit layer | ONNX b1 ms | ONNX b1 speed-up | "
          "ONNX b32 /s | ONNX b32 speed-up | SavedModel b1 ms | SavedModel b1 speed-up | "
          "SavedModel b32 /s | SavedModel b32 speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        cells = [name, f"{row['accuracy']:.3f}", f"{row['mean_exit_layer']:.2f}"]
        print("| " + " | ".join(cells + speed_cells(row, base)) + " |")


def speed_cells(row: Dict, base: Dict) -> List[str]:
    """Each runtime's (ONNX, SavedModel) batch-1 ms, its speed-up against `base`, batch-32
    sentences/s and its speed-up: a table row's speed cells."""
    cells = []
    for runtime in ("onnx", "saved_model"):
        figures, reference = row[runtime], base[runtime]
        cells += [f"{figures['batch1_ms']:.2f}",
                  f"{reference['batch1_ms'] / figures['batch1_ms']:.2f}x",
                  f"{figures['batch32_per_s']:.0f}",
                  f"{figures['batch32_per_s'] / reference['batch32_per_s']:.2f}x"]
    return cells


if __name__ == "__main__":
    from albert_tf.kernels import onednn

    onednn.configure()
    sys.exit(main())
