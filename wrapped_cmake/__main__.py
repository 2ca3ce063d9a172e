"""``python -m wrapped_cmake``: the same as the ``wrapped-cmake`` command."""
import sys

from .cli import main

sys.exit(main())
