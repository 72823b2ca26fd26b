"""Cloud-init user-data (``#cloud-config``) for every node, rendered from ``infra/templates``.

Broker nodes mount their data volume, install the pinned broker and write the
configuration files of the system's :class:`~brokers.base.CloudRecipe` (rendered from the
same templates the local clusters use), then start it; with faults, the nodes a fault may
act on also run the fault agent (:mod:`workload.engine.aws.fault_agent`) as a systemd service, from the
uploaded wheel. Client nodes install brokerbench
from the wheel the stack uploaded, with the versions of the constraints file uploaded next
to it, write the scenario TOML and start the client agent (``brokerbench cloud client``),
which waits for the brokers, runs the node's role for every sweep point and uploads the
results. Every node keeps its clock in sync with chrony, powers itself off when the run is
over (a client when its agent exits, a broker when its telemetry agent sees the run's end)
and, with a time to live, that many hours after boot at the latest (a systemd timer). Each
uploads its boot and node logs to the run's prefix when it stops or its set-up fails
(:func:`boot_logs`). Written files larger than :data:`PACK_OVER` bytes are gzipped
(cloud-init's ``gz+b64``), so that a node's user-data stays well within EC2's 16 KiB.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from brokers.cloud import BROKER_PASSWORD, CLOUD_SECRETS, CloudFaults, CloudRecipe
from infra.plan import BrokerNode, BucketLayout, ClientNode, Node
from workload.model.layout import LAYOUT

TEMPLATES = Path(__file__).resolve().parent / "templates"
#: Amazon Time Sync Service, reachable from every instance.
TIME_SERVER = "169.254.169.123"
#: Where a broker node's data volume is mounted before the recipe's commands run, unless
#: the recipe names its own ``data_dir``.
DATA_DIR = "/data"
#: Where recipe files wait until the broker is installed (then ``install -D`` to their path).
STAGING = "/opt/brokerbench/files"
RESULTS_DIR = "/var/lib/brokerbench/results"
SCENARIO_PATH = "/etc/brokerbench/scenario.toml"
VENV = "/opt/brokerbench/venv"
#: Characters a YAML literal block cannot carry as they are (they need escapes).
_UNSAFE_FOR_BLOCK = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]"
)
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}
#: Written files above this many bytes go gzipped and base64-encoded (``gz+b64``).
PACK_OVER = 1024


def yaml_scalar(value: object, indent: int) -> str:
    """``value`` as a YAML scalar placed after ``key: ``, its block lines indented by ``indent``.

    Multi-line text becomes a literal block (readable on the machine); anything a literal
    block cannot carry exactly becomes a double-quoted scalar with escapes.
    """
    text = str(value)
    first = next((line for line in text.split("\n") if line.strip()), "")
    # A block of blank lines only reads back as "": such text is quoted too.
    if not first or "\n" not in text or _UNSAFE_FOR_BLOCK.search(text) or first[:1] in (" ", "\t"):
        return _double_quoted(text)
    body = text.rstrip("\n")
    trailing = len(text) - len(body)
    chomp = {0: "-", 1: ""}.get(trailing, "+")
    pad = " " * indent
    lines = [pad + line if line else "" for line in body.split("\n")]
    lines += [""] * (trailing - 1 if trailing > 1 else 0)
    return f"|{chomp}\n" + "\n".join(lines)


def _double_quoted(text: str) -> str:
    def escape(char: str) -> str:
        if char in _ESCAPES:
            return _ESCAPES[char]
        if _UNSAFE_FOR_BLOCK.match(char):
            code = ord(char)
            return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
        return char

    return '"' + "".join(escape(c) for c in text) + '"'


def file_body(value: object, indent: int) -> str:
    """A written file's ``content`` (after ``content: ``): as text, or — above
    :data:`PACK_OVER` bytes — gzipped (the same bytes every time) and base64-encoded, with
    the ``encoding`` key that tells cloud-init so on the line after it."""
    data = str(value).encode()
    if len(data) <= PACK_OVER:
        return yaml_scalar(value, indent)
    packed = base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode()
    return f"{packed}\n{' ' * (indent - 2)}encoding: gz+b64"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["yaml_scalar"] = yaml_scalar
    env.filters["body"] = file_body
    env.filters["sh"] = lambda value: shlex.quote(str(value))
    return env


def render(template: str, **values: Any) -> str:
    return _environment().get_template(template).render(**values)


@dataclass(frozen=True)
class RunContext:
    """What every node of one stack shares."""

    system: str
    title: str
    run_id: str
    scenario_name: str
    bucket: str = ""
    region: str = ""
    wheel_key: str = ""
    scenario_toml: str = ""
    broker_wait_minutes: int = 30
    client_instance_type: str = ""
    broker_instance_type: str = ""
    client_extras: str = "brokers"
    #: Instance type → count of the whole fleet (brokers and clients), for cost figures.
    fleet: dict[str, int] = field(default_factory=dict)
    #: Set when the system has no cloud recipe: nodes fail at boot with this message.
    placeholder: str = ""
    #: Secret name → its parameter-store name (:mod:`infra.secrets`); values never come here.
    secret_parameters: dict[str, str] = field(default_factory=dict)
    #: The scenario declares faults: broker nodes run the fault agent (needs ``bucket``).
    faults: bool = False
    #: Hours after boot when every machine stops itself (``brokerbench:ttlHours``); 0: never.
    ttl_hours: int = 0

    @property
    def wheel_name(self) -> str:
        return self.wheel_key.rsplit("/", 1)[-1]

    @property
    def constraints_key(self) -> str:
        """The pip constraints the stack uploads next to the wheel (:class:`BucketLayout`)."""
        return BucketLayout(self.run_id, self.wheel_name).constraints_key


def ttl_units(context: RunContext) -> dict[str, str]:
    """The systemd timer (and its service) that powers the machine off ``ttl_hours`` after
    boot — the instance then stops, as its shutdown behaviour says — or none with no ttl."""
    if not context.ttl_hours:
        return {"ttl_timer": "", "ttl_service": ""}
    values = {"ttl_hours": context.ttl_hours, "run_id": context.run_id}
    return {
        "ttl_timer": render("brokerbench-ttl.timer.j2", **values),
        "ttl_service": render("brokerbench-ttl.service.j2", **values),
    }


def boot_logs(context: RunContext, machine: str) -> dict[str, str]:
    """The script that uploads a machine's boot and node logs to the run's prefix and the
    unit that runs it when the machine stops (none without a bucket)."""
    if not context.bucket:
        return {"upload_logs": "", "logs_unit": ""}
    return {
        "upload_logs": render(
            "upload-logs.sh.j2",
            bucket=context.bucket,
            prefix=LAYOUT.prefix(context.run_id) + LAYOUT.boot_logs,
            machine=machine,
            region=context.region,
        ),
        "logs_unit": render("brokerbench-logs.service.j2", run_id=context.run_id),
    }


def data_dir(recipe: CloudRecipe | None) -> str:
    """Where the node's data volume is mounted: the recipe's ``data_dir``, else /data."""
    return recipe.data_dir if recipe is not None else DATA_DIR


def missing_recipe_message(system: str) -> str:
    return (
        f"brokerbench: {system} has no cloud recipe yet (brokers/{system}/cloud.py, "
        f"exported as SYSTEM.cloud): this node cannot install the broker"
    )


def broker_user_data(
    context: RunContext,
    node: BrokerNode,
    recipe: CloudRecipe | None,
    cluster: dict[str, list[str]],
    params: Any,
) -> str:
    """The ``#cloud-config`` of one broker node (a failing placeholder without a recipe)."""
    if recipe is None:
        install: list[str] = []
        files: dict[str, str] = {}
        start: list[str] = []
        placeholder = context.placeholder or missing_recipe_message(context.system)
    else:
        install = recipe.install_commands()
        files = recipe.node_files(node.role, node.index, cluster, params)
        start = recipe.start_commands(node.role, node.index, cluster)
        placeholder = ""
    for path in files:
        if not path.startswith("/"):
            raise ValueError(f"{context.system} recipe: {path!r} is not an absolute path")
    secrets = [
        {"variable": s.variable, "placeholder": s.placeholder, "parameter": parameter}
        for s in CLOUD_SECRETS
        if (parameter := context.secret_parameters.get(s.name))
    ]
    secret_files = [
        path
        for path, content in files.items()
        if any(s.placeholder in content for s in CLOUD_SECRETS)
    ]
    if secret_files and len(secrets) < len(CLOUD_SECRETS):
        raise ValueError(f"{context.system} recipe: {secret_files[0]} needs the stack's secrets")
    values: dict[str, Any] = {
        **_node_values(context, node),
        "data_dir": data_dir(recipe),
        "staging": STAGING,
        "files": files,
        "install_commands": install,
        "start_commands": start,
        "placeholder": placeholder,
        "secrets": secrets,
        "secret_files": secret_files,
        "service_user": recipe.service_user if recipe is not None else "root",
        "fault_agent_unit": fault_agent_unit(context, node, recipe, cluster)
        if not placeholder
        else "",
        "fault_agent_name": FAULT_AGENT_UNIT,
        "telemetry_agent_unit": telemetry_agent_unit(context, node, recipe, cluster)
        if not placeholder
        else "",
        "telemetry_agent_name": TELEMETRY_AGENT_UNIT,
    }
    env = _env_file(
        BROKERBENCH_SYSTEM=context.system,
        BROKERBENCH_RUN_ID=context.run_id,
        BROKERBENCH_SCENARIO=context.scenario_name,
        BROKERBENCH_ROLE=node.role,
        BROKERBENCH_NODE=str(node.index),
        BROKERBENCH_DATA_DIR=data_dir(recipe),
        **{
            f"BROKERBENCH_{role.upper().replace('-', '_')}_NODES": " ".join(a)
            for role, a in cluster.items()
        },
    )
    return render(
        "broker-node.yaml.j2",
        **values,
        **ttl_units(context),
        node_env=env,
        mount_script=render("mount-data.sh.j2"),
        node_script=render("broker-node.sh.j2", **values),
    )


