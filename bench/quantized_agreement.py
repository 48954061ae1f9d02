"""How often the quantized files predict as float32: model.int8.onnx, model.int8.tflite and
model.fp16.tflite beside model.onnx / model.tflite, for a model fine-tuned briefly by the
real CLIs on the shared data (SST-2, CoNLL-2003 NER, RACE, SQuAD v1.1; C3 in Chinese).

    .venv/bin/python bench/quantized_agreement.py [--tasks sst2,conll2003,race,squad,c3]
        [--init_dir demo_output] [--output figures.json] [--keep DIR]

About 2 minutes per task on 2 shared cores (C3: 5), 13 for all five, from random weights.

For each task the CLI (run_classifier.py, run_ner.py, run_race.py, run_squad.py) runs in a
subprocess: it trains a few hundred steps, evaluates, and exports with
`--export_format=onnx,tflite --export_int8 --export_fp16 --int8_min_agreement=0.01` (so
that no int8 file is removed: the figures are what we want). The CLI runs each quantized
file beside its float32 file on the evaluation set and logs, on stderr,

    model.int8.tflite predicts as model.tflite on 99.63% of 272 values (272 evaluation examples)

This script parses those lines, then recomputes every figure itself from the exported
files (ONNX Runtime, and `albert_tf.export.litert_runtime.LiteRTModel`) on the same
evaluation features, read back from the run's feature caches, and counts how many of the
disagreements are near-ties: values where the float32 file's two most likely choices are
less than --near_tie apart in probability (softmax of the logits for NER tags and SQuAD
start / end positions). Everything runs in batches of 16, as the CLI's check does, and
model.int8.onnx once more one example at a time ("int8 ONNX, batch 1"): ONNX Runtime's
dynamic quantization takes one activation scale per tensor over the whole batch, so an
example's int8 prediction depends on the other examples of its batch (LiteRT's int8
kernels quantize each row on its own: no such dependence).

What is compared (as `albert_tf.export.portable` compares it): SST-2 the label; CoNLL-2003
the tag of each word (its first sub-token, in every window; constrained Viterbi decoding,
as run_ner.py exports it); RACE the chosen option; SQuAD v1.1 the argmax start and the
argmax end of each window of the --predict_file (two values per window, over the whole
window, [CLS] and question included). For SQuAD the script also compares what a user
gets: each question's answer text after the library's post-processing
(`span_qa.postprocess`: n-best spans inside the context), near-tie meaning float32's top
two n-best probabilities less than --near_tie apart; that row has no CLI figure.

Data (all from ../shared/data, assembled in a temporary directory; nothing is copied into
the repository): SST-2's dev.tsv split into 600 training / 272 held-out rows (as
bench/int8_accuracy.py); the first 800 sentences of the CoNLL-2003 eng.train sample for
training and the next 216 as eng.testa; RACE's train (22 questions) and dev (17
questions) samples; SQuAD v1.1 dev articles Warsaw, Normans and
Computational_complexity_theory (556 questions) for training and Southern_California
(180 questions) to predict; C3 (run_race.py --task_name=c3) from the shared c3-m / c3-d
dev files: documents 0-699 / 0-1199 for training, 846-1045 / 1428-1627 (606 questions)
for evaluation, with Google's Chinese WordPiece vocabulary.

Model: without --init_dir, from random weights: H=128, 4 layers sharing one block (as
bench/int8_accuracy.py's SMALL_CONFIG) with the shared 8k SentencePiece model, learning
rates 1e-4 to 5e-4 (higher ones left SST-2 and CoNLL-2003 on a constant prediction;
the span model predicts [CLS] in every window at any rate tried); with --init_dir pointing at demo.py's output directory (albert_config.json,
demo.model, model.ckpt-best.*), from that pretraining (C3 stays from random weights:
the demo's vocabulary is English).

Prints a table (task, evaluation examples, values compared, agreement with float32 of
int8 ONNX, int8 ONNX at batch 1, int8 LiteRT and fp16 LiteRT [disagreements: near-ties
among them], how many compared values are near-ties in float32, the float32 dev metric of
the exported weights) with the CPU named; then per task the run times, float32's most
frequent prediction (a model that predicts one value everywhere agrees trivially), each
file's dev accuracy (or SQuAD answer F1) and the largest float32 top-2 gap of any
disagreement. --output writes all of it as JSON, with the CLI's log figures beside ours.

With --int8_settings=8bit,reduce_range,per_tensor,uint8 it also remakes model.int8.onnx
from model.onnx with each of those quantization settings (albert_tf.export.onnx
.Int8Settings) and runs each as both kinds of CPU compute it: exact int32 sums (VNNI) and
u8 x s8 pairs saturated to int16 (x86 without VNNI), emulated by
albert_tf.export.int8_arithmetic on whatever CPU runs the script, in batches of 4; the
emulation of this CPU's kind is checked against its own ONNX Runtime first.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from int8_accuracy import SHARED, SMALL_CONFIG, split_sst2  # noqa: E402

TASKS = ("sst2", "conll2003", "race", "squad", "c3")
FILES = ("model.onnx", "model.tflite", "model.int8.onnx", "model.int8.tflite",
         "model.fp16.tflite")
# (quantized file, its float32 file), in the table's order. "model.int8.onnx@1" is
# model.int8.onnx run one example at a time: ONNX Runtime quantizes activations with one
# scale per tensor, taken over the whole batch, so its predictions depend on the batch
# (the rest run in batches of 16, as the CLI's check does).
PAIRS = (("model.int8.onnx", "model.onnx"), ("model.int8.onnx@1", "model.onnx"),
         ("model.int8.tflite", "model.tflite"), ("model.fp16.tflite", "model.tflite"))
CHECK_BATCH = 16  # albert_tf.export.portable._run_all's batch size
AGREEMENT_LINE = re.compile(
    r"(?P<file>model\.[\w.]+) (?:predicts as|agrees with) (?P<reference>model\.[\w.]+) on "
    r"(?P<percent>[\d.]+)% of (?P<values>\d+) (?:values|predictions)"
    r"(?: \((?P<examples>\d+) evaluation examples\))?")
CONLL_TRAIN_SENTENCES, CONLL_DEV_SENTENCES = 800, 216
SQUAD_TRAIN_ARTICLES = ("Warsaw", "Normans", "Computational_complexity_theory")
SQUAD_PREDICT_ARTICLES = ("Southern_California",)
SQUAD_N_BEST, SQUAD_MAX_ANSWER = 20, 30  # run_squad.py's defaults
# C3 documents (of each shared dev file, c3-m and c3-d) for training and for evaluation.
C3_SLICES = {"train": ((0, 700), (0, 1200)), "dev": ((846, 1046), (1428, 1628))}
CHINESE_VOCAB = SHARED / "chinese" / "vocab" / "vocab_chinese.txt"
# --int8_settings: quantization settings of model.int8.onnx made again from model.onnx,
# each run as both kinds of CPU compute it (albert_tf.export.int8_arithmetic), in
# batches of EMULATION_BATCH (the emulation holds K/2 x N float64 per row and product).
# Each is Int8Settings' defaults (7-bit int8 weights, per channel) with these changes.
INT8_SETTINGS = {"8bit": {"reduce_range": False}, "reduce_range": {},
                 "per_tensor": {"per_channel": False}, "uint8": {"weight_type": "uint8"}}
EMULATION_BATCH = 4


@dataclasses.dataclass
class Model:
    """Where the runs start: config, vocabulary and (or not) a pretrained checkpoint."""
    albert_config_file: str
    spm_model_file: str
    init_checkpoint: Optional[str]

    def flags(self) -> Dict[str, str]:
        flags = {"albert_config_file": self.albert_config_file,
                 "spm_model_file": self.spm_model_file}
        if self.init_checkpoint:
            flags["init_checkpoint"] = self.init_checkpoint
        return flags


# --- data and command lines -------------------------------------------------------------


def conll_blocks(path: pathlib.Path) -> List[str]:
    """The sentences (blank-line separated blocks) of a CoNLL file, -DOCSTART- dropped."""
    text = path.read_text(encoding="utf-8")
    return [b.strip("\n") for b in text.split("\n\n")
            if b.strip() and not b.strip().startswith("-DOCSTART-")]


def write_conll(path: pathlib.Path, blocks: List[str]) -> None:
    path.write_text("-DOCSTART- -X- O O\n\n" + "".join(b + "\n\n" for b in blocks),
                    encoding="utf-8")


def squad_subset(source: pathlib.Path, titles, path: pathlib.Path) -> int:
    """Writes the articles `titles` of a SQuAD file to `path`; returns their questions."""
    data = json.loads(source.read_text(encoding="utf-8"))
    articles = [a for a in data["data"] if a["title"] in titles]
    path.write_text(json.dumps({"version": data.get("version"), "data": articles}))
    return sum(len(p["qas"]) for a in articles for p in a["paragraphs"])


def common_flags(args, out: pathlib.Path, steps: int, learning_rate: float) -> Dict:
    return {"output_dir": out, "do_train": True, "train_step": steps,
            "warmup_step": max(steps // 10, 1), "learning_rate": learning_rate,
            "save_checkpoints_steps": max(steps // 4, 1), "seed": args.seed}


def sst2_run(args, model: Model, work: pathlib.Path) -> Tuple[str, Dict]:
    data = work / "data"
    if not (data / "SST-2").exists():
        split_sst2(SHARED / "glue" / "SST-2" / "dev.tsv", data)
    flags = dict(model.flags(), task_name="sst-2", data_dir=data, do_eval=True,
                 max_seq_length=args.max_seq_length_sst2, train_batch_size=32,
                 eval_batch_size=32, iterations_per_loop=50,
                 **common_flags(args, work / "run", args.sst2_steps, args.lr(2e-4, 1e-4)))
    return "run_classifier.py", flags


def conll_run(args, model: Model, work: pathlib.Path) -> Tuple[str, Dict]:
    data = work / "data"
    if not data.exists():
        blocks = conll_blocks(SHARED / "ner" / "conll2003" / "eng.train")
        data.mkdir(parents=True)
        write_conll(data / "eng.train", blocks[:CONLL_TRAIN_SENTENCES])
        write_conll(data / "eng.testa",
                    blocks[CONLL_TRAIN_SENTENCES:CONLL_TRAIN_SENTENCES + CONLL_DEV_SENTENCES])
    flags = dict(model.flags(), task_name="conll2003", data_dir=data, do_eval=True,
                 max_seq_length=args.max_seq_length_ner, doc_stride=args.max_seq_length_ner // 2,
                 train_batch_size=32, eval_batch_size=32, iterations_per_loop=50,
                 **common_flags(args, work / "run", args.ner_steps, args.lr(1e-4, 1e-4)))
    return "run_ner.py", flags


def race_run(args, model: Model, work: pathlib.Path) -> Tuple[str, Dict]:
    data = work / "data"
    if not data.exists():
        for split in ("train", "dev"):
            shutil.copytree(SHARED / "race" / "RACE" / split, data / "RACE" / split)
    flags = dict(model.flags(), data_dir=data, do_eval=True,
                 max_seq_length=args.max_seq_length_race, max_qa_length=32,
                 train_batch_size=8, eval_batch_size=8, iterations_per_loop=25,
                 **common_flags(args, work / "run", args.race_steps, args.lr(5e-4, 1e-4)))
    return "run_race.py", flags


def squad_run(args, model: Model, work: pathlib.Path) -> Tuple[str, Dict]:
    source = SHARED / "squad" / "dev-v1.1.json"
    work.mkdir(parents=True, exist_ok=True)
    squad_subset(source, SQUAD_TRAIN_ARTICLES, work / "train.json")
    squad_subset(source, SQUAD_PREDICT_ARTICLES, work / "predict.json")
    flags = dict(model.flags(), output_dir=work / "run", train_file=work / "train.json",
                 predict_file=work / "predict.json", do_train=True, do_predict=True,
                 max_seq_length=args.max_seq_length_squad,
                 doc_stride=args.max_seq_length_squad // 2, max_query_length=32,
                 train_batch_size=32, predict_batch_size=32, n_best_size=SQUAD_N_BEST,
                 max_answer_length=SQUAD_MAX_ANSWER, num_train_epochs=args.squad_epochs,
                 learning_rate=args.lr(2e-4, 1e-4),
                 save_checkpoints_steps=args.squad_checkpoint_steps, seed=args.seed)
    return "run_squad.py", flags


def c3_run(args, model: Model, work: pathlib.Path) -> Tuple[str, Dict]:
    """C3 through run_race.py, always from random weights with Google's Chinese WordPiece
    vocabulary (the demo's model is English)."""
    data = work / "data"
    if not data.exists():
        data.mkdir(parents=True)
        for subset, index in (("m", 0), ("d", 1)):
            documents = json.loads((SHARED / "chinese" / "c3" / f"c3-{subset}-dev.json")
                                   .read_text(encoding="utf-8"))
            for split, slices in C3_SLICES.items():
                start, stop = slices[index]
                (data / f"c3-{subset}-{split}.json").write_text(
                    json.dumps(documents[start:stop], ensure_ascii=False), encoding="utf-8")
    config = work / "albert_config_zh.json"
    config.write_text(json.dumps(dict(SMALL_CONFIG, vocab_size=21128), indent=2) + "\n")
    flags = dict(task_name="c3", albert_config_file=config, vocab_file=CHINESE_VOCAB,
                 data_dir=data, do_eval=True, max_seq_length=args.max_seq_length_race,
                 train_batch_size=8, eval_batch_size=8, iterations_per_loop=25,
                 **common_flags(args, work / "run", args.c3_steps,
                                args.learning_rate or 2e-4))
    return "run_race.py", flags


def run_cli(script: str, flags: Dict, log: pathlib.Path,
            export_dir: Optional[pathlib.Path] = None):
    """The CLI in a subprocess; with `export_dir`, exporting every portable file (no int8
    file removed). Returns (the finished process, seconds, the command line)."""
    if export_dir is not None:
        flags = dict(flags, export_dir=export_dir, export_format="onnx,tflite",
                     export_int8=True, export_fp16=True, int8_min_agreement=0.01)
    argv = [f"--{k}" if v is True else f"--no{k}" if v is False else f"--{k}={v}"
            for k, v in flags.items()]
    command = [sys.executable, str(REPO / script)] + argv
    begin = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    seconds = time.perf_counter() - begin
    log.write_text(done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{script} exited with {done.returncode}; the end of its log "
                           f"({log}):\n{done.stderr[-3000:]}")
    return done, seconds, " ".join(command[1:])


def logged_agreement(stderr: str) -> Dict[str, Dict]:
    """{quantized file: {reference, agreement, values, examples}} from the CLI's log."""
    found = {}
    for match in AGREEMENT_LINE.finditer(stderr):
        found[match["file"]] = {
            "reference": match["reference"], "agreement": float(match["percent"]) / 100,
            "values": int(match["values"]),
            "examples": int(match["examples"]) if match["examples"] else None}
    return found


# --- the evaluation features, as the CLI checked them ----------------------------------


def sst2_features(args, model: Model, work: pathlib.Path):
    from albert_tf import tokenization
    from albert_tf.tasks.classification import glue

    spec = glue.TASKS["sst-2"]
    tokenizer = tokenization.FullTokenizer(spm_model_file=model.spm_model_file)
    examples = glue.read_examples(spec, str(work / "data"), "dev")
    features = glue.convert_examples(examples, tokenizer, args.max_seq_length_sst2,
                                     spec.labels)
    return ({n: features[n].astype("int32") for n in ("input_ids", "input_mask", "segment_ids")},
            features["label_ids"])


def conll_features(args, model: Model, work: pathlib.Path):
    from albert_tf.tasks.tagging import features as tagging_features

    seq = args.max_seq_length_ner
    arrays = tagging_features.read_feature_arrays(
        str(work / "run" / f"conll2003_dev_s{seq}.tf_record"), seq)
    features = {n: arrays[n].astype("int32") for n in ("input_ids", "input_mask", "segment_ids")}
    features["word_mask"] = (arrays["word_index"] >= 0).astype("int32")
    return features, None


def race_features(args, model: Model, work: pathlib.Path, task_name: str = "race"):
    """RACE's (or C3's, with `choice_mask`) dev cache, as the CLI's check reads it."""
    import numpy as np
    import tensorflow as tf
    from albert_tf.tasks.multiple_choice import race

    path = str(work / "run" / f"{task_name}_dev.tf_record")
    count = sum(1 for _ in tf.data.TFRecordDataset(path))
    c3 = task_name == "c3"
    names = ("input_ids", "input_mask", "segment_ids") + (("choice_mask",) if c3 else ())
    parts = {n: [] for n in names + ("label_ids",)}
    for batch in race.dataset(path, args.max_seq_length_race, 8, False, num_examples=count,
                              choice_mask=c3):
        real = np.asarray(batch["is_real_example"]).astype(bool)
        for n in parts:
            parts[n].append(np.asarray(batch[n])[real])
    arrays = {n: np.concatenate(v).astype(np.int32) for n, v in parts.items()}
    return {n: arrays[n] for n in names}, arrays["label_ids"]


def c3_features(args, model: Model, work: pathlib.Path):
    return race_features(args, model, work, "c3")


def squad_features(args, model: Model, work: pathlib.Path):
    from albert_tf.tasks.span_qa import features as span_features

    arrays = span_features.read_feature_arrays(str(work / "run" / "predict.tf_record"),
                                               args.max_seq_length_squad)
    return {n: arrays[n].astype("int32") for n in ("input_ids", "input_mask", "segment_ids",
                                                   "p_mask")}, None


# --- what is compared, and how close float32's call was --------------------------------


def _top2_gap(probabilities):
    import numpy as np
    top = np.sort(probabilities, axis=-1)
    return top[..., -1] - top[..., -2]


def _softmax(logits):
    import numpy as np
    shifted = logits - logits.max(-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(-1, keepdims=True)


def choice_values(outputs, reference, features):
    """Classifier / RACE: the predicted label or option, and float32's top-2 gap."""
    return outputs["predictions"].reshape(-1), _top2_gap(reference["probabilities"])


def tag_values(outputs, reference, features):
    """NER: the tag of each word (positions where float32's `predictions` is not -1)."""
    keep = reference["predictions"] != -1
    gap = _top2_gap(_softmax(reference["logits"].astype("float64")))
    return outputs["predictions"][keep], gap[keep]


def span_values(outputs, reference, features):
    """SQuAD v1: the most likely start and end of each window over its passage (p_mask 0,
    [CLS] excluded), as run_squad.py's check compares them."""
    import numpy as np
    allowed = features["p_mask"] == 0
    allowed[:, 0] = False

    def passage(logits):
        return np.where(allowed, logits.astype("float64"), -np.inf)
    values = np.concatenate([passage(outputs[n]).argmax(-1)
                             for n in ("start_logits", "end_logits")])
    gaps = np.concatenate([_top2_gap(_softmax(passage(reference[n])))
                           for n in ("start_logits", "end_logits")])
    return values, gaps


def squad_answers(args, work: pathlib.Path, outputs: Dict[str, Dict], near_tie: float
                  ) -> Dict:
    """SQuAD: each file's answer texts after post-processing (as run_squad.py writes
    them), compared question by question with its float32 file's; near-tie = float32's
    two best n-best probabilities closer than `near_tie`. Also each file's F1 / EM."""
    from albert_tf.tasks.span_qa import (data as squad_data, features as span_features,
                                         metrics as squad_metrics,
                                         postprocess as squad_postprocess)

    predict_file = str(work / "predict.json")
    dataset = squad_data.load_squad_json(predict_file)
    examples = squad_data.read_squad_examples(predict_file, False, False, data=dataset)
    arrays = span_features.read_feature_arrays(str(work / "run" / "predict.tf_record"),
                                               args.max_seq_length_squad)
    options = squad_postprocess.PostprocessOptions(SQUAD_N_BEST, SQUAD_MAX_ANSWER)
    predictions, scores = {}, {}
    for name, out in outputs.items():
        results = {"unique_ids": arrays["unique_ids"], "start_logits": out["start_logits"],
                   "end_logits": out["end_logits"]}
        predictions[name] = squad_postprocess.postprocess(examples, arrays, results, options)
        metrics = squad_metrics.evaluate_v1(dataset, predictions[name].answers)
        scores[name] = {"f1": metrics["f1"] / 100, "exact_match": metrics["exact_match"] / 100}
    found = {"scores": scores}
    for quantized, reference in PAIRS:
        if quantized not in predictions:
            continue
        ref, got = predictions[reference], predictions[quantized]
        differ = near = ties = 0
        gaps = []
        for qid, entries in ref.nbest.items():
            gap = entries[0]["probability"] - (entries[1]["probability"]
                                               if len(entries) > 1 else 0.0)
            ties += gap < near_tie
            if got.answers[qid] != ref.answers[qid]:
                differ += 1
                near += gap < near_tie
                gaps.append(round(gap, 4))
        count = len(ref.answers)
        found[quantized] = {"reference": reference, "values": count,
                            "agreement": 1 - differ / count, "disagreements": differ,
                            "near_tie_disagreements": near, "near_tie_values": ties,
                            "disagreement_gaps": sorted(gaps)}
    return found


@dataclasses.dataclass(frozen=True)
class Task:
    name: str                 # table name
    command: Callable         # (args, model, work) -> (script, flags)
    features: Callable        # (args, model, work) -> (features, labels or None)
    values: Callable          # (outputs, float32 outputs, features) -> (compared values,
                              # float32's top-2 gaps)
    compare: tuple            # the rules albert_tf.export.portable checks with
    metric: Tuple[str, ...]   # best_eval.json / predict metrics keys, in order of preference
    unit: str = "examples"    # what an evaluation example is (a window of a long text, ...)
    answers: Optional[Callable] = None  # (args, work, outputs, near_tie) -> answer rows


TASK_SPECS = {
    "sst2": Task("SST-2", sst2_run, sst2_features, choice_values,
                 (("predictions", "values"),), ("eval_accuracy",), unit="sentences"),
    "conll2003": Task("CoNLL-2003 NER", conll_run, conll_features, tag_values,
                      (("predictions", "values"),), ("f1",), unit="windows"),
    "race": Task("RACE", race_run, race_features, choice_values,
                 (("predictions", "values"),), ("eval_accuracy",), unit="questions"),
    "squad": Task("SQuAD v1.1", squad_run, squad_features, span_values,
                  (("start_logits", "context_argmax"), ("end_logits", "context_argmax")),
                  ("f1",),
                  unit="windows", answers=squad_answers),
    "c3": Task("C3 (Chinese)", c3_run, c3_features, choice_values,
               (("predictions", "values"),), ("eval_accuracy",), unit="questions"),
}


# --- running the exported files ---------------------------------------------------------


def run_file(path: pathlib.Path, features, batch_size: int = CHECK_BATCH) -> Dict:
    """All outputs of an .onnx (ONNX Runtime, CPU) or .tflite (LiteRT) file on `features`,
    run as the CLI's check runs them (`albert_tf.export.portable.run_file`)."""
    from albert_tf.export import portable
    return portable.run_file(str(path), features, batch_size)


def compare_files(task: Task, outputs: Dict[str, Dict], features, near_tie: float,
                  pairs=PAIRS) -> Dict:
    """Each quantized file against its float32 file: agreement (ours, and
    `portable.prediction_agreement`'s as a cross-check), disagreements, near-ties."""
    from albert_tf.export import portable

    found: Dict[str, Dict] = {}
    for quantized, reference in pairs:
        if quantized not in outputs:
            continue
        ref = outputs[reference]
        ref_values, gaps = task.values(ref, ref, features)
        got_values, _ = task.values(outputs[quantized], ref, features)
        differ = ref_values != got_values
        library, compared = portable.prediction_agreement(ref, outputs[quantized], task.compare,
                                                          features)
        found[quantized] = {
            "reference": reference, "values": int(ref_values.size),
            "agreement": float(1 - differ.mean()), "library_agreement": library,
            "library_values": compared, "disagreements": int(differ.sum()),
            "near_tie_disagreements": int((differ & (gaps < near_tie)).sum()),
            "near_tie_values": int((gaps < near_tie).sum()),
            "disagreement_gaps": sorted(round(float(g), 4) for g in gaps[differ]),
            "largest_change": largest_change(ref, outputs[quantized])}
    return found


def largest_change(reference: Dict, got: Dict) -> float:
    """The largest change of any float output (logits, probabilities), as a fraction of
    that output's spread in the reference (max - min over the evaluation set)."""
    import numpy as np
    changes = [float(np.abs(got[key] - value).max() / max(np.ptp(value), 1e-12))
               for key, value in reference.items()
               if key in got and np.issubdtype(np.asarray(value).dtype, np.floating)]
    return max(changes, default=0.0)


def int8_variants(args, export_dir: pathlib.Path, work: pathlib.Path, features) -> Dict:
    """model.int8.onnx made again with each of --int8_settings and run as each kind of CPU
    computes it: {"<setting> [<arithmetic>]": outputs}. The first setting's file is also run
    by this CPU's ONNX Runtime, which must give what the emulation of this CPU's arithmetic
    gives (a broken emulation stops the run)."""
    import numpy as np
    import onnx
    from albert_tf.export import int8_arithmetic, onnx as onnx_export
    outputs = {}
    local = int8_arithmetic.local_arithmetic()
    for name in args.int8_settings:
        settings = onnx_export.Int8Settings(**INT8_SETTINGS[name])
        path = work / f"int8-{name}.onnx"
        onnx_export.quantize_int8(str(export_dir / "model.onnx"), str(path), settings)
        quantized = onnx.load(str(path))
        for arithmetic in int8_arithmetic.ARITHMETICS:
            emulated = work / f"int8-{name}-{arithmetic}.onnx"
            onnx.save(int8_arithmetic.emulate(quantized, arithmetic), str(emulated))
            outputs[f"{name} [{arithmetic}]"] = run_file(emulated, features, EMULATION_BATCH)
            emulated.unlink()
        if name == args.int8_settings[0]:
            own = run_file(path, features, EMULATION_BATCH)
            emulation = outputs[f"{name} [{local}]"]
            for key, value in own.items():
                if not np.allclose(value, emulation[key], atol=1e-4):
                    raise RuntimeError(f"the {local} emulation of {path} differs from this "
                                       f"CPU's ONNX Runtime on {key!r}")
    return outputs


def most_frequent_share(task: Task, outputs: Dict, features) -> Dict:
    """float32's most frequent compared value and its share (a model that predicts one
    value everywhere agrees with anything trivially)."""
    values, _ = task.values(outputs, outputs, features)
    value, count = collections.Counter(values.tolist()).most_common(1)[0]
    return {"value": value, "share": count / len(values)}


# --- one task, the table ----------------------------------------------------------------


def float32_metric(task: Task, run_dir: pathlib.Path, stdout: str) -> Dict:
    """The exported weights' dev metric: best_eval.json (run_squad.py: the metrics it
    prints, on the best weights; its F1 on a 0-100 scale, shown here as 0-1)."""
    source = {}
    best = run_dir / "best_eval.json"
    if best.exists():
        source = json.loads(best.read_text())
    if task.name.startswith("SQuAD"):
        printed = [line for line in stdout.strip().splitlines() if line.startswith("{")]
        source = json.loads(printed[-1]) if printed else source
        source = {k: v / 100 if k in ("f1", "exact_match") else v for k, v in source.items()}
    for key in task.metric:
        if key in source:
            return {"name": key, "value": float(source[key]),
                    "step": source.get("global_step")}
    return {"name": None, "value": None, "step": None}


def run_task(key: str, args, model: Model, root: pathlib.Path) -> Dict:
    from albert_tf.export import portable

    task = TASK_SPECS[key]
    work = root / key
    work.mkdir(parents=True, exist_ok=True)
    script, flags = task.command(args, model, work)
    shutil.rmtree(work / "run", ignore_errors=True)  # a fresh run each time (--keep)
    export_dir = work / "run" / "export"
    print(f"[{task.name}] {script} ...", file=sys.stderr, flush=True)
    commands, cli_seconds = [], 0.0
    done, seconds, command = run_cli(script, flags, work / "cli.log", export_dir)
    commands.append(command)
    cli_seconds += seconds

    begin = time.perf_counter()
    features, labels = task.features(args, model, work)
    limit = portable.AGREEMENT_EXAMPLES  # the CLI checks this many examples at most
    features = {k: v[:limit] for k, v in features.items()}
    outputs = {name: run_file(export_dir / name, features) for name in FILES
               if (export_dir / name).exists()}
    if "model.int8.onnx" in outputs:
        outputs["model.int8.onnx@1"] = run_file(export_dir / "model.int8.onnx", features, 1)
    variants = int8_variants(args, export_dir, work, features) if args.int8_settings else {}
    result = {
        "task": task.name, "unit": task.unit, "script": script, "commands": commands,
        "cli_seconds": round(cli_seconds, 1),
        "evaluation_examples": int(len(next(iter(features.values())))),
        "float32_metric": float32_metric(task, work / "run", done.stdout),
        "cli_log": logged_agreement(done.stderr),
        "recomputed": compare_files(task, outputs, features, args.near_tie),
        "float32_most_frequent": most_frequent_share(task, outputs["model.onnx"], features),
        "exported": sorted(p.name for p in export_dir.glob("model*")),
    }
    if variants:
        result["int8_settings"] = compare_files(
            task, dict(outputs, **variants), features, args.near_tie,
            [(name, "model.onnx") for name in variants])
    if labels is not None:
        labels = labels[:limit]
        result["accuracy"] = {name: float((out["predictions"].reshape(-1) == labels).mean())
                              for name, out in outputs.items()}
    if task.answers is not None:
        result["answers"] = task.answers(args, work, outputs, args.near_tie)
    result["recompute_seconds"] = round(time.perf_counter() - begin, 1)
    return result


def agreement_cell(logged: Optional[Dict], ours: Optional[Dict]) -> str:
    """'99.63% [1: 1 near-tie]': the CLI's figure (ours when the log has none, and ours
    beside it when they differ), with our count of disagreements and near-ties."""
    if not logged and not ours:
        return "-"
    text = f"{100 * (logged or ours)['agreement']:.2f}%"
    if logged and ours and (abs(logged["agreement"] - ours["agreement"]) > 5e-5
                            or logged["values"] != ours["values"]):
        text += f" (ours {100 * ours['agreement']:.2f}% of {ours['values']})"
    if ours and ours["disagreements"]:
        text += f" [{ours['disagreements']}: {ours['near_tie_disagreements']} near-tie]"
    return text


def metric_text(metric: Dict) -> str:
    if metric["value"] is None:
        return "-"
    step = f" (step {metric['step']})" if metric.get("step") is not None else ""
    return f"{metric['name']} {metric['value']:.3f}{step}"


def table_rows(results: List[Dict]) -> List[Tuple[str, ...]]:
    rows = []
    for r in results:
        ours = r["recomputed"]
        values = sorted({v["values"] for v in r["cli_log"].values()} or
                        {v["values"] for v in ours.values()})
        ties = sorted({v["near_tie_values"] for v in ours.values()})
        rows.append((r["task"], f"{r['evaluation_examples']} {r['unit']}",
                     "/".join(str(v) for v in values),
                     *(agreement_cell(r["cli_log"].get(q), ours.get(q)) for q, _ in PAIRS),
                     "/".join(str(t) for t in ties), metric_text(r["float32_metric"])))
        if "answers" in r:
            answers = r["answers"]
            count = {v["values"] for k, v in answers.items() if k != "scores"}
            ties = sorted({v["near_tie_values"] for k, v in answers.items() if k != "scores"})
            f1 = answers["scores"]["model.onnx"]["f1"]
            rows.append((f"{r['task']} answer text (ours)", f"{count.pop()} questions",
                         "" if not count else "?",
                         *(agreement_cell(None, answers.get(q)) for q, _ in PAIRS),
                         "/".join(str(t) for t in ties), f"f1 {f1:.3f} (model.onnx)"))
    return rows


def print_grid(header: Tuple[str, ...], rows: List[Tuple[str, ...]]) -> None:
    """A plain-text table: columns padded to their widest cell, a rule under the header."""
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths)] + rows:
        print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


