"""The porter's core: regions (fast reading held to the character-by-character one), whole
names, comments and strings, includes resolved against the extraction, profiles refused with
file:line."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tdev.port.lexer import reference_regions, regions, trie_pattern
from tdev.port.plan import PortError, make_plan
from tdev.port.profile import ProfileError, load, load_named, shipped_names

from support.port import MINI, PROFILE, make_extraction

PIECES = st.sampled_from(["a", "R", "u8", "L", "1", " ", "\n", "\\", "\\\n", "/", "*", "//", "/*", "*/",
                          '"', "'", "(", ")", "#", "#include", " <x.h>", '"y.h"', "cudaMalloc", "x"])


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_fast_regions_are_the_reference_regions(text):
    assert regions(text) == reference_regions(text)


def test_regions_of_each_kind():
    text = ('#include <a/b.h>\nint x = 1\'000; // c "q"\nauto s = u8R"d(he said "hi")d";\n'
            "char c = '\"'; /* k\n */ L\"w\"\n")
    kinds = [(r.kind, text[r.start:r.end]) for r in regions(text)]
    assert kinds == [("include", "#include <a/b.h>"), ("comment", '// c "q"'),
                     ("string", 'u8R"d(he said "hi")d"'), ("char", "'\"'"), ("comment", "/* k\n */"),
                     ("string", 'L"w"')]


@given(st.sets(st.text("abc:", min_size=1, max_size=5), min_size=1, max_size=8), st.text("abc: ", max_size=40))
def test_trie_pattern_matches_like_the_longest_alternative(words, text):
    ours = re.compile(trie_pattern(words))
    plain = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))
    assert [m.span() for m in ours.finditer(text)] == [m.span() for m in plain.finditer(text)]


@pytest.fixture
def mini(tmp_path):
    prof = tmp_path / "demo.yaml"
    prof.write_text(PROFILE)
    return make_extraction(tmp_path / "torch_cuda", MINI), prof


def test_names_whole_code_only_includes_resolved(mini):
    ext, prof = mini
    plan = make_plan(ext, load(prof))
    files = {f.source: f for f in plan.files}
    add = files["torch_cuda/csrc/aten/native/cuda/Add.cu"]
    assert add.dest == "torch_demo/csrc/aten/native/demo/Add.demo"
    text = add.data.decode()
    assert "#include <ATen/demo/DEMOContext.h>" in text  # resolved in the extraction, renamed with it
    assert '#include "Loops.cuh"' in text  # the neighbour keeps its name
    assert "// cudaMalloc in a comment" in text and '"cudaMalloc in a string"' in text
    assert "demoMalloc(&p, 4); mycudaMalloc();" in text  # whole names only
    assert [(c.line, c.old, c.new) for c in add.changes] == [
        (1, "ATen/cuda/CUDAContext.h", "ATen/demo/DEMOContext.h"), (6, "cudaMalloc", "demoMalloc")]
    assert all(c.origin.endswith(("demo.yaml:7", "it names")) for c in add.changes)
    ctx = files["torch_cuda/csrc/aten/cuda/CUDAContext.h"]
    assert ctx.data == b"#pragma once\n#include <demo_runtime.h>\ndemoStream_t current();\n"
    assert files["torch_cuda/core/__init__.py"].dest == "torch_cuda/core/__init__.py"  # copied as it is
    assert not files["torch_cuda/core/__init__.py"].ported


def test_comments_and_strings_when_the_profile_says_so(mini, tmp_path):
    ext, prof = mini
    prof.write_text(PROFILE.replace("rewrite_in: [code]", "rewrite_in: [code, comments, strings]"))
    text = {f.source: f.data.decode() for f in make_plan(ext, load(prof)).files}[
        "torch_cuda/csrc/aten/native/cuda/Add.cu"]
    assert "// demoMalloc in a comment" in text and '"demoMalloc in a string"' in text
    assert "mycudaMalloc" in text


@pytest.mark.parametrize("edit, line, problem", [
    ("names:\n  cudaMalloc: demoMalloc\n", 8, "'cudaMalloc' is given twice (first at line 7): maps onto two targets"),
    ("headers:\n  cuda_runtime.h: other.h\n", 12, "maps onto two targets"),
    ("paths:\n  replace: [[cuda, demo], [cuda, x]]\n", 13, "'cuda' is replaced twice"),
    ("colour: red\n", 15, "unknown key 'colour'"),
])
def test_a_profile_is_refused_with_file_and_line(tmp_path, edit, line, problem):
    text = PROFILE
    key = edit.split(":")[0]
    if key in ("names", "headers"):
        text = text.replace(f"{key}:\n", edit.rstrip("\n") + "\n", 1)
    elif key == "paths":
        text = text.replace("  replace: [[cuda, demo], [CUDA, DEMO]]\n", edit.split("\n", 1)[1])
    else:
        text += edit
    prof = tmp_path / "p.yaml"
    prof.write_text(text)
    with pytest.raises(ProfileError) as e:
        load(prof)
    assert problem in str(e.value)
    where = str(e.value).split(": ")[0]
    assert where.startswith(f"{prof}:"), str(e.value)
    assert int(where.rsplit(":", 1)[1]) == line


def test_renames_that_collide_are_refused_naming_the_rule(tmp_path):
    files = {"torch_cuda/csrc/cuda/A.h": ("c10/cuda/A.h", "int a;\n"),
             "torch_cuda/csrc/demo/A.h": ("c10/demo/A.h", "int b;\n")}
    ext = make_extraction(tmp_path / "torch_cuda", files)
    prof = tmp_path / "demo.yaml"
    prof.write_text(PROFILE)
    with pytest.raises(PortError) as e:
        make_plan(ext, load(prof))
    msg = str(e.value)
    assert msg.startswith(f"{prof}:13: renames collide: ") and "would both become torch_demo/csrc/demo/A.h" in msg


def test_shipped_profiles_load_and_name_their_sources():
    assert shipped_names() == ["hip", "maca", "musa"]
    for name in shipped_names():
        p = load_named(name)
        assert p.sources and p.names or p.prefixes
    hip = load_named("hip")
    assert hip.names["cudaMalloc"].target == "hipMalloc"
    assert hip.names["cudaMalloc"].origin == "hip_map.json: CUDA_IDENTIFIER_MAP"
    assert hip.device_math["map"]["std::max"] == "::max"


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES, max_size=30).map("".join))
def test_regions_up_to_the_last_include_are_the_first_regions(text):
    from tdev.port.lexer import include_horizon

    stop = include_horizon(text)
    whole = regions(text)
    assert regions(text, stop) == [r for r in whole if r.start < stop]
    assert all(r.start < stop for r in whole if r.kind == "include")


def test_musa_renames_the_cuda_key_and_maca_keeps_it(mini):
    ext, _ = mini
    musa = {f.source: f for f in make_plan(ext, load_named("musa")).files}
    add = musa["torch_cuda/csrc/aten/native/cuda/Add.cu"]
    assert add.dest == "torch_musa/csrc/aten/native/musa/Add.mu"
    text = add.data.decode()
    assert "#include <ATen/musa/MUSAContext.h>" in text and "musaMalloc(&p, 4); mycudaMalloc();" in text
    ctx = musa["torch_cuda/csrc/aten/cuda/CUDAContext.h"].data.decode()
    assert "#include <musa_runtime.h>" in ctx and "musaStream_t current();" in ctx
    maca = {f.source: f for f in make_plan(ext, load_named("maca")).files}
    add = maca["torch_cuda/csrc/aten/native/cuda/Add.cu"]
    assert add.dest == "torch_cuda/csrc/aten/native/cuda/Add.cu"  # MetaX keeps the CUDA key and names
    assert "#include <ATen/cuda/CUDAContext.h>" in add.data.decode() and "mcMalloc(&p, 4)" in add.data.decode()
    assert "#include <mcr/mc_runtime.h>" in maca["torch_cuda/csrc/aten/cuda/CUDAContext.h"].data.decode()


def test_a_derived_table_outside_the_profiles_directory_is_refused(tmp_path):
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE + "derived: ../../etc/table.json\n")
    with pytest.raises(ProfileError) as e:
        load(prof)
    assert str(e.value).startswith(f"{prof}:15: derived: a file name beside the profile")


def test_not_an_extraction_is_one_error(tmp_path):
    from tdev.extract.manifest import ManifestError

    (tmp_path / "x").mkdir()
    with pytest.raises(ManifestError) as e:
        make_plan(tmp_path / "x", load_named("hip"))
    assert "not a tree written by tdev extract" in str(e.value)


def test_an_include_of_a_header_the_build_generates_is_named_like_a_file(tmp_path):
    """``X.h`` made by the build from ``X.h.in`` (CMake's configure_file): the include is spelled
    as the profile's path rules name the file, not rewritten as text (maca keeps CUDA's file
    names; its "cuda" prefix must not make the include name a header nothing generates)."""
    files = {"torch_cuda/csrc/c10/cuda/impl/cuda_cmake_macros.h.in": ("c10/cuda/impl/cuda_cmake_macros.h.in",
                                                                      "#cmakedefine C10_CUDA_BUILD_SHARED_LIBS\n"),
             "torch_cuda/csrc/c10/cuda/CUDAMacros.h": ("c10/cuda/CUDAMacros.h",
                                                       "#include <c10/cuda/impl/cuda_cmake_macros.h>\n"
                                                       "#include \"impl/cuda_cmake_macros.h\"\ncudaError_t e;\n")}
    ext = make_extraction(tmp_path / "torch_cuda", files)
    want = {"maca": ("c10/cuda/impl/cuda_cmake_macros.h", "impl/cuda_cmake_macros.h"),
            "musa": ("c10/musa/impl/musa_cmake_macros.h", "impl/musa_cmake_macros.h")}
    for name, (angled, quoted) in want.items():
        plan = make_plan(ext, load_named(name))
        text = next(f for f in plan.files if f.source.endswith("CUDAMacros.h")).data.decode()
        assert text.splitlines()[:2] == [f"#include <{angled}>", f'#include "{quoted}"'], (name, text)
        assert "Error_t e;" in text and not plan.unresolved


def test_an_include_of_a_file_that_keeps_its_name_keeps_naming_it(tmp_path):
    """musa's path rules keep NCCLUtils.hpp (no "cuda" in it) but its NCCL prefix would make the
    include, read as text, name MCCLUtils.hpp, a file the ported tree does not have."""
    files = {"torch_cuda/csrc/framework/c10d/NCCLUtils.hpp": ("torch/csrc/distributed/c10d/NCCLUtils.hpp",
                                                             "#pragma once\n"),
             "torch_cuda/csrc/framework/c10d/ProcessGroupNCCL.cpp": (
                 "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
                 "#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>\nncclComm_t c;\n")}
    ext = make_extraction(tmp_path / "torch_cuda", files)
    plan = make_plan(ext, load_named("musa"))
    ported = {f.source: f for f in plan.files}
    assert ported["torch_cuda/csrc/framework/c10d/NCCLUtils.hpp"].dest == "torch_musa/csrc/framework/c10d/NCCLUtils.hpp"
    text = ported["torch_cuda/csrc/framework/c10d/ProcessGroupNCCL.cpp"].data.decode()
    assert text == "#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>\nmcclComm_t c;\n"
