"""`python -m vip.cli`: the same as the `vip` console script."""

import sys

from vip.cli import main

sys.exit(main())
