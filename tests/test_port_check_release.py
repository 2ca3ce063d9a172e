"""`tdev port --check` compiles a ported tree against the headers of the PyTorch release its
extraction was made from: `--torch-src DIR` (refused in one line unless it is that release), else
the PyTorch tree the extraction records, else the installed torch when it is that release, else
one line. A header a PyTorch build generates is written from the tree's .h.in as CMake's
configure_file writes it. (The real trees: tests/test_port_build.py.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from basekit.errors import InputError
from tdev.port.check import _configured, _installed_torch, torch_headers

from support.extract import tdev

TRUE = ["ON", "1", "YES", "TRUE", "Y", "on", "/some/path", "42"]
FALSE = ["", "0", "OFF", "NO", "FALSE", "N", "off", "NOTFOUND", "IGNORE"]


def source_tree(root: Path, version: str) -> Path:
    """A PyTorch source tree as far as the check reads one."""
    (root / "c10" / "macros").mkdir(parents=True)
    (root / "aten" / "src").mkdir(parents=True)
    (root / "c10" / "CMakeLists.txt").write_text("project(c10)\n")
    (root / "c10" / "macros" / "cmake_macros.h.in").write_text("#cmakedefine C10_BUILD_SHARED_LIBS\n")
    (root / "version.txt").write_text(version + "\n")
    return root


def extraction(root: Path, torch_source: str | None) -> Path:
    doc = {"schema": 1, "tool": "tdev extract", "torch": {"version": "x", "commit": None},
           "layout": {}, "counts": {}, "files": []}
    if torch_source is not None:
        doc["torch_source"] = torch_source
    root.mkdir(parents=True)
    (root / "MANIFEST.json").write_text(json.dumps(doc))
    return root


def port_doc(version: str, path: str = "../torch_cuda") -> dict:
    return {"extraction": {"path": path, "torch": {"version": version, "commit": None}}}


def one_line(e: pytest.ExceptionInfo) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


def test_torch_src_of_another_release_is_refused_in_one_line(tmp_path):
    tree = source_tree(tmp_path / "pytorch", "2.6.0a0")
    with pytest.raises(InputError) as e:
        torch_headers(tmp_path / "torch_musa", port_doc("1.13.0a0"), tree, {})
    text = one_line(e)
    assert text.startswith("--torch-src: ") and "2.6.0a0" in text and "1.13.0a0" in text
    with pytest.raises(InputError) as e:
        torch_headers(tmp_path / "torch_musa", port_doc("1.13.0a0"), tmp_path / "nothing", {})
    assert one_line(e).startswith("--torch-src: ") and "not a PyTorch source tree" in str(e.value)


def test_torch_src_of_the_release_gives_its_headers(tmp_path):
    tree = source_tree(tmp_path / "pytorch", "1.13.0a0")
    got = torch_headers(tmp_path / "torch_musa", port_doc("1.13.0a0"), tree, {})
    assert got.version == "1.13.0a0" and got.includes[:2] == (tree.resolve(), tree.resolve() / "aten" / "src")


def test_the_extractions_own_tree_is_used_when_it_is_that_release(tmp_path):
    tree = source_tree(tmp_path / "pytorch-1.13.1", "1.13.0a0")
    extraction(tmp_path / "torch_cuda", "../pytorch-1.13.1")
    (tmp_path / "torch_musa").mkdir()
    got = torch_headers(tmp_path / "torch_musa", port_doc("1.13.0a0"), None, {})
    assert got.origin == f"source tree {tree.resolve()}"


@pytest.mark.parametrize("recorded", [None, "../pytorch-2.6.0", "../gone"])
def test_no_headers_of_that_release_is_one_line(tmp_path, recorded):
    """Neither a tree of the release nor an installed torch of it: refused, not compiled against
    another release's headers (whose failures would not be the port's)."""
    source_tree(tmp_path / "pytorch-2.6.0", "2.6.0a0")
    extraction(tmp_path / "torch_cuda", recorded)
    (tmp_path / "torch_musa").mkdir()
    with pytest.raises(InputError) as e:
        torch_headers(tmp_path / "torch_musa", port_doc("0.9.0a0"), None, {})
    text = one_line(e)
    assert str(tmp_path / "torch_musa" / "PORT_MANIFEST.json") in text and "0.9.0a0" in text
    assert text.endswith("pass --torch-src DIR, a PyTorch 0.9 source tree")


def test_the_installed_torch_serves_its_own_release_only(tmp_path):
    installed, version = _installed_torch()
    if version is None:
        pytest.skip("no torch installed")
    major, minor = version.split(".")[:2]
    got = torch_headers(tmp_path / "t", port_doc(f"{major}.{minor}.0a0", "../none"), None, {})
    assert got.origin == f"installed torch {installed}" and got.version == version
    with pytest.raises(InputError):
        torch_headers(tmp_path / "t", port_doc(f"{major}.{int(minor) + 1}.0a0", "../none"), None, {})


def test_a_manifest_without_the_release_is_one_line(tmp_path):
    with pytest.raises(InputError) as e:
        torch_headers(tmp_path / "t", {"extraction": {"path": "../x"}}, None, {})
    assert "extraction.torch.version" in one_line(e)


def test_torch_src_only_with_check(tmp_path):
    r = tdev("port", "--verify", "--out", str(tmp_path), "--torch-src", str(tmp_path))
    assert r.returncode == 2 and r.stderr.strip() == "tdev: --torch-src: only with --check"


names = st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(names, st.sampled_from(TRUE + FALSE), max_size=6), st.lists(names, min_size=1, max_size=6))
def test_configure_writes_what_cmake_writes(tmp_path_factory, values, used):
    """#cmakedefine VAR: defined when VAR is set to a true constant, else '/* #undef VAR */';
    #cmakedefine01 VAR: 1 or 0; ${VAR} and @VAR@: its value, empty when unset."""
    template = tmp_path_factory.mktemp("conf") / "m.h.in"
    lines = [f"#cmakedefine {v}\n#cmakedefine01 {v}\n  #cmakedefine {v} tail\nx=${{{v}}} y=@{v}@" for v in used]
    template.write_text("\n".join(lines) + "\n")
    out = _configured(template, values).splitlines()
    assert len(out) == 4 * len(used)
    for i, v in enumerate(used):
        value = values.get(v, "")
        on = value.upper() not in {f.upper() for f in FALSE}
        assert out[4 * i] == (f"#define {v}" if on else f"/* #undef {v} */")
        assert out[4 * i + 1] == f"#define {v} {int(on)}"
        assert out[4 * i + 2] == (f"  #define {v} tail" if on else f"  /* #undef {v} */")
        assert out[4 * i + 3] == f"x={value} y={value}"
