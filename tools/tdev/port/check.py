"""``tdev port --check --out DIR``: a syntax check of a ported tree without the vendor's SDK.

No vendor SDK is needed or used: the runtime headers the checked units include are written
from ``check.yaml`` (beside this module), a part of the CUDA runtime API in CUDA's names, ported
by the tree's own port profile (names and header names, as the tree's files were). ``c++ -fsyntax-only`` then
compiles the units listed there (a sample, not the whole tree) against those headers, the ported
tree's own headers and the headers of the PyTorch release the extraction was made from
(:func:`torch_headers`). A pass means the ported units are consistent with the runtime API as the
profile maps it; it says nothing of the vendor's SDK.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from basekit.config import load_document
from basekit.docread import BadInput, read_regular
from basekit.errors import InputError

from .manifest import MANIFEST_NAME, load
from .profile import load_named
from .rewrite import Porter

CHECK_FILE = Path(__file__).resolve().parent / "check.yaml"
UNIT_TIMEOUT_S = 600
MAX_VERSION_BYTES = 4096
MAX_CONFIGURED_BYTES = 1 << 20


@dataclass(frozen=True)
class _Configured:
    source: str  # the .h.in, a path in a PyTorch source tree
    values: Mapping[str, str] = field(default_factory=dict)  # a variable not listed is unset


@dataclass(frozen=True)
class _CheckFile:
    units: tuple[str, ...]
    roots: tuple[str, ...]
    headers: Mapping[str, str]
    generated: Mapping[str, str] = field(default_factory=dict)
    configure: Mapping[str, _Configured] = field(default_factory=dict)
    vendor: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class TorchHeaders:
    """PyTorch's own headers for the check: a source tree's or an installed torch's."""
    origin: str  # "source tree DIR" or "installed torch DIR"
    version: str  # as the tree (version.txt) or the installed torch states it
    includes: tuple[Path, ...]
    configure: Mapping[str, _Configured] = field(default_factory=dict)  # written from the tree's .h.in


@dataclass(frozen=True)
class UnitResult:
    source: str  # in the extraction
    path: str  # in the ported tree
    ok: bool
    output: str  # the compiler's diagnostics (empty when clean)


@dataclass(frozen=True)
class PortCheck:
    tree: str
    profile: str
    headers: tuple[str, ...]  # the runtime headers written from the declarations
    units: tuple[UnitResult, ...]
    absent: tuple[str, ...] = ()  # listed units this extraction does not have (another release)
    torch: str = ""  # where PyTorch's headers came from, and their version

    @property
    def ok(self) -> bool:
        return bool(self.units) and all(u.ok for u in self.units)

    def describe(self) -> str:
        passed = sum(u.ok for u in self.units)
        return (f"syntax check against the CUDA runtime declarations of {CHECK_FILE.name} ported by "
                f"the {self.profile} profile ({', '.join(self.headers)}), NOT the {self.profile} "
                f"SDK, with PyTorch's headers of the {self.torch}: {passed}/{len(self.units)} units OK")

    def to_json(self) -> dict:
        return {"tree": self.tree, "profile": self.profile, "ok": self.ok, "against": "declared",
                "headers": list(self.headers), "torch": self.torch,
                "units": [vars(u) for u in self.units], "absent": list(self.absent)}


