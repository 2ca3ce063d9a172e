"""tdev.scan.pyfast: the lexical fast path gives exactly what the finder gives on the parsed line,
and leaves to the parser every line whose tokens do not settle the findings."""
from __future__ import annotations

import ast
import re

import pytest

from tdev.scan.pyfast import Around, Guard, line_hits
from tdev.scan.pyfinder import Finder
from tdev.scan.pysnippets import _wrap


def parsed(line: str, rules) -> list[tuple[str, str]]:
    """(rule, detail) of every hit the finder reports on the line parsed alone (as the scan
    parses a statement: headers get a body), sorted: the caller of line_hits leaves a line with
    two details for one rule to the parser, so the order never matters."""
    f = Finder(rules.python, events=[])
    f.visit(ast.parse(_wrap(line.strip())[0]))
    return sorted((e[0], e[1]) for e in f.events)


class Given(Around):
    """Neighbours given directly: the last character of the code line above, the start of the next."""

    def __init__(self, prev: str = "", nxt: str = "") -> None:
        super().__init__("", 0, 0)
        self._got = (prev, nxt)


def cols(line: str, rules) -> list[int]:
    return sorted(m.start() for n in rules.python.needles for m in re.finditer(re.escape(n), line))


SETTLED = [
    'x = torch.ones(2, device="cuda")',
    "y = t.to('cuda:1')",
    'name = "cuda graphs are off"',
    "z = b'cuda'",
    'dev = f"cuda:{rank}"',
    'dev = f"{prefix}cuda"',
    "u = x.cuda().is_cuda",
    "torch.cuda.synchronize()",
    "s = torch.cuda.current_stream().cuda_stream",
    "torch.backends.cudnn.benchmark = True",
    "m = torch.cuda",
    "raw = torch._C._cuda_getCurrentRawStream(0)",
    "self._cuda_graph_capture_health_check()",
    "cuda_home = os.environ['CUDA_HOME']  # cuda in a comment",
    "out = foo(x)[0].cuda(non_blocking=True)",
    "return {'cuda': torch.cuda.current_device()}",
    "assert y.is_cuda, 'expected a cuda tensor'",
    "@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)",
    "def f(x, device='cuda'):",
    "if device == 'cuda':",
    "for d in ['cuda', 'cpu']:",
]


@pytest.mark.parametrize("line", SETTLED)
def test_settled_lines_equal_the_parse(line, rules):
    got = line_hits(line, cols(line, rules), rules.python, Given("", ""))
    assert got is not None and sorted(got) == parsed(line, rules)


LEFT_TO_THE_PARSER = [
    "import torch.cuda as tc",  # an alias
    "from torch.backends import cudnn",
    "    and torch.cuda.get_device_capability() >= (8, 0)",  # goes on from an `if (` above
    "    device='cuda', dtype=torch.half),",  # unbalanced: part of a longer statement
    "x = 'cuda' ':0'",  # implicit concatenation
    "x = 'cuda\\n'",  # an escape
    "x = f\"{d['cuda']}\"",  # inside a replacement field
    'doc = """cuda"""',
    "if torch.cuda.is_available():",  # a guarded branch: only the parser sees it
    ").cuda()",
]


@pytest.mark.parametrize("line", LEFT_TO_THE_PARSER)
def test_unsettled_lines_go_to_the_parser(line, rules):
    assert line_hits(line, cols(line, rules), rules.python, Given("", "")) is None


def test_neighbouring_lines_that_continue_a_chain_or_a_string(rules):
    line = "    x = torch.cuda"
    assert line_hits(line, cols(line, rules), rules.python, Given("", "")) == []
    assert line_hits(line, cols(line, rules), rules.python, Given("", ".sy")) is None  # `.synchronize()` next
    line = "    'cuda'"
    assert line_hits(line, cols(line, rules), rules.python, Given("", "")) == [("py-device-string", "'cuda'")]
    assert line_hits(line, cols(line, rules), rules.python, Given("'", "")) is None  # a string ends the line above


@pytest.mark.parametrize("line", ["    torch.cuda.is_available()", "    not torch.cuda.is_available()"])
def test_a_guard_that_may_be_an_if_test_raises(line, rules):
    with pytest.raises(Guard):
        line_hits(line, cols(line, rules), rules.python, Given("(", "and"))


@pytest.mark.parametrize("line", ["return {'n': torch.cuda.device_count()}",
                                  "@unittest.skipIf(not torch.cuda.is_available(), 'no cuda')",
                                  "device = 'cuda' if torch.cuda.is_available() else 'cpu'"])
def test_a_guard_that_cannot_be_an_if_test_is_settled(line, rules):
    assert sorted(line_hits(line, cols(line, rules), rules.python, Given("(", ""))) == parsed(line, rules)
