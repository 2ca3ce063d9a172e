"""Fuzz tests of the readers of user documents a wrapped-cmake build meets: the extraction's
MANIFEST.json (tdev.extract.manifest, the one manifest model the standalone build reads, and the
accessors the build uses), backend profiles (wrapped_cmake.profile) and pyproject.toml
(wrapped_cmake.settings). Each input either gives a value or an InputError (one line, exit
2), within the time bound. Inputs are mutations of real valid documents, so that they reach
the per-field checks, not only the JSON/YAML/TOML parsers."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, strategies as st

from wrapped_cmake.errors import InputError
from wrapped_cmake.profile import BUILTIN_DIR, parse_profile
from wrapped_cmake.settings import pyproject_layer
from tdev.extract.manifest import ManifestError, load_manifest

from support.fuzzing import FUZZ, one_input

VALID_MANIFEST = {
    "schema": 1, "tool": "tdev extract", "torch": {"version": "2.6.0a0", "commit": None},
    "torch_source": "../../pytorch", "layout": {"source": "layout.yaml", "sha256": "4" * 64},
    "counts": {}, "files": [
        {"role": "moved", "source": "c10/cuda/CUDAStream.cpp",
         "path": "torch_cuda/csrc/c10/cuda/CUDAStream.cpp", "sha256": "0" * 64, "size": 10},
        {"role": "region", "source": "c10/macros/Macros.h", "lines": [249, 301],
         "path": "torch_cuda/csrc/regions/c10/macros/Macros.h/L249-301.inc", "sha256": "1" * 64,
         "size": 3},
        {"role": "patch", "path": "torch_patches/0001-x.patch", "sha256": "2" * 64, "size": 1},
        {"role": "report", "path": "EXTRACT_REPORT.json", "sha256": "3" * 64, "size": 1}]}

ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30),
    st.sampled_from(["../../etc/passwd", "/abs/x.cpp", "a\x00b", "", "c10/cuda/../../x",
                     "moved", "region", "supplement", "torch_cuda/csrc/x.cpp"]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(),
                                                         max_size=2))
RAW_TAILS = st.sampled_from(["", "NaN", "-Infinity", "[" * 5000, "\ufeff", "}", "\x00"])


@st.composite
def manifests(draw) -> bytes:
    doc = json.loads(json.dumps(VALID_MANIFEST))
    for _ in range(draw(st.integers(0, 4))):
        target = draw(st.sampled_from(["top", "torch", "file"]))
        if target == "top":
            doc[draw(st.sampled_from(["torch", "torch_source", "files", "schema"]))] = draw(ODD_VALUES)
        elif target == "torch" and isinstance(doc.get("torch"), dict):
            doc["torch"]["version"] = draw(ODD_VALUES)
        elif isinstance(doc.get("files"), list) and doc["files"]:
            i = draw(st.integers(0, len(doc["files"]) - 1))
            if draw(st.booleans()) and isinstance(doc["files"][i], dict):
                key = draw(st.sampled_from(["role", "source", "path", "sha256", "size", "lines"]))
                doc["files"][i][key] = draw(ODD_VALUES)
            else:
                doc["files"][i] = draw(ODD_VALUES)
    text = json.dumps(doc)
    if draw(st.booleans()):  # raw damage: truncation, constants, nesting, odd bytes
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(RAW_TAILS) + text[cut:]
    data = text.encode("utf-8")
    return data + b"\xff" if draw(st.integers(0, 9)) == 0 else data


@FUZZ
@given(data=manifests())
def test_fuzz_manifest_loader(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("m")
    path = root / "MANIFEST.json"
    path.write_bytes(data)
    with one_input("MANIFEST.json"):
        try:
            m = load_manifest(root)
        except ManifestError as e:
            assert "\n" not in str(e) and str(path) in str(e)
            return
        tree = m.torch_tree()
    assert tree is None or tree.is_absolute()
    assert all(not s.startswith("/") and ".." not in s.split("/")
               for s in list(m.sources) + [r.source for r in m.regions])


PROFILE_TEXT = (BUILTIN_DIR / "cuda.yaml").read_text()
YAML_BITS = st.sampled_from([
    "", "[", "]", "{", "}", ": ", "- ", "&a ", "*a", "!!python/object:os.system ", "\t",
    "languages: [CXX, CUDA]\n", "device: {language: CUDA}\n", "standard: 17\n", "flags: 5\n",
    "definitions: {A: [1]}\n", "name: nope\n", "[" * 200, "x: &a [1]\ny: [*a, *a, *a]\n",
    "\xff", "\x00", "compilers: {CUDA: {home: {env: [1]}}}\n"])


@st.composite
def profiles(draw) -> bytes:
    lines = PROFILE_TEXT.splitlines(keepends=True)
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(lines)))
        op = draw(st.sampled_from(["insert", "replace", "delete"]))
        bit = draw(YAML_BITS)
        if op == "insert" or not lines:
            lines.insert(i, bit)
        elif op == "replace":
            lines[min(i, len(lines) - 1)] = bit
        else:
            del lines[min(i, len(lines) - 1)]
    return "".join(lines).encode("utf-8", "surrogatepass")


@FUZZ
@given(data=profiles())
def test_fuzz_profile_loader(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("p") / "cuda.yaml"
    path.write_bytes(data)
    with one_input("profile"):
        try:
            parse_profile(path)
        except InputError as e:
            assert "\n" not in str(e)


TOML_BITS = st.sampled_from([
    "[tool.wrapped-cmake]\n", "build-type = \"Debug\"\n", "jobs = 4\n", "jobs = -1\n",
    "jobs = 1e400\n", "targets = [1, 2]\n", "[tool.wrapped-cmake.define]\n", "X = [1]\n",
    "tool = 5\n", "a = " + "[" * 3000 + "]" * 3000 + "\n", "\xff", "\x00", "= =\n",
    "backend = \"cuda\"\n", "define = 3\n", "unknown-key = 1\n"])


@FUZZ
@given(parts=st.lists(TOML_BITS, max_size=6))
def test_fuzz_pyproject_reader(tmp_path_factory, parts):
    path = tmp_path_factory.mktemp("t") / "pyproject.toml"
    path.write_bytes("".join(parts).encode("utf-8", "surrogatepass"))
    with one_input("pyproject.toml"):
        try:
            pyproject_layer(path)
        except InputError as e:
            assert "\n" not in str(e)
