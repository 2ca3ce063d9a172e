"""The structure of an ELF file, checked before its symbol tables are read.

``readelf`` reads a truncated or damaged file as far as it can: it prints ``Error:`` lines and
still exits 0, and what it does print can be tables that are empty or come from the wrong place.
:func:`check_elf` checks, with the file's own descriptor and a few hundred bytes read, what the
symbol reader relies on, so that a damaged library is bad input naming the file:

* the ELF header: magic, class, byte order, version, type (a shared library or an executable),
  header and entry sizes;
* the program and section header tables, and every section with contents, lie inside the file
  (a truncated file fails here: the section header table is at its end);
* one ``.dynsym``, at most one ``.symtab``, each of whole entries and linked to a string table;
  one ``.dynamic`` ending in ``DT_NULL``, where ``PT_DYNAMIC`` says it is;
* the addresses ``.dynamic`` gives (string table, symbol table, version tables) map, through the
  loadable segments, to exactly the sections of those kinds; its names lie in its string table.

Pure: a descriptor in, an :class:`ElfLayout` (the counts the reader checks readelf against) out.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from basekit.errors import InputError

SHT_NOBITS, SHT_STRTAB, SHT_SYMTAB, SHT_DYNSYM, SHT_DYNAMIC = 8, 3, 2, 11, 6
SHT_VERSYM, SHT_VERNEED, SHT_VERDEF = 0x6FFFFFFF, 0x6FFFFFFE, 0x6FFFFFFD
PT_LOAD, PT_DYNAMIC = 1, 2
MAX_SECTIONS = 1 << 20  # a linked library has a few dozen
DT_NULL, DT_NEEDED, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SYMENT, DT_SONAME = 0, 1, 5, 6, 10, 11, 14
DT_VERSYM, DT_VERDEF, DT_VERNEED = 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE
DT_VERDEFNUM, DT_VERNEEDNUM = 0x6FFFFFFD, 0x6FFFFFFF
# the section type each address in .dynamic must point at (DT_STRTAB: .dynamic's own string table)
DT_SECTION = {DT_SYMTAB: SHT_DYNSYM, DT_VERSYM: SHT_VERSYM, DT_VERDEF: SHT_VERDEF,
              DT_VERNEED: SHT_VERNEED}


@dataclass(frozen=True)
class Format:
    """The record layouts of one ELF class and byte order."""

    header: str
    section: str
    segment: str
    dyn: str
    sym_size: int

    def size(self, what: str) -> int:
        return struct.calcsize(getattr(self, what))


FORMATS = {
    (2, 1): Format("<16sHHIQQQIHHHHHH", "<IIQQQQIIQQ", "<IIQQQQQQ", "<qQ", 24),
    (2, 2): Format(">16sHHIQQQIHHHHHH", ">IIQQQQIIQQ", ">IIQQQQQQ", ">qQ", 24),
    (1, 1): Format("<16sHHIIIIIHHHHHH", "<IIIIIIIIII", "<IIIIIIII", "<iI", 16),
    (1, 2): Format(">16sHHIIIIIHHHHHH", ">IIIIIIIIII", ">IIIIIIII", ">iI", 16),
}


@dataclass(frozen=True)
class Section:
    index: int
    name: str
    type: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class ElfLayout:
    sections: tuple[Section, ...]
    dynsym: Section
    symtab: Section | None
    dynamic_entries: int  # entries of .dynamic up to and including DT_NULL
    needed: int  # DT_NEEDED entries

    def entries(self, table: Section) -> int:
        return table.size // table.entsize


class _File:
    def __init__(self, fd: int, size: int, where: str) -> None:
        self.fd, self.size, self.where = fd, size, where

    def bad(self, problem: str) -> InputError:
        return InputError(self.where, problem)

    def read(self, offset: int, length: int, what: str) -> bytes:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise self.bad(f"truncated or damaged ELF file: {what} (offset {offset}, {length} bytes) "
                           f"ends past the end of the file ({self.size} bytes)")
        data = os.pread(self.fd, length, offset)
        if len(data) != length:
            raise self.bad(f"truncated ELF file: {what} could not be read whole")
        return data


def _header(f: _File) -> tuple[Format, tuple]:
    ident = f.read(0, 16, "the ELF identification") if f.size >= 16 else b""
    if ident[:4] != b"\x7fELF":
        raise f.bad("not an ELF file (no ELF magic)")
    fmt = FORMATS.get((ident[4], ident[5]))
    if fmt is None:
        raise f.bad(f"damaged ELF header: class {ident[4]}, byte order {ident[5]}")
    if ident[6] != 1:
        raise f.bad(f"damaged ELF header: version {ident[6]}")
    head = struct.unpack(fmt.header, f.read(0, fmt.size("header"), "the ELF header"))
    _, etype, _, version, _, phoff, shoff, _, ehsize, phentsize, phnum, shentsize, shnum, shstrndx = head
    if etype not in (2, 3):
        raise f.bad(f"not a shared library or executable (ELF type {etype})")
    if version != 1 or ehsize != fmt.size("header"):
        raise f.bad(f"damaged ELF header: version {version}, header size {ehsize}")
    if phnum == 0 or phentsize != fmt.size("segment"):
        raise f.bad(f"damaged ELF header: {phnum} program headers of {phentsize} bytes")
    if shoff == 0:
        raise f.bad("no section headers: the symbol tables cannot be found")
    if shentsize != fmt.size("section"):
        raise f.bad(f"damaged ELF header: section headers of {shentsize} bytes")
    return fmt, (phoff, phnum, shoff, shnum, shstrndx)


def _sections(f: _File, fmt: Format, shoff: int, shnum: int, shstrndx: int) -> list[Section]:
    entry = fmt.size("section")
    first = struct.unpack(fmt.section, f.read(shoff, entry, "the section header table"))
    if shnum == 0:  # more than 0xff00 sections: the count is in section 0
        shnum = first[5]
    if shstrndx == 0xFFFF:
        shstrndx = first[6]
    if not 0 < shnum <= min(f.size // entry, MAX_SECTIONS) or not 0 < shstrndx < shnum:
        raise f.bad(f"damaged ELF header: {shnum} sections, names in section {shstrndx}")
    table = f.read(shoff, shnum * entry, "the section header table")
    raw = [struct.unpack_from(fmt.section, table, i * entry) for i in range(shnum)]
    for i, (_, typ, _, _, offset, size, *_rest) in enumerate(raw):
        if typ not in (0, SHT_NOBITS) and offset + size > f.size:
            raise f.bad(f"truncated or damaged ELF file: section {i} (offset {offset}, {size} bytes) "
                        f"ends past the end of the file ({f.size} bytes)")
    names_hdr = raw[shstrndx]
    if names_hdr[1] != SHT_STRTAB:
        raise f.bad(f"damaged ELF file: section {shstrndx} (section names) is not a string table")
    names = f.read(names_hdr[4], names_hdr[5], "the section names")
    out = []
    for i, (name, typ, _, addr, offset, size, link, info, _, entsize) in enumerate(raw):
        end = names.find(b"\0", name)
        if end < 0:
            raise f.bad(f"damaged ELF file: the name of section {i} lies outside the section names")
        label = names[name:end].decode("ascii", "replace")
        out.append(Section(i, label, typ, addr, offset, size, link, info, entsize))
    return out


def _one(f: _File, sections: list[Section], typ: int, name: str, required: bool) -> Section | None:
    found = [s for s in sections if s.type == typ]
    if len(found) > 1 or (required and not found):
        raise f.bad(f"damaged ELF file: {len(found)} sections of {name}'s type (one expected)")
    if found and found[0].name != name:
        raise f.bad(f"damaged ELF file: section {found[0].index} has {name}'s type but is named "
                    f"{found[0].name!r}")
    return found[0] if found else None


def _linked_strings(f: _File, sections: list[Section], s: Section) -> Section:
    if not 0 < s.link < len(sections) or sections[s.link].type != SHT_STRTAB:
        raise f.bad(f"damaged ELF file: {s.name} is not linked to a string table")
    return sections[s.link]


def _symbols(f: _File, fmt: Format, sections: list[Section], s: Section) -> None:
    if s.entsize != fmt.sym_size or s.size % fmt.sym_size or s.size == 0:
        raise f.bad(f"damaged ELF file: {s.name} of {s.size} bytes in entries of {s.entsize}")
    _linked_strings(f, sections, s)


def _dynamic(f: _File, fmt: Format, sections: list[Section], dyn: Section,
             phoff: int, phnum: int) -> tuple[int, int]:
    """The entries of ``.dynamic`` up to DT_NULL, and its DT_NEEDED count; every address it
    gives maps to the section it should."""
    step = fmt.size("segment")
    segments = [struct.unpack_from(fmt.segment, f.read(phoff, phnum * step, "the program headers"), i * step)
                for i in range(phnum)]
    if fmt.sym_size == 24:  # ELF64: type, flags, offset, vaddr, paddr, filesz, ...
        segments = [(p[0], p[2], p[3], p[5]) for p in segments]
    else:  # ELF32: type, offset, vaddr, paddr, filesz, ...
        segments = [(p[0], p[1], p[2], p[4]) for p in segments]
    for typ, offset, _, filesz in segments:
        if typ in (PT_LOAD, PT_DYNAMIC) and offset + filesz > f.size:
            raise f.bad(f"truncated or damaged ELF file: a segment (offset {offset}, {filesz} bytes) "
                        f"ends past the end of the file ({f.size} bytes)")
    if not any(typ == PT_DYNAMIC and offset == dyn.offset for typ, offset, _, _ in segments):
        raise f.bad("damaged ELF file: no PT_DYNAMIC segment where .dynamic is")
    entry = fmt.size("dyn")
    if dyn.entsize != entry or dyn.size % entry or dyn.size == 0:
        raise f.bad(f"damaged ELF file: .dynamic of {dyn.size} bytes in entries of {dyn.entsize}")
    data = f.read(dyn.offset, dyn.size, ".dynamic")
    strings = _linked_strings(f, sections, dyn)
    tags: dict[int, int] = {}
    names: list[int] = []
    count = needed = 0
    for tag, value in struct.iter_unpack(fmt.dyn, data):
        count += 1
        if tag == DT_NULL:
            break
        if tag in (DT_NEEDED, DT_SONAME):
            names.append(value)
            needed += tag == DT_NEEDED
        tags.setdefault(tag, value)
    else:
        raise f.bad("damaged ELF file: .dynamic does not end in DT_NULL")

    def offset_of(vaddr: int) -> int | None:
        for typ, offset, start, filesz in segments:
            if typ == PT_LOAD and start <= vaddr < start + filesz:
                return offset + vaddr - start
        return None

    for tag, typ in ((DT_STRTAB, None), (DT_SYMTAB, SHT_DYNSYM), *((t, k) for t, k in DT_SECTION.items())):
        if tag not in tags and (typ is None or any(s.type == typ for s in sections)):
            raise f.bad(f"damaged ELF file: .dynamic has no tag {tag:#x} for its section")
    for tag, typ in ((DT_VERDEFNUM, SHT_VERDEF), (DT_VERNEEDNUM, SHT_VERNEED)):
        have = [s.info for s in sections if s.type == typ]
        if have and tags.get(tag) != have[0]:
            raise f.bad(f"damaged ELF file: .dynamic's count {tag:#x} is not its section's")
    by_offset = {s.offset: s for s in sections if s.type not in (0, SHT_NOBITS) and s.size}
    wanted = {DT_STRTAB: strings.type, **DT_SECTION}
    for tag, typ in wanted.items():
        if tag in tags:
            hit = by_offset.get(offset_of(tags[tag]))
            if hit is None or hit.type != typ or (tag == DT_STRTAB and hit is not strings):
                raise f.bad(f"damaged ELF file: .dynamic tag {tag:#x} points at {tags[tag]:#x}, "
                            f"which is not its section")
    if tags.get(DT_STRSZ, strings.size) != strings.size or tags.get(DT_SYMENT, fmt.sym_size) != fmt.sym_size:
        raise f.bad("damaged ELF file: .dynamic's string table size or symbol entry size is wrong")
    if any(v >= strings.size for v in names):
        raise f.bad("damaged ELF file: a DT_NEEDED or DT_SONAME name lies outside .dynstr")
    return count, needed


def check_elf(fd: int, size: int, where: str) -> ElfLayout:
    """The layout of the ELF file open as ``fd`` (``size`` bytes), or bad input naming ``where``."""
    f = _File(fd, size, where)
    fmt, (phoff, phnum, shoff, shnum, shstrndx) = _header(f)
    sections = _sections(f, fmt, shoff, shnum, shstrndx)
    dynsym = _one(f, sections, SHT_DYNSYM, ".dynsym", required=True)
    symtab = _one(f, sections, SHT_SYMTAB, ".symtab", required=False)
    for table in (dynsym, symtab):
        if table is not None:
            _symbols(f, fmt, sections, table)
    versym = _one(f, sections, SHT_VERSYM, ".gnu.version", required=False)
    if versym is not None and (versym.entsize != 2 or versym.size != 2 * (dynsym.size // dynsym.entsize)
                               or versym.link != dynsym.index):
        raise f.bad("damaged ELF file: .gnu.version does not match .dynsym")
    dyn = _one(f, sections, SHT_DYNAMIC, ".dynamic", required=True)
    entries, needed = _dynamic(f, fmt, sections, dyn, phoff, phnum)
    return ElfLayout(tuple(sections), dynsym, symtab, entries, needed)
