"""fit under a MirroredStrategy of two replicas leaves the weights one device leaves: the
optimizer clips the replicas' summed gradient (as the original and the Trainer clip the
global batch's), a task's own loss is scaled per replica as Keras scales its compiled
losses, and the tagger's per-word loss counts the words of the global batch."""
import json
import os
import subprocess
import sys

import pytest

from tests.helpers.hf_models import NER_LABELS, write_hf_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # ~40 s on AMD EPYC Zen 3: six fits in a child process
def test_two_replicas_leave_one_devices_weights(models, tmp_path, official_spm):
    ner_dir = write_hf_dir(str(tmp_path / "ner"), "token_classifier", official_spm,
                           labels=NER_LABELS, seed=5)
    result = subprocess.run(
        [sys.executable, "-m", "tests.helpers.mirrored_fit", models["sentiment"], ner_dir,
         models["mlm"]], capture_output=True, text=True, cwd=ROOT, timeout=600,
        env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    differences = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(differences) == {"classifier", "tagger_crf", "squad_v2"}
    for name, difference in differences.items():
        assert difference < 1e-5, (name, difference)
