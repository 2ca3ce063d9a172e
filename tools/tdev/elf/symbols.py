"""ELF symbol tables of shared libraries: THE reader, and a small dump of one to carry elsewhere.

``read_table(path)`` returns a :class:`SymbolTable`: every symbol of the FULL tables (``.symtab``
when the library has one, and ``.dynsym``; the stock ``libtorch_cuda.so`` keeps kernels as hidden,
i.e. ``.symtab``-only LOCAL, symbols), each with binding, visibility, type, section (``UND`` or a
defined one), symbol version, and whether it is in ``.dynsym``; plus ``DT_NEEDED`` and
``DT_SONAME``. ``read_table(path, full=False)`` reads ``.dynsym`` only (enough for a library that
only provides symbols: what another library can bind to is exported, so dynamic).

The reader runs binutils' ``readelf -W -d -s`` (one process per library) and parses its text:
~1.5 s for the stock ``libtorch_cuda.so`` of torch 2.6.0 (903 MB, 162,119 symbols), against
~3.3 s for pyelftools only to iterate them. readelf reads a damaged file as far as it can and
often exits 0: the file's structure is checked first (:mod:`tdev.elf.header`), and anything
readelf prints on stderr, a table or dynamic section it does not print whole, an unknown binding,
visibility, type or section index, or a name with spaces, control characters (``^X``) or bytes
that are not UTF-8 is bad input naming the file.

A dump (``save``/``load``) is gzipped JSON lines: a header line ``{"format": "tdev-elfsyms",
"version": 1, "path", "soname", "needed", "has_symtab", "full", "count"}`` and one compact array
per symbol ``[name, version, default_version, bind, vis, type, section, dynamic]``. A library
built where it cannot be sent back (500 MB) sends its dump (a few MB); every reader here takes an
ELF file or a dump (:func:`read_table` looks at the first bytes). A dump is read as it is
decompressed, the header first, each row checked as an ELF symbol is, never more rows than the
header's count, no line over ``MAX_DUMP_LINE``, no more than ``MAX_DUMP_BYTES`` in all.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

from basekit.docread import load_json_text, open_regular
from basekit.errors import InputError
from basekit.fs import write_atomic

from .header import ElfLayout, check_elf

DUMP_FORMAT = "tdev-elfsyms"
DUMP_VERSION = 1
ELF_MAGIC = b"\x7fELF"
GZIP_MAGIC = b"\x1f\x8b"
EXPORT_BINDS = frozenset({"GLOBAL", "WEAK", "UNIQUE"})
EXPORT_VIS = frozenset({"DEFAULT", "PROTECTED"})
MAX_DUMP_BYTES = 512 * 1024 * 1024  # uncompressed, and compressed
MAX_DUMP_LINE = 1024 * 1024  # one symbol's line (the longest mangled names are a few KB)
MAX_SYMBOLS = 4_000_000  # in one dump (libtorch_cuda.so has 162k)
READELF_TIMEOUT = 600  # seconds for one library
BINDS = frozenset({"LOCAL", "GLOBAL", "WEAK", "UNIQUE"})
VISIBILITIES = frozenset({"DEFAULT", "INTERNAL", "HIDDEN", "PROTECTED"})
TYPES = frozenset({"NOTYPE", "OBJECT", "FUNC", "SECTION", "FILE", "COMMON", "TLS", "IFUNC"})
_PLAIN = re.compile(r"[\x21-\x5d\x5f-\x7e]*")  # printable ASCII but space and "^"


class Symbol(NamedTuple):
    """One symbol table entry (a named tuple: 160k of them are built in a second)."""

    name: str  # as in the string table, without the version (mangled for C++)
    version: str | None  # "GLIBCXX_3.4.29", "libcudart.so.12", or None (unversioned)
    default_version: bool  # foo@@V (the version a plain reference binds to) rather than foo@V
    bind: str  # GLOBAL, WEAK, LOCAL, UNIQUE
    vis: str  # DEFAULT, HIDDEN, PROTECTED, INTERNAL
    type: str  # FUNC, OBJECT, NOTYPE, TLS, IFUNC, ...
    section: str  # "UND", "ABS", "COM" or a section index
    dynamic: bool  # in .dynsym (else .symtab only)

    @property
    def defined(self) -> bool:
        return self.section != "UND"

    @property
    def exported(self) -> bool:
        """Another library can bind to it: defined, in .dynsym, global/weak, not hidden."""
        return self.defined and self.dynamic and self.bind in EXPORT_BINDS and self.vis in EXPORT_VIS

    @property
    def imported(self) -> bool:
        """A reference the dynamic linker must resolve elsewhere (GLOBAL or WEAK undefined)."""
        return not self.defined and self.bind in ("GLOBAL", "WEAK") and bool(self.name)

    @property
    def versioned_name(self) -> str:
        if self.version is None:
            return self.name
        return f"{self.name}{'@@' if self.default_version else '@'}{self.version}"

    def to_row(self) -> list:
        return list(self)


@dataclass(frozen=True)
class SymbolTable:
    path: str  # the library (or, for a dump, the library the dump was made from)
    soname: str | None
    needed: tuple[str, ...]
    symbols: tuple[Symbol, ...] = field(repr=False)
    has_symtab: bool  # the library has a .symtab (not stripped)
    full: bool  # .symtab was read (False: read with full=False, .dynsym only)

    @property
    def name(self) -> str:
        """What to call the library in a report: its soname, else its file name."""
        return self.soname or os.path.basename(self.path)

    def defined(self) -> Iterator[Symbol]:
        return (s for s in self.symbols if s.defined)

    def exported(self) -> Iterator[Symbol]:
        return (s for s in self.symbols if s.exported)

    def imported(self) -> Iterator[Symbol]:
        return (s for s in self.symbols if s.imported)


# --- reading an ELF file (readelf) ------------------------------------------------------------

def _run_readelf(fd: int, where: str, full: bool) -> str:
    """readelf's output for the open file ``fd``; anything on its stderr (``Error:`` and
    ``Warning:`` lines, with exit 0 as often as not) is bad input naming ``where``. A second run
    reads what the symbol listing does not look at closely (headers, program headers, section
    headers, the symbol-version sections), for its complaints only: a damaged version table is
    otherwise dropped silently."""
    exe = shutil.which("readelf")
    if exe is None:
        raise InputError("readelf", "not found on PATH (binutils is needed to read ELF symbol tables)")
    text = _readelf([exe, "-W", "-d", "-s" if full else "--dyn-syms"], fd, where)
    _readelf([exe, "-W", "-h", "-l", "-S", "-V"], fd, where, output=False)
    return text


def _readelf(args: list[str], fd: int, where: str, output: bool = True) -> str:
    env = dict(os.environ, LC_ALL="C")
    try:
        proc = subprocess.run([*args, f"/dev/fd/{fd}"], stdout=subprocess.PIPE if output else subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, check=False, pass_fds=(fd,),
                              timeout=READELF_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise InputError(where, f"readelf ran longer than {READELF_TIMEOUT} s") from None
    err = [line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if proc.returncode != 0 or err:
        first = err[0].replace(f"/dev/fd/{fd}", "").strip().removeprefix("readelf: ") if err else \
            f"exit {proc.returncode}"
        raise InputError(where, f"damaged ELF file, readelf says: {first}")
    return proc.stdout.decode("utf-8", "surrogateescape") if output else ""


def bad_name(name: str) -> bool:
    """Not a symbol, version or library name as a toolchain writes them: a space, a control
    character (which readelf shows as ``^X``), bytes that are not UTF-8, or readelf's
    ``<corrupt>``-style placeholders."""
    if _PLAIN.fullmatch(name):
        return name.startswith("<") and name.endswith(">")
    return any(ch.isspace() or ch == "^" or not ch.isprintable() for ch in name)


def _split_version(raw: str) -> tuple[str, str | None, bool]:
    name, at, rest = raw.partition("@")
    if not at:
        return raw, None, False
    if rest.startswith("@"):
        return name, rest[1:], True
    return name, rest, False


def _symbol(line: str, dynamic: bool) -> Symbol | None:
    # "   Num:    Value          Size Type    Bind   Vis      Ndx Name"
    parts = line.split(None, 7)
    if len(parts) < 7 or not parts[0].endswith(":") or not parts[0][:-1].isdigit():
        return None
    typ, bind, vis = parts[3], parts[4], parts[5]
    rest = parts[6] if len(parts) == 7 else f"{parts[6]} {parts[7]}"
    if rest.startswith("["):  # an extra st_other field ("[VARIANT_PCS]"): after Vis, before Ndx
        rest = rest.split("]", 1)[1].lstrip()
    ndx, _, raw = rest.partition(" ")
    raw = raw.strip()
    if raw.endswith(")") and " (" in raw:  # ".dynsym": "name@VER (2)", the version index
        raw = raw[:raw.rindex(" (")]
    name, version, default = _split_version(raw)
    return Symbol(name, version, default, bind, vis, typ, ndx, dynamic)


def _check_symbol(sym: Symbol, where: str, sections: int | None) -> None:
    if sym.bind not in BINDS or sym.vis not in VISIBILITIES or sym.type not in TYPES:
        raise InputError(where, f"damaged symbol table: binding {sym.bind!r}, visibility {sym.vis!r}, "
                                f"type {sym.type!r}")
    if sym.section not in ("UND", "ABS", "COM") and not (
            sym.section.isdigit() and (sections is None or int(sym.section) < sections)):
        raise InputError(where, f"damaged symbol table: section index {sym.section!r}")
    if bad_name(sym.name) or (sym.version is not None and bad_name(sym.version)):
        raise InputError(where, f"damaged symbol table: the name {ascii(sym.versioned_name)[1:-1]}")


def parse_readelf(text: str, path: str, layout: ElfLayout | None = None) -> SymbolTable:
    """A :class:`SymbolTable` from ``readelf -W -d -s`` (or ``--dyn-syms``) output. With the file's
    ``layout``, readelf must have printed every entry of the dynamic section and of each symbol
    table the layout has; each symbol's fields and every name are checked."""
    soname, needed, table = None, [], None
    dyn: dict[tuple[str, str | None, bool], Symbol] = {}
    local: list[Symbol] = []
    dyn_names: dict[tuple[str, bool], list[tuple[str, str | None, bool]]] = {}
    declared: dict[str, int] = {}  # table -> entries readelf announces
    rows: dict[str, int] = {}
    dynamic_entries = None
    sections = len(layout.sections) if layout else None
    for line in text.splitlines():
        if line.startswith("Symbol table '"):
            table = line.split("'")[1]
            if table not in (".dynsym", ".symtab") or table in declared:
                raise InputError(path, f"damaged ELF file: a symbol table {ascii(table)}")
            declared[table] = int(line.split(" contains ")[1].split()[0]) if " contains " in line else -1
            rows[table] = 0
            continue
        if table is None:
            if line.startswith("Dynamic section at offset") and " contains " in line:
                dynamic_entries = int(line.split(" contains ")[1].split()[0])
            if "(NEEDED)" in line or "(SONAME)" in line:
                value = line[line.find("[") + 1:line.rfind("]")]
                if bad_name(value) or not value:
                    raise InputError(path, f"damaged dynamic section: the library name {ascii(value)[1:-1]}")
                if "(NEEDED)" in line:
                    needed.append(value)
                else:
                    soname = value
            continue
        sym = _symbol(line, table == ".dynsym")
        if sym is None:
            continue
        rows[table] += 1
        _check_symbol(sym, path, sections)
        if not sym.name and sym.section == "UND":
            continue
        key = (sym.name, sym.version, sym.defined)
        if table == ".dynsym":
            dyn.setdefault(key, sym)
            dyn_names.setdefault((sym.name, sym.defined), []).append(key)
        elif key in dyn:
            continue  # the same symbol, already known from .dynsym
        elif sym.version is None and (sym.name, sym.defined) in dyn_names:
            continue  # .symtab without the version suffix of a .dynsym entry
        else:
            local.append(sym)
    if layout is not None:
        want = {".dynsym": layout.entries(layout.dynsym)}
        if layout.symtab is not None and ".symtab" in declared:
            want[".symtab"] = layout.entries(layout.symtab)
        for name, count in want.items():
            if not declared.get(name) == rows.get(name) == count:
                raise InputError(path, f"damaged ELF file: {name} has {count} entries, readelf "
                                       f"announced {declared.get(name)} and printed {rows.get(name, 0)}")
        if dynamic_entries != layout.dynamic_entries or len(needed) != layout.needed:
            raise InputError(path, f"damaged ELF file: .dynamic has {layout.dynamic_entries} entries and "
                                   f"{layout.needed} DT_NEEDED, readelf read {dynamic_entries} and {len(needed)}")
    seen_symtab = ".symtab" in declared
    return SymbolTable(path, soname, tuple(needed), tuple(dyn.values()) + tuple(local), seen_symtab,
                       seen_symtab)