#: Where a broker node keeps the wheel its fault and telemetry agents run from.
FAULT_AGENT_WHEEL = "/opt/brokerbench/brokerbench.whl"
FAULT_AGENT_UNIT = "brokerbench-faults.service"


TELEMETRY_AGENT_UNIT = "brokerbench-telemetry.service"


def telemetry_agent_unit(
    context: RunContext, node: BrokerNode, recipe: CloudRecipe | None, cluster: dict[str, list[str]]
) -> str:
    """The systemd unit of the node's telemetry agent (:mod:`workload.engine.aws.telemetry_agent`):
    every broker machine of a stack with a results bucket runs one."""
    if not context.bucket:
        return ""
    faults = _faults(recipe, cluster)
    return _agent_unit(
        "brokerbench-telemetry.service.j2",
        context,
        node,
        "workload.engine.aws.telemetry_agent",
        "--data-dir",
        data_dir(recipe),
        "--stop-at-end",
        *(["--unit", faults.unit] if faults is not None else []),
    )


def fault_agent_unit(
    context: RunContext, node: BrokerNode, recipe: CloudRecipe | None, cluster: dict[str, list[str]]
) -> str:
    """The systemd unit of the node's fault agent; "" where no fault acts on this node."""
    faults = _faults(recipe, cluster) if context.faults else None
    if faults is None or node.role not in faults.roles:
        return ""
    if not context.bucket:
        raise ValueError(f"{context.system}: faults on AWS need the results bucket in user-data")
    assert recipe is not None
    return _agent_unit(
        "brokerbench-faults.service.j2",
        context,
        node,
        "workload.engine.aws.fault_agent",
        "--unit",
        faults.unit,
        "--ports",
        ",".join(str(port) for port in recipe.ports()),
        "--address",
        node.address,
        unit=faults.unit,
    )


