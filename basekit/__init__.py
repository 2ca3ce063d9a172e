"""Generic pieces every layer of the project uses, importing nothing of it: one error base for
bad input and the exit codes (``errors``), bounded reading of documents (``docread``), atomic
writes and safe joins (``fs``), path globs that never backtrack (``globs``), three-way merge of
texts (``diff3``). ``wrapped_cmake`` and ``tdev`` sit above it."""
