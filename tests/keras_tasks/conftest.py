"""Hugging Face classifier and masked-LM directories (tiny, random weights, the official
SentencePiece model) that the Keras task tests read."""
import pytest

from tests.helpers import hf_models


@pytest.fixture(scope="module")
def models(tmp_path_factory, official_spm):
    return hf_models.write_model_set(str(tmp_path_factory.mktemp("hf")), official_spm,
                                     ("sentiment", "multilabel", "regression", "mlm"))
