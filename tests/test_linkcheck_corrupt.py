"""`tdev link-check` on damaged and hostile input: a truncated or mutated shared library, a corrupt
or inflating symbol dump, a FIFO or a device where a file is meant, a build directory whose links
loop, an output path that cannot be written. Each is bad input naming the file (exit 2), never a
clean reading, and every read is bounded.

The libraries are compiled here with gcc and taken from the system (libm); the tests that run the
whole check with a stage-1 torch are in tests/test_linkcheck.py."""
from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from basekit.errors import InputError
from tdev.build import elfsyms
from tdev.build.elfhead import check_elf
from tdev.build.linkgroups import source_index
from tdev.build.linkinputs import build_libraries, load_data
from tdev.extract import manifest

from fuzzing import FUZZ

REPO = Path(__file__).resolve().parent.parent
LIBM = Path("/lib/x86_64-linux-gnu/libm.so.6")
# bounds of a subprocess that runs one hostile case: a hang or a memory blow-up fails the test
CASE_TIMEOUT = 120
CASE_MEMORY = 1536 << 20

CODE = """#include <stdio.h>
#include <math.h>
int tdev_visible(int x) { return puts("x") + x; }
double tdev_math(double y) { return cos(y); }
static int tdev_hidden(int y) { return y * 2; }
int (*tdev_pointer)(int) = tdev_hidden;
__attribute__((weak)) void tdev_weak_optional(void);
void tdev_call_weak(void) { if (tdev_weak_optional) tdev_weak_optional(); }
"""


@pytest.fixture(scope="module")
def small_lib(tmp_path_factory) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to build the test library")
    d = tmp_path_factory.mktemp("lib")
    (d / "a.c").write_text(CODE)
    out = d / "libtdevsmall.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(d / "a.c"), "-lm"],
                   check=True, capture_output=True)
    return out


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tools"), str(REPO)]))


