"""AlbertConfig: official JSON in and out, presets, validation errors."""
import json

import pytest

from albert_tf import AlbertConfig
from albert_tf.config import PRESETS

# An official albert_base_v2/albert_config.json, key for key.
OFFICIAL_BASE_V2 = {
    "attention_probs_dropout_prob": 0, "hidden_act": "gelu", "hidden_dropout_prob": 0,
    "embedding_size": 128, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 512, "num_attention_heads": 12,
    "num_hidden_layers": 12, "num_hidden_groups": 1, "net_structure_type": 0, "gap_size": 0,
    "num_memory_blocks": 0, "inner_group_num": 1, "down_scale_factor": 1,
    "type_vocab_size": 2, "vocab_size": 30000,
}


def tiny(**changes):
    values = dict(vocab_size=50, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=64)
    values.update(changes)
    return AlbertConfig(**values)


def test_official_json_round_trips_with_extra_keys(tmp_path):
    path = tmp_path / "albert_config.json"
    path.write_text(json.dumps(dict(OFFICIAL_BASE_V2, layers_to_keep=[])))
    config = AlbertConfig.from_json_file(str(path))
    assert config.hidden_size == 768 and config.num_hidden_layers == 12
    assert config.extra == {"net_structure_type": 0, "gap_size": 0, "num_memory_blocks": 0,
                            "layers_to_keep": []}
    assert config.to_dict() == dict(OFFICIAL_BASE_V2, layers_to_keep=[])
    out = tmp_path / "out" / "albert_config.json"
    config.to_json_file(str(out))
    text = out.read_text()
    assert json.loads(text) == dict(OFFICIAL_BASE_V2, layers_to_keep=[])
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert AlbertConfig.from_json_file(str(out)) == config


def test_parameter_sharing_is_written_only_when_not_default():
    assert "parameter_sharing" not in tiny().to_dict()
    config = tiny(parameter_sharing="none")
    assert config.to_dict()["parameter_sharing"] == "none"
    assert AlbertConfig.from_dict(config.to_dict()) == config


def test_defaults_are_the_original_constructor_defaults():
    config = AlbertConfig(vocab_size=30000)
    assert (config.embedding_size, config.hidden_size, config.num_hidden_layers,
            config.num_hidden_groups, config.num_attention_heads, config.intermediate_size,
            config.inner_group_num, config.down_scale_factor, config.hidden_act,
            config.hidden_dropout_prob, config.attention_probs_dropout_prob,
            config.max_position_embeddings, config.type_vocab_size,
            config.initializer_range) == (128, 4096, 12, 1, 64, 16384, 1, 1, "gelu", 0.0, 0.0,
                                          512, 2, 0.02)


@pytest.mark.parametrize("size,dims", [("base", (768, 12, 12, 3072)),
                                       ("large", (1024, 24, 16, 4096)),
                                       ("xlarge", (2048, 24, 16, 8192)),
                                       ("xxlarge", (4096, 12, 64, 16384))])
def test_presets(size, dims):
    for version in ("v1", "v2"):
        config = AlbertConfig.from_preset(f"albert_{size}_{version}")
        assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
                config.intermediate_size) == dims
        assert config.vocab_size == 30000 and config.embedding_size == 128
        expected_dropout = 0.1 if version == "v1" and size != "xxlarge" else 0.0
        assert config.hidden_dropout_prob == expected_dropout
        assert config.attention_probs_dropout_prob == expected_dropout
    assert AlbertConfig.from_preset("albert_base_v2").to_dict() == OFFICIAL_BASE_V2
    assert len(PRESETS) == 8


def test_unknown_preset():
    with pytest.raises(ValueError, match="unknown preset 'albert_huge'.*albert_base_v1"):
        AlbertConfig.from_preset("albert_huge")


def test_group_index_matches_the_original_float_formula():
    for layers in range(1, 30):
        for groups in range(1, layers + 1):
            config = tiny(num_hidden_layers=layers, num_hidden_groups=groups)
            assert [config.group_index(l) for l in range(layers)] == \
                [int(l / layers * groups) for l in range(layers)]
    # Where float rounding makes the original's formula differ from exact division,
    # the original's is kept (checkpoints were trained with it).
    assert tiny(num_hidden_layers=22, num_hidden_groups=22).group_index(15) == 14


@pytest.mark.parametrize("changes,message", [
    (dict(hidden_size=30), r"hidden_size \(30\) must be divisible by num_attention_heads \(4\)"),
    (dict(num_hidden_groups=3), r"num_hidden_groups \(3\) cannot exceed num_hidden_layers \(2\)"),
    (dict(hidden_act="swishy"), r"hidden_act 'swishy' is not supported"),
    (dict(vocab_size=-5), r"vocab_size must be positive, got -5"),
    (dict(intermediate_size=0), r"intermediate_size must be positive"),
    (dict(embedding_size=12.5), r"embedding_size must be an integer"),
    (dict(num_hidden_layers=True), r"num_hidden_layers must be an integer"),
    (dict(hidden_dropout_prob=1.5), r"hidden_dropout_prob must be a probability"),
    (dict(attention_probs_dropout_prob=-0.1), r"attention_probs_dropout_prob must be"),
    (dict(initializer_range=0.0), r"initializer_range must be a positive number"),
    (dict(parameter_sharing="some"), r"parameter_sharing 'some' is unknown"),
    (dict(parameter_sharing="ffn", inner_group_num=2),
     r"inner_group_num must be 1 when parameter_sharing is 'ffn'"),
])
def test_invalid_configs_name_the_field(changes, message):
    with pytest.raises(ValueError, match=message):
        tiny(**changes)


def test_replace_validates():
    with pytest.raises(ValueError, match="num_attention_heads"):
        tiny().replace(num_attention_heads=5)


def test_json_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        AlbertConfig.from_json_file(str(bad))
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps(dict(OFFICIAL_BASE_V2, num_attention_heads=7)))
    with pytest.raises(ValueError, match="invalid.json: .*num_attention_heads"):
        AlbertConfig.from_json_file(str(invalid))
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ValueError, match="missing.json: .*vocab_size"):
        AlbertConfig.from_json_file(str(missing))
