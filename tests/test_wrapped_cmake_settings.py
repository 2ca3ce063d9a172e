"""wrapped_cmake.settings and wrapped_cmake.archs: layered sources, precedence, unknown keys,
TORCH_CUDA_ARCH_LIST parsing."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from wrapped_cmake.archs import ArchError, parse_arch_list
from wrapped_cmake.errors import InputError
from wrapped_cmake.settings import load_settings


def write_pyproject(root: Path, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(body)
    return root


PYPROJECT = """
[project]
name = "x"
[tool.wrapped-cmake]
build-type = "Debug"
jobs = 3
launcher = "ccache"
[tool.wrapped-cmake.define]
USE_FOO = true
ONLY_PYPROJECT = "p"
"""


def test_defaults_when_no_layer_sets_anything(tmp_path):
    s = load_settings(tmp_path, env={})
    assert (s.backend, s.build_type, s.generator, s.jobs, s.torch) == (
        "cuda", "Release", "Ninja", None, "cpu")
    assert s.build_dir == tmp_path.resolve() / "build" / "cuda"
    assert set(s.sources.values()) == {"default"}
    assert s.defines == {}


@pytest.mark.parametrize("layers, expected_type, expected_jobs, type_source, jobs_source", [
    ({"pyproject"}, "Debug", 3, "pyproject.toml [tool.wrapped-cmake]: build-type",
     "pyproject.toml [tool.wrapped-cmake]: jobs"),
    ({"pyproject", "env"}, "RelWithDebInfo", 5, "env CMAKE_BUILD_TYPE", "env MAX_JOBS"),
    ({"pyproject", "env", "cli"}, "MinSizeRel", 7, "command line: build-type",
     "command line: jobs"),
    ({"env", "cli"}, "MinSizeRel", 7, "command line: build-type", "command line: jobs"),
    ({"pyproject", "cli"}, "MinSizeRel", 7, "command line: build-type", "command line: jobs"),
])
def test_each_layer_overrides_the_one_below(tmp_path, layers, expected_type, expected_jobs,
                                            type_source, jobs_source):
    if "pyproject" in layers:
        write_pyproject(tmp_path, PYPROJECT)
    env = {"CMAKE_BUILD_TYPE": "RelWithDebInfo", "MAX_JOBS": "5"} if "env" in layers else {}
    overrides = {"build-type": "MinSizeRel", "jobs": "7"} if "cli" in layers else {}
    s = load_settings(tmp_path, env=env, overrides=overrides)
    assert s.build_type == expected_type and s.jobs == expected_jobs
    assert s.sources["build-type"].endswith(type_source)
    assert s.sources["jobs"].endswith(jobs_source)


def test_defines_merge_key_by_key_across_layers(tmp_path):
    write_pyproject(tmp_path, PYPROJECT)
    s = load_settings(tmp_path, env={"USE_FOO": "OFF", "USE_BAR": "1"},
                      defines=["USE_BAR=2", "CLI_ONLY:STRING=a=b"])
    assert s.defines == {"USE_FOO": "OFF", "ONLY_PYPROJECT": "p", "USE_BAR": "2",
                         "CLI_ONLY": "a=b"}
    assert s.define_sources["USE_FOO"] == "env USE_FOO"
    assert s.define_sources["ONLY_PYPROJECT"].endswith("define.ONLY_PYPROJECT")
    assert s.define_sources["USE_BAR"] == "command line: -D USE_BAR"


def test_environment_passthrough_follows_pytorch(tmp_path):
    env = {"USE_CUDA": "1", "BUILD_TEST": "0", "CMAKE_CUDA_FLAGS": "-lineinfo",
           "_GLIBCXX_USE_CXX11_ABI": "1", "USE_CUDA_STATIC_LINK": "ON", "WERROR": "1",
           "CMAKE_PREFIX_PATH": os.pathsep.join(["/a", "/b"]),
           # CMake's own variables and settings are not definitions
           "CMAKE_GENERATOR": "Unix Makefiles", "CMAKE_BUILD_PARALLEL_LEVEL": "4",
           "CMAKE_ARGS": "-DFROM_ARGS=1 --log-level=VERBOSE", "HOME": "/root",
           "PATH": "/usr/bin"}
    s = load_settings(tmp_path, env=env)
    assert s.defines == {"USE_CUDA": "1", "BUILD_TEST": "0", "CMAKE_CUDA_FLAGS": "-lineinfo",
                         "GLIBCXX_USE_CXX11_ABI": "1", "CAFFE2_STATIC_LINK_CUDA": "ON",
                         "WERROR": "1", "CMAKE_PREFIX_PATH": "/a;/b"}
    assert s.generator == "Unix Makefiles" and s.sources["generator"] == "env CMAKE_GENERATOR"
    assert s.cmake_args == ["-DFROM_ARGS=1", "--log-level=VERBOSE"]


def test_debug_flags_and_specific_variables(tmp_path):
    assert load_settings(tmp_path, env={"DEBUG": "1"}).build_type == "Debug"
    assert load_settings(tmp_path, env={"REL_WITH_DEB_INFO": "ON"}).build_type == "RelWithDebInfo"
    both = load_settings(tmp_path, env={"DEBUG": "1", "CMAKE_BUILD_TYPE": "Release"})
    assert both.build_type == "Release"  # the explicit CMake variable wins, as in PyTorch
    s = load_settings(tmp_path, env={"MAX_JOBS": "2", "WRAPPED_CMAKE_JOBS": "9",
                                     "WRAPPED_CMAKE_COMPILE_COMMANDS": "off"})
    assert s.jobs == 9 and s.sources["jobs"] == "env WRAPPED_CMAKE_JOBS"
    assert s.compile_commands is False


def test_paths_are_relative_to_the_layer_that_set_them(tmp_path, monkeypatch):
    write_pyproject(tmp_path / "src", '[tool.wrapped-cmake]\nbuild-dir = "out/here"\n')
    monkeypatch.chdir(tmp_path)
    assert load_settings(tmp_path / "src", env={}).build_dir == tmp_path / "src" / "out" / "here"
    s = load_settings(tmp_path / "src", env={}, overrides={"build-dir": "cli-build"})
    assert s.build_dir == tmp_path / "cli-build"


@pytest.mark.parametrize("where, kwargs, fragment", [
    ("pyproject", {}, "unknown setting 'biuld-type' (did you mean 'build-type'?)"),
    ("config", {"config": ["jbos=3"]}, "command line -C: unknown setting 'jbos'"),
    ("override", {"overrides": {"targest": ["a"]}}, "command line: unknown setting 'targest'"),
    ("env", {"env": {"WRAPPED_CMAKE_LAUNCHR": "ccache"}},
     "env WRAPPED_CMAKE_LAUNCHR: unknown setting 'launchr' (did you mean 'launcher'?)"),
])
def test_unknown_settings_are_errors_naming_key_and_source(tmp_path, where, kwargs, fragment):
    if where == "pyproject":
        write_pyproject(tmp_path, '[tool.wrapped-cmake]\nbiuld-type = "Debug"\n')
    with pytest.raises(InputError) as e:
        load_settings(tmp_path, **{"env": {}, **kwargs})
    assert fragment in str(e.value)
    if where == "pyproject":
        assert str(tmp_path / "pyproject.toml") in str(e.value)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"env": {"MAX_JOBS": "0"}}, "env MAX_JOBS: jobs: expected a positive integer, got '0'"),
    ({"env": {"CMAKE_BUILD_TYPE": "Fast"}}, "env CMAKE_BUILD_TYPE: build-type: expected one of"),
    ({"overrides": {"launcher": "distcc"}}, "command line: launcher: expected one of none"),
    ({"overrides": {"torch": "gpu"}}, "command line: torch: expected one of none, cpu, device"),
    ({"env": {"TORCH_CUDA_ARCH_LIST": "Amper"}},
     "env TORCH_CUDA_ARCH_LIST: cuda-arch-list: unknown architecture 'Amper' (did you mean "
     "'Ampere'?)"),
    ({"defines": ["=x"]}, "command line -D: expected KEY=VALUE"),
    ({"config": ["jobs"]}, "expected key=value"),
])
def test_bad_values_name_their_source(tmp_path, kwargs, fragment):
    with pytest.raises(InputError) as e:
        load_settings(tmp_path, **{"env": {}, **kwargs})
    assert fragment in str(e.value)


def test_malformed_pyproject_is_an_input_error(tmp_path):
    write_pyproject(tmp_path, "[tool.wrapped-cmake\n")
    with pytest.raises(InputError, match="pyproject.toml: not valid TOML"):
        load_settings(tmp_path, env={})
    write_pyproject(tmp_path, '[tool.wrapped-cmake]\ndefine = "USE_X=1"\n')
    with pytest.raises(InputError, match="define: expected a table"):
        load_settings(tmp_path, env={})


def test_to_dict_records_every_value_with_its_source(tmp_path):
    write_pyproject(tmp_path, PYPROJECT)
    d = load_settings(tmp_path, env={"TORCH_CUDA_ARCH_LIST": "Hopper"}).to_dict()
    assert d["cuda-architectures"] == {"value": ["90-real", "90-virtual"],
                                       "source": "env TORCH_CUDA_ARCH_LIST"}
    assert d["launcher"]["value"] == "ccache" and "pyproject.toml" in d["launcher"]["source"]
    assert d["define"]["USE_FOO"] == {"value": "ON", "source": d["define"]["USE_FOO"]["source"]}


@pytest.mark.parametrize("text, expected", [
    ("8.0", ["80-real"]),
    ("8.0+PTX", ["80-real", "80-virtual"]),
    ("9.0a", ["90a-real"]),
    ("10.0f+PTX", ["100f-real", "100f-virtual"]),
    ("Ampere", ["80-real", "86-real", "86-virtual"]),
    ("Hopper", ["90-real", "90-virtual"]),
    ("Ampere+Tegra", ["87-real"]),
    ("Turing+PTX", ["75-real", "75-virtual"]),
    ("Hopper;Ampere", ["80-real", "86-real", "86-virtual", "90-real", "90-virtual"]),
    ("9.0 8.0,7.5", ["75-real", "80-real", "90-real"]),
    ("8.0;8.0;8.0+PTX", ["80-real", "80-virtual"]),
    ("Blackwell", ["100-real", "120-real", "120-virtual"]),
    ("native", ["native"]),
    ("all-major", ["all-major"]),
])
def test_arch_list_parsing(text, expected):
    assert parse_arch_list(text) == expected


@pytest.mark.parametrize("text, fragment", [
    ("Amper", "did you mean 'Ampere'"),
    ("hopper+ptx", "did you mean 'Hopper'"),
    ("8", "unknown architecture '8'"),
    ("sm_80", "unknown architecture 'sm_80'"),
    ("9.0b", "unknown architecture '9.0b'"),
    ("native;8.0", "'native' must be the only entry"),
    (" ; ", "empty architecture list"),
])
def test_arch_list_rejects_invalid_entries(text, fragment):
    with pytest.raises(ArchError) as e:
        parse_arch_list(text)
    assert fragment in str(e.value)


def test_each_setting_is_declared_once_on_the_dataclass():
    """FIELDS, the environment's PyTorch variables and the options all come from Settings."""
    import dataclasses

    from wrapped_cmake.settings import ENV_NOT_DEFINES, FIELDS, SPEC, Settings
    declared = [f.name for f in dataclasses.fields(Settings) if SPEC in f.metadata]
    assert [f.attr for f in FIELDS.values()] == declared
    assert list(FIELDS) == [a.replace("_", "-") for a in declared]
    assert FIELDS["jobs"].spec.env == ("MAX_JOBS",) and "MAX_JOBS" in ENV_NOT_DEFINES
    assert FIELDS["targets"].default == [] and FIELDS["targets"].default is not \
        Settings(Path(".")).targets  # a list default is never shared
    with pytest.raises(dataclasses.FrozenInstanceError):
        load_settings(Path("."), env={}).jobs = 3  # type: ignore[misc]


