"""slow_in_default_suite.txt names tests that exist (a renamed test would silently move
back into the default suite's budget)."""
import re

from tests import conftest


def test_every_listed_test_exists():
    for prefix in conftest._slow_prefixes():
        path, _, name = prefix.partition("::")
        function = re.match(r"\w+", name).group(0)
        source = (conftest.REPO_ROOT / path).read_text()
        assert re.search(rf"^def {function}\(", source, re.M), prefix
