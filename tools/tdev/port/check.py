"""``tdev port --check --out DIR``: a syntax check of a ported tree without the vendor's SDK.

No vendor SDK is needed or used: the runtime headers the checked units include are written
from ``check.yaml`` (beside this module), a part of the CUDA runtime API in CUDA's names, ported
by the tree's own port profile (names and header names, as the tree's files were). ``c++ -fsyntax-only`` then
compiles the units listed there (a sample, not the whole tree) against those headers, the ported
tree's own headers and the installed torch's headers. A pass means the ported units are
consistent with the runtime API as the profile maps it; it says nothing of the vendor's SDK.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from basekit.config import load_document
from basekit.errors import InputError

from .manifest import MANIFEST_NAME, load
from .profile import load_named
from .rewrite import Porter

CHECK_FILE = Path(__file__).resolve().parent / "check.yaml"
UNIT_TIMEOUT_S = 600


@dataclass(frozen=True)
class _CheckFile:
    units: tuple[str, ...]
    roots: tuple[str, ...]
    headers: Mapping[str, str]
    generated: Mapping[str, str] = field(default_factory=dict)


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

    @property
    def ok(self) -> bool:
        return bool(self.units) and all(u.ok for u in self.units)

    def describe(self) -> str:
        passed = sum(u.ok for u in self.units)
        return (f"syntax check against the CUDA runtime declarations of {CHECK_FILE.name} ported by "
                f"the {self.profile} profile ({', '.join(self.headers)}), NOT the {self.profile} "
                f"SDK: {passed}/{len(self.units)} units OK")

    def to_json(self) -> dict:
        return {"tree": self.tree, "profile": self.profile, "ok": self.ok, "against": "declared",
                "headers": list(self.headers), "units": [vars(u) for u in self.units],
                "absent": list(self.absent)}


def check_tree(tree: Path, jobs: int = 2, env: Mapping[str, str] | None = None) -> PortCheck:
    env = dict(os.environ if env is None else env)
    doc, _, _ = load(tree)
    where = str(tree / MANIFEST_NAME)
    recorded = doc.get("profile") or {}
    profile = load_named(str(recorded.get("name")))
    if recorded.get("sha256") != profile.digest:
        raise InputError(where, f"ported with another version of the {profile.name} profile than "
                         f"{profile.path}: port it again before checking")
    spec = load_document(CHECK_FILE, what="port check file").read(_CheckFile)
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
        written = []
        for name, text in spec.headers.items():
            rule = porter.headers.get(name)
            target = rule.target if rule else name
            _write(include / target, _port(porter, text, name))
            written.append(target)
        roots = []
        for root in spec.roots:
            new = profile.rename(root)
            roots += [tree / r for r in dict.fromkeys((new, root)) if (tree / r).is_dir()]
            for path, text in spec.generated.items():
                if path.startswith(root + "/"):
                    _write(gen / profile.rename(path)[len(new) + 1:], _port(porter, text, path))
        flags = ["-std=c++17", "-fsyntax-only",
                 *[f"-I{p}" for p in (include, gen, *roots, *_torch_includes())]]

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
                     tuple(u for u in spec.units if u not in ported))


def _port(porter: Porter, text: str, rel: str) -> str:
    return porter.port(text, rel, lambda header, at, quoted: None)[0]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _torch_includes() -> list[Path]:
    spec = importlib.util.find_spec("torch")  # without importing torch (seconds)
    if spec is None or not spec.submodule_search_locations:
        raise InputError("--check", "torch is not installed: the check needs its headers")
    root = Path(list(spec.submodule_search_locations)[0]) / "include"
    return [root, root / "torch" / "csrc" / "api" / "include"]
