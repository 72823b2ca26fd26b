"""``python -m workload`` is the ``brokerbench`` command."""

from workload.cli import main

raise SystemExit(main())
