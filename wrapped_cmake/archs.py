"""``TORCH_CUDA_ARCH_LIST`` -> ``CMAKE_CUDA_ARCHITECTURES``.

Accepts what PyTorch accepts (``torch.utils.cpp_extension``): compute capabilities such as
``8.0``, ``9.0a`` or ``10.0f``, named architectures (``Ampere``, ``Hopper``), ``+PTX`` on an
entry (also embed PTX for it), separated by ``;``, spaces or commas. ``NAME+PTX`` adds PTX
for the newest capability of that name. CMake's own ``native``, ``all`` and ``all-major`` pass
through unchanged (alone).

Each capability becomes ``<NN>-real`` (SASS) and, with ``+PTX``, also ``<NN>-virtual``.
"""
from __future__ import annotations

import re

from basekit.errors import InputError

# the names torch.utils.cpp_extension knows, with the same expansions
NAMED_ARCHS: dict[str, str] = {
    "Kepler+Tesla": "3.7",
    "Kepler": "3.5+PTX",
    "Maxwell+Tegra": "5.3",
    "Maxwell": "5.0;5.2+PTX",
    "Pascal": "6.0;6.1+PTX",
    "Volta+Tegra": "7.2",
    "Volta": "7.0+PTX",
    "Turing": "7.5+PTX",
    "Ampere+Tegra": "8.7",
    "Ampere": "8.0;8.6+PTX",
    "Ada": "8.9+PTX",
    "Hopper": "9.0+PTX",
    "Blackwell+Tegra": "11.0",
    "Blackwell": "10.0;12.0+PTX",
}
CMAKE_SPECIAL = ("native", "all", "all-major")

_CAPABILITY = re.compile(r"^(\d{1,2})\.(\d)([af]?)$")


class ArchError(InputError):
    """An entry that is neither a capability nor a known name; the message says which."""


def parse_arch_list(text: str) -> list[str]:
    """``"Ampere;9.0a+PTX"`` -> ``["80-real", "86-real", "86-virtual", "90a-real",
    "90a-virtual"]`` (sorted by capability, each value once)."""
    entries = [e for e in re.split(r"[;,\s]+", text.strip()) if e]
    if not entries:
        raise ArchError("empty architecture list")
    lowered = [e.lower() for e in entries]
    for special in CMAKE_SPECIAL:
        if special in lowered:
            if len(entries) > 1:
                raise ArchError(f"{special!r} must be the only entry, got {text!r}")
            return [special]
    wanted: dict[tuple[int, int, str], set[str]] = {}
    for entry in entries:
        for cap, ptx in _expand(entry):
            kinds = wanted.setdefault(cap, set())
            kinds.add("real")
            if ptx:
                kinds.add("virtual")
    out = []
    for (major, minor, suffix) in sorted(wanted):
        for kind in ("real", "virtual"):
            if kind in wanted[(major, minor, suffix)]:
                out.append(f"{major}{minor}{suffix}-{kind}")
    return out


def _expand(entry: str) -> list[tuple[tuple[int, int, str], bool]]:
    if entry in NAMED_ARCHS:
        return [x for e in NAMED_ARCHS[entry].split(";") for x in _expand(e)]
    base, plus_ptx = (entry[:-4], True) if entry.upper().endswith("+PTX") else (entry, False)
    if base in NAMED_ARCHS:
        caps = [cap for cap, _ in _expand(base)]
        newest = max(caps)
        return [(cap, ptx or (plus_ptx and cap == newest)) for cap, ptx in _expand(base)]
    m = _CAPABILITY.match(base)
    if not m:
        import difflib  # only on this path: keeps start-up fast
        close = [n for n in NAMED_ARCHS if n.lower() == base.lower()] or \
            difflib.get_close_matches(base, list(NAMED_ARCHS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ArchError(f"unknown architecture {entry!r}{hint}; use a compute capability like "
                        f"8.0 or 9.0a, optionally +PTX, or one of: {', '.join(NAMED_ARCHS)}")
    return [((int(m.group(1)), int(m.group(2)), m.group(3)), plus_ptx)]
