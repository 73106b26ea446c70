"""Entry point of the generated shim executables: ``main(tool, root, argv)``.

Kept tiny so a shim imports only what its tool needs (``bootc status`` must not pay
for ``urllib``). ``root`` may be None for the generic ``hack/fake-bootc`` script,
which then takes the host from ``$FAKEBOOTC_ROOT``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT_ENV = "FAKEBOOTC_ROOT"


def main(tool: str, root: str | None, argv: list[str]) -> int:
    root = root or os.environ.get(ROOT_ENV)
    if not root:
        print(f"{tool} (simulated): set ${ROOT_ENV} to the simulated host's root", file=sys.stderr)
        return 1
    if tool == "bootc":
        from hack.fakebootc import bootc  # noqa: PLC0415

        return bootc.main(Path(root), argv)
    from hack.fakebootc import shims  # noqa: PLC0415

    return shims.main(tool, Path(root), argv)
