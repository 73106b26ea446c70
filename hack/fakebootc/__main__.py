"""``python -m hack.fakebootc ...``: the ``fake-host`` command (see ``cli``)."""

from __future__ import annotations

import sys

from hack.fakebootc.cli import main

sys.exit(main())
