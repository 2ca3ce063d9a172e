"""wrapped-cmake on hostile or careless input (issue 17, issue 15 items 2, 3, 10): clean --all
removes only a directory wrapped-cmake marked as its own; pyproject.toml, profiles and
MANIFEST.json that are malformed, huge or deeply nested give one line and exit 2; the command
line's --version, env --help, an unknown --backend with --plan, --target as the one option."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.buildenv import clean_env
from support.projects import write_hello_project

from support.standalone import REPO, write_extraction

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def run(*args: str, cwd: Path | None = None, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "wrapped_cmake", *args], capture_output=True,
                          text=True, env=env or clean_env(), cwd=cwd or REPO, timeout=120)


def one_line_exit_2(out, *fragments: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    assert out.stderr.startswith("wrapped-cmake: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr
    for f in fragments:
        assert f in out.stderr, out.stderr


def tiny_tree(root: Path, version: str = "2.6.0a0") -> Path:
    for rel, text in {"version.txt": version + "\n", "c10/CMakeLists.txt": "# c10\n",
                      "c10/cuda/CUDAMiscFunctions.cpp": "int one() { return 1; }\n",
                      "c10/cuda/CUDAKernel.cu": "__global__ void k() {}\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def extraction(tree: Path, out: Path, torch_source: str | None, version: str = "2.6.0a0",
               files: list | None = None) -> Path:
    """An extraction in the schema `tdev extract` writes (tools/tdev/extract/manifest.py)."""
    return write_extraction(tree, out, torch_source, version, files)


# --- 17.4: clean --all removes only what wrapped-cmake marked ---------------------------------

def test_clean_all_refuses_a_source_directory_with_a_cmake_cache(tmp_path):
    src = write_hello_project(tmp_path / "src")
    (src / "CMakeCache.txt").write_text("# after an in-source `cmake .`\n")
    out = run("clean", "--all", "--backend", "sim", "--source", str(src), "--build-dir", str(src))
    one_line_exit_2(out, str(src))
    assert (src / "CMakeLists.txt").is_file() and (src / "CMakeCache.txt").is_file()


def test_clean_all_refuses_a_planted_wrapped_cmake_directory(tmp_path):
    """A `.wrapped-cmake/` (or a marker copied from another build directory) does not make a
    directory wrapped-cmake's: the marker names the directory it was written for."""
    src = write_hello_project(tmp_path / "src")
    other = tmp_path / "elsewhere"
    assert run("configure", "--backend", "sim", "--source", str(src), "--build-dir",
               str(other)).returncode == 0
    victim = write_hello_project(tmp_path / "victim")
    import shutil
    shutil.copytree(other / ".wrapped-cmake", victim / ".wrapped-cmake")
    out = run("clean", "--all", "--backend", "sim", "--source", str(src), "--build-dir",
              str(victim))
    one_line_exit_2(out, str(victim))
    assert (victim / "CMakeLists.txt").is_file()
    # the directory it did create is removed
    out = run("clean", "--all", "--backend", "sim", "--source", str(src), "--build-dir", str(other))
    assert out.returncode == 0 and not other.exists(), out.stderr


def test_standalone_clean_all_refuses_a_planted_stage_state(tmp_path):
    tree = tiny_tree(tmp_path / "pytorch")
    ext = extraction(tree, tmp_path / "third_device" / "torch_cuda", "../../pytorch")
    victim = tmp_path / "mine"
    (victim / "src").mkdir(parents=True)
    (victim / "src" / ".staged.json").write_text("[]")
    (victim / "notes.txt").write_text("precious")
    out = run("clean", "--all", "--backend", "cuda", "--source", str(ext), "--build-dir",
              str(victim))
    one_line_exit_2(out, str(victim))
    assert (victim / "notes.txt").read_text() == "precious"


# --- 15.2 / 15.3: the default build directory, the manifest's tree ---------------------------