def _bounded(args: list[str], **kw) -> subprocess.CompletedProcess:
    """Run ``args`` with at most CASE_MEMORY of address space and CASE_TIMEOUT seconds: a case
    that hangs or exhausts memory fails here."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (CASE_MEMORY, CASE_MEMORY))
    try:
        return subprocess.run(args, capture_output=True, text=True, env=_env(), preexec_fn=limit,
                              timeout=CASE_TIMEOUT, **kw)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args[-4:]} did not finish within {CASE_TIMEOUT} s (a hang)")


def _tdev(*args: str) -> subprocess.CompletedProcess:
    return _bounded([sys.executable, "-m", "tdev", *args])


def _one_line_exit_2(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def _read_or_error(path: Path, full: bool):
    """The table, or the bad-input error, which must name the file."""
    try:
        return elfsyms.read_table(path, full=full)
    except InputError as e:
        assert os.fspath(path) in str(e) and "\n" not in str(e), str(e)
        return e


# --- libraries ------------------------------------------------------------------------------------

def test_truncations_of_a_library_are_bad_input(small_lib, tmp_path):
    """Cut at every byte of its first and last 256, and at 400 more places: never a table,
    always an error naming the file."""
    data = small_lib.read_bytes()
    cut = tmp_path / "cut.so"
    sizes = set(range(256)) | set(range(len(data) - 256, len(data))) | set(range(0, len(data), len(data) // 400))
    for size in sorted(sizes):
        cut.write_bytes(data[:size])
        for full in (True, False):
            got = _read_or_error(cut, full)
            assert isinstance(got, InputError), (size, full, len(got.symbols))


def test_truncated_system_library_is_bad_input(tmp_path):
    data = LIBM.read_bytes()
    cut = tmp_path / "libm.so.6"
    for size in sorted({0, 3, 4, 16, 63, 64, 1000, len(data) // 2, len(data) - 64, len(data) - 1}
                       | set(range(0, len(data), len(data) // 97))):
        cut.write_bytes(data[:size])
        assert isinstance(_read_or_error(cut, True), InputError), size


def _regions(path: Path) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the parts of the file: "content" (symbol, string and version tables
    and .dynamic, where another valid value is possible), "structure" (headers, section names)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        layout = check_elf(fd, os.fstat(fd).st_size, str(path))
    finally:
        os.close(fd)
    head = path.read_bytes()[:64]
    phoff, shoff = struct.unpack_from("<QQ", head, 32)
    phnum, shnum = struct.unpack_from("<H", head, 56)[0], struct.unpack_from("<H", head, 60)[0]
    out = [(0, 64, "structure"), (phoff, phoff + 56 * phnum, "structure"), (shoff, shoff + 64 * shnum, "structure")]
    content = {".dynsym", ".dynstr", ".symtab", ".strtab", ".gnu.version", ".gnu.version_r", ".gnu.version_d",
               ".dynamic"}
    for s in layout.sections:
        if s.name in content:
            out.append((s.offset, s.offset + s.size, "content"))
        elif s.name == ".shstrtab":
            out.append((s.offset, s.offset + s.size, "structure"))
    return out


def _well_formed(name: str) -> bool:
    return all(ch.isprintable() and not ch.isspace() and ch != "^" for ch in name) and not name.startswith("<")


@FUZZ
@given(which=st.sampled_from(["small", "libm"]), where=st.floats(0, 1, exclude_max=True),
       patch=st.binary(min_size=1, max_size=8), full=st.booleans())
def test_a_mutated_library_is_an_error_or_reads_what_it_holds(small_lib, tmp_path_factory, which, where,
                                                               patch, full):
    """Bytes overwritten anywhere: bad input naming the file, or the original's table where the
    change touched nothing the reader reads. A change inside the symbol, string or version
    tables may leave a valid library with other symbols: then each is well-formed."""
    original = small_lib if which == "small" else LIBM
    data = bytearray(original.read_bytes())
    at = int(where * len(data))
    patch = patch[: len(data) - at]
    if data[at:at + len(patch)] == patch:
        return
    data[at:at + len(patch)] = patch
    path = tmp_path_factory.mktemp("mut") / original.name
    path.write_bytes(bytes(data))
    got = _read_or_error(path, full)
    if isinstance(got, InputError):
        return
    clean = elfsyms.read_table(original, full=full)
    kinds = {kind for start, end, kind in _regions(original) if start < at + len(patch) and at < end}
    if "content" in kinds:
        assert all(_well_formed(s.name) and (s.version is None or _well_formed(s.version)) for s in got.symbols)
        return
    assert (got.symbols, got.needed, got.soname) == (clean.symbols, clean.needed, clean.soname), (at, patch, kinds)


def test_a_library_without_dynamic_symbols_or_not_a_library(tmp_path, small_lib):
    (tmp_path / "a.c").write_text("int f(void) { return 1; }\n")
    obj = tmp_path / "a.o"
    subprocess.run(["gcc", "-c", "-fPIC", "-o", str(obj), str(tmp_path / "a.c")], check=True)
    stripped = tmp_path / "nosections.so"
    data = bytearray(small_lib.read_bytes())
    data[40:48] = bytes(8)  # e_shoff = 0: no section headers
    stripped.write_bytes(bytes(data))
    for path, message in ((obj, "not a shared library"), (stripped, "no section headers"),
                          (tmp_path / "a.c", "neither an ELF file")):
        with pytest.raises(InputError, match=message) as e:
            elfsyms.read_table(path)
        assert str(path) in str(e.value)


def test_readelf_errors_are_not_ignored(small_lib, tmp_path, monkeypatch):
    """What readelf prints on stderr (it exits 0 after ``Error:``) makes the file bad input."""
    fake = tmp_path / "bin" / "readelf"
    fake.parent.mkdir()
    real = shutil.which("readelf")
    fake.write_text(f"#!/bin/sh\n{real} \"$@\"\necho 'readelf: Warning: something is off' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(InputError, match="readelf says: .*something is off") as e:
        elfsyms.read_table(small_lib)
    assert str(small_lib) in str(e.value)


def test_the_reading_of_an_intact_library(small_lib):
    """What the checks must not break: the full and dynamic tables of a library built here."""
    table = elfsyms.read_table(small_lib)
    names = {s.name: s for s in table.symbols}
    assert table.needed[:1] == ("libm.so.6",) and "libc.so.6" in table.needed and table.has_symtab
    assert names["tdev_visible"].exported and names["tdev_math"].exported
    assert names["tdev_hidden"].bind == "LOCAL" and not names["tdev_hidden"].dynamic
    assert names["tdev_weak_optional"].bind == "WEAK" and not names["tdev_weak_optional"].defined
    assert names["cos"].imported and names["cos"].version.startswith("GLIBC_")
    dynamic = elfsyms.read_table(small_lib, full=False)
    assert "tdev_hidden" not in {s.name for s in dynamic.symbols} and dynamic.needed == table.needed
    assert elfsyms.loads(elfsyms.dumps(table), "x") == table


# --- dumps ----------------------------------------------------------------------------------------

def _dump_lines(small_lib) -> list[bytes]:
    return gzip.decompress(elfsyms.dumps(elfsyms.read_table(small_lib))).splitlines(keepends=True)


def _gz(*parts: bytes) -> bytes:
    return gzip.compress(b"".join(parts), mtime=0)


def test_corrupt_dumps_are_bad_input(small_lib, tmp_path):
    lines = _dump_lines(small_lib)
    head, rows = lines[0], lines[1:]
    good = _gz(*lines)
    deep = b"[" * 200_000 + b"]" * 200_000 + b"\n"
    bad_utf8 = rows[0].replace(b'"', b'"\xff', 1)
    surrogate = rows[0].replace(b'"', b'"\\udcff', 1)
    control = rows[0].replace(b'"', b'"\\u0001', 1)
    fields = json.loads(head)
    cases = {
        "truncated.gz": (good[: len(good) // 2], "gzip"),
        "crc.gz": (good[:-8] + bytes(8), "gzip"),
        "bad-json.gz": (_gz(head, rows[0], b"[1, 2,\n", *rows[2:]), ":3:2: invalid JSON"),
        "deep.gz": (_gz(head, deep, *rows), ":2: "),
        "deep-header.gz": (_gz(deep, *rows), "no header line"),
        "no-header.gz": (_gz(*rows), "no header line"),
        "other-format.gz": (_gz(b'{"format": "something-else"}\n', *rows), "no header line"),
        "version.gz": (_gz(json.dumps({**fields, "version": 2}).encode() + b"\n", *rows), "dump version 2"),
        "count.gz": (_gz(json.dumps({**fields, "count": 10 ** 12}).encode() + b"\n", *rows), "count malformed"),
        "fewer.gz": (_gz(*lines[:-1]), "dump truncated"),
        "more.gz": (_gz(*lines, rows[0]), "more symbols than the header's"),
        "utf8.gz": (_gz(head, bad_utf8, *rows[1:]), "not valid UTF-8"),
        "surrogate.gz": (_gz(head, surrogate, *rows[1:]), "damaged symbol table: the name"),
        "control.gz": (_gz(head, control, *rows[1:]), "damaged symbol table: the name"),
        "bind.gz": (_gz(head, *(r.replace(b'"GLOBAL"', b'"PUBLIC"') for r in rows)), "binding 'PUBLIC'"),
        "section.gz": (_gz(head, *(r.replace(b'"UND"', b'"bad section index[ 99]"') for r in rows)),
                       "section index"),
        "empty.gz": (_gz(b""), "empty"),
        "no-newline.gz": (_gz(b"".join(lines).rstrip(b"\n")), "not a whole line"),
    }
    assert elfsyms.loads(good, "good") == elfsyms.read_table(small_lib)
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputError) as e:
            elfsyms.read_table(path)
        assert str(path) in str(e.value) and message in str(e.value) and "\n" not in str(e.value), (name, str(e.value))


@FUZZ
@given(cut=st.floats(0, 1, exclude_max=True))
def test_a_truncated_dump_is_bad_input(small_lib, tmp_path_factory, cut):
    good = elfsyms.dumps(elfsyms.read_table(small_lib))
    path = tmp_path_factory.mktemp("dump") / "cut.syms.gz"
    path.write_bytes(good[: int(cut * len(good))])
    with pytest.raises(InputError) as e:
        elfsyms.read_table(path)
    assert str(path) in str(e.value)


def _inflating(path: Path, head: bytes, megabytes: int) -> None:
    """A gzip file of ``head`` then ``megabytes`` MB of newlines (about 1 KB per MB)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as fh:
        fh.write(z.compress(head))
        block = b"\n" * (1 << 20)
        for _ in range(megabytes):
            fh.write(z.compress(block))
        fh.write(z.flush())


