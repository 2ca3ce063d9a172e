"""`tdev port` writing a tree: the manifest round-trips (--verify), a second run changes
nothing, a re-port after a profile change rewrites only the files whose bytes change, a
person's edit is never overwritten (the rules of re-extract), --dry-run writes nothing."""
from __future__ import annotations

import json
import os
from hashlib import sha256
from pathlib import Path

import pytest

from support.extract import tdev
from support.port import MINI, PROFILE, make_extraction

pytestmark = pytest.mark.slow

ADD = "torch_demo/csrc/aten/native/demo/Add.demo"
LOOPS = "torch_demo/csrc/aten/native/demo/Loops.cuh"
CTX = "torch_demo/csrc/aten/demo/DEMOContext.h"


@pytest.fixture
def setup(tmp_path):
    ext = make_extraction(tmp_path / "torch_cuda", MINI)
    prof = tmp_path / "demo.yaml"
    prof.write_text(PROFILE)
    return ext, prof, tmp_path / "torch_demo"


def port(ext, prof, out, *extra):
    return tdev("port", str(ext), "--to", str(prof), "--out", str(out), *extra)


def test_manifest_round_trip_and_a_second_run_changes_nothing(setup):
    ext, prof, out = setup
    r = port(ext, prof, out)
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "PORT_MANIFEST.json").read_text())
    rows = {e["path"]: e for e in doc["files"]}
    assert rows[ADD]["source"] == "torch_cuda/csrc/aten/native/cuda/Add.cu" and rows[ADD]["ported"]
    assert rows[ADD]["source_sha256"] == sha256((ext / rows[ADD]["source"]).read_bytes()).hexdigest()
    assert rows[ADD]["applied"] == {f"{prof}:7": 1, "include: renamed with the file it names": 1}
    assert doc["profile"]["name"] == "demo" and doc["extraction"]["path"] == "../torch_cuda"
    report = json.loads((out / "PORT_REPORT.json").read_text())
    assert report["changes"][ADD][1] == [6, "cudaMalloc", "demoMalloc", f"{prof}:7"]
    v = tdev("port", "--verify", "--out", str(out))
    assert v.returncode == 0 and f"{len(rows)} files match the manifest" in v.stdout, v.stdout + v.stderr
    inodes = {p: os.stat(out / p).st_ino for p in rows}
    again = port(ext, prof, out)
    assert again.returncode == 0 and ": unchanged;" in again.stdout, again.stdout + again.stderr
    assert {p: os.stat(out / p).st_ino for p in rows} == inodes
    (out / LOOPS).unlink()
    (out / "notes.txt").write_text("mine\n")
    v = tdev("port", "--verify", "--out", str(out))
    assert v.returncode == 1 and f"missing    {LOOPS}" in v.stdout and "unexpected notes.txt" in v.stdout


def test_a_profile_change_rewrites_only_the_files_it_changes(setup):
    ext, prof, out = setup
    assert port(ext, prof, out).returncode == 0
    before = {p: os.stat(out / p) for p in (ADD, LOOPS, CTX)}
    prof.write_text(PROFILE.replace("cudaError_t: demoError_t", "cudaError_t: demoStatus_t"))
    r = port(ext, prof, out)
    assert r.returncode == 0 and "written, 2 files new or changed" in r.stdout, r.stdout + r.stderr
    # Loops.cuh and PORT_REPORT.json (the manifest is written on every change, not counted)
    assert (out / LOOPS).read_text() == "#pragma once\ndemoStatus_t loop();\n"
    assert os.stat(out / LOOPS).st_ino != before[LOOPS].st_ino
    for p in (ADD, CTX):  # the very same files: inode and mtime
        st = os.stat(out / p)
        assert (st.st_ino, st.st_mtime_ns) == (before[p].st_ino, before[p].st_mtime_ns), p
    assert tdev("port", "--verify", "--out", str(out)).returncode == 0


def test_an_edit_is_never_overwritten(setup):
    ext, prof, out = setup
    assert port(ext, prof, out).returncode == 0
    (out / ADD).write_text("// my fix\n")
    (out / "build").mkdir()
    (out / "build" / "a.o").write_text("obj")
    prof.write_text(PROFILE.replace("cudaMalloc: demoMalloc", "cudaMalloc: demoAlloc"))
    r = port(ext, prof, out)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"changed    {ADD}" in r.stderr and "local changes would be lost; nothing was written" in r.stderr
    assert (out / ADD).read_text() == "// my fix\n"
    r = port(ext, prof, out, "--discard-changes")
    assert r.returncode == 0, r.stderr
    assert "demoAlloc(&p, 4)" in (out / ADD).read_text()
    assert (out / "build" / "a.o").read_text() == "obj"  # what tdev did not write is kept


def test_dry_run_shows_a_diff_and_writes_nothing(setup):
    ext, prof, out = setup
    r = port(ext, prof, out, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert f"+++ b/{ADD}" in r.stdout and "-void f() { void* p; cudaMalloc(&p, 4); mycudaMalloc(); }" in r.stdout
    assert "+void f() { void* p; demoMalloc(&p, 4); mycudaMalloc(); }" in r.stdout
    assert not out.exists()


@pytest.mark.parametrize("args, problem", [
    (["--to", "nosuch"], "nosuch: no such port profile (shipped: hip, maca, musa"),
    (["--verify"], "--verify: takes only --out"),
])
def test_bad_input_is_one_line(setup, args, problem):
    ext, prof, out = setup
    r = tdev("port", str(ext), *args)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and problem in r.stderr, r.stderr


def test_a_directory_tdev_did_not_write_is_not_replaced(setup):
    ext, prof, out = setup
    out.mkdir()
    (out / "mine.txt").write_text("x")
    r = port(ext, prof, out)
    assert r.returncode == 2 and "not a tree written by tdev port" in r.stderr, r.stderr
    assert (out / "mine.txt").read_text() == "x"


def test_a_fifo_where_the_extraction_lists_a_file_is_refused(setup):
    ext, prof, out = setup
    victim = ext / "torch_cuda/csrc/aten/native/cuda/Loops.cuh"
    victim.unlink()
    os.mkfifo(victim)
    r = port(ext, prof, out)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{victim}: an extracted file is not a regular file" in r.stderr
    assert not out.exists()
