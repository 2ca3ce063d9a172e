"""The standalone two-stage torch_cuda build: manifest, target sets, staging with patches, the
--plan estimate and the CLI, on small trees and (realtree) the plan of the real extraction.
The real builds are in test_standalone_realbuild.py."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tdev.standalone.estimate import DEFAULT_SECONDS, ccache_hits, make_plan, parse_ninja_log, record_unit_times
from tdev.standalone.inputs import resolve_inputs, standalone_settings
from tdev.standalone.stage import changed, stage_sources
from tdev.standalone.from_source import sources_cmake
from tdev.standalone.targets import glob_match, load_target_sets
from tdev.extract.manifest import ManifestError, load_manifest
from wrapped_cmake.builddir import claim
from wrapped_cmake.errors import InputError
from wrapped_cmake.settings import load_settings
from support.buildenv import clean_env

from support.standalone import (CUDA_FILE, OVERLAY, REPO, cli as _cli, extract_for_tests,
                                     readme_build_line, run_readme_line, series_with as _series,
                                     write_extraction)

LAYOUT = {"source": "layout.yaml", "sha256": "0" * 64}


def _tree(root: Path) -> Path:
    """A tiny PyTorch-shaped tree: enough for staging, not for compiling."""
    files = {"version.txt": "2.6.0a0\n", "cmake/public/utils.cmake": "# utils\n",
             "c10/CMakeLists.txt": "# c10\n", "c10/core/Device.h": "#pragma once\n",
             "c10/cuda/CUDAMiscFunctions.cpp": "int one() {\n  return 1;\n}\n",
             "c10/cuda/impl/CUDATest.h": "#pragma once\n", "c10/hip/skip.h": "// ROCm\n",
             "c10/cuda/test/impl/T.cu": "// a test\n"}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _extract(tree: Path, out: Path, version: str = "2.6.0", **extra) -> Path:
    """An extraction in the schema `tdev extract` writes, the tree recorded relative to it."""
    return write_extraction(tree, out, os.path.relpath(tree, out), version, **extra)


@pytest.fixture
def small(tmp_path):
    tree = _tree(tmp_path / "pytorch")
    return tree, _extract(tree, tmp_path / "x" / "third_device" / "torch_cuda")


# --- manifest --------------------------------------------------------------------------------

def test_manifest_maps_original_paths_to_destinations(small):
    tree, ext = small
    m = load_manifest(ext)
    assert m.torch_tree() == tree and m.torch_version == "2.6.0"
    assert m.file(CUDA_FILE) == ext / "torch_cuda/csrc" / CUDA_FILE
    assert [e.source for e in m.under("c10/cuda")][0] == CUDA_FILE
    assert not changed(m, m.sources[CUDA_FILE])
    m.file(CUDA_FILE).write_text("edited\n")
    assert changed(m, m.sources[CUDA_FILE])


def _entry(role: str, path: str, source: str | None = None, **more) -> dict:
    d = {"role": role, "path": path, "sha256": "0" * 64, "size": 1, **more}
    return d if source is None else {**d, "source": source}


def test_manifest_schema_of_tdev_extract(tmp_path):
    doc = {"schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0a0", "commit": None},
           "layout": LAYOUT, "counts": {}, "files": [
               _entry("moved", f"torch_cuda/csrc/{CUDA_FILE}", CUDA_FILE),
               _entry("region", "torch_cuda/csrc/regions/c10/macros/Macros.h/L249-301.inc",
                      "c10/macros/Macros.h", lines=[249, 301]),
               _entry("region", "torch_cuda/csrc/regions/c10/macros/Macros.h/L309-309.inc",
                      "c10/macros/Macros.h", lines=[309, 309]),
               _entry("patch", "torch_patches/0022-split-c10-macros-Macros-h.patch",
                      "c10/macros/Macros.h"),
               _entry("report", "EXTRACT_REPORT.json")]}
    (tmp_path / "MANIFEST.json").write_text(json.dumps(doc))
    m = load_manifest(tmp_path)
    assert (m.torch_version, m.torch_tree()) == ("2.6.0a0", None)
    assert list(m.sources) == [CUDA_FILE]  # the patch entry does not hide a file mapping
    assert [r.path.rsplit("/", 1)[1] for r in m.regions] == ["L249-301.inc", "L309-309.inc"]


@pytest.mark.parametrize("files, problem", [
    ([_entry("moved", "../../etc/passwd", "c10/cuda/a.cpp")], "leaves the output directory"),
    ([_entry("moved", "a.cpp", "/abs/a.cpp")], "source refused.*absolute"),
    ([_entry("region", "a.cpp", "c10/../../a.cpp")], "source refused.*leaves"),
    ([_entry("moved", "a.cpp")], "role moved needs a source"),
    ([{"role": "moved", "source": "c10/cuda/a.cpp"}], "path must be a non-empty string"),
    ([_entry("copied", "a.cpp", "c10/cuda/a.cpp")], "role must be one of"),
    ("nope", "files must be a list"),
])
def test_manifest_refuses_bad_entries(tmp_path, files, problem):
    (tmp_path / "MANIFEST.json").write_text(json.dumps(
        {"schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0", "commit": None},
         "layout": LAYOUT, "counts": {}, "files": files}))
    with pytest.raises(ManifestError, match=problem):
        load_manifest(tmp_path)


def test_build_refuses_a_listed_file_behind_a_symlink_out_of_the_extraction(small, tmp_path):
    tree, ext = small
    target = ext / "torch_cuda" / "csrc" / CUDA_FILE
    target.unlink()
    target.symlink_to(tree / CUDA_FILE)  # outside the extraction
    with pytest.raises(InputError, match="resolves outside"):
        stage_sources(load_manifest(ext), tree, OVERLAY, tmp_path / "src", [], "2.6.0a0")


# --- target sets -----------------------------------------------------------------------------

def _plan_only_overlay(tmp_path: Path) -> Path:
    """A copy of the overlay whose targets.yaml adds a set the build cannot compile yet."""
    overlay = tmp_path / "overlay"
    shutil.copytree(OVERLAY, overlay)
    text = (overlay / "targets.yaml").read_text()
    later = ("  torch_cuda_later:\n    stage: 2\n    buildable: false\n"
             "    why: \"not wired yet\"\n    sources: [\"torch/csrc/later/**\"]\n")
    (overlay / "targets.yaml").write_text(text.replace("\nsettings:", f"\n{later}\nsettings:", 1))
    return overlay


def test_globs_and_target_set_selection(tmp_path):
    assert glob_match("c10/cuda/**/*.cpp", "c10/cuda/A.cpp")
    assert glob_match("c10/cuda/**/*.cpp", "c10/cuda/impl/B.cpp")
    assert not glob_match("c10/cuda/*.cpp", "c10/cuda/impl/B.cpp")
    sets = load_target_sets(OVERLAY / "targets.yaml")
    assert sets.select([]) == ["c10_cuda", "_CUDAC"]
    assert sets.select(["_CUDAC"]) == ["c10_cuda", "_CUDAC"]  # requirements first
    with pytest.raises(InputError, match=r"unknown target set 'c10cuda' \(did you mean 'c10_cuda'"):
        sets.select(["c10cuda"])
    assert sets.select(["torch_python_cuda"]) == ["c10_cuda", "aten_cuda", "torch_cuda_framework",
                                                 "torch_python_cuda"]
    later = load_target_sets(_plan_only_overlay(tmp_path) / "targets.yaml")
    with pytest.raises(InputError, match="torch_cuda_later' cannot be built.*not wired yet"):
        later.select(["torch_cuda_later"])
    assert sets.select(["aten_native_cuda"]) == ["c10_cuda", "aten_cuda", "aten_native_cuda"]
    assert sets.stage1_mode(sets.select([])) == "source"  # c10_cuda, _CUDAC: c10 from the tree
    assert sets.stage1_mode(sets.select(["aten_cuda"])) == "torch"  # the installed torch


def test_sources_come_from_the_manifest_and_skip_tests(small, tmp_path):
    tree, ext = small
    inputs = resolve_inputs(load_settings(ext, env=clean_env()), env=clean_env())
    text = sources_cmake(inputs)
    assert f"torch/{CUDA_FILE}" in text and "T.cu" not in text
    assert 'set(TORCH_VERSION "2.6.0a0")' in text and "csrc/cudac_module.cpp" in text


# --- resolving the inputs --------------------------------------------------------------------

def test_torch_source_precedence_and_version_check(small, tmp_path):
    tree, ext = small
    env = clean_env()
    got = resolve_inputs(load_settings(ext, env=env), env=env)
    assert got.torch_source == tree and got.torch_source_from == f"{ext / 'MANIFEST.json'}: torch_source"
    other = _tree(tmp_path / "other")
    env2 = clean_env(TDEV_TORCH_SOURCE_DIR=str(other))
    got = resolve_inputs(load_settings(ext, env=env2), env=env2)
    assert (got.torch_source, got.torch_source_from) == (other, "env TDEV_TORCH_SOURCE_DIR")
    s = load_settings(ext, env=env2, defines=[f"TORCH_SOURCE_DIR={tree}"])
    assert resolve_inputs(s, env=env2).torch_source == tree  # -D beats the environment
    (other / "version.txt").write_text("2.7.0\n")
    with pytest.raises(InputError, match=r"is PyTorch 2.7.0 \(its version.txt\) but the extraction was made from 2.6.0"):
        resolve_inputs(load_settings(ext, env=env2), env=env2)


def test_manifest_without_tree_asks_for_one(tmp_path):
    ext = _extract(_tree(tmp_path / "t"), tmp_path / "x")
    doc = json.loads((ext / "MANIFEST.json").read_text())
    del doc["torch_source"]
    (ext / "MANIFEST.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="pass -D TORCH_SOURCE_DIR"):
        resolve_inputs(load_settings(ext, env=clean_env()), env=clean_env())


# --- staging and patches ---------------------------------------------------------------------

def test_staging_patches_copies_never_the_extraction(small, tmp_path):
    tree, ext = small
    old = (tree / CUDA_FILE).read_text()
    new = old.replace("return 1;", "return 1;  // patched for the standalone build")
    series = _series(tmp_path / "series", "0001-test", CUDA_FILE, old, new)
    m = load_manifest(ext)
    root = tmp_path / "build" / "src"
    r = stage_sources(m, tree, OVERLAY, root, [series, REPO / "torch_patches"], "2.6.0a0")
    assert [(p.name, p.state) for p in r.patches] == [("0001-test.patch", "applied-now")]
    assert (root / "stage2/torch" / CUDA_FILE).read_text() == new
    assert m.file(CUDA_FILE).read_text() == old  # the extracted file is untouched
    assert (root / "stage1/torch/c10/core/Device.h").is_file()
    assert not (root / "stage1/torch/c10/hip").exists()  # ROCm is not stage 1's
    assert not (root / "stage1/torch/c10/cuda").exists()  # c10/cuda comes from the extraction
    assert (root / "stage2/CMakeLists.txt").is_file()
    # a re-stage writes nothing and keeps mtimes (Ninja and ccache see no change)
    mtime = (root / "stage2/torch" / CUDA_FILE).stat().st_mtime_ns
    time.sleep(0.01)
    again = stage_sources(m, tree, OVERLAY, root, [series], "2.6.0a0")
    assert again.written == 0 and (root / "stage2/torch" / CUDA_FILE).stat().st_mtime_ns == mtime


def test_patch_already_in_the_extraction_and_conflicts(small, tmp_path):
    tree, ext = small
    old = (tree / CUDA_FILE).read_text()
    new = old.replace("return 1;", "return 2;")
    m = load_manifest(ext)
    m.file(CUDA_FILE).write_text(new)  # extracted from an already patched tree
    series = _series(tmp_path / "s1", "0001-two", CUDA_FILE, old, new)
    r = stage_sources(m, tree, OVERLAY, tmp_path / "b1", [series], "2.6.0a0")
    assert r.patches[0].state == "already-in" and r.changed_extracted == [CUDA_FILE]
    clash = _series(tmp_path / "s2", "0001-clash", CUDA_FILE, old.replace("1", "7"), old)
    r = stage_sources(m, tree, OVERLAY, tmp_path / "b2", [clash], "2.6.0a0")
    assert r.conflict is not None and r.conflict.name == "0001-clash.patch"
    assert not (tmp_path / "b2").exists()  # nothing staged when a patch conflicts
    other = _series(tmp_path / "s3", "0001-later", CUDA_FILE, old, new, applies=">=2.7")
    assert stage_sources(m, tree, OVERLAY, tmp_path / "b3", [other], "2.6.0a0").patches == []


# --- the plan --------------------------------------------------------------------------------

def test_ninja_log_and_ccache_hits(tmp_path):
    log = tmp_path / ".ninja_log"
    log.write_text("# ninja log v6\n0\t2500\t1\tCMakeFiles/c10_cuda.dir/torch/c10/cuda/A.cpp.o\t9\n"
                   "2500\t2600\t1\tlib/libc10_cuda.so\t8\n")
    assert parse_ninja_log(log) == ([("CMakeFiles/c10_cuda.dir/torch/c10/cuda/A.cpp.o", 2.5),
                                     ("lib/libc10_cuda.so", 0.1)], 2)
    assert parse_ninja_log(log, skip=2) == ([], 2)
    stats = tmp_path / "stats.log"
    stats.write_text("# /b/src/stage2/torch/c10/cuda/A.cpp\ncache_miss\n"
                     "# /b/src/stage2/torch/c10/cuda/A.cpp\ndirect_cache_hit\n"
                     "# /b/src/stage2/torch/c10/cuda/B.cpp\ncache_miss\n")
    assert ccache_hits(stats) == {"/b/src/stage2/torch/c10/cuda/A.cpp"}


def test_plan_counts_units_and_estimates_from_compiles_not_cache_hits(small, tmp_path):
    tree, ext = small
    env = clean_env()
    inputs = resolve_inputs(standalone_settings(load_settings(ext, env=env)), env=env,
                            need_tree=False)
    build = inputs.build_dir
    assert build == ext.parent / "build" / "torch_cuda"
    (build / "stage2").mkdir(parents=True)
    unit = "CMakeFiles/c10_cuda.dir/torch/c10/cuda/CUDAMiscFunctions.cpp.o"
    (build / "stage2" / ".ninja_log").write_text(f"# ninja log v6\n0\t50\t1\t{unit}\t1\n")
    stats = build / "stats.log"
    stats.write_text(f"# {build}/src/stage2/torch/{CUDA_FILE}\ndirect_cache_hit\n")
    assert record_unit_times(build, stats) == {}  # a cache hit is no compile time
    assert stats.read_text() == ""
    report = make_plan(inputs, jobs=2)
    assert report.total_units == 1 and report.not_built == 1  # the test .cu is never built
    assert set(report.estimated_from.values()) == {"default"}  # before any compile
    assert report.serial_s == DEFAULT_SECONDS["cpp"] and "defaults" in report.notes[0]
    with open(build / "stage2" / ".ninja_log", "a") as f:
        f.write(f"100\t4100\t2\t{unit}\t1\n")
    times = record_unit_times(build, stats)
    assert times[CUDA_FILE]["slowest"] == 4.0
    report = make_plan(inputs, jobs=2)
    c10 = next(s for s in report.sets if s.name == "c10_cuda")
    assert (c10.units, c10.measured, c10.estimate_s) == (1, 1, 4.0)
    assert report.serial_s == 4.0 and report.wall_s == 2.0
    assert report.estimated_from["cpp"] == "measured" and report.estimated_from["cu"] == "default"


C10_CMAKE = """file(GLOB C10_SRCS
        *.cpp
        core/*.cpp
        util/*.cpp
      )
file(GLOB C10_HEADERS *.h core/*.h)
"""


def test_plan_counts_stage_1s_units_and_time(small, tmp_path):
    """Stage 1 (c10 from the tree, the default build's) is part of the build `--plan` plans:
    the units the tree's own c10/CMakeLists.txt globs, at the stage-1 time per unit (measured
    by this build directory's stage-1 Ninja log once there is one)."""
    tree, ext = small
    (tree / "c10" / "CMakeLists.txt").write_text(C10_CMAKE)
    for rel in ("core/Device.cpp", "core/Stream.cpp", "util/Logging.cpp", "test/core/T.cpp",
                "mobile/Skip.cpp"):  # the last two: no glob of C10_SRCS takes them
        (tree / "c10" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / "c10" / rel).write_text("int f();\n")
    out = _cli("build", "--backend", "cuda", "--source", str(ext), "--plan", "-j", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    per_unit = DEFAULT_SECONDS["stage1"]
    assert f"  stage 1: c10 from {tree}: 3 unit(s), {3 * per_unit:.1f} s of compiling" in lines
    this = next(ln for ln in lines if ln.startswith("  this build: "))
    total = 3 * per_unit + DEFAULT_SECONDS["cpp"]
    assert this == (f"  this build: 4 unit(s) (3 of them stage 1's), {total:.1f} s of compiling, "
                    f"about {total / 2:.1f} s with 2 job(s)")
    build = ext.parent / "build" / "torch_cuda"
    (build / "stage1" / "build").mkdir(parents=True)
    (build / "stage1" / "build" / ".ninja_log").write_text(
        "# ninja log v5\n0\t9000\t1\tc10/CMakeFiles/c10.dir/core/Device.cpp.o\t1\n")
    assert record_unit_times(build)["c10/core/Device.cpp"]["stage"] == "stage1"
    out = _cli("build", "--backend", "cuda", "--source", str(ext), "--plan", "--json")
    report = json.loads(out.stdout)
    assert (report["stage1_units"], report["stage1_serial_s"]) == (3, 27.0)
    assert report["estimated_from"]["stage1"] == "measured"


# --- the command line ------------------------------------------------------------------------

def test_cli_refuses_a_plan_only_target_set(small, tmp_path):
    tree, ext = small
    out = _cli("build", "--backend", "cuda", "--source", str(ext), "--target",
               "c10_cuda,torch_cuda_later", "-D", f"TORCH_CUDA_OVERLAY={_plan_only_overlay(tmp_path)}")
    assert out.returncode == 2
    assert "target set 'torch_cuda_later' cannot be built by the standalone build yet" in out.stderr
    assert not (ext / "build").exists() and not (ext.parent / "build").exists()


def test_cli_clean_only_removes_a_standalone_build_directory(small, tmp_path):
    tree, ext = small
    build = ext.parent / "build" / "torch_cuda"  # the default: next to the extraction
    (build / "stage2").mkdir(parents=True)
    out = _cli("clean", "--backend", "cuda", "--source", str(ext), "--all")
    assert out.returncode == 2 and "refusing to clean it" in out.stderr and build.exists()
    m = load_manifest(ext)
    stage_sources(m, tree, OVERLAY, build / "src", [], "2.6.0a0")
    out = _cli("clean", "--backend", "cuda", "--source", str(ext), "--all")
    assert out.returncode == 2 and build.exists()  # staged, but not a directory it created
    (build / "stage2").rmdir()
    import shutil
    shutil.rmtree(build / "src")
    assert claim(build)  # what a build does first
    stage_sources(m, tree, OVERLAY, build / "src", [], "2.6.0a0")
    out = _cli("clean", "--backend", "cuda", "--source", str(ext), "--all")
    assert out.returncode == 0 and not build.exists(), out.stderr
    assert sorted(p.name for p in ext.parent.iterdir()) == ["torch_cuda"]  # nothing left
    out = _cli("configure", "--backend", "cuda", "--source", str(ext))
    assert out.returncode == 2 and "supports `build`" in out.stderr


def test_readme_build_line_is_what_the_tests_run():
    assert readme_build_line() == ["wrapped-cmake", "build", "--backend", "cuda", "--source",
                                   "third_device/torch_cuda"]


@pytest.mark.realtree
def test_plan_on_the_real_extraction(pytorch_tree, tmp_path):
    """The README's build line with --plan, verbatim, from the directory holding the
    extraction: no -D TORCH_SOURCE_DIR, no tree needed, an estimate before any build."""
    ext = tmp_path / "third_device" / "torch_cuda"
    extract_for_tests(pytorch_tree, ext)
    out = run_readme_line(tmp_path, "--plan", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    sets = {s["name"]: s for s in report["sets"]}
    assert sets["c10_cuda"]["units"] == 11 and sets["c10_cuda"]["cu"] == 0
    assert sets["aten_native_cuda"]["cu"] > 200 and sets["aten_native_cuda"]["stage1"] == "torch"
    assert report["stage1"] == "source"  # the defaults need no installed torch
    assert report["total_units"] == sum(s["units"] for s in report["sets"]) + len(
        report["unassigned"])
    assert report["total_units"] > 400 and report["not_built"] > 0
    assert set(report["estimated_from"].values()) == {"default"}
    assert report["wall_s"] > 0 and report["serial_s"] > 60 * 10  # hundreds of units
    text = run_readme_line(tmp_path, "--plan")
    assert text.returncode == 0 and "estimate: " in text.stdout, text.stderr
    assert not (tmp_path / "third_device" / "build").exists()  # --plan builds nothing
