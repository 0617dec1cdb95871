"""`python -m tunelab.cli`: the `tunelab` command."""

import sys

from tunelab.cli import main

sys.exit(main())