def _faults(recipe: CloudRecipe | None, cluster: dict[str, list[str]]) -> CloudFaults | None:
    """The faults the recipe takes on a cluster of these nodes (None without a recipe)."""
    roles = {role: len(addresses) for role, addresses in cluster.items()}
    return recipe.faults_for(roles) if recipe is not None else None


def _agent_unit(
    template: str, context: RunContext, node: BrokerNode, module: str, *more: str, **values: Any
) -> str:
    """The systemd unit ``template`` of a broker machine's agent: the system's Python on
    ``module`` from the run's wheel (fetched before every start), with the run's bucket, id
    and region and the node's name, then ``more``."""
    command = [
        "/usr/bin/python3",
        "-m",
        module,
        "--bucket",
        context.bucket,
        "--run-id",
        context.run_id,
        "--region",
        context.region,
        "--node",
        node.name,
        *more,
    ]
    fetch = [
        "/usr/bin/aws",
        "s3",
        "cp",
        "--only-show-errors",
        "--region",
        context.region,
        f"s3://{context.bucket}/{context.wheel_key}",
        FAULT_AGENT_WHEEL,
    ]
    return render(
        template,
        node=node,
        run_id=context.run_id,
        wheel=FAULT_AGENT_WHEEL,
        fetch=shlex.join(fetch),
        command=shlex.join(command),
        **values,
    )


