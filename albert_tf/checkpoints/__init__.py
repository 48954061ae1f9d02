"""Checkpoints in and out: the official TF1 format, Hugging Face, keras-hub, and autodetection.

The TF1 name-based format (official downloads `model.ckpt-best.*`, TF-Hub module
variables, the original scripts' fine-tuned checkpoints) is the interchange format;
`names.py` is the one table between its names and our variables. Every reader
returns a `LoadReport`, and loading is all-or-nothing: every name and shape is
checked, and every tensor read, before the first variable is assigned.

  assign.py    the shared core: checks, assignment, LoadReport
  names.py     official variable names of each model class
  tf1.py       load_tf1_checkpoint, save_tf1_checkpoint, read_tf1_variables
  hf.py        Hugging Face `albert-*` directories (config.json + model.safetensors)
  restore.py   restore_for_training: TF1, TF-Hub, Hugging Face, Keras .weights.h5,
               tf.train.Checkpoint, detected from the path
  official.py  from_official_dir (config + tokenizer + model in one call),
               check_vocab_size
  keras_hub.py keras-hub ALBERT presets (config.json + model.weights.h5 + task files),
               read and written without keras-hub
  sentence_transformers.py  sentence-transformers directories (5.x and 6.x layouts)

May import: albert_tf.modeling, albert_tf.tokenization, albert_tf.kernels and the
foundation (config, errors, fileio).
"""
# The public names of the former module albert_tf.checkpoints.
from albert_tf.checkpoints.assign import (  # noqa: F401
    CheckpointMismatchError, LoadReport, assign_named_arrays)
from albert_tf.checkpoints.official import (  # noqa: F401
    CONFIG_FILE, CONFIG_PATTERN, MASK_TOKEN, SPM_MODEL_FILE, WORDPIECE_VOCAB_FILES,
    OfficialModel, check_vocab_size, find_config_file, find_vocabulary, from_official_dir)
from albert_tf.checkpoints.restore import detect_format, restore_for_training  # noqa: F401
from albert_tf.checkpoints.tf1 import (  # noqa: F401
    OBJECT_GRAPH_KEY, PREFERRED_PREFIXES, TFHUB_PREFIX, load_tf1_checkpoint,
    read_tf1_variables, resolve_tf1_checkpoint, save_tf1_checkpoint)
