"""``python -m workload.shell`` is the ``brokerbench`` command."""

from workload.shell.cli import main

raise SystemExit(main())
