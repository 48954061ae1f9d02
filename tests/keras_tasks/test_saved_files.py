"""A saved task model outside the process that made it: `keras.saving.load_model` in a fresh
Python after `import albert_tf` (whatever the order of its imports), and `python -m
albert_tf.convert` from the .keras file to a Hugging Face directory."""
import os
import subprocess
import sys

import numpy as np
import pytest

import albert_tf
from tests.helpers import hf_models

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = ["a good film", "A BAD film, truly."]


@pytest.fixture(scope="module")
def saved(models, tmp_path_factory):
    classifier = albert_tf.from_pretrained(models["sentiment"], sequence_length=24)
    path = str(tmp_path_factory.mktemp("saved") / "sentiment.keras")
    classifier.save(path)
    return classifier, path


def _python(program: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


@pytest.mark.parametrize("imports", [
    "import albert_tf, tensorflow as tf, keras",   # Keras imported inside TensorFlow's import
    pytest.param("import keras, albert_tf", marks=pytest.mark.slow),
    pytest.param("import albert_tf, keras", marks=pytest.mark.slow)])
def test_load_model_in_a_fresh_python_after_import_albert_tf(saved, imports):
    classifier, path = saved
    result = _python(f"{imports}\nimport numpy as np\n"
                     f"model = keras.saving.load_model({path!r})\n"
                     f"np.save({path + '.npy'!r}, model.predict({TEXTS!r}, verbose=0))\n"
                     "print(type(model).__name__)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["AlbertTextClassifier"]
    np.testing.assert_array_equal(np.load(path + ".npy"), classifier.predict(TEXTS, verbose=0))


def test_import_albert_tf_alone_still_loads_no_tensorflow():
    result = _python("import sys, albert_tf\nprint('tensorflow' in sys.modules, "
                     "'keras' in sys.modules)")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "False"]


@pytest.mark.slow  # ~15 s on AMD EPYC Zen 3: a convert process
def test_convert_writes_a_keras_task_as_hugging_face(saved, tmp_path):
    classifier, path = saved
    output = str(tmp_path / "hf")
    result = subprocess.run([sys.executable, "-m", "albert_tf.convert", f"--input={path}",
                             f"--output={output}", "--output_format=hf"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "AlbertTextClassifier (classifier)" in result.stdout
    assert os.path.exists(os.path.join(output, "spiece.model"))
    again = albert_tf.from_pretrained(output, sequence_length=24)
    assert again.labels == hf_models.SENTIMENT_LABELS
    np.testing.assert_allclose(again.predict(TEXTS, verbose=0),
                               classifier.predict(TEXTS, verbose=0), rtol=1e-5, atol=1e-6)
    wrong = subprocess.run([sys.executable, "-m", "albert_tf.convert", f"--input={path}",
                            f"--output={output}2", "--output_format=hf", "--model=pretrainer"],
                           capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env=dict(os.environ, PYTHONPATH=ROOT))
    assert wrong.returncode != 0
    assert wrong.stderr.strip().splitlines()[-1] == (
        f"convert.py: error: --model=pretrainer: --input={path} holds a classifier (leave "
        "--model=auto)")


def test_convert_names_every_network_a_task_holds():
    from albert_tf import convert
    from albert_tf.modeling import models
    from albert_tf.modeling.encoder import AlbertEncoder
    from albert_tf.modeling.sentence_encoder import AlbertSentenceEncoder
    from albert_tf.modeling.token_classifier import AlbertTokenClassifier

    for network in (models.AlbertClassifier, AlbertTokenClassifier, models.AlbertSpanLabeler,
                    models.AlbertSquadV2, models.AlbertMultipleChoice, models.AlbertPretrainer,
                    AlbertEncoder, AlbertSentenceEncoder):
        assert convert.TASK_NETWORKS[network.__name__] in convert.MODELS, network.__name__
