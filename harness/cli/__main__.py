"""`python -m harness.cli ARGS`: the same as `kueue-harness ARGS`."""

import sys

from harness.cli.commands import main

sys.exit(main())
