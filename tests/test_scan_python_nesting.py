"""The Python scanner on deeply nested guarded blocks (3,000 nested ``if torch.cuda...:``) does
work linear in the file's lines, and finds what the whole-file parse of a shallow copy finds:
each guarded block is one branch, the nested blocks one range."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tdev.scan import pysnippets
from tdev.scan.python import _scan_whole, scan_python


def nested(n: int, step: str = " ") -> str:
    lines = [step * i + "if torch.cuda.is_available():" for i in range(n)]
    return "\n".join(lines + [step * n + "pass"]) + "\n"


@pytest.mark.parametrize("step", [" ", "\t"])
def test_nested_guards_cost_linear_work(rules, monkeypatch, step):
    """Work counted in lines measured (each line's indentation), not in seconds."""
    calls = {"n": 0}
    real = pysnippets._indent

    def counting(line: str) -> int:
        calls["n"] += 1
        return real(line)
    monkeypatch.setattr(pysnippets, "_indent", counting)
    for n in (100, 400):
        calls["n"] = 0
        evidence, warning = scan_python(nested(n, step), rules.python)
        assert warning is None
        branch = next(e for e in evidence if e.rule == "py-cuda-branch")
        assert branch.lines == ((2, n + 1),)
        assert calls["n"] <= 4 * (n + 1) + 100, (n, calls["n"])  # was about n * n / 2


def test_nested_guards_match_the_whole_file_parse(rules):
    """At a depth Python's own parser accepts, the statement-by-statement scan and the whole-file
    parse agree, also with code after the blocks and an else branch."""
    text = nested(60) + textwrap.dedent("""\
    if not torch.cuda.is_available():
        x = 1
    else:
        y = torch.cuda.current_device()
        z = 2
    w = 3
    """)
    assert scan_python(text, rules.python) == _scan_whole(text, rules.python)


def test_3000_nested_guards_finish(tmp_path):
    """The file from the attack (3,000 levels, beyond what Python's parser accepts); the timeout
    is only a hang guard, the assertion is on the result."""
    src = tmp_path / "nested.py"
    src.write_text(nested(3000))
    code = ("import sys; from tdev.scan.python import scan_python; from tdev.scan.rules import load_rules; "
            "ev, w = scan_python(open(sys.argv[1]).read(), load_rules().python); "
            "print(sorted((e.rule, e.lines) for e in ev), w)")
    r = subprocess.run([sys.executable, "-c", code, str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "('py-cuda-branch', ((2, 3001),))" in r.stdout and r.stdout.rstrip().endswith("None"), r.stdout[-500:]


def _random_blocks(rng, depth: int = 0, budget: list[int] | None = None) -> list[str]:
    budget = budget if budget is not None else [rng.randint(5, 60)]
    pad, out = "    " * depth, []
    while budget[0] > 0:
        budget[0] -= 1
        kind = rng.choice(["guard", "not", "plain", "code", "cuda", "blank", "comment", "up"])
        if kind == "up" and depth:
            break
        if kind in ("guard", "not", "plain") and depth < 12:
            test = {"guard": "torch.cuda.is_available()", "not": "not torch.cuda.is_available()",
                    "plain": "x"}[kind]
            out.append(f"{pad}if {test}:")
            out += _random_blocks(rng, depth + 1, budget) + [f"{pad}    pass"]
            if rng.random() < 0.4:
                out.append(f"{pad}else:")
                out += _random_blocks(rng, depth + 1, budget) + [f"{pad}    pass"]
        elif kind == "cuda":
            out.append(f"{pad}y = torch.cuda.current_device()")
        elif kind == "blank":
            out.append("")
        elif kind == "comment":
            out.append(f"{pad[:rng.randint(0, len(pad))]}# note")
        else:
            out.append(f"{pad}z = {rng.randint(0, 9)}")
    return out


def test_random_nestings_match_the_whole_file_parse(rules):
    import random
    rng = random.Random(26)
    for _ in range(200):
        text = "\n".join(_random_blocks(rng) or ["pass"]) + "\n"
        compile(text, "generated", "exec")  # the generator writes valid Python
        assert scan_python(text, rules.python) == _scan_whole(text, rules.python), text


@pytest.mark.parametrize("shape", ["sum", "not", "call", "guard-sum"])
def test_expressions_too_deep_for_python_are_a_warning_not_a_crash(rules, shape):
    """A 30,000-term expression (Python's parser or the tree walk runs out of recursion): the
    file is reported with a warning, never a RecursionError out of the scan."""
    n = 30_000
    text = {"sum": "x = 1 \\\n" + "  + torch.cuda.y \\\n" * n + "  + 1\n",
            "not": "if " + "not " * n + "torch.cuda.is_available():\n    pass\n",
            "call": "x = " + "f(" * 50 + "torch.cuda.y" + ")" * 50 + " + " + " + ".join(["torch.cuda.z"] * n) + "\n",
            "guard-sum": "if torch.cuda.is_available() and " + " + ".join(["a"] * n) + ":\n    pass\n"}[shape]
    evidence, warning = scan_python(text, rules.python)
    assert evidence or warning


def test_the_scan_command_reports_such_a_file(tmp_path):
    root = tmp_path / "tree"
    for d in ("aten", "c10", "torch"):
        (root / d).mkdir(parents=True)
    (root / "torch" / "deep.py").write_text("x = 1 \\\n" + "  + torch.cuda.y \\\n" * 30_000 + "  + 1\n")
    r = subprocess.run([sys.executable, "-m", "tdev", "scan", str(root), "--no-cache", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    import json
    doc = json.loads(r.stdout)
    assert [f["path"] for f in doc["files"]] == ["torch/deep.py"] or any("deep.py" in str(w) for w in doc["warnings"])
