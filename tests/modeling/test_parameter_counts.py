"""Exact parameter counts: the analytic formula, Keras' count_params and the paper's tables."""
import gc

import pytest

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.modeling import parameter_counts
from albert_tf.modeling.parameter_counts import count_parameters, paper_rows

from tests.conftest import REPO_ROOT

# Models above this size are checked with the formula only (building BERT-xlarge
# would allocate 5 GB); the formula itself is proven on every smaller row.
MAX_BUILT = 250_000_000

EXPECTED = {  # encoder + pooler, exact
    "albert_base_v2": 11_683_584,
    "albert_large_v2": 17_683_968,
    "albert_xlarge_v2": 58_724_864,
    "albert_xxlarge_v2": 222_595_584,
}


def built_count(config):
    encoder = AlbertEncoder(config)
    encoder.build()
    count = encoder.count_params()
    del encoder
    gc.collect()
    return count


@pytest.mark.parametrize("preset", [  # xlarge 2 s, xxlarge 5 s; base and large stay
    pytest.param(preset, marks=pytest.mark.slow) if "xlarge" in preset else preset
    for preset in sorted(EXPECTED)])
def test_presets_exact_counts(preset):
    config = AlbertConfig.from_preset(preset)
    assert count_parameters(config) == EXPECTED[preset]
    assert built_count(config) == EXPECTED[preset]
    v1 = AlbertConfig.from_preset(preset.replace("v2", "v1"))
    assert count_parameters(v1) == EXPECTED[preset]  # dropout does not change the count


@pytest.mark.parametrize("mode,expected", [
    ("all", 11_683_584),
    pytest.param("attention", 63_647_232, marks=pytest.mark.slow),  # 2 s
    ("ffn", 37_686_528),
    pytest.param("none", 89_650_176, marks=pytest.mark.slow)])  # 3 s
def test_sharing_modes_on_base(mode, expected):
    config = AlbertConfig.from_preset("albert_base_v2").replace(parameter_sharing=mode)
    assert count_parameters(config) == expected
    assert built_count(config) == expected


@pytest.mark.slow  # 38 s
@pytest.mark.parametrize("row", paper_rows(), ids=lambda r: r[1])
def test_paper_rows(row):
    _, name, config, paper_millions, note = row
    count = count_parameters(config)
    if count <= MAX_BUILT:
        assert built_count(config) == count
    if not note:
        # The paper's figures are rounded or truncated millions.
        assert abs(count / 1e6 - paper_millions) < 1.0, (name, count)


def test_grouped_counts_scale_with_groups_and_inner_groups():
    config = AlbertConfig.from_preset("albert_base_v2").replace(
        num_hidden_groups=3, inner_group_num=2)
    per_block = (parameter_counts.attention_sublayer_params(config)
                 + parameter_counts.ffn_sublayer_params(config))
    assert count_parameters(config) == EXPECTED["albert_base_v2"] + 5 * per_block
    assert built_count(config) == count_parameters(config)


def test_pretrainer_head_count():
    config = AlbertConfig.from_preset("albert_base_v2")
    model = AlbertPretrainer(config)
    model.build()
    heads = parameter_counts.count_pretraining_head_parameters(config)
    assert model.count_params() == EXPECTED["albert_base_v2"] + heads
    assert heads == 768 * 128 + 128 + 256 + 30000 + 2 * 768 + 2


def test_documented_table_is_current():
    document = REPO_ROOT / "docs" / "parameter_counts.md"
    assert parameter_counts.markdown_table() in document.read_text(), \
        ("docs/parameter_counts.md's table is stale: paste "
         "`python -m albert_tf.modeling.parameter_counts`")
