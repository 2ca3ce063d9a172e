"""The routing configuration is read at every `import torch` of an environment the package is
installed in: it is bounded like every document tdev reads. Regular files only (a FIFO or a
device is refused without blocking), a size limit, an include depth limit, a limit on includes
in all (a file included twice is read once, so diamonds cost what their files do), cycles
refused: each is one RoutingError line naming the file, not a hang, MemoryError or
RecursionError."""
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PREFIX, pkg

routing = pkg.routing


def _torch_address_space() -> int:
    """What a plain `import torch` maps here (a CUDA build of torch maps gigabytes of libraries)."""
    probe = ("import torch, re; print(re.search(r\"VmPeak:\\s*(\\d+)\", "
             "open(\"/proc/self/status\").read()).group(1))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).stdout
    return int(out) << 10


# address space for the child: what torch itself needs, and 3 GB more for the package
MEMORY_LIMIT = _torch_address_space() + (3 << 30)


def import_torch_with(config: Path) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX + "_")}
    environ[f"{PREFIX}_BACKEND_CONFIG"] = str(config)

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    try:  # the timeout turns a hang into a failure
        return subprocess.run([sys.executable, "-c", "import torch"], env=environ,
                              capture_output=True, text=True, timeout=300, preexec_fn=limit,
                              cwd=Path(__file__).parent)
    except subprocess.TimeoutExpired:
        pytest.fail(f"import torch with {PREFIX}_BACKEND_CONFIG={config} did not return")


def diamond(directory: Path, levels: int) -> Path:
    """level_i includes level_{i+1} twice (through a and b): 2**levels paths to the bottom."""
    (directory / f"level{levels}.conf").write_text("mm = cpu\n")
    for i in reversed(range(levels)):
        (directory / f"a{i}.conf").write_text(f"include level{i + 1}.conf\n")
        (directory / f"b{i}.conf").write_text(f"include level{i + 1}.conf\nsum = cpu\n")
        (directory / f"level{i}.conf").write_text(f"include a{i}.conf\ninclude b{i}.conf\n")
    return directory / "level0.conf"


def chain(directory: Path, depth: int) -> Path:
    for i in range(depth):
        (directory / f"c{i}.conf").write_text(f"include c{i + 1}.conf\n" if i + 1 < depth
                                              else "mm = cpu\n")
    return directory / "c0.conf"


def fifo(directory: Path) -> Path:
    os.mkfifo(directory / "fifo.conf")
    return directory / "fifo.conf"


def fifo_included(directory: Path) -> Path:
    fifo(directory)
    (directory / "main.conf").write_text("mm = cpu\ninclude fifo.conf\n")
    return directory / "main.conf"


def oversized(directory: Path) -> Path:
    line = "# " + "x" * 1021 + "\n"
    (directory / "big.conf").write_text(line * (routing.MAX_CONFIG_BYTES // len(line) + 1))
    return directory / "big.conf"


def many_includes(directory: Path) -> Path:
    (directory / "one.conf").write_text("mm = cpu\n")
    (directory / "main.conf").write_text("include one.conf\n" * (routing.MAX_INCLUDES + 1))
    return directory / "main.conf"


BAD = {  # case: (make the config, expected line's file, its problem)
    "fifo": (fifo, "fifo.conf", "cannot read: not a regular file"),
    "fifo included": (fifo_included, "fifo.conf", "cannot read: not a regular file"),
    "/dev/zero": (lambda d: Path("/dev/zero"), "/dev/zero", "cannot read: not a regular file"),
    "directory": (lambda d: d, "", "cannot read:"),
    "oversized": (oversized, "big.conf", f"larger than {routing.MAX_CONFIG_BYTES} bytes"),
    "3000-deep chain": (lambda d: chain(d, 3000), ".conf:1",
                        f"includes nested deeper than {routing.MAX_INCLUDE_DEPTH}"),
    "many includes": (many_includes, f"main.conf:{routing.MAX_INCLUDES + 1}",
                      f"more than {routing.MAX_INCLUDES} includes"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_an_unbounded_config_is_one_line_at_import(tmp_path, case):
    make, where, problem = BAD[case]
    config = make(tmp_path)
    r = import_torch_with(config)
    assert r.returncode == 2, r.stderr[-2000:]
    errors = r.stderr.splitlines()  # the one line, no traceback
    assert len(errors) == 1 and errors[0].startswith(f"{pkg.__name__}: "), r.stderr[-2000:]
    assert where in errors[0] and problem in errors[0], errors[0]


def test_a_deep_diamond_of_includes_is_read_once_per_file(tmp_path):
    """24 levels of diamonds: 2**24 include paths, 73 files."""
    config = diamond(tmp_path, 24)
    r = import_torch_with(config)
    assert r.returncode == 0, r.stderr[-2000:]
    assert routing.read_config(config).keys() == {"mm", "sum"}


def test_includes_up_to_the_limits_are_read(tmp_path):
    routes = routing.read_config(chain(tmp_path, routing.MAX_INCLUDE_DEPTH))
    assert routes["mm"].source.endswith(f"c{routing.MAX_INCLUDE_DEPTH - 1}.conf:1")
    (tmp_path / "one.conf").write_text("sum = cpu\n")
    (tmp_path / "wide.conf").write_text("include one.conf\n" * routing.MAX_INCLUDES)
    assert routing.read_config(tmp_path / "wide.conf").keys() == {"sum"}