def test_docs_table_lists_every_setting_with_its_default():
    doc = (Path(__file__).parents[1] / "docs" / "wrapped-cmake.md").read_text()
    from wrapped_cmake.settings import FIELDS
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 3:
            for key in cells[0].replace("`", "").split(","):
                rows[key.strip()] = cells[1]
    assert set(rows) == set(FIELDS)
    for key, f in FIELDS.items():
        if isinstance(f.default, bool):
            assert rows[key] == f"`{str(f.default).lower()}`", key
        elif isinstance(f.default, str):
            assert rows[key] == f"`{f.default}`", key


def test_every_setting_with_flags_is_an_option_and_gives_an_override(tmp_path):
    from wrapped_cmake.cli import build_parser
    from wrapped_cmake.settings import FIELDS, given_options
    args = build_parser().parse_args(
        ["build", "--backend", "sim", "--build-dir", "b", "--generator", "Unix Makefiles",
         "--build-type", "Debug", "-j", "4", "--cuda-arch-list", "8.0", "--launcher", "ccache",
         "--target", "a", "--target", "b", "--install-prefix", "p", "--torch", "none",
         "--verbose"])
    given = given_options(args)
    assert set(given) == {k for k, f in FIELDS.items() if f.spec.flags}
    assert None not in given.values()
    s = load_settings(tmp_path, env={}, overrides=given)
    assert (s.backend, s.generator, s.build_type, s.jobs, s.cuda_arch_list, s.launcher,
            s.targets, s.torch, s.verbose) == ("sim", "Unix Makefiles", "Debug", 4, "8.0",
                                               "ccache", ["a", "b"], "none", True)
    assert set(s.sources.values()) - {"default"} == {f"command line: {k}" for k in given}
    unset = given_options(build_parser().parse_args(["build"]))
    assert set(unset.values()) == {None}  # an option not given leaves the layers below