def _read_elf(fd: int, size: int, where: str, full: bool) -> SymbolTable:
    layout = check_elf(fd, size, where)
    table = parse_readelf(_run_readelf(fd, where, full), where, layout)
    if full and layout.symtab is not None and not table.has_symtab:
        raise InputError(where, "damaged ELF file: readelf did not print .symtab")
    if full and not table.has_symtab:  # stripped: .dynsym is the full table
        return SymbolTable(table.path, table.soname, table.needed, table.symbols, False, True)
    return table


# --- dumps ------------------------------------------------------------------------------------

def dumps(table: SymbolTable) -> bytes:
    head = {"format": DUMP_FORMAT, "version": DUMP_VERSION, "path": table.path, "soname": table.soname,
            "needed": list(table.needed), "has_symtab": table.has_symtab, "full": table.full,
            "count": len(table.symbols)}
    buf = io.StringIO()
    buf.write(json.dumps(head, sort_keys=True) + "\n")
    for s in table.symbols:
        buf.write(json.dumps(s.to_row(), separators=(",", ":")) + "\n")
    return gzip.compress(buf.getvalue().encode("utf-8"), compresslevel=6, mtime=0)


def save(table: SymbolTable, out: str | os.PathLike) -> Path:
    """Write ``table`` as a dump (temp + rename); a path that cannot be written is bad input."""
    out = Path(out)
    try:
        write_atomic(out, dumps(table))
    except OSError as e:
        raise InputError(out, f"cannot write the dump: {e.strerror or e}") from None
    return out


