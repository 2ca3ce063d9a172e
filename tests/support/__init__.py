"""Test support: helpers the tests (and the benchmarks) share, never shipped with tdev.

On pytest's ``pythonpath`` (pyproject.toml ``[tool.pytest.ini_options]``); a benchmark run as a
script puts ``tests/`` on ``sys.path`` itself.
"""
