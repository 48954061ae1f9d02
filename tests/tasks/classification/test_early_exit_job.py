"""run_classifier.py's light inference end to end: exit heads trained, early exit at
evaluation and in every export (SavedModel, ONNX, LiteRT), each agreeing with the Python
model on every dev example."""
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import tokenization
from albert_tf.config import AlbertConfig
from albert_tf.finetuning import FinetuningOptions, load_best_weights
from albert_tf.modeling.early_exit import EarlyExit
from albert_tf.tasks.classification import glue
from albert_tf.tasks.classification.job import ClassificationJob, ClassificationOptions, run_glue
from tests.helpers import glue_data

CONFIG = AlbertConfig(vocab_size=8000, embedding_size=16, hidden_size=32, num_hidden_layers=4,
                      num_attention_heads=4, intermediate_size=64, max_position_embeddings=32)
SEQ = 32


def options_for(data_dir, out, spm, **changes):
    values = dict(task_name="sst-2", data_dir=str(data_dir), spm_model_file=spm,
                  albert_config=CONFIG, max_seq_length=SEQ, eval_batch_size=16,
                  export_dir=str(out / "export"),
                  export_format=("saved_model", "onnx", "tflite"),
                  exit_heads="per_layer", patience=1,
                  finetuning=FinetuningOptions(output_dir=str(out), do_train=True,
                                               do_eval=True, train_batch_size=16,
                                               learning_rate=3e-3, train_step=12,
                                               save_checkpoints_steps=12,
                                               iterations_per_loop=12, seed=3))
    values.update(changes)
    return ClassificationOptions(**values)


@pytest.fixture(scope="module")
def run(shared_data, tmp_path_factory):
    spm = shared_data / "spm" / "albert_style_pd8k.model"
    if not spm.exists():
        pytest.skip(f"{spm} not found")
    root = tmp_path_factory.mktemp("early_exit")
    data = glue_data.sst2_split(shared_data, root, train=160, dev=64)
    options = options_for(data, root / "out", str(spm))
    return options, run_glue(options)


def dev_features(options):
    examples = glue.read_examples(glue.TASKS["sst-2"], options.data_dir, "dev")
    tokenizer = tokenization.FullTokenizer(spm_model_file=options.spm_model_file)
    features = glue.convert_examples(examples, tokenizer, SEQ, ["0", "1"])
    return examples, {k: features[k] for k in ("input_ids", "input_mask", "segment_ids")}


@pytest.mark.slow  # 40 s: trains, then writes three exports
def test_every_export_exits_where_the_python_model_does(run):
    options, results = run
    examples, features = dev_features(options)
    job = ClassificationJob(options)
    model = job.build_model()
    model.build()
    assert load_best_weights(model, options.output_dir)
    assert model.early_exit == EarlyExit(patience=1) and model.exit_heads == "per_layer"
    # In a graph, as the evaluation and the exports run it (eager rounds differently).
    want = {name: value.numpy() for name, value in tf.function(model)(features).items()}
    assert 1 <= want["exit_layer"].min() and want["exit_layer"].max() <= 4

    best = json.loads(open(f"{options.output_dir}/best_eval.json").read())
    assert best["eval_exit_layer"] == pytest.approx(want["exit_layer"].mean())

    export_dir = results["export_dir"]
    served = tf.saved_model.load(export_dir).signatures["serve_tokens"](
        **{k: tf.constant(v) for k, v in features.items()})
    texts = tf.saved_model.load(export_dir).signatures["serving_default"](
        text_a=tf.constant([e.text_a for e in examples]))
    import onnxruntime
    session = onnxruntime.InferenceSession(f"{export_dir}/model.onnx")
    onnx = dict(zip([o.name for o in session.get_outputs()], session.run(None, features)))
    from albert_tf.export.litert_runtime import LiteRTModel
    litert = LiteRTModel(f"{export_dir}/model.tflite")(**features)
    labels = np.array([b"0", b"1"])[want["predictions"]]
    for name, outputs in (("saved_model", served), ("text", texts), ("onnx", onnx),
                          ("litert", litert)):
        exits = np.asarray(outputs["exit_layer"])
        np.testing.assert_array_equal(exits, want["exit_layer"], err_msg=name)
        predictions = np.asarray(outputs["predictions"])
        if predictions.dtype.kind in "SO":
            np.testing.assert_array_equal(predictions, labels, err_msg=name)
        else:
            np.testing.assert_array_equal(predictions, want["predictions"], err_msg=name)
        np.testing.assert_allclose(np.asarray(outputs["logits"]), want["logits"], atol=1e-4,
                                   err_msg=name)
    record = json.loads(open(f"{export_dir}/albert_tf_export.json").read())
    assert record["early_exit"] == {"patience": 1, "confidence": None, "tolerance": 0.0}
    assert record["exit_heads"] == "per_layer" and record["num_hidden_layers"] == 4


@pytest.mark.parametrize("changes, message", [
    ({"inference_layers": 5}, r"--inference_layers must be from 1 to the model's "
                              r"num_hidden_layers \(4, --albert_config_file\); got 5"),
    ({"inference_layers": 0}, r"--inference_layers must be from 1"),
    ({"patience": 0}, r"--patience: patience must be a whole number of layers >= 1, got 0"),
    ({"patience": None, "exit_confidence": 2.0}, r"--exit_confidence: the exit confidence "
                                                 r"must be in \(0, 1\]"),
])
def test_light_inference_mistakes_name_the_flag(changes, message, tmp_path, spm_model):
    options = options_for(tmp_path, tmp_path, spm_model, **changes)
    with pytest.raises(ValueError, match=message):
        options.check_light_inference()


def test_patience_under_xla_is_refused(tmp_path, spm_model):
    options = options_for(tmp_path, tmp_path, spm_model)
    options.jit_compile = True
    with pytest.raises(ValueError, match="cannot run under --jit_compile"):
        options.check_light_inference()