def _row(row, where: str) -> Symbol:
    if not (isinstance(row, list) and len(row) == 8):
        raise InputError(where, "not a symbol row [name, version, default, bind, vis, type, section, dynamic]")
    name, version, default, bind, vis, typ, section, dynamic = row
    if not (isinstance(name, str) and (version is None or isinstance(version, str))
            and isinstance(default, bool) and isinstance(dynamic, bool)
            and all(isinstance(x, str) and x for x in (bind, vis, typ, section))):
        raise InputError(where, "a symbol row with a field of the wrong type")
    sym = Symbol(name, version, default, bind, vis, typ, section, dynamic)
    _check_symbol(sym, where, None)
    return sym


def _lines(stream: io.BufferedIOBase, where: str) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a dump as it is decompressed: no line longer than
    MAX_DUMP_LINE, no more than MAX_DUMP_BYTES in all."""
    total = 0
    for no in range(1, MAX_SYMBOLS + 3):
        try:
            line = stream.readline(MAX_DUMP_LINE + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(where, f"not a readable gzip file ({e})") from None
        if not line:
            return
        total += len(line)
        if len(line) > MAX_DUMP_LINE or not line.endswith(b"\n"):
            raise InputError(f"{where}:{no}", f"not a whole line of at most {MAX_DUMP_LINE} bytes")
        if total > MAX_DUMP_BYTES:
            raise InputError(where, f"dump larger than {MAX_DUMP_BYTES} bytes uncompressed")
        yield no, line
    raise InputError(where, f"more than {MAX_SYMBOLS} symbols")


def _header(no: int, line: bytes, where: str) -> dict:
    try:
        head = load_json_text(line, f"{where}:{no}")
    except InputError:
        head = None
    if not isinstance(head, dict) or head.get("format") != DUMP_FORMAT:
        raise InputError(where, f"not a {DUMP_FORMAT} symbol dump (no header line)")
    if head.get("version") != DUMP_VERSION:
        raise InputError(where, f"dump version {ascii(head.get('version'))[:40]}; this reader reads {DUMP_VERSION}")
    needed, soname, count = head.get("needed"), head.get("soname"), head.get("count")
    if not (isinstance(head.get("path"), str) and head["path"].isprintable() and isinstance(needed, list)
            and all(isinstance(n, str) and n and not bad_name(n) for n in needed)
            and (soname is None or isinstance(soname, str) and soname and not bad_name(soname))
            and isinstance(head.get("has_symtab"), bool) and isinstance(head.get("full"), bool)
            and type(count) is int and 0 <= count <= MAX_SYMBOLS):
        raise InputError(where, "dump header: path, soname, needed, has_symtab, full or count malformed")
    return head


def read_dump(stream: io.BufferedIOBase, where: str) -> SymbolTable:
    """The table in the gzipped dump ``stream``, read line by line: the header first, each row
    checked as it comes, never more rows than the header's count."""
    lines = _lines(gzip.GzipFile(fileobj=stream, mode="rb"), where)
    first = next(lines, None)
    if first is None:
        raise InputError(where, f"not a {DUMP_FORMAT} symbol dump (empty)")
    head = _header(*first, where)
    symbols = []
    for no, line in lines:
        if len(symbols) == head["count"]:
            raise InputError(f"{where}:{no}", f"more symbols than the header's {head['count']}")
        symbols.append(_row(load_json_text(line, f"{where}:{no}"), f"{where}:{no}"))
    if head["count"] != len(symbols):
        raise InputError(where, f"dump truncated: header says {head['count']} symbols, found {len(symbols)}")
    return SymbolTable(head["path"], head["soname"], tuple(head["needed"]), tuple(symbols),
                       head["has_symtab"], head["full"])


