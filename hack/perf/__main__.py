"""``python -m hack.perf`` = ``hack/bench``."""

import sys

from hack.perf.cli import main

sys.exit(main())
