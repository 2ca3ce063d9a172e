"""`tdev link-check` (issue 12): ELF symbol tables, closure and coverage, on the REAL libraries of
the stage-1 torch 2.6.0 wheel (cu124) and libraries compiled here with g++.

The stage-1 environment comes from tests/support/stage1.py (tools/setup-stage1.sh; TDEV_TORCH_PYTHON
chooses another interpreter)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from basekit.errors import InputError
from tdev.elf import symbols as elfsyms
from tdev.linkcheck.check import closure, coverage, cuda_imports
from tdev.linkcheck.groups import demangle, group, qualified_parts, source_index
from tdev.linkcheck.inputs import (interpreter_library, load_data, provider_paths, stage1_paths,
                                   stage1_site)
from tdev.extract import manifest

from support.stage1 import stage1, stage1_py  # noqa: F401  (pytest fixtures)

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(stage1):
    found = stage1_site(stage1.python, stage1.version, os.environ)
    assert found.torch_dir == stage1.torch_dir and stage1.version == "2.6.0"
    return found


@pytest.fixture(scope="module")
def tables(site):
    """Stage 1 + CUDA + system (exports), the stock CUDA libraries (full), the importers."""
    data = load_data()
    t0 = time.perf_counter()
    stock = elfsyms.read_tables(stage1_paths(site, data, "stock_cuda"))
    providers = elfsyms.read_tables(provider_paths(site, data, os.environ), full=False)
    importers = elfsyms.read_tables(stage1_paths(site, data, "importers"), full=False)
    print(f"\nread {len(stock) + len(providers) + len(importers)} libraries in {time.perf_counter() - t0:.1f} s")
    return {"data": data, "stock": stock, "providers": providers, "importers": importers,
            "by_name": {t.name: t for t in stock}}


def _compile(tmp: Path, name: str, code: str, *libs: Path) -> Path:
    src, out = tmp / f"{name}.cpp", tmp / f"lib{name}.so"
    src.write_text(code)
    link = [os.fspath(p) for p in libs]
    subprocess.run(["g++", "-shared", "-fPIC", "-O1", "-o", os.fspath(out), os.fspath(src), "-Wl,--no-as-needed", *link],
                   check=True, capture_output=True)
    return out


# --- reading ------------------------------------------------------------------------------------

@pytest.mark.realtree
def test_full_tables_of_the_stock_library_and_the_speed(site, capsys):
    """libtorch_cuda keeps kernels as hidden (.symtab-only LOCAL) symbols: only the full tables
    see them. Reading speed is reported, not asserted."""
    path = site.torch_dir / "lib" / "libtorch_cuda.so"
    t0 = time.perf_counter()
    table = elfsyms.read_table(path)
    elapsed = time.perf_counter() - t0
    dynamic = elfsyms.read_table(path, full=False)
    with capsys.disabled():
        print(f"\nlibtorch_cuda.so ({path.stat().st_size >> 20} MiB): {len(table.symbols)} symbols "
              f"({len(dynamic.symbols)} dynamic) read in {elapsed:.2f} s")
    assert table.has_symtab and table.full and table.soname == "libtorch_cuda.so"
    assert "libc10_cuda.so" in table.needed and "libcudart.so.12" in table.needed
    hidden = [s for s in table.symbols if s.defined and not s.dynamic and s.name.startswith("_ZN2at6native")]
    assert len(hidden) > 1000
    assert not any(s.name.startswith("_ZN2at6native") and not s.dynamic for s in dynamic.symbols)
    versioned = {s.version for s in table.symbols if s.version and not s.defined}
    assert {"libcudart.so.12", "GLIBC_2.2.5"} <= versioned


@pytest.mark.realtree
def test_dump_round_trip_equals_the_elf_read(site, tmp_path):
    for lib in ("libc10_cuda.so", "libtorch_cuda_linalg.so"):
        table = elfsyms.read_table(site.torch_dir / "lib" / lib)
        dump = elfsyms.save(table, tmp_path / f"{lib}.syms.gz")
        assert elfsyms.read_table(dump) == table == elfsyms.load(dump)
    raw = (tmp_path / "libc10_cuda.so.syms.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "plain.txt").write_text("hello\n")
    (tmp_path / "other.gz").write_bytes(gzip.compress(b'{"format": "something-else"}\n'))
    for bad, message in (("cut.gz", "gzip"), ("plain.txt", "neither an ELF"), ("other.gz", "not a tdev-elfsyms")):
        with pytest.raises(InputError, match=message):
            elfsyms.read_table(tmp_path / bad)


# --- closure ------------------------------------------------------------------------------------

@pytest.mark.realtree
def test_stock_c10_cuda_closes_against_stage1_and_cuda(tables):
    c10_cuda = tables["by_name"]["libc10_cuda.so"]
    result = closure([c10_cuda], tables["providers"], tables["stock"])
    assert result.ok and result.references > 100, result.to_json()
    assert result.nowhere == () and result.in_stock == ()
    # versions matter: without the wheel's CUDA 12 runtime, CUDA 13's libcudart (which exports the
    # same names as version libcudart.so.13) does not resolve c10_cuda's cuda*@libcudart.so.12
    no_cudart12 = [t for t in tables["providers"] if t.name != "libcudart.so.12"]
    broken = closure([c10_cuda], no_cudart12, tables["stock"])
    assert not broken.ok
    assert {u.version for u in broken.nowhere} == {"libcudart.so.12"}
    nowhere = {u.name: u for u in broken.nowhere}
    assert "libcudart.so.13" in nowhere["cudaGetDeviceCount"].other_versions


@pytest.mark.realtree
def test_closure_of_compiled_libraries(tables, tmp_path):
    """A library calling a function nobody defines; one using a stock-only symbol (exported, and a
    hidden kernel of libtorch_cuda); a hidden definition in a sibling; a weak reference."""
    stock_cuda = tables["by_name"]["libtorch_cuda.so"]
    hidden = next(s.name for s in stock_cuda.symbols
                  if s.bind == "LOCAL" and s.type == "FUNC" and not s.dynamic and "." not in s.name
                  and s.name.startswith("_ZN2at6native") and "_GLOBAL__N_" not in s.name
                  and not s.name.startswith("_ZN2at6nativeL"))
    assert not any(s.name == hidden and s.exported for t in tables["stock"] for s in t.symbols)
    helper = _compile(tmp_path, "helper", '__attribute__((visibility("hidden"))) int tdev_hidden_helper() { return 2; }\n'
                      "int tdev_visible_helper() { return 3; }\n")
    code = f"""#include <cstdio>
