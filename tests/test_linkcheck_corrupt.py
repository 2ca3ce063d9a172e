"""`tdev link-check`'s reader on damaged libraries: truncated, with bytes overwritten, inserted
or removed, without the tables it needs, or making readelf complain. Each is bad input naming the
file, or (where the change touched nothing the reader reads) the original's table: never a
garbage or empty reading taken for a clean one. The libraries are compiled here with gcc and
taken from the system (libm); hostile dumps and paths are in tests/test_linkcheck_hostile.py, the
whole check with a stage-1 torch in tests/test_linkcheck.py."""
from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from basekit.errors import InputError
from tdev.elf import symbols as elfsyms
from tdev.elf.header import check_elf

from support.fuzzing import FUZZ
from support.linkcheck import LIBM, read_or_error, small_lib  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


def test_truncations_of_a_library_are_bad_input(small_lib, tmp_path):
    """Cut at every byte of its first and last 256, and at 400 more places: never a table,
    always an error naming the file."""
    data = small_lib.read_bytes()
    cut = tmp_path / "cut.so"
    sizes = set(range(256)) | set(range(len(data) - 256, len(data))) | set(range(0, len(data), len(data) // 400))
    for size in sorted(sizes):
        cut.write_bytes(data[:size])
        for full in (True, False):
            got = read_or_error(cut, full)
            assert isinstance(got, InputError), (size, full, len(got.symbols))


def test_truncated_system_library_is_bad_input(tmp_path):
    data = LIBM.read_bytes()
    cut = tmp_path / "libm.so.6"
    for size in sorted({0, 3, 4, 16, 63, 64, 1000, len(data) // 2, len(data) - 64, len(data) - 1}
                       | set(range(0, len(data), len(data) // 97))):
        cut.write_bytes(data[:size])
        assert isinstance(read_or_error(cut, True), InputError), size


def _layout(path: Path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return check_elf(fd, os.fstat(fd).st_size, str(path))
    finally:
        os.close(fd)


def _regions(path: Path) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the parts of the file: "content" (symbol, string and version tables
    and .dynamic, where another valid value is possible), "structure" (headers, section names)."""
    layout = _layout(path)
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
       patch=st.binary(min_size=1, max_size=8), shift=st.booleans())
def test_bytes_inserted_or_removed_make_an_error_or_the_same_reading(small_lib, tmp_path_factory, which,
                                                                     where, patch, shift):
    """What follows moves (the section header table at the end included): bad input naming the
    file, or, where the move changed nothing the reader reads, the original's table."""
    original = small_lib if which == "small" else LIBM
    data = original.read_bytes()
    at = int(where * len(data))
    mutated = data[:at] + patch + data[at:] if shift else data[:at] + data[at + len(patch):]
    path = tmp_path_factory.mktemp("shift") / original.name
    path.write_bytes(mutated)
    got = read_or_error(path, True)
    if not isinstance(got, InputError):  # the move changed nothing read (trailing bytes, padding)
        clean = elfsyms.read_table(original)
        assert (got.symbols, got.needed, got.soname) == (clean.symbols, clean.needed, clean.soname)


@FUZZ
@given(which=st.sampled_from(["small", "libm"]), where=st.floats(0, 1, exclude_max=True),
       patch=st.binary(min_size=1, max_size=8), full=st.booleans())
def test_a_mutated_library_is_an_error_or_reads_what_it_holds(small_lib, tmp_path_factory, which, where,
                                                               patch, full):
    """Bytes overwritten anywhere: bad input naming the file, or the original's table where the
    change touched nothing the reader reads. A change inside the symbol, string or version
    tables may leave a valid library with other symbols: then each is well-formed and its name
    is a string the file holds."""
    original = small_lib if which == "small" else LIBM
    data = bytearray(original.read_bytes())
    at = int(where * len(data))
    patch = patch[: len(data) - at]
    if data[at:at + len(patch)] == patch:
        return
    data[at:at + len(patch)] = patch
    path = tmp_path_factory.mktemp("mut") / original.name
    path.write_bytes(bytes(data))
    got = read_or_error(path, full)
    if isinstance(got, InputError):
        return
    clean = elfsyms.read_table(original, full=full)
    kinds = {kind for start, end, kind in _regions(original) if start < at + len(patch) and at < end}
    if "content" in kinds:  # every name read is well-formed and is in the file as a string
        held = bytes(data)
        for s in got.symbols:
            for name in (s.name, s.version or ""):  # .strtab spells a versioned name name@VERSION
                assert _well_formed(name) and any(name.encode() + end in held for end in (b"\0", b"@")), (at, name)
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
    many = tmp_path / "many.so"  # e_shnum 0: the count is section 0's sh_size, here 2**40
    data = bytearray(small_lib.read_bytes())
    shoff = struct.unpack_from("<Q", data, 40)[0]
    data[60:62] = bytes(2)
    data[shoff + 32:shoff + 40] = struct.pack("<Q", 1 << 40)
    many.write_bytes(bytes(data))
    no_dynsym = tmp_path / "nodynsym.so"  # .dynsym's type made SHT_PROGBITS
    data = bytearray(small_lib.read_bytes())
    dynsym = next(s for s in _layout(small_lib).sections if s.name == ".dynsym")
    data[shoff + 64 * dynsym.index + 4:shoff + 64 * dynsym.index + 8] = struct.pack("<I", 1)
    no_dynsym.write_bytes(bytes(data))
    for path, message in ((obj, "not a shared library"), (stripped, "no section headers"),
                          (many, f"{1 << 40} sections"), (no_dynsym, "0 sections of .dynsym's type"),
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


def _sections(data: bytes) -> list[dict]:
    """The ELF64 section headers of ``data``: type, flags, offset, and where the header is."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3a)
    out = []
    for i in range(shnum):
        at = shoff + i * shentsize
        _, kind, flags, _, offset = struct.unpack_from("<IIQQQ", data, at)
        out.append({"header": at, "type": kind, "flags": flags, "offset": offset})
    return out


def _second_verdef_next_zero(data: bytearray) -> None:
    """The version-definition chain cut after its first entry (vd_next 0 with more to come)."""
    verdef = next(s for s in _sections(data) if s["type"] == 0x6ffffffd)  # SHT_GNU_verdef
    first_next, = struct.unpack_from("<I", data, verdef["offset"] + 16)
    struct.pack_into("<I", data, verdef["offset"] + first_next + 16, 0)


def _text_info_field(data: bytearray) -> None:
    """An ``sh_info`` on the executable section where none belongs."""
    text = next(s for s in _sections(data) if s["type"] == 1 and s["flags"] & 4)  # PROGBITS, exec
    struct.pack_into("<I", data, text["header"] + 44, 2048)


@pytest.mark.parametrize("damage", [_second_verdef_next_zero, _text_info_field])
def test_readelf_warnings_on_the_version_tables_and_section_headers_are_not_ignored(damage, tmp_path):
    """Damage readelf reports only where it reads the version sections or the section headers
    (its symbol listing reads the same symbols, silently): bad input naming the file."""
    data = bytearray(LIBM.read_bytes())
    damage(data)
    lib = tmp_path / "damaged.so"
    lib.write_bytes(bytes(data))
    said = subprocess.run(["readelf", "-W", "-h", "-l", "-S", "-V", str(lib)], capture_output=True, text=True)
    assert "Warning:" in said.stderr or "Error:" in said.stderr  # readelf itself calls it damaged
    for full in (True, False):
        got = read_or_error(lib, full)
        assert isinstance(got, InputError) and "readelf says" in str(got), (full, got)
    r = subprocess.run([sys.executable, "-m", "tdev", "link-check", "--dump-symbols", str(lib), "-o",
                        str(tmp_path / "d.gz")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(lib) in r.stderr, r.stderr
    assert not (tmp_path / "d.gz").exists()
