"""Speed of distillation students against an ALBERT-base teacher, on model.onnx and the
SavedModel (random weights: speed does not depend on them).

    .venv/bin/python bench/student_speed.py [--students tiny,small,layers:4,layers:2] \
        [--output x.json]

The teacher is ALBERT-base's shape (E=128, H=768, 12 applications of one shared layer,
12 heads, I=3072) with the shared 8k SentencePiece vocabulary; each student is
`students.student_config(teacher, spec)`. Each model is exported as a classifier as
run_classifier.py --export_dir does (SavedModel and model.onnx) and runs the 272 held-out
SST-2 sentences of bench/light_inference.py: batch-1 latency (each sentence alone, its row
as long as its tokens; median) and batch-32 throughput. Prints the CPU, each model's
figures and its speed-up against the teacher. Quality is bench/light_inference.py's
(a student trained from a teacher that has learned); this script answers only "how much
faster is the student's shape".
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from int8_accuracy import SHARED, split_sst2  # noqa: E402
from light_inference import (SEQ, cpu_name, export_setting, held_out, measure,  # noqa: E402
                             speed_cells)

BASE = {"vocab_size": 8000, "embedding_size": 128, "hidden_size": 768,
        "num_hidden_layers": 12, "num_hidden_groups": 1, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 512}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", default="tiny,small,layers:4,layers:2")
    parser.add_argument("--output", help="JSON file of every figure")
    return parser.parse_args(argv)


def measure_config(config, options, spec, features, directory: pathlib.Path):
    import onnxruntime
    import tensorflow as tf

    from albert_tf.modeling.models import AlbertClassifier

    tf.keras.utils.set_random_seed(0)
    model = AlbertClassifier(config, num_labels=2)
    model.build()
    export_setting(model, options, spec, directory)
    session = onnxruntime.InferenceSession(str(directory / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    serve = tf.saved_model.load(str(directory)).signatures["serve_tokens"]

    def onnx_run(batch):
        return session.run(["predictions"], batch)

    def saved_run(batch):
        return serve(**{name: tf.constant(value) for name, value in batch.items()})

    return {"hidden_size": config.hidden_size, "layers": config.num_hidden_layers,
            "onnx": measure(onnx_run, features), "saved_model": measure(saved_run, features)}


def main(argv=None) -> int:
    args = parse_args(argv)
    from albert_tf.config import AlbertConfig
    from albert_tf.distillation import students
    from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions

    work = pathlib.Path(tempfile.mkdtemp(prefix="student_speed_"))
    split_sst2(SHARED / "glue" / "SST-2" / "dev.tsv", work / "data")
    teacher = AlbertConfig.from_dict(BASE)
    options = ClassificationOptions(
        task_name="sst-2", data_dir=str(work / "data"), output_dir=str(work / "run"),
        spm_model_file=str(SHARED / "spm" / "albert_style_pd8k.model"), max_seq_length=SEQ,
        albert_config=teacher, export_format=("saved_model", "onnx"))
    spec = ClassificationJob(options).spec
    features, _ = held_out(options)
    rows = {"teacher (ALBERT-base shape)": measure_config(teacher, options, spec, features,
                                                          work / "teacher")}
    print("teacher", json.dumps(rows["teacher (ALBERT-base shape)"]), flush=True)
    for name in filter(None, args.students.split(",")):
        config = students.student_config(teacher, name)
        rows[name] = measure_config(config, options, spec, features,
                                    work / name.replace(":", "_"))
        print(name, json.dumps(rows[name]), flush=True)
    report = {"cpu": cpu_name(), "rows": rows}
    base = rows["teacher (ALBERT-base shape)"]
    print(f"\nCPU: {report['cpu']}; 272 SST-2 sentences, random weights")
    print("| model | ONNX b1 ms | ONNX b1 speed-up | ONNX b32 /s | ONNX b32 speed-up | "
          "SavedModel b1 ms | SavedModel b1 speed-up | SavedModel b32 /s | "
          "SavedModel b32 speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, row in rows.items():
        print("| " + " | ".join([name] + speed_cells(row, base)) + " |")
    if args.output:
        pathlib.Path(args.output).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    from albert_tf.kernels import onednn

    onednn.configure()
    sys.exit(main())
