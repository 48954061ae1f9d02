"""Convert ALBERT weights between the TF1, Hugging Face, Keras `.weights.h5` and
`tf.train.Checkpoint` formats, printing the load report.

Examples:
  # Official download -> Keras weights (config read from the download directory)
  python -m albert_tf.convert --input=albert_base_v2 --output=/tmp/base.weights.h5
  # Hugging Face directory -> TF1 checkpoint the original code and converters read
  python -m albert_tf.convert --input=hf/albert-base-v2 --output=/tmp/tf1/model.ckpt-best \
      --output_format=tf1
  # A fine-tuned MNLI checkpoint of run_classifier -> Hugging Face
  python -m albert_tf.convert --input=mnli_out/model.ckpt-best --albert_config_file=cfg.json \
      --model=classifier --num_labels=3 --output=/tmp/hf_mnli --output_format=hf
  # A Keras task saved with model.save("sentiment.keras") -> Hugging Face (its labels,
  # casing and vocabulary come with it)
  python -m albert_tf.convert --input=sentiment.keras --output=/tmp/hf_sentiment \
      --output_format=hf

The model class (`--model`) decides which heads are converted; a head absent
from the input is reported and written with its initial values. The default, auto, is a
Hugging Face input's class and labels (config.json), else the pretrainer.
"""
from __future__ import annotations

import os
from typing import Optional

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # noqa: E402

from albert_tf.errors import (UserFileNotFoundError, UserValueError,  # noqa: E402
                              check_file)

FORMATS = ["auto", "tf1", "hf", "keras_h5", "tf_checkpoint"]
MODELS = ["auto", "pretrainer", "encoder", "classifier", "span_labeler", "squad_v2",
          "multiple_choice", "token_classifier"]


def define_flags() -> None:
    """Defines the CLI's absl flags (only when run as a program: importing this module for its
    functions defines no flags, so it cannot clash with other CLIs' flags)."""
    flags.DEFINE_string("input", None, "Checkpoint to read: TF1 prefix or directory, TF-Hub "
                        "module directory, Hugging Face directory, .weights.h5, "
                        "tf.train.Checkpoint, or a .keras file of an albert_tf task "
                        "model.")
    flags.DEFINE_enum("input_format", "auto", FORMATS, "Format of --input (auto = detect).")
    flags.DEFINE_string("output", None, "Where to write: TF1 prefix, Hugging Face directory, "
                        ".weights.h5 file, or tf.train.Checkpoint prefix.")
    flags.DEFINE_enum("output_format", "auto", FORMATS, "Format of --output (auto: "
                      ".weights.h5 -> keras_h5, otherwise tf1).")
    flags.DEFINE_string("albert_config_file", None, "albert_config.json (default: the one "
                        "in the input directory, or config.json of a Hugging Face input).")
    flags.DEFINE_enum("model", "auto", MODELS, "Model (and so heads) to convert; auto: a "
                      "Hugging Face input's class (config.json's architectures), else "
                      "pretrainer.")
    flags.DEFINE_integer("num_labels", 2, "Labels of --model=classifier (1 = regression) or "
                         "--model=token_classifier (the tags, softmax head); with --model=auto "
                         "a Hugging Face input's id2label gives it.")
    flags.DEFINE_list("labels", None, "--output_format=hf: the label names of the outputs, in "
                      "order (config.json's id2label; default LABEL_0, LABEL_1, ...).")
    flags.DEFINE_integer("num_choices", 4, "Choices of --model=multiple_choice.")
    flags.DEFINE_string("spm_model_file", None, "--output_format=hf: the SentencePiece model "
                        "to write as spiece.model (default: the one beside --input).")
    flags.DEFINE_string("vocab_file", None, "--output_format=hf: the WordPiece vocabulary to "
                        "write as vocab.txt (default: the one beside --input).")
    flags.DEFINE_bool("init_from_group0", False, "Initialise every group from group 0.")
    flags.DEFINE_integer("global_step", None, "global_step to store in a TF1 output.")
    flags.mark_flags_as_required(["input", "output"])


def build_model(name: str, config, num_labels: int = 2, num_choices: int = 4):
    """The model for a `--model` value."""
    from albert_tf.modeling import models
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    builders = {
        "pretrainer": lambda: models.AlbertPretrainer(config),
        "encoder": lambda: AlbertEncoder(config),
        "classifier": lambda: models.AlbertClassifier(config, num_labels),
        "span_labeler": lambda: models.AlbertSpanLabeler(config),
        "squad_v2": lambda: models.AlbertSquadV2(config),
        "multiple_choice": lambda: models.AlbertMultipleChoice(config, num_choices),
        "token_classifier": lambda: AlbertTokenClassifier(config, num_labels),
    }
    model = builders[name]()
    model.build()
    return model