def test_an_inflating_dump_is_refused_within_bounded_memory(small_lib, tmp_path):
    """A small gzip file that inflates to hundreds of MB of empty lines, after a valid header or
    instead of one: refused at its first bad line, within CASE_MEMORY of address space."""
    head = _dump_lines(small_lib)[0]
    for name, first in (("bomb.syms.gz", b""), ("bomb-after-header.syms.gz", head)):
        bomb = tmp_path / name
        _inflating(bomb, first, 400)
        assert bomb.stat().st_size < (1 << 20)
        r = _tdev("link-check", "--dump-symbols", str(bomb), "-o", str(tmp_path / "out.syms.gz"))
        _one_line_exit_2(r, str(bomb))
        assert not (tmp_path / "out.syms.gz").exists()


# --- the command ---------------------------------------------------------------------------------

def test_dump_symbols_of_a_damaged_library_is_exit_2(small_lib, tmp_path):
    cut = tmp_path / "libcut.so"
    cut.write_bytes(small_lib.read_bytes()[:3000])
    out = tmp_path / "cut.syms.gz"
    _one_line_exit_2(_tdev("link-check", "--dump-symbols", str(cut), "-o", str(out)), str(cut))
    assert not out.exists()
    r = _tdev("link-check", "--dump-symbols", str(small_lib), "-o", str(out))
    assert r.returncode == 0 and elfsyms.load(out) == elfsyms.read_table(small_lib), r.stderr


