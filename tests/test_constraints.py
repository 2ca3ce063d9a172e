"""The versions tdev is tested with (constraints.txt) and how a fresh machine gets them: the
README's two commands, which CI runs on a new virtual environment every time."""
from __future__ import annotations

import os
import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
NOT_PINNED = {"pip", "tdev"}  # pip comes with the environment; tdev is the project itself


def pins() -> dict[str, str]:
    """{canonical name: version} of constraints.txt; every line a `name==version` pin."""
    found: dict[str, str] = {}
    for n, line in enumerate((REPO / "constraints.txt").read_text().splitlines(), 1):
        line = line.split("#")[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s;]*)", line)
        assert m, f"constraints.txt:{n}: not an exact pin: {line}"
        name = canonicalize_name(m[1])
        assert name not in found, f"constraints.txt:{n}: {name} pinned twice"
        found[name] = m[2]
    return found


def test_every_requirement_of_the_project_is_pinned_within_its_range():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["test"],
              *(r for r in project["optional-dependencies"]["build"] if r.startswith("torch"))]
    pinned = pins()
    for text in wanted:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        name = canonicalize_name(req.name)
        assert name in pinned, f"{text} (pyproject.toml) is not pinned in constraints.txt"
        assert req.specifier.contains(Version(pinned[name]), prereleases=True), (text, pinned[name])
    assert pinned["torch"] == "2.13.0+cpu"  # the CPU build: a plain torch is a CUDA build of GBs


def project_environment() -> Path:
    return Path(os.environ.get("TDEV_VENV", REPO / ".venv")).resolve()


@pytest.mark.skipif(Path(sys.prefix).resolve() != project_environment(),
                    reason="checks the project's own environment (.venv), which tools/setup.sh "
                           "makes: run the tests with .venv/bin/python")
def test_the_project_environment_holds_exactly_the_pinned_versions():
    # the environment's own site-packages only: setuptools, once imported, puts its vendored
    # packages' directory on sys.path too
    site = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    installed = {canonicalize_name(d.metadata["Name"]): d.version
                 for d in metadata.distributions(path=site)}
    for name in NOT_PINNED:
        installed.pop(name, None)
    pinned = pins()
    assert {n: v for n, v in installed.items() if pinned.get(n) != v} == {}, "installed, not pinned"
    assert sorted(set(pinned) - set(installed)) == [], "pinned, not installed"


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_ci_runs_the_readme_commands_on_a_new_environment():
    commands = readme_commands()
    assert commands == ["bash tools/quickstart.sh", ".venv/bin/python -m pytest -q"]
    ci = [line.split("#")[0].strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    ci = [line for line in ci if line]
    at = [ci.index(c) for c in commands]
    assert at == sorted(at), ci
    assert "rm -rf .venv" in ci[:at[0]], "CI must make the environment anew"
    setup = (REPO / "tools" / "setup.sh").read_text()
    installs = [line for line in setup.splitlines() if "pip install" in line
                and not line.lstrip().startswith(("#", "log "))]
    assert installs and all("-c constraints.txt" in line for line in installs), installs