def resolve_model(name: str, input_path: str, num_labels: int, num_labels_given: bool
                  ) -> tuple:
    """(--model, --num_labels, label names or None) of a conversion: --model=auto is a
    Hugging Face input's class and label count (unless --num_labels is given) and its label
    names, else the pretrainer."""
    from albert_tf import checkpoints
    from albert_tf.checkpoints import hf as hf_weights

    if checkpoints.detect_format(input_path) != "huggingface":
        return ("pretrainer" if name == "auto" else name), num_labels, None
    values = hf_weights.read_hf_config(input_path)
    source = os.path.join(input_path, "config.json")
    labels = hf_weights.labels_from_hf_config(values, source)
    if name == "auto":
        name, stored = hf_weights.model_of_hf_config(values, source)
        num_labels = num_labels if num_labels_given else stored
    if labels is not None and len(labels) != num_labels:  # --num_labels chose another head
        labels = None
    return name, num_labels, labels


def input_settings(input_path: str) -> dict:
    """What a Hugging Face input says beyond its weights that a Hugging Face output keeps:
    `problem_type` and the tokenizer's `do_lower_case` (empty for other inputs)."""
    from albert_tf import checkpoints
    from albert_tf.checkpoints import hf as hf_weights

    if checkpoints.detect_format(input_path) != "huggingface":
        return {}
    settings = {"problem_type": hf_weights.read_hf_config(input_path).get("problem_type")}
    tokenizer_config = hf_weights.read_hf_tokenizer_config(input_path)
    if tokenizer_config:
        settings["do_lower_case"] = tokenizer_config.get("do_lower_case", True)
    return settings


def find_output_vocabulary(input_path: str, spm_model_file=None, vocab_file=None) -> dict:
    """The vocabulary a Hugging Face output gets: the flags', else the one beside the input
    ({"spm_model_file": ...} or {"vocab_file": ...}; {} when there is none)."""
    from albert_tf.checkpoints import official

    if spm_model_file:
        check_file(spm_model_file, "--spm_model_file", "SentencePiece model")
        return {"spm_model_file": spm_model_file}
    if vocab_file:
        check_file(vocab_file, "--vocab_file", "vocabulary file")
        return {"vocab_file": vocab_file}
    base = input_path if os.path.isdir(input_path) else os.path.dirname(input_path) or "."
    try:
        kind, path = official.find_vocabulary(base)
    except (FileNotFoundError, ValueError):
        return {}
    return {"spm_model_file": path} if kind == "sentencepiece" else {"vocab_file": path}


def find_config(input_path: str, config_file=None):
    """The AlbertConfig for a conversion: explicit file, HF config.json, or the download's
    albert_config.json / albert_config_*.json (`checkpoints.find_config_file`)."""
    from albert_tf import checkpoints
    from albert_tf.checkpoints import hf as hf_weights
    from albert_tf.config import AlbertConfig

    if config_file:
        return AlbertConfig.from_json_file(config_file)
    if checkpoints.detect_format(input_path) == "huggingface":
        return hf_weights.config_from_hf_dir(input_path)
    base = input_path if os.path.isdir(input_path) else os.path.dirname(input_path)
    try:
        return AlbertConfig.from_json_file(checkpoints.find_config_file(base or "."))
    except FileNotFoundError:
        raise UserValueError(f"no config for {input_path} (albert_config.json or "
                             "albert_config_*.json): pass --albert_config_file") from None


def load(model, path: str, fmt: str = "auto", init_from_group0: bool = False):
    """Reads `path` into `model`; returns the LoadReport."""
    from albert_tf import checkpoints
    from albert_tf.checkpoints import hf as hf_weights

    if fmt == "auto":
        return checkpoints.restore_for_training(model, path, init_from_group0=init_from_group0)
    if fmt == "tf1":
        return checkpoints.load_tf1_checkpoint(model, path, init_from_group0=init_from_group0)
    if fmt == "hf":
        return hf_weights.load_hf_checkpoint(model, path, init_from_group0=init_from_group0)
    if fmt == "keras_h5" and not path.endswith(".h5"):
        raise UserValueError(f"{path}: a Keras weights file must end with .weights.h5")
    if fmt == "tf_checkpoint" and checkpoints.detect_format(path) != "tf_checkpoint":
        raise UserValueError(f"{path} is not a tf.train.Checkpoint")
    return checkpoints.restore_for_training(model, path)