def print_settings_table(results: List[Dict]) -> None:
    """Agreement with float32 per quantization setting, with exact int32 sums (CPUs with
    VNNI) and with pairs saturated to int16 (CPUs without), emulated."""
    found = [r for r in results if "int8_settings" in r]
    if not found:
        return
    names = list(found[0]["int8_settings"])
    header = ("task", *names)
    rows = [(r["task"], *(f"{agreement_cell(None, r['int8_settings'][n])}, largest change "
                          f"{100 * r['int8_settings'][n]['largest_change']:.1f}%"
                          for n in names)) for r in found]
    print(f"\nmodel.int8.onnx's settings, as each kind of CPU computes them (emulated, "
          f"batches of {EMULATION_BATCH}): agreement with float32, and the largest change "
          "of a float output (% of its spread over the evaluation set)")
    print_grid(header, rows)


def print_table(results: List[Dict], cpu, args) -> None:
    print(f"\nCPU: {cpu.name}; flags: {cpu.shown_flags()}; "
          f"AVX512-VNNI: {'yes' if 'avx512_vnni' in cpu.flags else 'no'}")
    start = (f"from {args.init_dir}" if args.init_dir else
             "random init, H=128, 4 layers sharing one block, SentencePiece 8k")
    if "C3 (Chinese)" in [r["task"] for r in results]:
        start += "; C3: random init, Chinese WordPiece 21k"
    print(f"Model: {start}")
    print(f"Agreement with float32 [disagreements: how many of them are near-ties, float32 "
          f"top-2 probability gap < {args.near_tie}]")
    header = ("task", "dev examples", "values", "int8 ONNX", "int8 ONNX, batch 1",
              "int8 LiteRT", "fp16 LiteRT", "near-tie values", "float32 dev metric")
    rows = table_rows(results)
    print_grid(header, rows)
    print()
    for r in results:
        common = r["float32_most_frequent"]
        line = (f"{r['task']}: CLI {r['cli_seconds']:.0f} s, recomputation "
                f"{r['recompute_seconds']:.0f} s; float32's most frequent value "
                f"({common['value']}) is {100 * common['share']:.1f}% of the compared values")
        if "accuracy" in r:
            shown = {k: round(v, 4) for k, v in r["accuracy"].items()}
            line += f"; dev accuracy per file {json.dumps(shown)}"
        if "answers" in r:
            shown = {k: round(v["f1"], 4) for k, v in r["answers"]["scores"].items()}
            line += f"; answer F1 per file {json.dumps(shown)}"
        gaps = [g for v in r["recomputed"].values() for g in v["disagreement_gaps"]]
        gaps += [g for k, v in r.get("answers", {}).items() if k != "scores"
                 for g in v["disagreement_gaps"]]
        if gaps:
            line += f"; largest float32 top-2 gap of a disagreement {max(gaps):.4f}"
        print(line)


