"""The Pulumi program (``Pulumi.yaml`` → ``main: stacks/``): one stack per broker system.

Select a stack (``pulumi stack select kafka``); its ``stacks/Pulumi.<stack>.yaml`` names the
system, the scenario and the sizes. Everything else is in :mod:`infra.program`; the cost
cap (``brokerbench:maxUsd``), which needs the price table, is checked by the shell's guard.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infra.program import main
from workload.shell.cloud_plan import deploy_guard

main(guard=deploy_guard)
