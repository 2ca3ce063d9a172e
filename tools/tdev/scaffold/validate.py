"""Checks for every value that reaches generated code: identifiers, C types, header paths, ...

Each check returns the value (normalised where that helps) or raises ``ValueError`` with a short
reason; the caller adds the file and key. The rules are deliberately narrow: a value that is not
plainly an identifier, a C type made of identifiers and ``*``, a relative header path, ... is
refused, so no profile or ``--name`` can put code into the generated package.
"""
from __future__ import annotations

import keyword
import re
import sys
from typing import Any, Callable

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
ENV_VAR = re.compile(r"[A-Z_][A-Z0-9_]*\Z")
PACKAGE = re.compile(r"[a-z_][a-z0-9_]*\Z")
DEVICE = re.compile(r"[a-z][a-z_]*\Z")  # torch parses device names as letters and '_' only
HEADER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*\.(h|hh|hpp|hxx)\Z")
LIBRARY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")
ABS_PATH = re.compile(r"/[A-Za-z0-9_.+/-]*\Z")
REL_DIR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*(/[A-Za-z0-9_][A-Za-z0-9_.+-]*)*\Z")
OP_NAME = re.compile(r"[a-z_][a-z0-9_]*(\.[A-Za-z0-9_]+)?\Z")
INT = re.compile(r"-?[0-9]+\Z")
TEXT_FORBIDDEN = ("*/", '"', "\\", "{{", "{%", "{#", "<!--", "`")

CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq
nullptr operator or or_eq private protected public register reinterpret_cast requires return
short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while
xor xor_eq""".split())
# words that may appear inside a C type (besides the type's own identifier)
C_TYPE_WORDS = frozenset("const volatile unsigned signed long short int char float double void "
                         "bool struct enum".split())
# c10::DeviceType names: torch refuses them (or parses them as its own devices)
TORCH_DEVICE_TYPES = frozenset("cpu cuda mkldnn opengl opencl ideep hip fpga maia xla vulkan "
                               "metal xpu mps meta hpu ve lazy ipu mtia privateuseone".split())


def identifier(v: object) -> str:
    """A C/C++ identifier that is not a keyword (used as a name in generated C++)."""
    s = _str(v)
    if not IDENT.match(s):
        raise ValueError(f"{s!r} is not a C identifier")
    if s in CPP_KEYWORDS:
        raise ValueError(f"{s!r} is a C++ keyword")
    return s


def package_name(v: object) -> str:
    s = _str(v)
    if not PACKAGE.match(s):
        raise ValueError(f"{s!r} is not a Python package name (lowercase letters, digits, '_')")
    if keyword.iskeyword(s) or s in CPP_KEYWORDS:
        raise ValueError(f"{s!r} is a Python or C++ keyword")
    if s == "torch" or s in sys.stdlib_module_names:
        raise ValueError(f"{s!r} would shadow an existing module")
    return s


def device_name(v: object) -> str:
    s = _str(v)
    if not DEVICE.match(s):
        raise ValueError(f"{s!r} is not a device name torch accepts (lowercase letters and '_')")
    if s in TORCH_DEVICE_TYPES:
        raise ValueError(f"{s!r} is one of torch's own device types")
    return s


def _matching(pattern: re.Pattern, what: str, plain_path: bool = False):
    """A check that the value matches ``pattern`` (and, for paths, has no '..' part)."""
    def check(v: object) -> str:
        s = _str(v)
        if not pattern.match(s) or (plain_path and ".." in s.split("/")):
            raise ValueError(f"{s!r} is not {what}")
        return s
    return check


env_var = _matching(ENV_VAR, "an environment variable name (A-Z, 0-9, '_')")
header_path = _matching(HEADER, "a relative header path (like mcr/mc_runtime.h)", True)
library_name = _matching(LIBRARY, "a library name (like mcruntime)")
abs_path = _matching(ABS_PATH, "an absolute path of plain names", True)
rel_dir = _matching(REL_DIR, "a relative directory of plain names", True)
op_name = _matching(OP_NAME, "an operator name (like add.Tensor)")


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``check`` for a value that may be null."""
    return lambda x: None if x is None else check(x)


def in_place_or_functional(v: object) -> str:
    """An operator name that is not named as an out= overload (``mm.out``, ``sum.IntList_out``):
    an unboxed route presents its arguments, so a resized out argument would not come back, and
    it returns an in-place kernel's self. Out= overloads named otherwise (``*.grad_input``) are
    refused when the package compiles (Unboxed.cpp: its first argument is not the result)."""
    name = op_name(v)
    overload = name.partition(".")[2]
    if overload == "out" or overload.endswith("_out"):
        raise ValueError(f"{name}: an out= overload's route stays boxed (the kernel may resize its "
                         "out argument); list the functional operator in presized instead")
    return name


def text(v: object, limit: int = 160) -> str:
    """One line of prose for comments, docstrings and the README."""
    s = _str(v)
    if len(s) > limit or not s.isprintable():
        raise ValueError(f"expected one printable line of at most {limit} characters")
    for bad in TEXT_FORBIDDEN:
        if bad in s:
            raise ValueError(f"{bad!r} is not allowed in text that goes into generated files")
    return s


def integer(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, str) and INT.match(v):
            return int(v)
        raise ValueError(f"expected an integer, got {v!r}")
    return v


def c_type(v: object) -> str:
    """A C type of identifiers and '*' (``const void*``, ``struct CUstream_st*``,
    ``unsigned int``), normalised to single spaces with the stars attached."""
    ctype, name = _c_decl(_str(v), allow_name=False)
    return ctype


def c_param(v: str) -> tuple[str, str | None]:
    """A parameter of a declared function: a C type and an optional name."""
    return _c_decl(v, allow_name=True)


def _c_decl(s: str, allow_name: bool) -> tuple[str, str | None]:
    tokens = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|\*|\S", s)
    if not tokens:
        raise ValueError("empty type")
    for t in tokens:
        if t != "*" and not IDENT.match(t):
            raise ValueError(f"{s!r} is not a C type (only identifiers and '*' are allowed)")
    name = None
    if allow_name and len(tokens) >= 2 and tokens[-1] != "*" and tokens[-1] not in C_TYPE_WORDS \
            and tokens[-2] not in ("struct", "enum") and _has_base(tokens[:-1]):
        name = tokens.pop()
    if not _has_base(tokens):
        raise ValueError(f"{s!r} is not a C type")
    words: list[str] = []
    stars = ""
    for i, t in enumerate(tokens):
        if t == "*":
            stars += "*"
        elif stars and t != "const":
            raise ValueError(f"{s!r}: unexpected {t!r} after '*'")
        elif stars:
            stars += " const"
        else:
            if t in CPP_KEYWORDS and t not in C_TYPE_WORDS:
                raise ValueError(f"{s!r}: keyword {t!r} in a type")
            if i > 0 and tokens[i - 1] in ("struct", "enum") and t in C_TYPE_WORDS:
                raise ValueError(f"{s!r}: {tokens[i - 1]} needs a name")
            words.append(t)
    if words[-1] in ("struct", "enum", "const"):
        raise ValueError(f"{s!r} is not a complete C type")
    return " ".join(words) + stars, name


def _has_base(tokens: list[str]) -> bool:
    """Whether the tokens before any '*' name a type (not only qualifiers)."""
    base = [t for t in tokens if t != "*"]
    return any(t not in ("const", "volatile", "struct", "enum") for t in base)


def _str(v: object) -> str:
    if not isinstance(v, str):
        raise ValueError(f"expected a string, got {type(v).__name__} {v!r}")
    return v