# --- command line -----------------------------------------------------------------------


def argument_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].replace("\n", " "),
        epilog="See the module docstring (bench/quantized_agreement.py) for the data and "
               "what is compared.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--tasks", default=",".join(TASKS),
                        help=f"comma-separated, of {', '.join(TASKS)}")
    parser.add_argument("--init_dir", default=None,
                        help="demo.py's output directory (albert_config.json, demo.model, "
                             "model.ckpt-best.*): start from its pretraining; default: a "
                             "small model from random weights")
    parser.add_argument("--spm_model_file",
                        default=str(SHARED / "spm" / "albert_style_pd8k.model"),
                        help="the vocabulary without --init_dir")
    parser.add_argument("--sst2_steps", type=int, default=400, help="training steps, batch 32")
    parser.add_argument("--ner_steps", type=int, default=400, help="training steps, batch 32")
    parser.add_argument("--race_steps", type=int, default=100, help="training steps, batch 8")
    parser.add_argument("--c3_steps", type=int, default=200, help="training steps, batch 8")
    parser.add_argument("--squad_epochs", type=int, default=8,
                        help="run_squad.py counts epochs (17 steps each here)")
    parser.add_argument("--squad_checkpoint_steps", type=int, default=40,
                        help="SQuAD: evaluate every this many steps")
    parser.add_argument("--max_seq_length_sst2", type=int, default=64, help="SST-2")
    parser.add_argument("--max_seq_length_ner", type=int, default=64,
                        help="CoNLL-2003 (doc_stride: half of it)")
    parser.add_argument("--max_seq_length_race", type=int, default=128, help="RACE and C3")
    parser.add_argument("--max_seq_length_squad", type=int, default=128,
                        help="SQuAD (doc_stride: half of it)")
    parser.add_argument("--learning_rate", type=float, default=None,
                        help="for every task; default per task (1e-4 to 5e-4 from random "
                             "weights, 1e-4 from --init_dir)")
    parser.add_argument("--near_tie", type=float, default=0.1,
                        help="a disagreement is a near-tie when float32's top-2 "
                             "probabilities are closer than this")
    parser.add_argument("--seed", type=int, default=1, help="every CLI's --seed")
    parser.add_argument("--int8_settings", default="",
                        type=lambda text: [t for t in text.split(",") if t],
                        help=f"comma-separated, of {', '.join(INT8_SETTINGS)}: remake "
                             "model.int8.onnx with these settings and measure each as CPUs "
                             "with VNNI and without compute it (emulated)")
    parser.add_argument("--output", default=None, help="also write the figures as JSON")
    parser.add_argument("--keep", default=None,
                        help="run in this directory and keep it (default: a temporary "
                             "directory, removed at the end)")
    return parser


