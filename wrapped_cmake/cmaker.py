"""Configure, build, install and clean one CMake project for one backend.

The build directory keeps ``.wrapped-cmake/stamp.json``: the effective definitions, extra
arguments, generator and toolchain fingerprint of the last successful configure. A build
compares it with the current one: equal means no configure at all (a no-op build is one
Ninja call); different means reconfigure, and the result says why. Changes CMake cannot
apply to an existing cache (another compiler or generator, a removed definition) reconfigure
with ``--fresh``.

Failures come back as a :class:`~wrapped_cmake.errors.Failure` in the :class:`RunResult`,
with the first real error lines; the full logs are in ``.wrapped-cmake/*.log``.
"""
from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from basekit.fs import write_atomic

from .builddir import claim, locked, remove as remove_build_dir
from .errors import BuildFailed, Failure, FailureKind, InputError
from .logparse import classify, cmake_error_block, compile_error_lines, host_compiler_in_log
from .presets import link_compile_commands, preset_name, unlink_compile_commands, write_presets
from .profile import Profile, load_profile
from .settings import Settings
from .toolchain import file_identity, resolve_toolchain, torch_cmake_prefix

META_DIR = ".wrapped-cmake"
STAMP_FORMAT = 1
_PROGRESS = re.compile(r"^\[\d+/\d+\] ")
# definitions CMake reads once, when the cache is created: changing them needs --fresh
_FRESH_ONLY = re.compile(r"^CMAKE_(\w+_COMPILER|\w+_HOST_COMPILER|MAKE_PROGRAM|GENERATOR\w*|"
                         r"TOOLCHAIN_FILE)$")
# toolchain entries whose change needs --fresh (a new launcher or torch does not)
_FRESH_TOOLS = re.compile(r"^(cmake|make-program|host-compiler|compiler-\w+)$")


@dataclass
class Step:
    name: str  # configure, build, install, clean
    ran: bool
    reason: str
    seconds: float = 0.0
    command: list[str] = field(default_factory=list)


@dataclass
class RunResult:
    build_dir: Path
    steps: list[Step] = field(default_factory=list)
    failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def raise_for_failure(self) -> "RunResult":
        if self.failure:
            raise BuildFailed(self.failure)
        return self

    def to_dict(self) -> dict:
        return {"ok": self.ok, "build_dir": str(self.build_dir),
                "steps": [vars(s) for s in self.steps], "warnings": self.warnings,
                "failure": self.failure.to_dict() if self.failure else None}


def _exclusive(step):
    """A step that holds the build directory's lock (:func:`~.builddir.locked`) for its whole
    run; the steps it calls (build's configure, install's build) run under the same hold."""
    @functools.wraps(step)
    def run(self: "CMaker", *args, **kwargs):
        if self._held:
            return step(self, *args, **kwargs)
        with locked(self.build_dir, create=step.__name__ != "clean"):
            self._held = True
            try:
                return step(self, *args, **kwargs)
            finally:
                self._held = False
    return run