def loads(data: bytes, where: str) -> SymbolTable:
    return read_dump(io.BytesIO(data), where)


def load(path: str | os.PathLike) -> SymbolTable:
    """The dump ``path`` (a regular file)."""
    fd, st = open_regular(path, what="symbol dump")
    with os.fdopen(fd, "rb") as fh:
        return _load_open(fh, st.st_size, os.fspath(path))


def _load_open(fh: io.BufferedIOBase, size: int, where: str) -> SymbolTable:
    if size > MAX_DUMP_BYTES:
        raise InputError(where, f"dump larger than {MAX_DUMP_BYTES} bytes")
    return read_dump(fh, where)


# --- either ------------------------------------------------------------------------------------

def read_table(path: str | os.PathLike, full: bool = True) -> SymbolTable:
    """The symbol table of ``path``: an ELF shared library (read with readelf) or a dump; a file
    that is neither, or a damaged one, is bad input naming it."""
    where = os.fspath(path)
    fd, st = open_regular(path, what="library or symbol dump")
    with os.fdopen(fd, "rb") as fh:
        magic = os.pread(fd, 4, 0)
        if magic.startswith(GZIP_MAGIC):
            return _load_open(fh, st.st_size, where)
        if magic != ELF_MAGIC:
            raise InputError(where, "neither an ELF file nor a tdev-elfsyms dump")
        return _read_elf(fd, st.st_size, where, full)


def read_tables(paths: Iterable[str | os.PathLike], full: bool = True, jobs: int = 2,
                progress=None) -> list[SymbolTable]:
    """``read_table`` for each path, ``jobs`` readelf processes at a time, in the given order;
    ``progress(done, total)`` after each."""
    paths = list(paths)
    out: list[SymbolTable | None] = [None] * len(paths)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(read_table, p, full): i for i, p in enumerate(paths)}
        for done, fut in enumerate(as_completed(futures), start=1):
            out[futures[fut]] = fut.result()
            if progress is not None:
                progress(done, len(paths))
    return [t for t in out if t is not None]