namespace at {{ namespace cuda {{ void* getCurrentCUDABlasHandle(); }} }}
void stock_hidden_kernel() __asm__("{hidden}");
int tdev_visible_helper();
int tdev_hidden_helper();
__attribute__((weak)) void tdev_weak_optional();
int use() {{
  std::puts("x");
  if (tdev_weak_optional) tdev_weak_optional();
  stock_hidden_kernel();
  return at::cuda::getCurrentCUDABlasHandle() != nullptr ? tdev_visible_helper() : 0;
}}
"""
    part = _compile(tmp_path, "part", code, helper)
    nobody = _compile(tmp_path, "nobody", code.replace("return at::", "tdev_hidden_helper();\n  return at::")
                      + "void tdev_nobody_defines_this(int);\nvoid more() { tdev_nobody_defines_this(1); }\n", helper)
    tabs = {p.name: elfsyms.read_table(p) for p in (helper, part, nobody)}
    args = (tables["providers"], tables["stock"])

    subset = closure([tabs["libpart.so"], tabs["libhelper.so"]], *args, subset=True)
    assert subset.ok, subset.to_json()
    assert {u.name for u in subset.in_stock} == {"_ZN2at4cuda24getCurrentCUDABlasHandleEv", hidden}
    assert {u.stock for u in subset.in_stock} == {("libtorch_cuda.so",)}
    full = closure([tabs["libpart.so"], tabs["libhelper.so"]], *args, subset=False)
    assert not full.ok and full.in_stock == subset.in_stock and full.nowhere == ()

    # DT_NEEDED: a sibling left out is unknown; the stock libc10_cuda makes a build not standalone
    alone = closure([tabs["libpart.so"]], *args, subset=True)
    assert not alone.ok and [(lib, os.path.basename(n)) for lib, n in alone.unknown_needed] == [("libpart.so", "libhelper.so")]
    on_stock = elfsyms.read_table(_compile(tmp_path, "onstock", "int f() { return 1; }\n",
                                           tables["by_name"]["libc10_cuda.so"].path))
    assert closure([on_stock], *args, subset=True).ok
    not_standalone = closure([on_stock], *args, subset=False)
    assert not not_standalone.ok and not_standalone.stock_needed == (("libonstock.so", "libc10_cuda.so"),)

    bad = closure([tabs["libnobody.so"], tabs["libhelper.so"]], *args, subset=True)
    assert not bad.ok
    nowhere = {u.name: u for u in bad.nowhere}
    assert set(nowhere) == {"_Z24tdev_nobody_defines_thisi", "_Z18tdev_hidden_helperv"}
    assert nowhere["_Z18tdev_hidden_helperv"].hidden_in == ("libhelper.so",)
    assert nowhere["_Z24tdev_nobody_defines_thisi"].needed_by == ("libnobody.so",)
    assert "_Z18tdev_weak_optionalv" not in {u.name for u in bad.in_stock + bad.nowhere}


@pytest.mark.realtree
def test_the_interpreter_provides_the_c_api_to_extension_modules_only(tables, stage1, tmp_path):
    """A module named as CPython names extension modules takes PyLong_FromLong from the
    interpreter (the stage-1 python's libpython or executable); the same code as a plain
    library does not: libtorch_cuda referencing Python would be a fault."""
    code = 'extern "C" void* PyLong_FromLong(long);\nvoid* f() { return PyLong_FromLong(1); }\n'
    plain_path = _compile(tmp_path, "plain", code)
    plain = elfsyms.read_table(plain_path)
    module_path = tmp_path / "_mod.cpython-311-x86_64-linux-gnu.so"
    shutil.copyfile(plain_path, module_path)  # the same code under an extension module's name
    module = elfsyms.read_table(module_path)
    python = elfsyms.read_tables([interpreter_library(stage1.python)], full=False)
    assert any(s.name == "PyLong_FromLong" for s in python[0].exported())
    args = (tables["providers"], tables["stock"])
    assert closure([module], *args, interpreter=python).ok
    assert [u.name for u in closure([module], *args).nowhere] == ["PyLong_FromLong"]
    assert [u.name for u in closure([plain], *args, interpreter=python).nowhere] == ["PyLong_FromLong"]


# --- coverage -----------------------------------------------------------------------------------

@pytest.mark.realtree
def test_stock_torch_cuda_covers_the_importers(tables, capsys):
    per, imports = cuda_imports(tables["importers"], tables["stock"], tables["providers"])
    with capsys.disabled():
        print(f"\nimports from the stock CUDA libraries (2.6.0): {per}")
    assert per["libtorch_python.so"] == 137  # 140 names, less 3 that libstdc++ serves as well
    names = {i.name for i in imports}
    assert "_ZN2at4cuda9CUDAGraph13capture_beginESt4pairIyyE21cudaStreamCaptureMode" in names
    # libc10_cuda carries a static copy of operator new(size_t, align_val_t) and exports it;
    # libtorch_python's reference binds to libstdc++'s as well (the default @@CXXABI_1.3.11): it
    # is no import from the CUDA libraries, and a standalone build need not define it
    libtorch_python = next(t for t in tables["importers"] if t.name == "libtorch_python.so")
    assert any(s.name == "_ZnwmSt11align_val_t" for s in libtorch_python.imported())
    assert any(s.name == "_ZnwmSt11align_val_t" for s in tables["by_name"]["libc10_cuda.so"].exported())
    assert "_ZnwmSt11align_val_t" not in names
    result = coverage(tables["stock"], tables["importers"], tables["stock"], tables["providers"])
    assert result.ok and result.missing == () and len(result.required) == len(imports)
    assert result.sonames == {"libc10_cuda.so": True, "libtorch_cuda.so": True}


def _real_sources(tree: Path, out: Path, dirs: tuple[str, ...]) -> Path:
    """An extraction-shaped tree (MANIFEST.json as tdev extract writes it) of real 2.6.0 files."""
    entries = []
    for d in dirs:
        for f in sorted((tree / d).rglob("*")):
            if f.is_file() and f.suffix in (".cpp", ".cu", ".h", ".cuh", ".hpp"):
                rel = f.relative_to(tree).as_posix()
                data = f.read_bytes()
                (out / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
                (out / "src" / rel).write_bytes(data)
                entries.append(manifest.Entry(f"src/{rel}", manifest.sha256(data), len(data), "moved", rel))
    (out / "MANIFEST.json").write_bytes(manifest.render(entries, {"version": "2.6.0", "commit": None},
                                                        {"source": "test", "sha256": "0" * 64}, {}, str(tree)))
    return out


@pytest.mark.realtree
def test_coverage_negative_grouped(tables, pytorch_tree, tmp_path):
    """Only libc10_cuda as the standalone build: what libtorch_python needs from libtorch_cuda is
    missing, grouped by source directory (by rule, then by the real sources)."""
    c10_cuda = tables["by_name"]["libc10_cuda.so"]
    result = coverage([c10_cuda], tables["importers"], tables["stock"], tables["providers"])
    assert not result.ok
    from_c10 = {i.name for i in result.required if "libc10_cuda.so" in i.stock}
    assert from_c10 and not from_c10 & {i.name for i in result.missing}
    assert len(result.missing) == len(result.required) - len(from_c10)
    assert {i.stock for i in result.missing} == {("libtorch_cuda.so",)}
    assert result.sonames == {"libc10_cuda.so": True, "libtorch_cuda.so": False}

    by_rule = group(result, tables["data"].groups)
    where = {d: g.directory for g in by_rule.groups for _, d in g.symbols}
    assert sorted(i.name for g in by_rule.groups for i, _ in g.symbols) == sorted(i.name for i in result.missing)
    assert where["at::cuda::CUDAGraph::capture_begin(std::pair<unsigned long long, unsigned long long>, "
                 "cudaStreamCaptureMode)"] == "aten/src/ATen/cuda"
    assert where["at::cuda::getCurrentCUDABlasHandle()"] == "aten/src/ATen/cuda"
    assert where["c10d::ProcessGroupNCCL::abort()"] == "torch/csrc/distributed/c10d"
    assert where["torch::cuda::nccl::version()"] == "torch/csrc/cuda"
    assert all(g.how == "rule" for g in by_rule.groups)
    assert all(d.startswith(("at::cuda::", "at::CUDA")) for d, dr in where.items() if dr == "aten/src/ATen/cuda"
               and not d.startswith(("vtable", "at::detail")))

    ext = _real_sources(pytorch_tree, tmp_path / "torch_cuda",
                        ("aten/src/ATen/cuda", "aten/src/ATen/native/cuda", "aten/src/ATen/native/sparse/cuda",
                         "aten/src/ATen/test", "torch/csrc/cuda", "torch/csrc/distributed/c10d"))
    by_source = group(result, tables["data"].groups, source_index(ext, tables["data"].sources_exclude))
    found = {d: (g.directory, g.how) for g in by_source.groups for _, d in g.symbols}
    # the prefix rule says aten/src/ATen/native/cuda; the file is in native/sparse/cuda
    cslt = next(d for d in found if d.startswith("at::native::_cslt_sparse_mm_impl("))
    assert found[cslt] == ("aten/src/ATen/native/sparse/cuda", "source")
    # the rule says aten/src/ATen/cuda/detail; it is defined in aten/src/ATen/cuda/CUDAGeneratorImpl.cpp
    assert found["at::cuda::detail::getDefaultCUDAGenerator(signed char)"] == ("aten/src/ATen/cuda", "source")
    # called in aten/src/ATen/test, torch/csrc/cuda: defined in aten/src/ATen/cuda
    assert found["at::cuda::CachingHostAllocator_emptyCache()"] == ("aten/src/ATen/cuda", "source")
    assert found["at::cuda::sleep(long)"] == ("aten/src/ATen/cuda", "source")
    assert found["typeinfo for c10d::ProcessGroupNCCL"] == ("torch/csrc/distributed/c10d", "source")
    assert not any(d.endswith("/test") for d, _ in found.values())


def test_qualified_parts_of_demangled_names():
    cases = {
        "void at::native::gpu_kernel<at::native::(anonymous namespace)::F>(at::TensorIteratorBase&, F const&)":
            ("at", "native", "gpu_kernel"),
        "at::cuda::tunable::TuningContext::GetFilename() const": ("at", "cuda", "tunable", "TuningContext", "GetFilename"),
        "vtable for at::CUDAGeneratorImpl": ("at", "CUDAGeneratorImpl"),
        "c10::cuda::CUDACachingAllocator::allocator": ("c10", "cuda", "CUDACachingAllocator", "allocator"),
        "at::cuda::CUDAGraph::~CUDAGraph()": ("at", "cuda", "CUDAGraph", "~CUDAGraph"),
        "std::function<void (int)>::operator()(int) const": ("std", "function", "operator_call"),
    }
    for text, parts in cases.items():
        assert qualified_parts(text) == parts, text
    assert demangle(["_ZN2at4cuda9CUDAGraph6replayEv", "cudaMalloc"]) == {
        "_ZN2at4cuda9CUDAGraph6replayEv": "at::cuda::CUDAGraph::replay()", "cudaMalloc": "cudaMalloc"}


# --- the CLI ------------------------------------------------------------------------------------

def _tdev(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tools"), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, text=True, env=env)


@pytest.mark.realtree
def test_cli_dump_then_check_the_dump(stage1_py, tmp_path):
    lib = _compile(tmp_path, "lonely", "void tdev_nobody_defines_this(int);\nvoid f() { tdev_nobody_defines_this(1); }\n")
    r = _tdev("link-check", "--dump-symbols", str(lib), "-o", str(tmp_path / "lonely.syms.gz"))
    assert r.returncode == 0, r.stderr
    lib.unlink()  # the check runs on the dump alone
    r = _tdev("link-check", "--libs", f"{tmp_path / 'lonely.syms.gz'}", "--stage1-python", str(stage1_py), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert not doc["ok"] and not doc["closure"]["ok"]
    assert [u["name"] for u in doc["closure"]["unresolved_nowhere"]] == ["_Z24tdev_nobody_defines_thisi"]
    assert doc["coverage"]["imports_per_importer"]["libtorch_python.so"] == 137
    assert doc["coverage"]["missing"] == 137
    # a provider that is not on this machine (as the driver's libcuda.so.1), through its dump
    prov = _compile(tmp_path, "elsewhere", "void tdev_nobody_defines_this(int) {}\n")
    r = _tdev("link-check", "--dump-symbols", str(prov), "-o", str(tmp_path / "elsewhere.syms.gz"))
    assert r.returncode == 0, r.stderr
    prov.unlink()
    r = _tdev("link-check", "--libs", f"{tmp_path / 'lonely.syms.gz'}", "--provider",
              f"{tmp_path / 'elsewhere.syms.gz'}", "--stage1-python", str(stage1_py), "--subset", "--json")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    assert json.loads(r.stdout)["closure"]["unresolved_nowhere"] == []
    r = _tdev("link-check", "--libs", f"{tmp_path / 'lonely.syms.gz'}", "--provider",
              f"{tmp_path / 'gone.syms.gz'}", "--stage1-python", str(stage1_py))
    assert r.returncode == 2 and "gone.syms.gz" in r.stderr and "no such file" in r.stderr


@pytest.mark.realtree
def test_cli_bad_input_is_exit_2(stage1_py, tmp_path):
    (tmp_path / "x.so").write_text("not elf\n")
    r = _tdev("link-check", "--libs", str(tmp_path / "x.so"), "--stage1-python", str(stage1_py))
    assert r.returncode == 2 and "neither an ELF file nor a tdev-elfsyms dump" in r.stderr
    r = _tdev("link-check", "--stage1-python", str(stage1_py))
    assert r.returncode == 2 and "--build DIR or --libs" in r.stderr
    r = _tdev("link-check", "--dump-symbols", str(tmp_path / "x.so"))
    assert r.returncode == 2 and "-o OUT" in r.stderr
    r = _tdev("link-check", "--build", str(tmp_path), "--stage1-python", str(stage1_py))
    assert r.returncode == 2 and "no shared library" in r.stderr
    # the extraction's release picks the stage-1 torch: another release is bad input naming both
    ext = tmp_path / "torch_cuda"
    ext.mkdir()
    (ext / "MANIFEST.json").write_bytes(manifest.render([], {"version": "2.5.1", "commit": None},
                                                        {"source": "test", "sha256": "0" * 64}, {}, "."))
    r = _tdev("link-check", "--libs", str(tmp_path / "x.so"), "--source", str(ext), "--stage1-python", str(stage1_py))
    assert r.returncode == 2 and "2.5.1" in r.stderr and "2.6.0" in r.stderr, r.stderr


@pytest.mark.realtree
def test_cli_a_damaged_library_or_dump_is_never_clean(stage1_py, tmp_path):
    """A truncated library, a dump holding a name that is not UTF-8, and no library at all,
    checked with the whole stage 1: one line naming the file, exit 2 (not "closure: OK" on 0
    references)."""
    lib = _compile(tmp_path, "whole", "int tdev_f(int x) { return x + 1; }\n")
    cut = tmp_path / "libcut.so"
    cut.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])
    dump = tmp_path / "whole.syms.gz"
    elfsyms.save(elfsyms.read_table(lib), dump)
    text = gzip.decompress(dump.read_bytes()).replace(b'"tdev', b'"\xff\xfetdev', 1)
    bad_name = tmp_path / "badname.syms.gz"
    bad_name.write_bytes(gzip.compress(text))
    for bad in (cut, bad_name):
        r = _tdev("link-check", "--libs", str(bad), "--stage1-python", str(stage1_py))
        assert r.returncode == 2 and str(bad) in r.stderr, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    # "--libs ," names no library: not a subset check of nothing that passes
    r = _tdev("link-check", "--libs", ",", "--subset", "--stage1-python", str(stage1_py))
    assert r.returncode == 2 and "--libs: names no library" in r.stderr, (r.returncode, r.stdout[-1000:])