def test_readme_plan_works_without_the_tree_and_estimates_from_defaults(tmp_path):
    """`--plan` only counts: no TORCH_SOURCE_DIR, no tree at all, and a time estimate before
    any build (per-kind defaults). Nothing is written into the extraction."""
    tree = tiny_tree(tmp_path / "pytorch")
    ext = extraction(tree, tmp_path / "third_device" / "torch_cuda", None)
    before = sorted(p.relative_to(ext) for p in ext.rglob("*"))
    out = run("build", "--backend", "cuda", "--source", "third_device/torch_cuda", "--plan",
              "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["total_units"] == 2 and report["serial_s"] > 0
    # every kind is estimated from the measured defaults (no ninja log exists yet); the c10 kinds
    # are there, the ATen ones too (the plan estimates every set)
    assert {"cu", "cpp"} <= set(report["estimated_from"])
    assert set(report["estimated_from"].values()) == {"default"}
    assert sorted(p.relative_to(ext) for p in ext.rglob("*")) == before


def test_manifest_records_the_tree_relative_to_itself(tmp_path):
    from wrapped_cmake.settings import load_settings
    from tdev.standalone.inputs import resolve_inputs, standalone_settings

    tree = tiny_tree(tmp_path / "pytorch")
    ext = extraction(tree, tmp_path / "third_device" / "torch_cuda", "../../pytorch")
    env = clean_env()
    settings = standalone_settings(load_settings(ext, env=env))
    inputs = resolve_inputs(settings, env=env)
    assert inputs.torch_source == tree.resolve()
    assert inputs.torch_source_from == f"{ext.resolve() / 'MANIFEST.json'}: torch_source"
    # the default build directory lies outside the extraction
    assert settings.build_dir == tmp_path / "third_device" / "build" / "torch_cuda"
    assert not settings.build_dir.resolve().is_relative_to(ext.resolve())


def test_manifest_tree_of_another_version_names_both(tmp_path):
    tree = tiny_tree(tmp_path / "pytorch", version="2.5.1")
    ext = extraction(tree, tmp_path / "third_device" / "torch_cuda", str(tree))
    out = run("build", "--backend", "cuda", "--source", str(ext))
    one_line_exit_2(out, "2.5.1", "2.6.0a0", str(tree))


def test_manifest_only_reads_the_keys_tdev_extract_writes(tmp_path):
    """No guessed aliases: a `dest` key or a top-level `torch_version` is not the schema (the
    build reads MANIFEST.json through tdev's one manifest model)."""
    from tdev.extract.manifest import ManifestError, load_manifest

    head = {"schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0", "commit": None},
            "layout": {}, "counts": {}}
    p = tmp_path / "MANIFEST.json"
    p.write_text(json.dumps({**head, "files": [{"source": "c10/cuda/A.cpp", "dest": "x/A.cpp",
                                                "role": "moved"}]}))
    with pytest.raises(ManifestError, match=r"files\[0\]: path must be"):
        load_manifest(tmp_path)
    p.write_text(json.dumps({"schema": 1, "tool": "tdev extract", "torch_version": "2.6.0",
                             "layout": {}, "counts": {}, "files": []}))
    with pytest.raises(ManifestError, match="torch must be an object"):
        load_manifest(tmp_path)


HEAD = {"schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0", "commit": None},
        "layout": {}, "counts": {}}


