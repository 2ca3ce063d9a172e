"""Parse a Starlark build file with :mod:`ast`, also when it is too deeply nested for the parser:
then the file is split into its top-level statements with :mod:`tokenize` (iterative) and each is
parsed alone, a statement that still fails being left out with a warning naming its line."""
from __future__ import annotations

import ast
import io
import tokenize


def _statements(text: str) -> list[tuple[int, str]]:
    """The top-level statements of ``text`` as (first line, source), split with :mod:`tokenize`
    (iterative): used when the whole file is too deeply nested for :func:`ast.parse`."""
    lines = text.splitlines(keepends=True)
    starts, depth, at_start = [], 0, True
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.INDENT:
            depth += 1
        elif tok.type == tokenize.DEDENT:
            depth -= 1
        elif tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
            at_start = at_start or (tok.type == tokenize.NEWLINE and depth == 0)
        elif at_start:
            if depth == 0:
                starts.append(tok.start[0])
            at_start = False
    ends = starts[1:] + [len(lines) + 1]
    return [(a, "".join(lines[a - 1:b - 1])) for a, b in zip(starts, ends)]


def parse_statements(text: str, filename: str, warnings: list[tuple[int, str]]) -> list[ast.stmt] | None:
    """The statements of ``text`` (None and a warning when it does not parse); a statement
    nested too deeply for the parser is left out with a warning naming its line."""
    try:
        return ast.parse(text, filename=filename).body
    except (SyntaxError, ValueError) as e:
        warnings.append((getattr(e, "lineno", 0) or 0, f"cannot parse: {getattr(e, 'msg', e)}"))
        return None
    except (RecursionError, MemoryError):
        pass
    body: list[ast.stmt] = []
    try:
        chunks = _statements(text)
    except (tokenize.TokenError, SyntaxError, ValueError) as e:  # IndentationError is a SyntaxError
        warnings.append((0, f"cannot parse: {e}"))
        return None
    for line, chunk in chunks:
        try:
            tree = ast.parse(chunk, filename=filename)
        except (RecursionError, MemoryError, SyntaxError, ValueError):
            warnings.append((line, "cannot evaluate: statement nested too deeply to parse"))
            continue
        body.extend(ast.increment_lineno(stmt, line - 1) for stmt in tree.body)
    return body
