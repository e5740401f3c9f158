"""`python -m raybridge` runs the command line."""

import sys

from raybridge.cli import main

sys.exit(main())