class CMaker:
    def __init__(self, settings: Settings, profile: Profile | None = None,
                 env: Mapping[str, str] | None = None,
                 echo: Callable[[str], None] | None = None):
        self.settings = settings
        self.env = dict(os.environ if env is None else env)
        self.profile = profile or load_profile(settings.backend, self.env,
                                               where=settings.sources.get("backend", "backend"))
        self.echo = echo
        self.toolchain = resolve_toolchain(settings, self.profile, self.env)
        self.build_dir = settings.build_dir
        self.meta = self.build_dir / META_DIR
        self._definitions: dict[str, str] | None = None
        self._torch_prefix = torch_cmake_prefix() if settings.torch != "none" else None
        self._held = False  # this object holds the build directory's lock

    # --- what a configure would do ---------------------------------------------------------

    def definitions(self) -> dict[str, str]:
        if self._definitions is None:
            self._definitions = self._compute_definitions()
        return dict(self._definitions)

    def _compute_definitions(self) -> dict[str, str]:
        s, p, tc = self.settings, self.profile, self.toolchain
        d: dict[str, str] = dict(p.definitions)
        d["WRAPPED_CMAKE_BACKEND"] = p.name
        d["CMAKE_BUILD_TYPE"] = s.build_type
        d["CMAKE_EXPORT_COMPILE_COMMANDS"] = "ON"
        if p.standard:
            for lang in p.languages:
                if lang in ("CXX", "CUDA", "HIP"):
                    d[f"CMAKE_{lang}_STANDARD"] = str(p.standard)
        for lang, flags in p.flags.items():
            d[f"CMAKE_{lang}_FLAGS"] = " ".join(flags)
        if s.cuda_arch_list and "CUDA" in p.languages:
            d["CMAKE_CUDA_ARCHITECTURES"] = ";".join(s.cuda_architectures)
        if s.install_prefix:
            d["CMAKE_INSTALL_PREFIX"] = str(s.install_prefix)
        d["Python_EXECUTABLE"] = d["Python3_EXECUTABLE"] = sys.executable
        d.update(s.defines)  # the user's definitions win over everything above...
        prefixes = [x for x in s.defines.get("CMAKE_PREFIX_PATH", "").split(";") if x]
        if self._torch_prefix and self._torch_prefix not in prefixes:
            prefixes.append(self._torch_prefix)
        if prefixes:
            d["CMAKE_PREFIX_PATH"] = ";".join(prefixes)
        # ...except the tools: those were resolved (honouring the user's choice) and checked
        for lang, found in tc.compilers.items():
            if found.path:
                d[f"CMAKE_{lang}_COMPILER"] = found.path
        if p.host_compiler and tc.host_compiler and tc.host_compiler.path:
            d[p.host_compiler.variable] = tc.host_compiler.path
        if tc.make_program:
            d["CMAKE_MAKE_PROGRAM"] = tc.make_program
        if tc.launcher:
            for lang in p.languages:
                d[f"CMAKE_{lang}_COMPILER_LAUNCHER"] = tc.launcher
        return d

    def configure_command(self, fresh: bool = False) -> list[str]:
        s = self.settings
        cmd = [self.toolchain.cmake or "cmake", "-S", str(s.source_dir), "-B",
               str(self.build_dir), "-G", s.generator, "--no-warn-unused-cli"]
        if fresh:
            cmd.append("--fresh")
        cmd += [f"-D{k}={v}" for k, v in self.definitions().items()]
        return cmd + list(s.cmake_args)

    def build_command(self, targets: list[str] | None = None) -> list[str]:
        s = self.settings
        targets = list(s.targets if targets is None else targets)
        if s.generator == "Ninja" and self.toolchain.make_program:
            cmd = [self.toolchain.make_program, "-C", str(self.build_dir)]
            if s.jobs:
                cmd += ["-j", str(s.jobs)]
            if s.verbose:
                cmd.append("-v")
            return cmd + targets + list(s.build_args)
        cmd = [self.toolchain.cmake or "cmake", "--build", str(self.build_dir)]
        if s.jobs:
            cmd += ["--parallel", str(s.jobs)]
        for t in targets:
            cmd += ["--target", t]
        return cmd + (["--", *s.build_args] if s.build_args else [])

    def stamp(self) -> dict:
        tools = self.toolchain.fingerprint()
        if self._torch_prefix:  # a torch upgrade in place changes version.py
            tools["torch"] = file_identity(str(Path(self._torch_prefix).parents[1] / "version.py"))
        return {"format": STAMP_FORMAT, "source_dir": str(self.settings.source_dir),
                "generator": self.settings.generator, "definitions": self.definitions(),
                "cmake_args": list(self.settings.cmake_args), "toolchain": tools}

    def stale_reasons(self) -> tuple[list[str], bool]:
        """Why the build directory must be (re)configured, and whether with ``--fresh``."""
        if not (self.build_dir / "CMakeCache.txt").is_file():
            return [f"no CMake cache in {self.build_dir} (first configure)"], False
        if self.settings.generator == "Ninja" and not (self.build_dir / "build.ninja").is_file():
            return ["build.ninja is missing (an earlier configure did not finish)"], False
        try:
            old = json.loads((self.meta / "stamp.json").read_text())
        except (OSError, ValueError):
            return ["no wrapped-cmake stamp (configured by another tool or interrupted)"], True
        return diff_stamps(old, self.stamp())

    # --- steps ----------------------------------------------------------------------------

    @_exclusive
    def configure(self, force: bool = False) -> RunResult:
        result = RunResult(self.build_dir)
        reasons, fresh = self.stale_reasons()
        if not reasons and not force:
            result.steps.append(Step("configure", False, "up to date"))
            return result
        reason = "; ".join(reasons) if reasons else "forced"
        from .checks import preflight  # imported here: a no-op build never needs it

        check = preflight(self.settings, self.profile, self.toolchain)
        result.warnings += check.warnings
        if check.failure:
            result.failure = check.failure
            result.steps.append(Step("configure", False, f"pre-flight check failed ({reason})"))
            return result
        claim(self.build_dir)  # marks a directory it creates: only those clean --all removes
        self.meta.mkdir(parents=True, exist_ok=True)
        (self.meta / "stamp.json").unlink(missing_ok=True)  # valid only after a success
        cmd = self.configure_command(fresh=fresh)
        self._say(f"wrapped-cmake: configuring {self.settings.source_dir} ({reason})")
        rc, out, seconds = self._run(cmd, self.meta / "configure.log", progress=False)
        result.steps.append(Step("configure", True, reason, seconds, cmd))
        if rc != 0:
            result.failure = self._configure_failure(out)
            return result
        write_atomic(self.meta / "stamp.json", json.dumps(self.stamp(), indent=1, sort_keys=True))
        result.warnings += self._write_source_files()
        return result

    @_exclusive
    def build(self, targets: list[str] | None = None) -> RunResult:
        result = self.configure()
        if not result.ok:
            return result
        cmd = self.build_command(targets)
        rc, out, seconds = self._run(cmd, self.meta / "build.log", progress=True)
        noop = "ninja: no work to do." in out
        result.steps.append(Step("build", True, "up to date" if noop else "built", seconds, cmd))
        if rc != 0:
            kind, lines = classify(out)
            details = compile_error_lines(out)
            msg = f"build failed in {self.build_dir}"
            if kind is FailureKind.HOST_COMPILER:
                msg = "the device compiler rejected the host compiler during the build"
            result.failure = Failure(kind if kind is FailureKind.HOST_COMPILER else
                                     FailureKind.BUILD, msg, details,
                                     log=self.meta / "build.log")
        return result

    @_exclusive
    def install(self, prefix: Path | None = None) -> RunResult:
        result = self.build(targets=[])
        if not result.ok:
            return result
        cmd = [self.toolchain.cmake or "cmake", "--install", str(self.build_dir)]
        if prefix:
            cmd += ["--prefix", str(prefix)]
        rc, out, seconds = self._run(cmd, self.meta / "install.log", progress=False)
        result.steps.append(Step("install", True, f"into {prefix or 'CMAKE_INSTALL_PREFIX'}",
                                 seconds, cmd))
        if rc != 0:
            lines = cmake_error_block(out) or out.strip().splitlines()[-8:]
            result.failure = Failure(FailureKind.INSTALL, f"install from {self.build_dir} "
                                     "failed", lines, log=self.meta / "install.log")
        return result

    @_exclusive
    def clean(self, everything: bool = False) -> RunResult:
        result = RunResult(self.build_dir)
        if not self.build_dir.exists():
            result.steps.append(Step("clean", False, "no build directory"))
            return result
        if everything:
            remove_build_dir(self.build_dir, self.settings.source_dir)
            unlink_compile_commands(self.settings.source_dir, self.build_dir)
            result.steps.append(Step("clean", True, "removed the build directory"))
            return result
        if not ((self.build_dir / "CMakeCache.txt").exists() or self.meta.exists()):
            raise InputError(str(self.build_dir), "not a CMake build directory; refusing to "
                             "clean it")
        cmd = self.build_command(["clean"]) if (self.build_dir / "build.ninja").exists() else []
        if not cmd:
            result.steps.append(Step("clean", False, "nothing built yet"))
            return result
        rc, out, seconds = self._run(cmd, self.meta / "clean.log", progress=False)
        result.steps.append(Step("clean", True, "removed build outputs", seconds, cmd))
        if rc != 0:
            result.failure = Failure(FailureKind.BUILD, "clean failed", out.splitlines()[-5:])
        return result

    # --- helpers --------------------------------------------------------------------------

    def _configure_failure(self, out: str) -> Failure:
        log = self.meta / "configure.log"
        kind, lines = classify(out)
        block = cmake_error_block(out)
        if kind is FailureKind.HOST_COMPILER:
            host = host_compiler_in_log(out) or (self.toolchain.host_compiler.path
                                                 if self.toolchain.host_compiler else "")
            return Failure(kind, "CMake could not use the device compiler: it rejects the host "
                           f"compiler {host}", lines, log=log,
                           hint="point CMAKE_CUDA_HOST_COMPILER at a supported compiler")
        if kind is FailureKind.MISSING_COMPILER:
            return Failure(kind, "CMake could not find a compiler the project needs",
                           block or lines, log=log, hint="set CMAKE_<LANG>_COMPILER to a full "
                           "path (-D), or CC/CXX/CUDACXX")
        if kind is FailureKind.MISSING_TOOL:
            return Failure(kind, "CMake could not find the build tool", block or lines, log=log)
        where = block[0] if block else "see the log"
        return Failure(FailureKind.CONFIGURE, f"CMake failed to configure "
                       f"{self.settings.source_dir}: {_location(where)}", block, log=log)

    def _write_source_files(self) -> list[str]:
        s, warnings = self.settings, []
        if s.presets:
            name = preset_name(self.profile.name, self.build_dir,
                               s.sources.get("build-dir") == "default")
            _, w = write_presets(
                s.source_dir, self.build_dir, name, s.generator, self.definitions(),
                self.toolchain.sdk_env, s.cmake_args, s.jobs, s.targets,
                f"wrapped-cmake {self.profile.name} ({s.build_type})")
            warnings += w
        if s.compile_commands:
            _, w = link_compile_commands(s.source_dir, self.build_dir)
            warnings += [w] if w else []
        return warnings

    def _run(self, cmd: list[str], log: Path, progress: bool) -> tuple[int, str, float]:
        env = {**self.env, **self.toolchain.sdk_env}
        log.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        lines = []
        with open(log, "w") as f, subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                errors="replace") as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                f.write(line)
                lines.append(line)
                if progress and (self.settings.verbose or _PROGRESS.match(line)):
                    self._say(line.rstrip())
            rc = proc.wait()
        return rc, "".join(lines), time.perf_counter() - start

    def _say(self, line: str) -> None:
        if self.echo:
            self.echo(line)