def agent_command(context: RunContext, node: ClientNode) -> str:
    """The command the client service runs (``brokerbench cloud client``)."""
    args = [
        f"{VENV}/bin/brokerbench",
        "cloud",
        "client",
        "--role",
        node.role,
        "--node",
        str(node.index),
        "--run-id",
        context.run_id,
        "--bucket",
        context.bucket,
        "--region",
        context.region,
        "--results",
        RESULTS_DIR,
        "--broker-wait",
        f"{context.broker_wait_minutes}m",
        SCENARIO_PATH,
    ]
    return shlex.join(args)


def client_user_data(context: RunContext, node: ClientNode) -> str:
    """The ``#cloud-config`` of one sender or receiver machine."""
    values: dict[str, Any] = {
        **_node_values(context, node),
        "wheel_uri": f"s3://{context.bucket}/{context.wheel_key}",
        "wheel_name": context.wheel_name,
        "constraints_uri": f"s3://{context.bucket}/{context.constraints_key}",
        "constraints_name": context.constraints_key.rsplit("/", 1)[-1],
        "extras": context.client_extras,
        "placeholder": context.placeholder,
        "agent_command": agent_command(context, node),
    }
    env = _env_file(
        BROKERBENCH_SYSTEM=context.system,
        BROKERBENCH_RUN_ID=context.run_id,
        BROKERBENCH_SCENARIO=context.scenario_name,
        BROKERBENCH_ROLE=node.role,
        BROKERBENCH_NODE=str(node.index),
        BROKERBENCH_BUCKET=context.bucket,
        BROKERBENCH_MACHINE_TYPE=context.client_instance_type,
        BROKERBENCH_BROKER_MACHINE_TYPE=context.broker_instance_type,
        BROKERBENCH_FLEET=json.dumps(context.fleet, sort_keys=True),
        AWS_DEFAULT_REGION=context.region,
        BROKERBENCH_PASSWORD_PARAMETER=context.secret_parameters.get(BROKER_PASSWORD.name, ""),
    )
    return render(
        "client-node.yaml.j2",
        **values,
        **ttl_units(context),
        scenario_toml=context.scenario_toml,
        node_env=env,
        service_unit=render("brokerbench-client.service.j2", **values),
        client_script=render("client-node.sh.j2", **values),
    )


def analysis_entry(run_id: str, module: str) -> str:
    """The small script EMR runs: the analysis module as ``__main__``."""
    return render("analysis_entry.py.j2", run_id=run_id, module=module)


def _node_values(context: RunContext, node: Node) -> dict[str, Any]:
    """What the templates of every machine's user-data take: the run, the node, its region
    and time server, and the upload of its logs."""
    return {
        "title": context.title,
        "run_id": context.run_id,
        "scenario_name": context.scenario_name,
        "node": node,
        "region": context.region,
        "time_server": TIME_SERVER,
        **boot_logs(context, node.name),
    }


def _env_file(**values: str) -> str:
    return "".join(f"{key}={shlex.quote(value)}\n" for key, value in values.items())
