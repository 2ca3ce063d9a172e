"""`tdev link-check` on hostile input: corrupt or inflating symbol dumps, a FIFO or a device where
a file is meant, a build directory whose links loop, an output path that cannot be written. Each
is one line naming the file and exit 2, never a clean reading, and every read is bounded (the
cases run in subprocesses limited in time and address space)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from basekit.errors import InputError
from tdev.elf import symbols as elfsyms
from tdev.linkcheck.groups import source_index
from tdev.linkcheck.inputs import build_libraries, load_data
from tdev.extract import manifest

from support.fuzzing import FUZZ
from support.linkcheck import bounded, one_line_exit_2, small_lib, tdev  # noqa: F401  (a fixture)

pytestmark = pytest.mark.slow  # integration: runs the CLI, builds or kills processes; not in the fast lane


# --- dumps ----------------------------------------------------------------------------------------

def _dump_lines(small_lib) -> list[bytes]:
    return gzip.decompress(elfsyms.dumps(elfsyms.read_table(small_lib))).splitlines(keepends=True)


def _gz(*parts: bytes) -> bytes:
    return gzip.compress(b"".join(parts), mtime=0)


def _corrupt_dumps(lines: list[bytes]) -> dict[str, tuple[bytes, str]]:
    """name -> (a damaged dump made from ``lines``, what the error says)."""
    head, rows = lines[0], lines[1:]
    good = _gz(*lines)
    deep = b"[" * 200_000 + b"]" * 200_000 + b"\n"
    fields = json.loads(head)
    return {
        "truncated": (good[: len(good) // 2], "gzip"),
        "crc": (good[:-8] + bytes(8), "gzip"),
        "bad-json": (_gz(head, rows[0], b"[1, 2,\n", *rows[2:]), ":3:2: invalid JSON"),
        "deep": (_gz(head, deep, *rows), ":2: "),
        "deep-header": (_gz(deep, *rows), "no header line"),
        "no-header": (_gz(*rows), "no header line"),
        "other-format": (_gz(b'{"format": "something-else"}\n', *rows), "no header line"),
        "version": (_gz(json.dumps({**fields, "version": 2}).encode() + b"\n", *rows), "dump version 2"),
        "count": (_gz(json.dumps({**fields, "count": 10 ** 12}).encode() + b"\n", *rows), "count malformed"),
        "path": (_gz(json.dumps({**fields, "path": "lib\nclosure: OK"}).encode() + b"\n", *rows), "path"),
        "fewer": (_gz(*lines[:-1]), "dump truncated"),
        "more": (_gz(*lines, rows[0]), "more symbols than the header's"),
        "utf8": (_gz(head, rows[0].replace(b'"', b'"\xff', 1), *rows[1:]), "not valid UTF-8"),
        "surrogate": (_gz(head, rows[0].replace(b'"', b'"\\udcff', 1), *rows[1:]), "damaged symbol table: the name"),
        "control": (_gz(head, rows[0].replace(b'"', b'"\\u0001', 1), *rows[1:]), "damaged symbol table: the name"),
        "bind": (_gz(head, *(r.replace(b'"GLOBAL"', b'"PUBLIC"') for r in rows)), "binding 'PUBLIC'"),
        "section": (_gz(head, *(r.replace(b'"UND"', b'"bad section index[ 99]"') for r in rows)), "section index"),
        "empty": (_gz(b""), "empty"),
        "no-newline": (_gz(b"".join(lines).rstrip(b"\n")), "not a whole line"),
    }


@pytest.mark.parametrize("case", list(_corrupt_dumps([b"{}\n", b"[]\n", b"[]\n"])))
def test_corrupt_dumps_are_bad_input(small_lib, tmp_path, case):
    lines = _dump_lines(small_lib)
    assert elfsyms.loads(_gz(*lines), "good") == elfsyms.read_table(small_lib)
    data, message = _corrupt_dumps(lines)[case]
    path = tmp_path / f"{case}.syms.gz"
    path.write_bytes(data)
    with pytest.raises(InputError) as e:
        elfsyms.read_table(path)
    assert str(path) in str(e.value) and message in str(e.value) and "\n" not in str(e.value), str(e.value)


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
        r = tdev("link-check", "--dump-symbols", str(bomb), "-o", str(tmp_path / "out.syms.gz"))
        one_line_exit_2(r, str(bomb))
        assert not (tmp_path / "out.syms.gz").exists()


@FUZZ
@given(where=st.floats(0, 1, exclude_max=True), patch=st.binary(min_size=1, max_size=8))
def test_a_mutated_dump_is_an_error_or_the_same_table(small_lib, tmp_path_factory, where, patch):
    """gzip's CRC covers the content: a changed byte is bad input naming the dump, or it lay in a
    header field (time, OS) that carries none of it."""
    good = elfsyms.dumps(elfsyms.read_table(small_lib))
    at = int(where * len(good))
    data = bytearray(good)
    data[at:at + len(patch)] = patch[: len(good) - at]
    path = tmp_path_factory.mktemp("dump") / "mut.syms.gz"
    path.write_bytes(bytes(data))
    try:
        got = elfsyms.read_table(path)
    except InputError as e:
        assert str(path) in str(e) and "\n" not in str(e), str(e)
        return
    assert got == elfsyms.loads(good, "good"), at


# --- the command ---------------------------------------------------------------------------------

def test_dump_symbols_of_a_damaged_library_is_exit_2(small_lib, tmp_path):
    cut = tmp_path / "libcut.so"
    cut.write_bytes(small_lib.read_bytes()[:3000])
    out = tmp_path / "cut.syms.gz"
    one_line_exit_2(tdev("link-check", "--dump-symbols", str(cut), "-o", str(out)), str(cut))
    assert not out.exists()
    r = tdev("link-check", "--dump-symbols", str(small_lib), "-o", str(out))
    assert r.returncode == 0 and elfsyms.load(out) == elfsyms.read_table(small_lib), r.stderr


def test_fifos_and_devices_are_refused_without_blocking(small_lib, tmp_path):
    fifo = tmp_path / "fifo.so"
    os.mkfifo(fifo)
    out = tmp_path / "out.syms.gz"
    for bad in (fifo, Path("/dev/zero")):
        one_line_exit_2(tdev("link-check", "--dump-symbols", str(bad), "-o", str(out)), str(bad), "not a regular file")
    for bad in (fifo, Path("/dev/zero"), tmp_path):
        for option in ("--interpreter", "--provider", "--libs"):
            libs = ["--libs", str(small_lib)] if option != "--libs" else []
            one_line_exit_2(tdev("link-check", *libs, option, str(bad)), str(bad), "not a regular file")
        with pytest.raises(InputError, match="not a regular file"):
            elfsyms.read_tables([small_lib, bad], full=False)
    assert not out.exists()


def test_output_paths_that_cannot_be_written_are_exit_2(small_lib, tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    for out in (tmp_path / "dir", tmp_path / "file" / "x"):
        one_line_exit_2(tdev("link-check", "--dump-symbols", str(small_lib), "-o", str(out)), str(out))
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
    code = ("import sys; from pathlib import Path; from tdev.linkcheck.inputs import build_libraries, load_data; "
            "print('\\n'.join(str(p) for p in build_libraries(Path(sys.argv[1]), load_data())))")
    r = bounded([sys.executable, "-c", code, str(build)])
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
        code = ("import sys; from pathlib import Path; from tdev.linkcheck.groups import source_index; "
                "from basekit.errors import InputError\ntry: source_index(Path(sys.argv[1]))\n"
                "except InputError as e: print(e); sys.exit(2)")
        r = bounded([sys.executable, "-c", code, str(ext)])
        assert r.returncode == 2 and bad in r.stdout and "not a regular file" in r.stdout, (r.stdout, r.stderr[-2000:])
    (ext / "src" / "fifo.cpp").unlink()
    (ext / "src" / "zero.cpp").unlink()
    (ext / "MANIFEST.json").write_bytes(manifest.render(
        [manifest.Entry("src/ok.cpp", "0" * 64, 1, "moved", "aten/ok.cpp")], {"version": "2.6.0", "commit": None},
        {"source": "test", "sha256": "0" * 64}, {}, "."))
    assert [f.original for f in source_index(ext)] == ["aten/ok.cpp"]
