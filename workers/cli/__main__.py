"""`python -m workers.cli`: the same as the `trawl` command."""

import sys

from workers.cli.main import main

sys.exit(main())
