"""``python -m bootc_operator`` is the same as the ``bootc-operator`` script."""

from bootc_operator.cli import main

raise SystemExit(main())