def save(model, path: str, fmt: str = "auto", global_step=None, labels=None,
         hf_settings: Optional[dict] = None) -> str:
    """Writes `model` to `path` in `fmt` (`labels`: a Hugging Face output's label names;
    `hf_settings`: its `problem_type`, `do_lower_case` and vocabulary, see
    `save_hf_checkpoint`); returns a one-line description."""
    import tensorflow as tf

    from albert_tf import checkpoints
    from albert_tf.checkpoints import hf as hf_weights

    if fmt == "auto":
        fmt = "keras_h5" if path.endswith(".h5") else "tf1"
    if fmt == "tf1":
        checkpoints.save_tf1_checkpoint(model, path, global_step=global_step)
        config_path = os.path.join(os.path.dirname(path) or ".", "albert_config.json")
        if not os.path.exists(config_path):
            model.config.to_json_file(config_path)
        return f"TF1 checkpoint {path} (config: {config_path})"
    if fmt == "hf":
        settings = dict(hf_settings or {})
        left_out = hf_weights.save_hf_checkpoint(model, path, labels, **settings)
        if left_out:
            raise UserValueError(f"these variables have no Hugging Face name: {left_out}")
        vocabulary = settings.get("spm_model_file") or settings.get("vocab_file")
        return f"Hugging Face directory {path}" + (
            f" (tokenizer from {vocabulary})" if vocabulary else
            " (no vocabulary found beside the input: pass --spm_model_file or --vocab_file "
            "to write the tokenizer)")
    if fmt == "keras_h5":
        if not path.endswith(".weights.h5"):
            raise UserValueError(f"{path}: a Keras weights file must end with .weights.h5")
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".tmp-{os.getpid()}-{os.path.basename(path)}")
        model.save_weights(tmp)
        os.replace(tmp, path)
        return f"Keras weights {path}"
    written = tf.train.Checkpoint(model=model).write(path)
    stored = [n for n, _ in tf.train.list_variables(written) if n.startswith("model/")]
    if len(stored) < len(model.weights):
        raise UserValueError(
            f"tf.train.Checkpoint stored {len(stored)} of the model's {len(model.weights)} "
            f"variables in {written}: some layers are not tracked by TensorFlow's object "
            "graph; use --output_format=tf1 or keras_h5")
    return f"tf.train.Checkpoint {written}"


# The network classes of albert_tf's Keras tasks -> their --model names.
TASK_NETWORKS = {"AlbertClassifier": "classifier", "AlbertTokenClassifier": "token_classifier",
                 "AlbertSpanLabeler": "span_labeler", "AlbertSquadV2": "squad_v2",
                 "AlbertMultipleChoice": "multiple_choice",
                 "AlbertPretrainer": "pretrainer", "AlbertEncoder": "encoder",
                 "AlbertSentenceEncoder": "encoder"}


def convert_keras_task(args) -> None:
    """--input=<file>.keras: a task model of `albert_tf.keras_tasks` (saved by
    `model.save`) written in --output_format, its network with the task's labels, problem
    type, casing and vocabulary (a sentence embedder's encoder alone: its pooling has no
    Hugging Face field; its export's sentence-transformers/ directory keeps it)."""
    import tempfile

    import albert_tf.keras_tasks  # noqa: F401  (registers the task classes for load_model)
    from albert_tf.keras_tasks.task import load_task_file

    task = load_task_file(args.input, f"--input={args.input}")
    network = task.network
    name = TASK_NETWORKS.get(type(network).__name__)
    if name is None:
        raise UserValueError(f"--input={args.input}: its network {type(network).__name__} "
                             "has no --model name")
    if name == "encoder" and hasattr(network, "encoder"):
        network = network.encoder
    if args.model not in ("auto", name):
        raise UserValueError(f"--model={args.model}: --input={args.input} holds a {name} "
                             "(leave --model=auto)")
    settings = {"do_lower_case": task.preprocessor.do_lower_case}
    if name == "classifier":
        settings["problem_type"] = task.problem_type
    with tempfile.TemporaryDirectory() as vocabulary_dir:
        settings.update(
            find_output_vocabulary(args.input, args.spm_model_file, args.vocab_file)
            if args.spm_model_file or args.vocab_file
            else _written_vocabulary(task.preprocessor, vocabulary_dir))
        print("Read", f"{args.input}: {type(task).__name__} ({name})")
        print("Wrote", save(network, args.output, args.output_format, args.global_step,
                            args.labels or getattr(task, "labels", None), settings))


def _written_vocabulary(preprocessor, directory: str) -> dict:
    path = preprocessor.write_vocabulary(directory)
    return ({"spm_model_file": path} if preprocessor.tokenizer_kind == "sentencepiece"
            else {"vocab_file": path})


def main(argv):
    del argv
    args = flags.FLAGS
    if args.input.endswith(".keras") and os.path.isfile(args.input):
        return convert_keras_task(args)
    if args.albert_config_file:
        check_file(args.albert_config_file, "--albert_config_file", "albert_config.json file")
    if "://" not in args.input and not os.path.exists(args.input) and not os.path.exists(
            args.input + ".index"):
        raise UserFileNotFoundError(f"--input={args.input}: no such file, directory or "
                                    "checkpoint prefix")
    config = find_config(args.input, args.albert_config_file)
    name, num_labels, labels = resolve_model(args.model, args.input, args.num_labels,
                                             args["num_labels"].present)
    model = build_model(name, config, num_labels, args.num_choices)
    report = load(model, args.input, args.input_format, args.init_from_group0)
    print(report.summary())
    hf_settings = dict(input_settings(args.input),
                       **find_output_vocabulary(args.input, args.spm_model_file,
                                                args.vocab_file))
    if hf_settings.get("problem_type") and name != "classifier":
        hf_settings.pop("problem_type")
    print("Wrote", save(model, args.output, args.output_format, args.global_step,
                        args.labels or labels, hf_settings))


if __name__ == "__main__":
    from albert_tf.kernels import onednn

    onednn.configure()  # before TensorFlow is imported: it reads the oneDNN switch once
    from albert_tf import cli

    define_flags()
    cli.run(main)