def pretrained_model(args, parser) -> Optional[Model]:
    """The --init_dir model (None without it); a parser error if the directory lacks
    demo.py's files."""
    if not args.init_dir:
        return None
    init = pathlib.Path(args.init_dir)
    config = init / "albert_config.json"
    spm = init / "demo.model"
    if not spm.exists():
        models = sorted(init.glob("*.model"))
        spm = models[0] if models else spm
    checkpoint = init / "model.ckpt-best"
    if not config.exists() or not spm.exists() or \
            not pathlib.Path(str(checkpoint) + ".index").exists():
        parser.error(f"--init_dir={init}: expected albert_config.json, demo.model and "
                     "model.ckpt-best.* (demo.py's output directory)")
    return Model(str(config.resolve()), str(spm.resolve()), str(checkpoint.resolve()))


def scratch_model(args, root: pathlib.Path) -> Model:
    """The small config (written to `root`) from random weights."""
    config = root / "albert_config.json"
    config.write_text(json.dumps(SMALL_CONFIG, indent=2) + "\n")
    return Model(str(config), args.spm_model_file, None)


def main(argv=None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        parser.error(f"--tasks: unknown {', '.join(unknown) or '(none given)'}; "
                     f"choose from {', '.join(TASKS)}")
    if not (SHARED / "glue").exists():
        parser.error(f"{SHARED} not found (the shared data)")
    unknown = [name for name in args.int8_settings if name not in INT8_SETTINGS]
    if unknown:
        parser.error(f"--int8_settings: unknown {', '.join(unknown)}; choose from "
                     f"{', '.join(INT8_SETTINGS)}")
    args.lr = lambda scratch, pretrained: args.learning_rate or (
        pretrained if args.init_dir else scratch)

    model = pretrained_model(args, parser)

    from albert_tf.kernels import precision

    cpu = precision.read_cpu_info()
    root = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="albert_quantized_"))
    root.mkdir(parents=True, exist_ok=True)
    model = model or scratch_model(args, root)
    begin = time.perf_counter()
    results = []
    try:
        for key in tasks:
            results.append(run_task(key, args, model, root))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    total = time.perf_counter() - begin
    print_table(results, cpu, args)
    print_settings_table(results)
    print(f"total {total:.0f} s")
    if args.output:
        settings = {k: v for k, v in vars(args).items() if k != "lr"}
        pathlib.Path(args.output).write_text(json.dumps({
            "cpu": cpu.name, "cpu_flags": cpu.shown_flags(),
            "avx512_vnni": "avx512_vnni" in cpu.flags, "settings": settings,
            "total_seconds": round(total, 1), "tasks": results}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
