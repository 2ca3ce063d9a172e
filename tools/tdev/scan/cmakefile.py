"""Intra-file rule for CMake files: ``if()`` branches that only run in a GPU build.

``if(USE_CUDA) ... endif()`` in caffe2/CMakeLists.txt is CUDA build logic inside a generic file,
as ``#ifdef USE_CUDA`` is in C++. A branch is GPU-only when its own condition needs one of the
GPU flags (``build_files.gpu_flags`` in rules.yaml) or when the negation of an earlier branch of
its block does (the ``else()`` of ``if(NOT USE_CUDA)``). Only maximal branches are reported, with
their body lines; the tokenizer and condition logic are the build-file evaluator's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .cmake_syntax import CMakeSyntaxError, negation_needs_flag, needs_flag, parse_condition, tokenize
from .model import Evidence


@dataclass
class _Open:
    gpu_parent: bool
    start: int  # line of the if/elseif/else command opening the current branch
    head: str
    gpu: bool
    negated_gpu: bool = False  # the negation of some earlier branch needs a GPU flag
    regions: list = field(default_factory=list)


def scan_cmake(text: str, gpu_flags: frozenset[str]) -> tuple[list[Evidence], str | None]:
    """Evidence of GPU-only branches, and a warning when the file cannot be tokenized."""
    if not any(f in text for f in gpu_flags):
        return [], None
    try:
        cmds = tokenize(text)
    except CMakeSyntaxError as e:
        return [], f"not valid CMake ({e})"
    stack: list[_Open] = []
    found: list[Evidence] = []

    def close(o: _Open, end_line: int) -> None:
        if o.gpu and not o.gpu_parent and end_line - 1 >= o.start + 1:
            found.append(Evidence("cmake-gpu-region", f"{o.head} (lines {o.start}-{end_line})",
                                  ((o.start + 1, end_line - 1),)))

    for c in cmds:
        if c.name == "if":
            cond = parse_condition(c.args)
            parent = bool(stack) and (stack[-1].gpu or stack[-1].gpu_parent)
            stack.append(_Open(parent, c.line, _render(c), needs_flag(cond, gpu_flags),
                               negation_needs_flag(cond, gpu_flags)))
        elif c.name in ("elseif", "else", "endif") and stack:
            o = stack[-1]
            close(o, c.line)
            if c.name == "endif":
                stack.pop()
                continue
            own = needs_flag(parse_condition(c.args), gpu_flags) if c.name == "elseif" else False
            cond = parse_condition(c.args) if c.name == "elseif" else None
            stack[-1] = _Open(o.gpu_parent, c.line, f"{o.head.split(' ... ')[0]} ... {_render(c)}",
                              own or o.negated_gpu,
                              o.negated_gpu or (cond is not None and negation_needs_flag(cond, gpu_flags)))
    return found, None


def _render(c) -> str:
    args = " ".join(a.text for a in c.args)
    return f"{c.name}({args[:60]})"
