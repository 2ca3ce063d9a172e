"""Source builders bring their own options (``wrapped_cmake.sources``): wrapped-cmake adds what a
registered builder declares to the commands it takes, an option of a builder given on the
command line selects that builder, and nothing of a builder is known without it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from wrapped_cmake import cli, sources


@dataclass
class Builder:
    """A registered builder: it builds directories holding ``marker`` and records its runs."""
    name: str
    backend: str = "sim"
    marker: str = "BUILD.me"
    flags: tuple[str, ...] = ("--dry",)
    runs: list = field(default_factory=list)

    @property
    def usage(self) -> str:
        return f"--backend {self.backend} --source <a {self.marker} directory>"

    @property
    def title(self) -> str:
        return f"{self.name} builds"

    def add_options(self, group, command: str) -> None:
        if command == "build":
            for flag in self.flags:
                group.add_argument(flag, action="store_true", help=f"{self.name}'s {flag}")

    def handles(self, source: Path) -> bool:
        return (source / self.marker).is_file()

    def run(self, request: sources.SourceRequest) -> int:
        self.runs.append((request.command, request.settings.source_dir,
                          {f: getattr(request.args, f.lstrip("-")) for f in self.flags}))
        return 0


def _main(monkeypatch, builders, argv):
    monkeypatch.setattr(sources, "installed", lambda: list(builders))
    return cli.main(argv)


def test_a_builders_options_appear_on_the_commands_it_takes(monkeypatch, capsys):
    b = Builder("one")
    monkeypatch.setattr(sources, "installed", lambda: [b])
    with pytest.raises(SystemExit):
        cli.main(["build", "--help"])
    out = capsys.readouterr().out
    assert "one builds:" in out and "--dry" in out and "one's --dry" in out
    with pytest.raises(SystemExit):
        cli.main(["install", "--help"])
    assert "--dry" not in capsys.readouterr().out
    monkeypatch.setattr(sources, "installed", lambda: [])
    with pytest.raises(SystemExit) as e:
        cli.main(["build", "--source", ".", "--dry"])
    assert e.value.code == 2 and "unrecognized arguments: --dry" in capsys.readouterr().err


def test_a_given_option_selects_its_builder_whatever_the_source(monkeypatch, tmp_path, capsys):
    one, two = Builder("one"), Builder("two", flags=("--dry", "--fast"), marker="OTHER")
    (tmp_path / "CMakeLists.txt").write_text("project(x)\n")  # a CMake project
    assert _main(monkeypatch, [one, two], ["build", "--backend", "sim", "--source",
                                           str(tmp_path), "--fast"]) == 0
    assert two.runs == [("build", tmp_path.resolve(), {"--dry": False, "--fast": True})]
    assert not one.runs
    # a flag both declare (added once): the one that handles the source, else the first
    (tmp_path / "OTHER").write_text("")
    assert _main(monkeypatch, [one, two], ["build", "--backend", "sim", "--source",
                                           str(tmp_path), "--dry"]) == 0
    assert len(two.runs) == 2 and not one.runs
    (tmp_path / "OTHER").unlink()
    assert _main(monkeypatch, [one, two], ["build", "--backend", "sim", "--source",
                                           str(tmp_path), "--dry"]) == 0
    assert len(one.runs) == 1
    # with another backend, the option is one line naming what takes it
    capsys.readouterr()
    assert _main(monkeypatch, [one, two], ["build", "--backend", "cuda", "--source",
                                           str(tmp_path), "--fast"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("wrapped-cmake: --fast:") and two.usage in err


def test_a_source_nobody_builds_is_one_line(monkeypatch, tmp_path, capsys):
    one = Builder("one")
    assert _main(monkeypatch, [one], ["build", "--backend", "sim", "--source", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path) in err and one.usage in err
    (tmp_path / "BUILD.me").write_text("")
    assert _main(monkeypatch, [one], ["build", "--backend", "sim", "--source", str(tmp_path),
                                      "--json"]) == 0
    assert one.runs[0][:2] == ("build", tmp_path.resolve())


def test_a_builder_that_cannot_be_loaded_stops_only_the_project_commands(monkeypatch, capsys):
    monkeypatch.setenv(sources.ENV, "no_such_module_here:SOURCE")
    monkeypatch.setattr(sources, "distributions", lambda: [])
    assert cli.main(["env", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert cli.main(["build", "--source", "."]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no_such_module_here:SOURCE cannot be loaded" in err


def test_version_is_the_distribution_that_ships_wrapped_cmake(capsys):
    from importlib.metadata import packages_distributions, version
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    dist = packages_distributions()["wrapped_cmake"][0]
    assert capsys.readouterr().out == f"wrapped-cmake {version(dist)}\n"
