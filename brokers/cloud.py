"""How a system runs on AWS: its :class:`CloudRecipe` (the broker machines' install
commands, configuration files and start commands, rendered into cloud-init), the secrets a
recipe refers to (:class:`CloudSecret`: placeholders and shell variables, never values),
how faults reach its nodes (:class:`CloudFaults`), or the :class:`ManagedService` AWS runs
in place of broker machines. Each system's ``brokers/<name>/cloud.py`` implements the recipe.
"""

from __future__ import annotations

import abc
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic

from brokers.connection import Destination, Endpoints, P_contra
from brokers.errors import BrokerError


@dataclass(frozen=True)
class CloudSecret:
    """One secret of an AWS stack as a recipe refers to it; its value never enters user-data.

    Each stack generates its secrets and keeps them in the parameter store. At boot a
    broker node reads them, replaces ``placeholder`` in the recipe's files (a file holding
    one is installed 0600, owned by the recipe's ``service_user``) and exports them to the
    recipe's commands as ``$<variable>``. Values are 32 letters and digits: they need no
    quoting in any configuration syntax.
    """

    name: str
    variable: str

    @property
    def placeholder(self) -> str:
        return f"@@{self.variable}@@"

    @property
    def shell(self) -> str:
        """The value in a recipe command, quoted for the shell."""
        return f'"${self.variable}"'


def machine_java_command(
    main: str,
    classpath: str,
    heap: str,
    args: Sequence[str] = (),
    jvm: Sequence[str] = (),
    java: str = "/usr/bin/java",
) -> list[str]:
    """A broker machine's ``java`` command line: the heap fixed at ``heap``, G1 collector."""
    return [java, f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC", *jvm, "-cp", classpath, main, *args]


def shell_wait(condition: str, timeout_s: int, pause_s: int = 2) -> str:
    """A shell command that tries ``condition`` every ``pause_s`` seconds until it holds,
    and fails after ``timeout_s`` seconds."""
    loop = f"until {condition}; do sleep {pause_s}; done"
    return f"timeout {timeout_s} bash -c {shlex.quote(loop)}"


def systemd_unit(description: str, *service: str) -> str:
    """A systemd unit started at boot and not restarted, with its ``[Service]`` lines
    (``ExecStart=…`` among them) and a million open files allowed."""
    return (
        "[Unit]\n"
        f"Description={description}\n"
        "After=network-online.target\n\n"
        "[Service]\n" + "".join(f"{line}\n" for line in service) + "LimitNOFILE=1000000\n"
        "Restart=no\n\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )


#: What clients authenticate with (also read by client machines).
BROKER_PASSWORD = CloudSecret("password", "BROKERBENCH_PASSWORD")
#: What only the broker nodes share (Erlang cookie, cluster and replication passwords).
CLUSTER_SECRET = CloudSecret("cluster", "BROKERBENCH_CLUSTER_SECRET")
CLOUD_SECRETS = (BROKER_PASSWORD, CLUSTER_SECRET)


@dataclass(frozen=True, slots=True)
class CloudFaults:
    """How a scenario's faults reach a broker node on AWS: the node's fault agent
    (:mod:`workload.engine.aws.fault_agent`) acts on the systemd ``unit`` that runs the broker process.

    A fault's ``node = <index>`` counts the nodes of ``roles``, role by role in this order
    and each role's nodes by index (as the local clusters count them). ``fails_over`` says
    whether the system elects a new leader by itself (see :class:`FaultSupport`);
    ``leader`` is the index of the node that always leads where nothing fails over (the
    primary, the master), else None.
    """

    unit: str
    roles: tuple[str, ...] = ("broker",)
    fails_over: bool = True
    leader: int | None = None


@dataclass(frozen=True, slots=True)
class CreatedService:
    """What AWS answers for a created :class:`ManagedService` resource, from which the
    recipe forms the clients' :class:`Endpoints`."""

    name: str
    url: str
    arn: str
    region: str


@dataclass(frozen=True)
class ManagedService:
    """A service AWS runs in place of broker machines (a managed queue), as a cloud recipe
    declares it: data only; the AWS stack creates the resource and its client access.

    ``resource`` is the Pulumi type token of the AWS resource (``"aws:<module>/<name>:<Type>"``;
    the stack knows the types it can create) and ``attributes`` its arguments by their
    Pulumi Python names (besides ``tags``, which the stack adds). Client machines may call
    ``client_actions`` on the created resource and on those whose ARN starts with its ARN
    (e.g. per sweep point queues named after it). ``endpoints`` forms what clients connect
    to from the created resource.
    """

    resource: str
    attributes: Mapping[str, str | int | bool]
    client_actions: tuple[str, ...]
    endpoints: Callable[[CreatedService], Endpoints]


class CloudRecipe(abc.ABC, Generic[P_contra]):
    """How a broker node on AWS is installed and configured (rendered into cloud-init),
    from the system's parameters (``P_contra``).

    Configuration files come from the same templates the local deployment renders; only
    addresses, paths and sizes differ. Credentials appear only as :class:`CloudSecret`
    placeholders and shell variables; the client's user name goes into ``endpoints``,
    its password reaches client machines from the parameter store.
    """

    #: Where the node's data volume is mounted before the install commands run.
    data_dir: str = "/data"
    #: Owner of the files that hold a secret (installed 0600); must exist once installed.
    service_user: str = "root"
    #: The systemd unit of the broker process, for faults on AWS; None: no faults on AWS.
    faults: CloudFaults | None = None
    #: A service AWS runs for this system (no broker machines needed); the stack creates it
    #: and clients connect to its endpoints rather than to the broker machines.
    managed: ManagedService | None = None

    @abc.abstractmethod
    def install_commands(self) -> list[str]:
        """Shell commands that install the pinned broker version on Debian/Ubuntu."""

    @abc.abstractmethod
    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: P_contra
    ) -> dict[str, str]:
        """Absolute path → content of the configuration files of node ``index`` of ``role``.

        ``cluster`` maps every role of the topology to its nodes' private addresses.
        """

    @abc.abstractmethod
    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        """Shell commands that start (and, for the last node, initialise) the node."""

    def ports(self) -> list[int]:
        """TCP ports clients and peers use (opened inside the security group only)."""
        return []

    def faults_for(self, roles: dict[str, int]) -> CloudFaults | None:
        """The faults a stack of these roles takes (by default :attr:`faults`)."""
        return self.faults

    @property
    def finds_leader(self) -> bool:
        """Whether faults on AWS may name ``"leader"`` and ``"follower"``: the leader is
        fixed (``faults.leader``) or :meth:`fault_leader` asks the running brokers."""
        if self.faults is None:
            return False
        return self.faults.leader is not None or (
            type(self).fault_leader is not CloudRecipe.fault_leader
        )

    def fault_leader(self, endpoints: Endpoints, params: P_contra, destination: Destination) -> int:
        """The fault index (see :class:`CloudFaults`) of the node leading the sweep point's
        ``destination`` now, asked over the network from a client machine. Systems that
        cannot ask leave it out; with a fixed ``faults.leader`` that is the answer."""
        if self.faults is not None and self.faults.leader is not None:
            return self.faults.leader
        raise BrokerError(f"{type(self).__name__} cannot tell which node leads")

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """Where clients connect: by default every node on the first port."""
        port = self.ports()[0] if self.ports() else 0
        return Endpoints(
            hosts=tuple(f"{address}:{port}" for nodes in cluster.values() for address in nodes)
        )
