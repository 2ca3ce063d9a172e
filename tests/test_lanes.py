"""The test lanes are checked, not trusted: a mark pyproject.toml does not declare stops the run
(--strict-markers), and a test that uses a fixture of the real PyTorch trees or the stage-1 wheel
without the realtree mark is refused at collection (tests/conftest.py), so that the fast lane
(-m "not realtree and not slow", docs/CONTRIBUTING.md) never reaches them."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs pytest in a subprocess

REPO = Path(__file__).resolve().parents[1]


def collect(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    """Collect one test file under the repository's configuration and tests/conftest.py."""
    test = tmp_path / "test_probe.py"
    test.write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-c", str(REPO / "pyproject.toml"), "--rootdir", str(REPO), "-p", "conftest", str(test)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_an_undeclared_mark_stops_the_run(tmp_path):
    out = collect(tmp_path, "import pytest\n\n@pytest.mark.realtre\ndef test_x():\n    pass\n")
    assert out.returncode != 0 and "'realtre' not found in `markers`" in out.stdout + out.stderr, out.stdout


def test_a_real_tree_fixture_without_the_mark_is_refused(tmp_path):
    out = collect(tmp_path, "def test_x(pytorch_tree):\n    pass\n")
    assert out.returncode != 0 and "without the realtree mark" in out.stdout + out.stderr, out.stdout
    assert "::test_x" in out.stderr, out.stderr  # named


@pytest.mark.parametrize("source", [
    "import pytest\n\n@pytest.mark.realtree\ndef test_x(pytorch_tree):\n    pass\n",
    "import pytest\n\npytestmark = pytest.mark.realtree\n\n@pytest.fixture\ndef tree(stage1_py):\n"
    "    return stage1_py\n\ndef test_x(tree):\n    pass\n",
    "def test_x(tmp_path):\n    pass\n",
])
def test_marked_or_unrelated_tests_are_collected(tmp_path, source):
    out = collect(tmp_path, source)
    assert out.returncode == 0 and "1 test collected" in out.stdout, out.stdout + out.stderr
