"""The ``brokerbench`` command: the command line (:mod:`.cli`), the ``cloud`` commands
that follow ``pulumi up`` and start a client machine's agent (:mod:`.cloud`), and the
``prepare`` / ``node`` commands a client machine runs (:mod:`.remote`). It stands above
everything it uses — the engine (the rest of :mod:`workload`), the analysis and
``infra/`` — and nothing imports it."""
