"""Shared pytest fixtures.

`shared_data` points at ../shared/data (third-party data that must not be
copied into this repository); tests that need it are skipped with a reason
when it is absent.
"""
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from albert_tf.kernels import onednn  # noqa: E402

# The suite runs what albert-tf's programs run: their oneDNN choice, made as they make it,
# before TensorFlow is imported (TensorFlow reads TF_ENABLE_ONEDNN_OPTS once, at import).
ONEDNN = onednn.configure()

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
HELPERS = REPO_ROOT / "tests" / "helpers"  # modules the tests import or run as scripts
SHARED_DATA = pathlib.Path(
        os.environ.get("ALBERT_TF_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    """Path to ../shared/data; skips the test when the folder is missing."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared test data not found at {SHARED_DATA} "
                    "(set ALBERT_TF_SHARED_DATA to its location)")
    return SHARED_DATA


def shared_file(shared_data: pathlib.Path, *parts: str, what: str = "") -> str:
    """The path of a file in ../shared/data; skips the test when it is missing."""
    path = shared_data.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found{f' ({what})' if what else ''}")
    return str(path)


@pytest.fixture(scope="session")
def spm_model(shared_data) -> str:
    """The shared 8k-piece ALBERT-style SentencePiece model; skips when it is missing."""
    return shared_file(shared_data, "spm", "albert_style_pd8k.model")


@pytest.fixture(scope="session")
def official_spm(shared_data) -> str:
    """Google's 30k-clean.model (the English ALBERT models'); skips when it is missing."""
    return shared_file(shared_data, "spm_official", "30k-clean.model")


@pytest.fixture(scope="session")
def chinese_vocab_file(shared_data) -> str:
    """The official Chinese ALBERT WordPiece vocabulary (21,128 tokens) in ../shared/data."""
    return shared_file(shared_data, "chinese", "vocab", "vocab_chinese.txt",
                       what="the official Chinese vocabulary")


# The `slow` mark (`make test-slow`, which CI also runs, rather than `make test`) is written on
# the tests themselves: `@pytest.mark.slow` on a test, `pytest.param(..., marks=pytest.mark.slow)`
# on the parameter sets that are slow when the others are not. The default suite's budget is 10
# minutes on the slowest CPU measured (an AVX2-only EPYC, about 2x a Zen 4's time), so it stays
# near 4 minutes on a Zen 4 (4 min 6 s on 2026-11-27): besides the tests slow on any machine, the longest end-to-end
# runs that the default suite can spare are marked, their seconds (call + setup on an AMD EPYC
# Zen 4, family 25, model 17, 2026-11-26) in a comment beside the mark. docs/performance.md
# has the history of the budget.


def selected_cases(request, cases, read_by_name=()):
    """The names in `cases` that this session's tests of the requesting module take as
    their `name` parameter, plus `read_by_name` (cases that unparametrized tests of the
    module read), in `cases`' order: a module fixture that builds one export per case
    builds only those the run selected (`make test` leaves out the cases whose tests are
    marked slow)."""
    items = [item for item in request.session.items if item.module is request.module]
    wanted = set(read_by_name)
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "name" in callspec.params:
            wanted.add(callspec.params["name"])
    return [name for name in cases if name in wanted]


def pytest_report_header(config):
    return ONEDNN.describe()
