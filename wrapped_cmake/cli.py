"""``wrapped-cmake``: the command line of the wrapped_cmake library.

Parses arguments, calls the library and renders (text or ``--json``); nothing else.
Exit codes: 0 success, 1 the build failed (the message says why), 2 bad input, 130 interrupted.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import EXIT_FAILED, EXIT_OK, InputError, exit_codes_epilog, run_command

EPILOG = """settings precedence (lowest first):
  defaults < pyproject.toml [tool.wrapped-cmake] of the source directory
  < environment (WRAPPED_CMAKE_<SETTING>, MAX_JOBS, TORCH_CUDA_ARCH_LIST, CMAKE_BUILD_TYPE,
    DEBUG, CMAKE_GENERATOR, CMAKE_ARGS; BUILD_*, USE_*, CMAKE_* become -D definitions)
  < command line (options, -C key=value, -D KEY=VALUE)
  `--explain` shows every value with the source that set it.

""" + exit_codes_epilog(
    failed="the build failed: missing compiler, unsupported host compiler, torch mismatch, CMake "
           "or compiler error (one message with the first error lines and the log path)",
    usage="bad input: unknown setting, bad value, unknown backend, malformed profile") + """

docs: docs/wrapped-cmake.md"""


def build_parser(builders: list | None = None) -> argparse.ArgumentParser:
    """The parser; ``builders``: the installed source builders (:mod:`.sources`), whose own
    options are added to the commands they take (loaded here when not given)."""
    from .sources import add_builder_options
    if builders is None:
        builders, _ = _load_builders()
    parser = argparse.ArgumentParser(
        prog="wrapped-cmake", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Build PyTorch device backends with CMake: one configuration model "
        "(layered settings, backend profiles), Ninja, stale-build detection, presets and "
        "actionable errors.", epilog=EPILOG)
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    env_text = "report cmake, ninja, compilers, CUDA/MACA/CANN, torch, Python and pybind11"
    env = sub.add_parser("env", help=env_text, description=env_text + " (what a build would "
                         "use; a warning when nvcc rejects the host compiler)")
    env.add_argument("--json", action="store_true", help="print JSON")
    env.set_defaults(func=cmd_env)
    helps = {"configure": "configure the build directory (only when stale, unless --fresh)",
             "build": "configure if needed, then build (incremental)",
             "install": "build, then cmake --install",
             "clean": "remove build outputs (--all: the whole build directory)"}
    for name, text in helps.items():
        p = sub.add_parser(name, help=text, description=text, epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        project_options(p)
        if name == "configure":
            p.add_argument("--fresh", action="store_true", help="configure even if up to date")
        if name == "install":
            p.add_argument("--prefix", type=Path, help="install prefix (overrides "
                           "install-prefix for this run)")
        if name == "clean":
            p.add_argument("--all", action="store_true", help="remove the build directory")
        p.set_defaults(func=cmd_project, source_builders=builders,
                       builder_options=add_builder_options(p, name, builders))
    return parser


def project_options(p: argparse.ArgumentParser, source: Path = Path(".")) -> None:
    """The options of a project command (configure, build, install, clean): ``--source`` (default
    ``source``), one per setting, -D, -C and the output options."""
    from .settings import add_options
    g = p.add_argument_group("project")
    g.add_argument("--source", type=Path, default=source, help=f"source directory (default: {source})")
    s = p.add_argument_group("settings (override pyproject.toml and the environment)")
    add_options(s)  # one option per setting, declared on wrapped_cmake.settings.Settings
    s.add_argument("-D", action="append", dest="defines", default=[], metavar="KEY=VALUE",
                   help="CMake definition (repeatable)")
    s.add_argument("-C", action="append", dest="config", default=[], metavar="KEY=VALUE",
                   help="any setting by its pyproject key, e.g. -C compile-commands=false")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    o.add_argument("--explain", action="store_true",
                   help="print each setting with the source that set it, why the build "
                   "directory would be reconfigured and the cmake command, then stop")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def main(argv: list[str] | None = None) -> int:
    builders, load_error = _load_builders()
    args = build_parser(builders).parse_args(argv)
    if load_error is not None and args.func is cmd_project:
        args.func = lambda _: _raise(load_error)  # a builder that cannot be loaded: one line
    return run_command("wrapped-cmake", lambda: args.func(args))


def _load_builders() -> tuple[list, InputError | None]:
    """The installed source builders; one that cannot be loaded is said when a project command
    runs (``env``, ``--help`` and ``--version`` work regardless)."""
    from .sources import installed
    try:
        return installed(), None
    except InputError as e:
        return [], e


def _raise(error: Exception):
    raise error


def cmd_env(args: argparse.Namespace) -> int:
    from .env import detect_environment

    env = detect_environment()
    if args.json:
        print(json.dumps(env.to_dict(), indent=2))
        return EXIT_OK
    for section, value in env.to_dict().items():
        fields = {k: v for k, v in value.items() if v not in (None, "")}
        print(f"{section}: " + (", ".join(f"{k}={v}" for k, v in fields.items())
                                if fields else "not found"))
    if env.cuda.host_compiler_supported is False:
        print(f"warning: nvcc {env.cuda.version} does not support the host compiler "
              f"{env.cuda.host_compiler} ({env.cuda.host_compiler_version}; newest supported "
              f"GCC: {env.cuda.max_host_gcc})", file=sys.stderr)
    return EXIT_OK


def cmd_project(args: argparse.Namespace) -> int:
    from .cmaker import CMaker
    from .settings import given_options, load_settings

    overrides = given_options(args)
    if not args.source.is_dir():
        raise InputError("--source", f"not a directory: {args.source}")
    settings = load_settings(args.source, overrides=overrides, defines=args.defines,
                             config=args.config)
    echo = None if (args.json or args.quiet) else (lambda line: print(line, flush=True))
    builder = _source_builder(args, settings)
    if builder is not None:  # not a CMake project: a registered source builder builds it
        from .sources import SourceRequest
        return builder.run(SourceRequest(args.command, args, settings, echo))
    cmaker = CMaker(settings, echo=echo)
    if args.explain:
        return explain(cmaker, args.json)
    if args.command == "configure":
        result = cmaker.configure(force=args.fresh)
    elif args.command == "build":
        result = cmaker.build()
    elif args.command == "install":
        result = cmaker.install(args.prefix.resolve() if args.prefix else None)
    else:
        result = cmaker.clean(everything=args.all)
    if args.json:
        print(json.dumps({**result.to_dict(), "backend": cmaker.profile.name,
                          "settings": settings.to_dict()}, indent=2))
    else:
        for w in result.warnings:
            print(f"wrapped-cmake: warning: {w}", file=sys.stderr)
        if result.failure:
            print(result.failure.render(), file=sys.stderr)
        elif not args.quiet:
            print("wrapped-cmake: " + ", ".join(
                f"{s.name} {'%.2fs' % s.seconds if s.ran else 'skipped'} ({s.reason})"
                for s in result.steps) + f" [{result.build_dir}]")
    return EXIT_OK if result.ok else EXIT_FAILED


def _source_builder(args: argparse.Namespace, settings):
    """The installed source builder (:mod:`.sources`) for ``--source``, or None for CMake."""
    from .sources import given, select
    options = given(args, getattr(args, "builder_options", []))
    backend = settings.backend
    if options:  # the backend by its profile's name (a .yaml file names one too)
        from .profile import load_profile
        backend = load_profile(settings.backend,
                               where=settings.sources.get("backend", "backend")).name
    return select(args.source, backend, options, getattr(args, "source_builders", None))


def explain(cmaker, as_json: bool) -> int:
    s = cmaker.settings
    reasons, fresh = cmaker.stale_reasons()
    cmd = cmaker.configure_command(fresh=fresh)
    if as_json:
        print(json.dumps({"backend": cmaker.profile.name, "profile": str(cmaker.profile.path),
                          "settings": s.to_dict(), "definitions": cmaker.definitions(),
                          "reconfigure": reasons, "fresh": fresh, "configure_command": cmd,
                          "build_command": cmaker.build_command()}, indent=2))
        return EXIT_OK
    print(f"backend: {cmaker.profile.name} ({cmaker.profile.path})")
    print("\n".join(settings_lines(s)))
    print("configure: " + ("; ".join(reasons) + (" (--fresh)" if fresh else "")
                           if reasons else "up to date"))
    print("  " + " ".join(_quote(a) for a in cmd))
    print("build:\n  " + " ".join(_quote(a) for a in cmaker.build_command()))
    for f in cmaker.toolchain.failures:
        print(f.render(), file=sys.stderr)
    return EXIT_OK


def settings_lines(s) -> list[str]:
    """``--explain``'s settings: each value with the source that set it, then the definitions
    of the settings layers."""
    shown = s.to_dict()
    lines = ["settings:"]
    lines += [f"  {key:<18} = {item['value']!r:<40} [{item['source']}]"
              for key, item in shown.items() if key != "define"]
    lines.append("definitions from settings layers:")
    lines += [f"  {key} = {item['value']!r} [{item['source']}]"
              for key, item in shown["define"].items()]
    return lines


class _Version(argparse.Action):
    """``--version``: the version of the distribution that ships wrapped_cmake, looked up only
    when asked."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"wrapped-cmake {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, packages_distributions, version
    for dist in packages_distributions().get(__package__ or "wrapped_cmake", []):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown (not installed)"


def _quote(arg: str) -> str:
    import shlex
    return shlex.quote(arg)


if __name__ == "__main__":
    sys.exit(main())
