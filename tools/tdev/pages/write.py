"""Writing a page: the output path checked before the slow work, the page written atomically,
and a path that cannot be written is one line of bad input."""
from __future__ import annotations

from pathlib import Path

from basekit.errors import InputError
from basekit.fs import check_writable, write_atomic


def check_page_path(path: Path) -> None:
    """Refuse at once an HTML output that cannot be written: a directory, or a place
    ``basekit.fs.write_problem`` names (an ancestor that is a file, a read-only file system, no
    permission). Missing parent directories are made."""
    if path.is_dir():
        raise InputError(str(path), "is a directory; --html takes a file name")
    check_writable(path)


def write_page(path: Path, text: str) -> None:
    try:
        write_atomic(path, text)
    except OSError as e:
        raise InputError(str(path), f"cannot write the page: {e.strerror or e}") from None


def write_scan_page(path: Path, result, root: Path, rules) -> int:
    """The scan map of ``result`` (lines counted in ``root`` with the scan's ``rules``) to
    ``path``; returns its size in bytes."""
    from .scanpage import render_scan_page
    from .treelines import count_tree

    text = render_scan_page(result, count_tree(root, rules).lines)
    write_page(path, text)
    return len(text.encode("utf-8"))


def write_plan_page(path: Path, plan, out: str) -> int:
    """The source-to-destination map of ``plan`` (written to ``out``) to ``path``; returns its
    size in bytes."""
    from .planpage import render_plan_page

    text = render_plan_page(plan, out)
    write_page(path, text)
    return len(text.encode("utf-8"))


def write_build_plan_page(path: Path, report) -> int:
    """The standalone build's plan ``report`` to ``path``; returns its size in bytes."""
    from .buildpage import render_build_plan_page

    check_page_path(path)
    text = render_build_plan_page(report)
    write_page(path, text)
    return len(text.encode("utf-8"))


def write_route_page(path: Path, result) -> int:
    """A `tdev route tune` ``result`` to ``path``; returns its size in bytes."""
    from .routepage import render_route_page

    text = render_route_page(result)
    write_page(path, text)
    return len(text.encode("utf-8"))
