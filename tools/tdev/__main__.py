import sys

from tdev.cli.main import main

sys.exit(main())
