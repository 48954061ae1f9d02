"""The embeddings family's data sets: STS-B's real sample, LCQMC / ATEC files, custom pairs,
triplets and texts, and their bad rows in one line naming file and line."""
import shutil

import pytest

from albert_tf.errors import UserError
from albert_tf.tasks.embeddings import datasets, features, postprocess


def test_stsb_reads_the_glue_layout(shared_data, tmp_path):
    (tmp_path / "STS-B").mkdir()
    shutil.copy(shared_data / "glue" / "STS-B" / "dev_sample.tsv", tmp_path / "STS-B" / "dev.tsv")
    dev = datasets.read_stsb(str(tmp_path), "dev")
    assert len(dev) == 30
    assert all(0 <= e.score <= 5 and e.text_a and e.text_b for e in dev)
    assert dev[0].source.endswith("dev.tsv:2")


def test_lcqmc_pairs_with_and_without_labels(tmp_path):
    (tmp_path / "train.tsv").write_text("喜欢打篮球的男生喜欢什么样的女生\t爱打篮球的男生喜欢什么样的女生\t1\n"
                                        "我手机丢了，我想换个手机\t我想买个新手机，求推荐\t1\n"
                                        "大家觉得她好看吗\t大家觉得跑男好看吗？\t0\n", encoding="utf-8")
    (tmp_path / "test.txt").write_text("一\t二\n", encoding="utf-8")
    train = datasets.read_lcqmc(str(tmp_path), "train")
    assert [e.score for e in train] == [1.0, 1.0, 0.0]
    assert datasets.read_lcqmc(str(tmp_path), "test")[0].score is None
    (tmp_path / "dev.tsv").write_text("a\tb\tc\td\n")
    with pytest.raises(UserError, match=r"dev.tsv:1: expected text_a, text_b and a label"):
        datasets.read_lcqmc(str(tmp_path), "dev")
    (tmp_path / "dev.tsv").write_text("a\tb\tsimilar\n")
    with pytest.raises(UserError, match=r"dev.tsv:1: score 'similar' is not a number"):
        datasets.read_lcqmc(str(tmp_path), "dev")


def test_custom_pairs_triplets_and_texts(tmp_path):
    columns = datasets.EmbeddingColumns("q", "p", "score", "n")
    (tmp_path / "train.tsv").write_text("q\tp\tn\nx\ty\tz\n")
    (tmp_path / "dev.csv").write_text('q,p,score\n"a, b",c,0.5\n')
    train = datasets.read_custom(columns, str(tmp_path), "train")
    assert (train[0].text_b, train[0].negative, train[0].score) == ("y", "z", None)
    assert features.texts_of(train) == ("a", "b", "n")
    dev = datasets.read_custom(columns, str(tmp_path), "dev")
    assert (dev[0].text_a, dev[0].score) == ("a, b", 0.5)
    (tmp_path / "test.txt").write_text("one text\n\nanother\n")
    assert [e.text_a for e in datasets.read_custom(columns, str(tmp_path), "test")] == \
        ["one text", "another"]
    with pytest.raises(UserError, match=r"--text_b_column='p': no such column in the header"):
        (tmp_path / "dev.csv").write_text("q,x\na,b\n")
        datasets.read_custom(columns, str(tmp_path), "dev")
    with pytest.raises(UserError, match="--task_name=custom needs --text_a_column"):
        datasets.open_task(type("O", (), {"task_name": "custom", "data_dir": str(tmp_path),
                                          "columns": None})())


def test_a_similarities_file_reads_back_in_the_examples_order(tmp_path):
    examples = [datasets.PairExample("g1", "a", "b", 1.0), datasets.PairExample("g2", "c", "d", 2.0)]
    postprocess.write_similarities(str(tmp_path), examples, [0.25, -0.5])
    path = str(tmp_path / "similarities.tsv")
    assert postprocess.read_similarities(path, examples[::-1]).tolist() == [-0.5, 0.25]
    with pytest.raises(UserError, match="0 unknown .* 1 without a similarity"):
        postprocess.read_similarities(path, examples + [datasets.PairExample("g3", "e", "f")])