def diff_stamps(old: dict, new: dict) -> tuple[list[str], bool]:
    reasons: list[str] = []
    fresh = False
    for key in ("format", "source_dir", "generator"):
        if old.get(key) != new.get(key):
            reasons.append(f"{key} changed: {old.get(key)} -> {new.get(key)}")
            fresh = True
    for label, section in (("toolchain", "toolchain"), ("definition", "definitions")):
        a, b = old.get(section, {}), new.get(section, {})
        for k in sorted(set(a) | set(b)):
            if a.get(k) == b.get(k):
                continue
            if k not in b:
                reasons.append(f"{label} {k} removed (was {a[k]!r})")
                fresh = True
            elif k not in a:
                reasons.append(f"{label} {k} added: {b[k]!r}")
            else:
                reasons.append(f"{label} {k} changed: {a[k]!r} -> {b[k]!r}")
            needs_fresh = _FRESH_TOOLS if section == "toolchain" else _FRESH_ONLY
            fresh = fresh or bool(needs_fresh.match(k))
    if old.get("cmake_args") != new.get("cmake_args"):
        reasons.append(f"cmake arguments changed: {old.get('cmake_args')} -> "
                       f"{new.get('cmake_args')}")
        fresh = True
    return reasons, fresh


def _location(header: str) -> str:
    # "CMake Error at CMakeLists.txt:3 (add_library):" -> "CMakeLists.txt:3 (add_library)"
    m = re.match(r"CMake Error(?: at (.+?))?:?\s*$", header.strip())
    return m.group(1) if m and m.group(1) else header.strip()
