"""Hostile inputs to the content scanners (issue 17: 6, 8, 10 and the scan tracebacks): each finishes
in bounded time with a value, never a hang or a traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from support.hang import finishes
from tdev.scan import ppexpr
from tdev.scan.cpp import find_cuda_regions, scan_cpp
from tdev.scan.python import scan_python
from tdev.scan.rules import load_rules

RULES = load_rules()


# ---------------------------------------------------------------- C/C++: linear regexes
HEAD = "// a comment: the lexer runs\nat::cuda::getCurrentCUDAStream();\n"
CPP_HOSTILE = {
    # 17.6: an unclosed string in a file naming a CUDA API (was 47 s at 30 characters)
    "unclosed-string": HEAD + "#error \"" + "a" * 20000 + "\n",
    "unclosed-string-long": HEAD + "#error \"" + "ab " * 20000 + "\n#ifdef USE_CUDA\n#endif\n",
    "escaped-quotes": HEAD + '"' + '\\"' * 10000 + "\n" + "'" + "\\'" * 10000 + "\n",
    "unclosed-char": HEAD + "char c = '" + "\\a" * 10000 + "\n",
    "unclosed-comments": HEAD + "" + "/* " * 10000 + "\n",
    "unclosed-raw-strings": HEAD + "" + 'R"x( ' * 5000 + "\n",
    "line-comments": HEAD + "" + "// \\" * 5000 + "\n",
    "directives-on-one-line": HEAD + "#ifdef USE_CUDA\n" + "#if" * 10000 + "\n#endif\n",
    "continued-directives": HEAD + "".join("#if USE_CUDA \\\n" for _ in range(5000)) + "\n#endif\n",
    "continued-directives-no-macro": HEAD + "".join("#if X \\\n" for _ in range(5000)) + "\nat::cuda::x();\n",
    "spaces-in-directive": HEAD + "#if" + " " * 20000 + "\nat::cuda::x();\n",
    "named-prefix-runs": HEAD + "" + "at::" * 10000 + "\n" + "is_cuda " * 5000 + "\n",
}


@pytest.mark.parametrize("name", sorted(CPP_HOSTILE))
def test_cpp_scan_is_linear_on_hostile_lines(name):
    text = CPP_HOSTILE[name]
    assert len(text) >= 10000
    finishes(scan_cpp, text, RULES.cpp)
    finishes(find_cuda_regions, text, RULES.cpp.macros)


def test_unclosed_string_still_finds_the_named_code():
    ev = scan_cpp(HEAD + "#error \"" + "a" * 40 + "\n", RULES.cpp)
    assert [e.rule for e in ev] == ["cpp-cuda-namespace"]
    assert ev[0].lines == ((2, 2),)


# ---------------------------------------------------------------- #if literals cpp rejects
@pytest.mark.parametrize("expr", ["09", "0x'", "0b''", "0x", "0b2", "08'1", "1'''", "0xg"])
def test_bad_integer_literal_is_a_syntax_error(expr):
    with pytest.raises(ppexpr.PPSyntaxError):
        ppexpr.parse(expr)


@pytest.mark.parametrize("expr, value", [("800", 800), ("010", 8), ("0", 0), ("0x1'F", 31), ("0b1'0", 2),
                                         ("1'000'000ull", 1000000), ("0XffL", 255), ("07'7", 63)])
def test_integer_literals(expr, value):
    assert ppexpr.parse(expr) == ("n", value)


@pytest.mark.parametrize("expr", ["09", "0x'", "0b''"])
def test_bad_integer_literal_region_is_undecidable(expr):
    # the region guarded by a literal cpp rejects is not called CUDA code, and nothing raises
    src = f"#ifdef USE_CUDA\nint a;\n#endif\n#if {expr} || defined(USE_CUDA)\nint b;\n#endif\n"
    regions = find_cuda_regions(src, RULES.cpp.macros)
    assert [(r.start, r.end) for r in regions] == [(2, 2)]
    assert [e.rule for e in scan_cpp(src, RULES.cpp)] == ["pp-region"]


# ---------------------------------------------------------------- Python: linear candidates
def test_python_identifier_runs_with_cuda_are_linear():
    # 17.8: _candidates was quadratic in long identifier runs containing "cuda" (8k: 14 s)
    text = "x = " + "cuda" * 250_000 + "\n"  # 1 MB
    ev, warn = finishes(scan_python, text, RULES.python)
    assert ev == [] and warn is None


def test_python_identifier_run_that_is_a_listed_name_still_counts():
    ev, _ = scan_python("y = x." + "a_" * 1000 + "cuda\nz = x.is_cuda\n", RULES.python)
    assert [(e.rule, e.lines) for e in ev] == [("py-cuda-attribute", ((2, 2),))]


@pytest.mark.parametrize("text", [
    "_cuda" * 200_000 + "\n",
    "a_" * 300_000 + "cuda\n",
    "is_cuda" * 150_000 + "\n",
    "x" + "_cuda_" * 150_000 + "\n",
], ids=["_cuda", "a_-then-cuda", "is_cuda", "_cuda_"])
def test_python_other_identifier_runs_are_linear(text):
    finishes(scan_python, text, RULES.python)


# ---------------------------------------------------------------- workers die with the scan
def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")  # a zombie has ended; only its exit status is left


def _slow_source(n: int) -> str:
    """A valid C++ file that takes the content scanner seconds (every #if is decided)."""
    return "// slow\n" + "".join(f"#if defined(USE_CUDA) && X{i} > {i}\nint a{i} = at::cuda::f();\n#endif\n"
                                  for i in range(n))


@pytest.mark.realtree
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_killed_scan_leaves_no_worker(pytorch_tree, tmp_path):
    # 17.6: a killed scan's workers kept running (one was busy 12 minutes later). A copy of the
    # real tree (hard links: nothing is written into a linked file) with files that keep a
    # worker busy for seconds each, so that the workers are mid-file when the scan is killed
    tree = tmp_path / "pytorch"
    subprocess.run(["cp", "-al", str(pytorch_tree), str(tree)], check=True)
    slow = tree / "c10" / "zz_slow"
    slow.mkdir()
    (slow / "slow0.cpp").write_text(_slow_source(150_000))  # 11 MB, about 10 s of CPU
    for k in range(1, 6):
        os.link(slow / "slow0.cpp", slow / f"slow{k}.cpp")
    proc = subprocess.Popen([sys.executable, "-m", "tdev", "scan", str(tree), "--no-cache", "-j", "3"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TDEV_CACHE_DIR": str(tmp_path / "cache")})
    try:
        deadline, workers = time.monotonic() + 30, []
        while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
            workers = _children(proc.pid)
        assert len(workers) == 2, "the scan did not start its workers"
        # mid-scan: the whole real tree takes the workers about a second of CPU, so past four
        # they are inside the slow files
        deadline = time.monotonic() + 120
        while sum(map(_cpu_seconds, workers)) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, "the scan ended before it could be killed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 60  # PR_SET_PDEATHSIG kills at once: the wait only bounds a hang
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [w for w in workers if _alive(w)]
    for w in left:  # do not leave them to the next test
        os.kill(w, signal.SIGKILL)
    assert left == []


def test_deep_nesting_and_long_elif_chains_are_linear():
    # each branch's path condition grew with the depth: 1000 nested groups took 36 s (cubic)
    nested = HEAD + "".join(f"#if defined(A{i}) || !defined(USE_CUDA)\n" for i in range(5000)) + \
        "at::cuda::x;\n" + "#endif\n" * 5000
    chain = HEAD + "#if defined(B)\n" + "".join(f"#elif defined(A{i}) || !defined(USE_CUDA)\nint a{i};\n"
                                                for i in range(5000)) + "#endif\n"
    for text in (nested, chain):
        finishes(scan_cpp, text, RULES.cpp)


def test_deep_branches_are_undecidable_not_cuda():
    # past MAX_PATH literals a branch is not called CUDA code; shallower ones still are
    from tdev.scan.cpp import MAX_PATH
    src = "#ifdef USE_CUDA\nint a;\n#endif\n" + "".join(f"#if defined(A{i})\n" for i in range(MAX_PATH)) + \
        "#ifdef USE_CUDA\nint b;\n#endif\n" + "#endif\n" * MAX_PATH
    assert [(r.start, r.end) for r in find_cuda_regions(src, RULES.cpp.macros)] == [(2, 2)]


# ---------------------------------------------------------------- FIFOs and file names
def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "pytorch"
    for d in ("torch", "aten/src", "c10/core"):
        (root / d).mkdir(parents=True)
    (root / "torch" / "a.py").write_text("import torch\n")
    return root


def _tdev(*args: str, cache: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tdev", *args], capture_output=True, timeout=timeout,
                          env={**os.environ, "TDEV_CACHE_DIR": str(cache),
                               "PYTHONIOENCODING": "utf-8:strict"})  # as in a UTF-8 locale


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifos_in_the_tree_are_reported_not_read(tmp_path):
    # 17.10: a FIFO must not hang the scan; it is named as a warning
    root = _tree(tmp_path)
    os.mkfifo(root / "c10" / "core" / "pipe.cpp")
    os.mkfifo(root / "torch" / "pipe.py")
    os.symlink("pipe.cpp", root / "c10" / "core" / "link.cpp")
    out = _tdev("scan", str(root), "--json", cache=tmp_path / "cache")
    assert out.returncode == 0, out.stderr
    warnings = {w["path"]: w["message"] for w in json.loads(out.stdout)["warnings"]}
    for p in ("c10/core/pipe.cpp", "torch/pipe.py", "c10/core/link.cpp"):
        assert warnings[p] == "FIFO, not a regular file; not read"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_reader_does_not_block_on_a_fifo_put_in_place_after_the_walk(tmp_path):
    from tdev.scan.content import read_text
    fifo = tmp_path / "late.cpp"
    os.mkfifo(fifo)
    got: list = []
    t = threading.Thread(target=lambda: got.append(read_text(str(fifo), 10, 1000)), daemon=True)
    t.start()
    t.join(3)
    if t.is_alive():  # blocked in open(): a writer releases it
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert got == [(None, "not a regular file; not read")]


def test_file_names_that_are_not_utf8_round_trip(tmp_path):
    # a name with invalid UTF-8 broke --json, --list, -o and the summary (UnicodeEncodeError)
    root = _tree(tmp_path)
    name = b"c10/core/caf\xe9\xff.cpp"
    (root / os.fsdecode(name)).write_bytes(b"#ifdef USE_CUDA\nint x;\n#endif\n")
    cache = tmp_path / "cache"
    doc = _tdev("scan", str(root), "--json", cache=cache)
    assert doc.returncode == 0, doc.stderr
    paths = [f["path"] for f in json.loads(doc.stdout)["files"]]
    assert [os.fsencode(p) for p in paths] == [name]  # surrogateescape: the bytes come back
    listed = _tdev("scan", str(root), "--list", cache=cache)
    assert listed.returncode == 0 and listed.stdout == name + b"\n"
    summary = _tdev("scan", str(root), "-o", str(tmp_path / "out.json"), cache=cache)
    assert summary.returncode == 0, summary.stderr
    saved = json.loads((tmp_path / "out.json").read_text())
    assert [os.fsencode(f["path"]) for f in saved["files"]] == [name]


def test_links_to_directories_are_not_warned_about(tmp_path):
    root = _tree(tmp_path)
    os.symlink("../torch", root / "c10" / "core" / "linked")
    os.symlink("missing", root / "c10" / "core" / "dangling.cpp")
    out = _tdev("scan", str(root), "--json", cache=tmp_path / "cache")
    assert out.returncode == 0, out.stderr
    assert not [w for w in json.loads(out.stdout)["warnings"] if w["path"].startswith("c10/core/")]


PY_HOSTILE = {
    # each took 10-60 s at these sizes: a quadratic regex (trailing comments) and a lexer whose
    # failing unclosed-string alternative rescanned the line from every escaped quote
    "escaped-quotes": "x = torch.cuda.f('" + "\\'" * 20000 + "\n",
    "escaped-double-quotes": 'x = (torch.cuda.f("' + '\\"' * 20000 + "\n",
    "spaces-before-colon": "if torch.cuda.is_available()" + " " * 50000 + ":\n    pass\n",
    "hashes-then-quote": "if torch.cuda.is_available(): " + "#" * 50000 + "'\n    pass\n",
}


@pytest.mark.parametrize("name", sorted(PY_HOSTILE))
def test_python_scan_is_linear_on_hostile_lines(name):
    finishes(scan_python, PY_HOSTILE[name], RULES.python)


def test_python_guard_with_a_long_trailing_comment_still_counts():
    ev, warn = scan_python("if torch.cuda.is_available():" + " " * 5000 + "# " + "#" * 5000 + "\n    x = 1\n",
                           RULES.python)
    assert warn is None and ("py-cuda-branch", ((2, 2),)) in [(e.rule, e.lines) for e in ev]


@pytest.mark.parametrize("imports", ["import torch.cuda as a{i}\n", "from torch.cuda import a{i}\n"])
def test_python_many_aliases_are_linear(imports):
    # every candidate line was checked against every alias (8,000 aliases: about 20 s)
    n = 8000
    text = "".join(imports.format(i=i) for i in range(n)) + "".join(f"x{i} = y.cuda() + a{i}\n" for i in range(n))
    ev, warn = finishes(scan_python, text, RULES.python)
    assert warn is None and {e.rule for e in ev} >= {"py-import", "py-cuda-attribute"}


def test_version_files_are_read_only_when_small_regular_and_inside(tmp_path):
    from tdev.scan.walk import read_version
    root = _tree(tmp_path)
    (root / "version.txt").write_text("2.6.0a0\n")
    (root / ".git" / "refs" / "heads").mkdir(parents=True)
    (root / ".git" / "refs" / "heads" / "main").write_text("0123456789abcdef0123\n")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert read_version(root) == "2.6.0a0+git0123456789ab"
    secret = tmp_path / "secret"
    secret.write_text("fedcba9876543210\n")
    (root / ".git" / "HEAD").write_text("ref: ../../secret\n")  # outside the repository
    assert read_version(root) == "2.6.0a0"
    (root / "version.txt").unlink()
    os.mkfifo(root / "version.txt")
    assert read_version(root) == "unknown"


@pytest.mark.parametrize("expr, value", [("'a'", 97), ("'\\n'", 10), ("'\\x41'", 65), ("'\\101'", 65),
                                         ("'\\''", 39), ("'\\\\'", 92), ("u'\\u00e9'", 233)])
def test_character_literals(expr, value):
    assert ppexpr.parse(expr) == ("n", value)


@pytest.mark.parametrize("expr", ["'\\ '", "'\\='", "'ab'", "'\\x'", "'\\u12'"])
def test_bad_character_literal_is_a_syntax_error_without_a_warning(expr):
    # the fuzz test found "'\ '": unicode_escape decoding warned (an error under -W error)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ppexpr.PPSyntaxError):
            ppexpr.parse(expr)


def test_invalid_escapes_in_scanned_python_do_not_warn_or_change_results(tmp_path):
    # ast.parse warns about "\w" in a non-raw string (a SyntaxWarning shown by default from
    # Python 3.12; under -W error the statement would not parse and the file would be called
    # invalid Python)
    root = _tree(tmp_path)
    (root / "torch" / "esc.py").write_text('import re\nif torch.cuda.is_available() and re.match("\\w", s):\n'
                                           '    x = torch.cuda.f("\\d")\n')
    out = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-W", "error::SyntaxWarning", "-m",
                          "tdev", "scan", str(root), "--json"], capture_output=True, text=True,
                         env={**os.environ, "TDEV_CACHE_DIR": str(tmp_path / "cache")})
    assert out.returncode == 0 and "Warning" not in out.stderr, out.stderr
    doc = json.loads(out.stdout)
    assert [w for w in doc["warnings"] if w["path"] == "torch/esc.py"] == []
    (found,) = [f for f in doc["files"] if f["path"] == "torch/esc.py"]
    assert {e["rule"] for e in found["evidence"]} == {"py-cuda-api", "py-cuda-branch"}


@pytest.mark.parametrize("value", ["9" * 5000, "-" + "9" * 5000])
def test_a_5000_digit_number_in_the_rules_is_one_line_naming_the_file(tmp_path, value):
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"walk:\n  max_file_bytes: {value}\n")
    (tmp_path / "tree").mkdir()
    r = subprocess.run([sys.executable, "-m", "tdev", "scan", str(tmp_path / "tree"), "--rules", str(rules)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and str(rules) in r.stderr and "digits" in r.stderr, r.stderr[-2000:]