@pytest.mark.parametrize("name, text, fragment", [
    ("deep", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("infinity", json.dumps({**HEAD, "files": [
        {"path": "a/A.cpp", "source": "c10/cuda/A.cpp", "role": "moved", "sha256": "0" * 64,
         "size": 1}]}).replace('"size": 1', '"size": -Infinity'), "-Infinity"),
    ("string-entry", json.dumps({**HEAD, "files": ["c10/cuda/A.cpp"]}),
     "files[0]: must be an object"),
    ("null-entry", json.dumps({**HEAD, "files": [None]}), "files[0]: must be an object"),
    ("list-files", json.dumps({**HEAD, "files": {"a": 1}}), "files must be a list"),
    ("nul", json.dumps({**HEAD, "files": [
        {"path": "a/A\u0000.cpp", "source": "c10/cuda/A.cpp", "role": "moved"}]}), "NUL"),
    ("size-type", json.dumps({**HEAD, "files": [
        {"path": "a/A.cpp", "source": "c10/cuda/A.cpp", "role": "moved", "sha256": "0" * 64,
         "size": "1"}]}), "size must be"),
    ("not-utf8", b"{\"files\": [\xff]}", "UTF-8"),
    ("torch-source-type", json.dumps({**HEAD, "torch_source": 5, "files": []}),
     "torch_source must be"),
    ("not-tdev", json.dumps({"schema": 1, "files": []}), "not a tdev extract manifest"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else "")
def test_hostile_manifest_is_one_line_exit_2(tmp_path, name, text, fragment):
    ext = tmp_path / "third_device" / "torch_cuda"
    ext.mkdir(parents=True)
    data = text if isinstance(text, bytes) else text.encode()
    (ext / "MANIFEST.json").write_bytes(data)
    out = run("build", "--backend", "cuda", "--source", str(ext), "--plan")
    one_line_exit_2(out, "MANIFEST.json", fragment)


def test_manifest_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    import os
    ext = tmp_path / "x"
    ext.mkdir()
    os.mkfifo(ext / "MANIFEST.json")
    out = run("build", "--backend", "cuda", "--source", str(ext), "--plan")
    one_line_exit_2(out, "not a regular file")


# --- 17: pyproject.toml and profiles ---------------------------------------------------------

@pytest.mark.parametrize("data, fragment", [
    (b"[tool.wrapped-cmake]\nbuild-type = \"\xff\"\n", "UTF-8"),
    (b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n", "pyproject.toml"),
    (b"x = " + b"{a = " * 5000 + b"1" + b"}" * 5000 + b"\n", "pyproject.toml"),
], ids=["utf8", "deep-arrays", "deep-tables"])
def test_hostile_pyproject_is_one_line_exit_2(tmp_path, data, fragment):
    src = write_hello_project(tmp_path / "src")
    (src / "pyproject.toml").write_bytes(data)
    out = run("build", "--backend", "sim", "--source", str(src), "--explain")
    one_line_exit_2(out, fragment)


@pytest.mark.parametrize("text, fragment", [
    ("name: deep\nlanguages: " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than"),
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 10) + "]\n"
        for i in range(8)) + "name: bomb\n", "aliases"),
    ("name: x\nlanguages: [CXX]\n\xff: 1\n", "profile"),
    ("name: x\x00\n", "invalid YAML (unacceptable character"),  # found by the fuzz test
], ids=["deep-lists", "alias-bomb", "latin1", "nul"])
def test_hostile_profile_is_one_line_exit_2(tmp_path, text, fragment):
    src = write_hello_project(tmp_path / "src")
    prof = tmp_path / "bad.yaml"
    prof.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text
                     else text.encode("latin-1"))
    out = run("build", "--backend", str(prof), "--source", str(src), "--explain")
    one_line_exit_2(out, str(prof), fragment)


# --- 15.10: the command line -----------------------------------------------------------------

def test_version_and_env_help():
    out = run("--version")
    from importlib.metadata import version
    assert out.returncode == 0 and out.stdout.strip() == f"wrapped-cmake {version('tdev')}"
    out = run("env", "--help")
    assert out.returncode == 0 and "report cmake, ninja, compilers" in out.stdout


def test_plan_with_an_unknown_backend_is_bad_input(tmp_path):
    tree = tiny_tree(tmp_path / "pytorch")
    ext = extraction(tree, tmp_path / "third_device" / "torch_cuda", None)
    out = run("build", "--backend", "cudaa", "--source", str(ext), "--plan")
    one_line_exit_2(out, "unknown backend 'cudaa'", "did you mean 'cuda'")
    out = run("build", "--backend", "sim", "--source", str(ext), "--plan")
    one_line_exit_2(out, "--plan", "cuda")


def test_target_is_the_one_option(tmp_path):
    out = run("build", "--help")
    assert "--target TARGET" in out.stdout and "--targets" not in out.stdout
    tree = tiny_tree(tmp_path / "pytorch")
    ext = extraction(tree, tmp_path / "third_device" / "torch_cuda", None)
    out = run("build", "--backend", "cuda", "--source", str(ext), "--plan", "--json", "--target",
              "c10_cuda,_CUDAC")
    assert out.returncode == 0, out.stderr
    sets = {s["name"]: s["selected"] for s in json.loads(out.stdout)["sets"]}
    assert sets["c10_cuda"] and sets["_CUDAC"] and not sets["aten_cuda"]
    out = run("build", "--backend", "cuda", "--source", str(ext), "--plan", "--targets", "c10_cuda")
    assert out.returncode == 2 and "unrecognized arguments: --targets" in out.stderr