def test_fifos_and_devices_are_refused_without_blocking(small_lib, tmp_path):
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    out = tmp_path / "out.syms.gz"
    for bad in (fifo, Path("/dev/zero")):
        _one_line_exit_2(_tdev("link-check", "--dump-symbols", str(bad), "-o", str(out)), str(bad), "not a regular file")
    for bad in (fifo, Path("/dev/zero"), tmp_path):
        for option in ("--interpreter", "--provider", "--libs"):
            libs = ["--libs", str(small_lib)] if option != "--libs" else []
            _one_line_exit_2(_tdev("link-check", *libs, option, str(bad)), str(bad), "not a regular file")
        with pytest.raises(InputError, match="not a regular file"):
            elfsyms.read_tables([small_lib, bad], full=False)
    assert not out.exists()


def test_output_paths_that_cannot_be_written_are_exit_2(small_lib, tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "dir", tmp_path / "file" / "x"):
        _one_line_exit_2(_tdev("link-check", "--dump-symbols", str(small_lib), "-o", str(out)), str(out))
    assert (tmp_path / "file").read_text() == "x" and os.listdir(tmp_path / "dir") == []


def test_a_build_directory_whose_links_loop(small_lib, tmp_path):
    """python/a -> . and python/b -> .: the walk does not follow directory links."""
    build = tmp_path / "build"
    (build / "lib").mkdir(parents=True)
    (build / "python" / "pkg").mkdir(parents=True)
    shutil.copy(small_lib, build / "lib" / "libx.so")
    shutil.copy(small_lib, build / "python" / "pkg" / "_mod.so")
    os.symlink(".", build / "python" / "a")
    os.symlink(".", build / "python" / "b")
    os.symlink("..", build / "python" / "pkg" / "up")
    code = ("import sys; from pathlib import Path; from tdev.build.linkinputs import build_libraries, load_data; "
            "print('\\n'.join(str(p) for p in build_libraries(Path(sys.argv[1]), load_data())))")
    r = _bounded([sys.executable, "-c", code, str(build)])
    assert r.returncode == 0, r.stderr[-2000:]
    assert sorted(Path(p).relative_to(build).as_posix() for p in r.stdout.split()) == [
        "lib/libx.so", "python/pkg/_mod.so"]
    assert build_libraries(build, load_data()) == [build / "lib" / "libx.so", build / "python" / "pkg" / "_mod.so"]


def test_a_fifo_or_device_listed_as_a_source_is_bad_input(tmp_path):
    ext = tmp_path / "torch_cuda"
    (ext / "src").mkdir(parents=True)
    (ext / "src" / "ok.cpp").write_text("void f() {}\n")
    os.mkfifo(ext / "src" / "fifo.cpp")
    os.symlink("/dev/zero", ext / "src" / "zero.cpp")
    for bad in ("fifo.cpp", "zero.cpp"):
        entries = [manifest.Entry(f"src/{n}", "0" * 64, 1, "moved", f"aten/{n}") for n in ("ok.cpp", bad)]
        (ext / "MANIFEST.json").write_bytes(manifest.render(entries, {"version": "2.6.0", "commit": None},
                                                            {"source": "test", "sha256": "0" * 64}, {}, "."))
        code = ("import sys; from pathlib import Path; from tdev.build.linkgroups import source_index; "
                "from basekit.errors import InputError\ntry: source_index(Path(sys.argv[1]))\n"
                "except InputError as e: print(e); sys.exit(2)")
        r = _bounded([sys.executable, "-c", code, str(ext)])
        assert r.returncode == 2 and bad in r.stdout and "not a regular file" in r.stdout, (r.stdout, r.stderr[-2000:])
    (ext / "src" / "fifo.cpp").unlink()
    (ext / "src" / "zero.cpp").unlink()
    (ext / "MANIFEST.json").write_bytes(manifest.render(
        [manifest.Entry("src/ok.cpp", "0" * 64, 1, "moved", "aten/ok.cpp")], {"version": "2.6.0", "commit": None},
        {"source": "test", "sha256": "0" * 64}, {}, "."))
    assert [f.original for f in source_index(ext)] == ["aten/ok.cpp"]