def check_tree(tree: Path, jobs: int = 2, env: Mapping[str, str] | None = None,
               torch_src: Path | None = None) -> PortCheck:
    """Compile the units of ``check.yaml`` in the ported ``tree``; PyTorch's headers are those of
    ``torch_src`` when given, else chosen by :func:`torch_headers`."""
    env = dict(os.environ if env is None else env)
    doc, _, _ = load(tree)
    where = str(tree / MANIFEST_NAME)
    recorded = doc.get("profile") or {}
    profile = load_named(str(recorded.get("name")))
    if recorded.get("sha256") != profile.digest:
        raise InputError(where, f"ported with another version of the {profile.name} profile than "
                         f"{profile.path}: port it again before checking")
    spec = load_document(CHECK_FILE, what="port check file").read(_CheckFile)
    torch = torch_headers(tree, doc, torch_src, spec.configure)
    cxx = env.get("CXX") or "g++"
    if shutil.which(cxx, path=env.get("PATH")) is None:
        raise InputError("--check", f"{cxx}: C++ compiler not found (set CXX)")
    ported = {f["source"]: f["path"] for f in doc["files"]
              if isinstance(f, dict) and isinstance(f.get("source"), str)}
    present = [u for u in spec.units if u in ported]
    if not present:
        raise InputError(where, f"none of the units of {CHECK_FILE} is in the ported tree")
    porter = Porter.of(profile)
    with tempfile.TemporaryDirectory(prefix="tdev-port-check-") as tmp:
        include, gen = Path(tmp) / "include", Path(tmp) / "generated"
        written: dict[str, str] = {}  # two CUDA headers may be one of the vendor's: both go in it
        for name, text in spec.headers.items():
            rule = porter.headers.get(name)
            target = rule.target if rule else name
            written[target] = (written.get(target, "") + _port(porter, text, name)
                               + spec.vendor.get(profile.name, {}).get(name, ""))
        for target, text in written.items():
            _write(include / target, text)
        roots = []
        for root in spec.roots:
            new = profile.rename(root)
            roots += [tree / r for r in dict.fromkeys((new, root)) if (tree / r).is_dir()]
            for path, text in spec.generated.items():
                if path.startswith(root + "/"):
                    _write(gen / profile.rename(path)[len(new) + 1:], _port(porter, text, path))
        for path, conf in torch.configure.items():
            _write(gen / path, _configured(torch.includes[0] / conf.source, conf.values))
        flags = ["-std=c++17", "-fsyntax-only", "-Wno-deprecated-declarations",
                 *[f"-I{p}" for p in (include, gen, *roots, *torch.includes)]]

        def run(source: str) -> UnitResult:
            path = ported[source]
            try:
                p = subprocess.run([cxx, *flags, str(tree / path)], capture_output=True, text=True,
                                   errors="replace", stdin=subprocess.DEVNULL, timeout=UNIT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                return UnitResult(source, path, False, f"no result in {UNIT_TIMEOUT_S} s")
            return UnitResult(source, path, p.returncode == 0, (p.stdout + p.stderr).strip())

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            units = tuple(pool.map(run, present))
    return PortCheck(str(tree), profile.name, tuple(written), units,
                     tuple(u for u in spec.units if u not in ported),
                     f"{torch.origin} (PyTorch {torch.version})")


def _port(porter: Porter, text: str, rel: str) -> str:
    return porter.port(text, rel, lambda header, at, quoted: None)[0]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def torch_headers(tree: Path, doc: Mapping, torch_src: Path | None,
                  configure: Mapping[str, _Configured]) -> TorchHeaders:
    """The headers of the PyTorch release the ported tree's extraction was made from (the
    ``torch.version`` its manifest records): ``torch_src`` when given (refused unless it is that
    release); else the PyTorch tree the extraction records (``torch_source`` of its MANIFEST.json)
    when it is there and of that release; else the installed torch when it is that release
    (major.minor: a release's version.txt says X.Y.0a0 for every X.Y.z); else one line."""
    where = str(tree / MANIFEST_NAME)
    extraction = doc.get("extraction") if isinstance(doc.get("extraction"), dict) else {}
    recorded = extraction.get("torch") if isinstance(extraction.get("torch"), dict) else {}
    want = recorded.get("version")
    if not isinstance(want, str) or _release(want) is None:
        raise InputError(where, "does not record the PyTorch version of its extraction "
                         "(extraction.torch.version): port it again")
    if torch_src is not None:
        return _source_tree(Path(torch_src), "--torch-src", want, configure)
    recorded_tree = _recorded_tree(tree, extraction)
    why = f"the extraction ({extraction.get('path')}) cannot be read or records no PyTorch tree"
    if recorded_tree is not None:
        try:
            return _source_tree(recorded_tree, "", want, configure)
        except InputError as e:  # moved, or another release since
            why = e.problem
    installed, version = _installed_torch()
    if version is not None and _release(version)[:2] == _release(want)[:2]:
        return TorchHeaders(f"installed torch {installed}", version,
                            (installed, installed / "torch" / "csrc" / "api" / "include"))
    found = f"the installed torch is {version}" if version else "no torch is installed"
    raise InputError(where, f"ported from PyTorch {want}; {found}; {why}: pass --torch-src DIR, "
                     f"a PyTorch {'.'.join(map(str, _release(want)[:2]))} source tree")


def _release(version: str) -> tuple[int, ...] | None:
    """(1, 13, 0) of '1.13.0a0', '2.13.0+cpu'; None when ``version`` is no version."""
    from tdev.standalone.inputs import release

    try:
        return release(version)
    except ValueError:
        return None


def _recorded_tree(tree: Path, extraction: Mapping) -> Path | None:
    """The PyTorch tree the extraction's MANIFEST.json records, if the extraction is there."""
    from tdev.extract.manifest import load_manifest

    rel = extraction.get("path")
    if not isinstance(rel, str) or not rel:
        return None
    try:
        return load_manifest(tree / rel).torch_tree()
    except (BadInput, InputError, OSError):
        return None


def _source_tree(root: Path, where: str, want: str, configure: Mapping[str, _Configured]) -> TorchHeaders:
    where = where or str(root)
    if not (root / "c10" / "CMakeLists.txt").is_file() or not (root / "aten" / "src").is_dir():
        raise InputError(where, f"{root} is not a PyTorch source tree (no c10/CMakeLists.txt or aten/src)")
    from tdev.standalone.inputs import same_release, tree_version

    try:
        version = tree_version(root)
    except BadInput as e:
        raise InputError(where, f"{e.where}: {e.problem}") from None
    if not same_release(version, want):
        raise InputError(where, f"{root} is PyTorch {version[:40]} (its version.txt) but the ported "
                         f"tree's extraction was made from PyTorch {want}: the check needs that release's headers")
    root = root.resolve()
    return TorchHeaders(f"source tree {root}", version,
                        (root, root / "aten" / "src", root / "torch" / "csrc" / "api" / "include"), configure)


def _installed_torch() -> tuple[Path | None, str | None]:
    """The installed torch's include directory and version, read without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None, None
    root = Path(list(spec.submodule_search_locations)[0])
    try:
        text = read_regular(root / "version.py", max_bytes=MAX_VERSION_BYTES * 4,
                            what="torch/version.py").decode("utf-8", "replace")
    except BadInput:
        return None, None
    m = re.search(r"^__version__\s*=\s*['\"]([^'\"\n]{1,64})['\"]", text, re.M)
    return (root / "include", m.group(1)) if m and (root / "include").is_dir() else (None, None)


def _configured(template: Path, values: Mapping[str, str]) -> str:
    """``template`` (a .h.in) as CMake's configure_file writes it: ``#cmakedefine VAR`` and
    ``#cmakedefine01 VAR``, ``${VAR}`` and ``@VAR@``; a variable not in ``values`` is unset."""
    try:
        text = read_regular(template, max_bytes=MAX_CONFIGURED_BYTES, what="a .h.in").decode("utf-8")
    except (BadInput, UnicodeDecodeError) as e:
        raise InputError(template, f"cannot be configured: {e}") from None
    true = lambda var: str(values.get(var, "")).upper() not in _FALSE  # noqa: E731

    def define(m: re.Match) -> str:
        indent, one, var, rest = m.groups()
        if one:
            return f"{indent}#define {var} {int(true(var))}"
        return f"{indent}#define {var}{rest}" if true(var) else f"{indent}/* #undef {var} */"

    text = re.sub(r"^([ \t]*)#[ \t]*cmakedefine(01)?[ \t]+(\w+)([^\n]*)$", define, text, flags=re.M)
    return re.sub(r"\$\{(\w+)\}|@(\w+)@", lambda m: str(values.get(m.group(1) or m.group(2), "")), text)


# CMake's false constants (and the empty string): a variable set to one of them is not defined
_FALSE = {"", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"}
