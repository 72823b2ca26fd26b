"""Cloud-init user-data rendering: exact YAML scalars, the broker node script built from a
recipe (install → configure → start), the failing placeholder, the client node bootstrap,
and validation by ``cloud-init schema``."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.cloud import BROKER_PASSWORD, CLUSTER_SECRET, CloudRecipe
from infra import userdata_checks
from infra.plan import BrokerNode, ClientNode
from infra.userdata import (
    RunContext,
    analysis_entry,
    broker_user_data,
    client_user_data,
    yaml_scalar,
)

CLUSTER = {"controller": ["10.42.1.10"], "broker": ["10.42.1.11", "10.42.1.12"]}
AWKWARD = "  leading spaces\n\ttab\n'quotes' \"double\" # not a comment\n: colon\n\n\nünïcode ✓"


class ToyRecipe(CloudRecipe):
    data_dir = "/var/lib/toy"

    def install_commands(self) -> list[str]:
        return ["apt-get install -y toy-broker=1.2.3"]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: Any
    ) -> dict[str, str]:
        return {
            "/etc/toy/toy.conf": f"role = {role}\nindex = {index}\npeers = {cluster['broker']}\n",
            "/etc/toy/awkward.txt": AWKWARD,
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        return ["systemctl restart toy"]

    def ports(self) -> list[int]:
        return [7000]


CONTEXT = RunContext(
    system="toy",
    title="Toy MQ",
    run_id="toy-run-1",
    scenario_name="toy-sweep",
    bucket="results-bucket",
    region="eu-west-1",
    wheel_key="artifacts/toy-run-1/brokerbench-0.1.0-py3-none-any.whl",
    scenario_toml='name = "toy-sweep"\n\n[broker]\nsystem = "toy"\n',
)
NODE = BrokerNode("broker", 1, "10.42.1.12")
SENDER = ClientNode("sender", 2, "10.42.1.102")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_yaml_scalar_round_trips_any_text(text: str) -> None:
    document = f"items:\n  - path: /x\n    content: {yaml_scalar(text, 6)}\n  - path: /y\n"
    assert yaml.safe_load(document)["items"] == [{"path": "/x", "content": text}, {"path": "/y"}]


def test_multi_line_text_stays_readable() -> None:
    assert yaml_scalar("a = 1\nb = 2\n", 4) == "|\n    a = 1\n    b = 2"
    assert yaml_scalar("one line", 4) == '"one line"'


def test_broker_node_installs_then_configures_then_starts() -> None:
    text = broker_user_data(CONTEXT, NODE, ToyRecipe(), CLUSTER, params=None)
    assert userdata_checks.cloud_config_problems(text) == []
    files = userdata_checks.written_files(text)
    assert files["/opt/brokerbench/files/etc/toy/awkward.txt"] == AWKWARD
    assert files["/opt/brokerbench/files/etc/toy/toy.conf"].startswith("role = broker\nindex = 1\n")
    script = files["/opt/brokerbench/node.sh"]
    order = [
        "/opt/brokerbench/mount-data.sh /var/lib/toy",
        "apt-get install -y toy-broker=1.2.3",
        "install -D -m 0644 /opt/brokerbench/files/etc/toy/toy.conf /etc/toy/toy.conf",
        "systemctl restart toy",
        "state ready",
    ]
    positions = [script.index(line) for line in order]
    assert positions == sorted(positions)
    document = yaml.safe_load(text)
    assert document["ntp"] == {
        "enabled": True,
        "ntp_client": "chrony",
        "servers": ["169.254.169.123"],
    }
    assert "BROKERBENCH_BROKER_NODES='10.42.1.11 10.42.1.12'" in files["/etc/brokerbench/node.env"]
    assert "toy-run-1" in text and "toy-sweep" in text


def test_broker_node_script_is_valid_bash(tmp_path: Path) -> None:
    text = broker_user_data(CONTEXT, NODE, ToyRecipe(), CLUSTER, params=None)
    for name in ("/opt/brokerbench/node.sh", "/opt/brokerbench/mount-data.sh"):
        script = tmp_path / "script.sh"
        script.write_text(userdata_checks.written_files(text)[name])
        done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_missing_recipe_renders_a_failing_placeholder(tmp_path: Path) -> None:
    text = broker_user_data(CONTEXT, NODE, None, CLUSTER, params=None)
    assert userdata_checks.cloud_config_problems(text) == []
    script = userdata_checks.written_files(text)["/opt/brokerbench/node.sh"]
    assert "toy has no cloud recipe yet" in script
    path = tmp_path / "node.sh"
    path.write_text(
        script.replace("/var/lib/brokerbench", str(tmp_path)).replace("/var/log", str(tmp_path))
    )
    done = subprocess.run(["bash", str(path)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 1 and "no cloud recipe" in done.stdout + done.stderr


def test_recipe_files_must_be_absolute() -> None:
    class Relative(ToyRecipe):
        def node_files(self, *args: Any) -> dict[str, str]:
            return {"etc/toy.conf": ""}

    with pytest.raises(ValueError, match="not an absolute path"):
        broker_user_data(CONTEXT, NODE, Relative(), CLUSTER, params=None)


def test_client_node_installs_the_wheel_and_starts_its_role() -> None:
    text = client_user_data(CONTEXT, SENDER)
    assert userdata_checks.cloud_config_problems(text) == []
    files = userdata_checks.written_files(text)
    assert files["/etc/brokerbench/scenario.toml"] == CONTEXT.scenario_toml
    bootstrap = files["/opt/brokerbench/client.sh"]
    assert "s3://results-bucket/artifacts/toy-run-1/brokerbench-0.1.0-py3-none-any.whl" in bootstrap
    assert "'/opt/brokerbench/brokerbench-0.1.0-py3-none-any.whl[brokers]'" in bootstrap
    unit = files["/etc/systemd/system/brokerbench-client.service"]
    assert (
        "ExecStart=/opt/brokerbench/venv/bin/brokerbench cloud client --role sender --node 2 "
        "--run-id toy-run-1 --bucket results-bucket --region eu-west-1 "
        "--results /var/lib/brokerbench/results --broker-wait 30m /etc/brokerbench/scenario.toml"
    ) in unit
    assert "toy-run-1" in text and "toy-sweep" in text


def fake_commands(bin_dir: Path, bucket: Path, log: Path) -> None:
    """``aws s3 cp`` from a directory standing for S3 (each key fails once, then works),
    ``python3 -m venv`` whose pip logs its arguments, and no-op ``sleep``/``systemctl``."""
    scripts = {
        "aws": f'uri="${{@: -2:1}}"; key="${{uri#s3://}}"; tried="{log}-tried-${{key##*/}}"\n'
        'if [ ! -e "$tried" ]; then touch "$tried"; exit 1; fi\n'
        f'cp "{bucket}/$key" "${{@: -1}}"',
        "pip": f'printf "%s\\n" "$@" >> {log}',
        "python3": f'mkdir -p "$3/bin" && cp {bin_dir}/pip "$3/bin/pip"',
        "sleep": "true",
        "systemctl": "true",
    }
    bin_dir.mkdir()
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)


def test_client_node_installs_with_the_uploaded_constraints(tmp_path: Path) -> None:
    script = userdata_checks.written_files(client_user_data(CONTEXT, SENDER))[
        "/opt/brokerbench/client.sh"
    ]
    opt, log = tmp_path / "opt", tmp_path / "pip-args"
    artifacts = tmp_path / "s3" / "results-bucket" / "artifacts" / "toy-run-1"
    artifacts.mkdir(parents=True)
    (artifacts / "brokerbench-0.1.0-py3-none-any.whl").write_bytes(b"wheel")
    (artifacts / "constraints.txt").write_text("pika==1.3.2\n")
    fake_commands(tmp_path / "bin", tmp_path / "s3", log)
    local = tmp_path / "client.sh"
    local.write_text(
        script.replace("/opt/brokerbench", str(opt))
        .replace("/var/lib/brokerbench", str(tmp_path))
        .replace("/var/log", str(tmp_path))
    )
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(local)], capture_output=True, text=True, env=env)

    done = run()
    assert done.returncode == 0, done.stdout + done.stderr
    output = done.stdout + done.stderr
    assert "download of s3://results-bucket/artifacts/toy-run-1/constraints.txt failed" in output
    assert (opt / "constraints.txt").read_text() == "pika==1.3.2\n"
    assert log.read_text().split() == [
        "install",
        "--quiet",
        "-c",
        f"{opt}/constraints.txt",
        f"{opt}/brokerbench-0.1.0-py3-none-any.whl[brokers]",
    ]  # one pip call, and pip itself is not upgraded from PyPI

    # Without the constraints the node installs nothing: it stops after the last retry.
    (artifacts / "constraints.txt").unlink()
    (opt / "constraints.txt").unlink()
    log.unlink()
    done = run()
    assert done.returncode != 0 and not log.exists()
    assert "could not download s3://results-bucket/artifacts/toy-run-1/constraints.txt" in (
        done.stdout + done.stderr
    )


def test_client_command_line_matches_the_cloud_client_command() -> None:
    import argparse

    from infra.userdata import agent_command
    from workload.shell import cloud

    parser = argparse.ArgumentParser()
    cloud.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(agent_command(CONTEXT, SENDER).split()[1:])
    assert (args.role, args.node, args.run_id, args.bucket) == (
        "sender",
        2,
        "toy-run-1",
        "results-bucket",
    )
    assert args.broker_wait == 1800.0 and args.scenario == Path("/etc/brokerbench/scenario.toml")


def test_analysis_entry_runs_the_module_as_main(tmp_path: Path) -> None:
    (tmp_path / "fakejob.py").write_text(
        "import sys\nif __name__ == '__main__':\n    print('ran', sys.argv[1:])\n"
    )
    entry = tmp_path / "entry.py"
    entry.write_text(analysis_entry("toy-run-1", "fakejob"))
    done = subprocess.run(
        [sys.executable, str(entry), "s3://b/runs/toy-run-1/"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    assert done.stdout.strip() == "ran ['s3://b/runs/toy-run-1/']", done.stderr


def test_cloud_init_schema_accepts_the_templates_and_rejects_nonsense() -> None:
    if userdata_checks.cloud_init_schema("#cloud-config\n{}\n") is None:
        pytest.skip("cloud-init is not installed (apt-get install cloud-init; make setup does)")
    for text in (
        broker_user_data(CONTEXT, NODE, ToyRecipe(), CLUSTER, params=None),
        broker_user_data(CONTEXT, NODE, None, CLUSTER, params=None),
        client_user_data(CONTEXT, SENDER),
    ):
        assert userdata_checks.cloud_init_schema(text) == []
    assert userdata_checks.cloud_init_schema("#cloud-config\nruncmd: 5\nntp:\n  enabled: maybe\n")


class SecretToyRecipe(ToyRecipe):
    """A recipe whose configuration holds the stack's secrets."""

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: Any
    ) -> dict[str, str]:
        return {
            "/etc/toy/users.conf": f"user = toy\npassword = {BROKER_PASSWORD.placeholder}\n",
            "/etc/toy/cookie": CLUSTER_SECRET.placeholder,
            "/etc/toy/toy.conf": "role = broker\n",
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        return [f"toyctl add-user toy {BROKER_PASSWORD.shell}"]


def test_secrets_reach_the_broker_files_at_boot_and_never_the_user_data(tmp_path: Path) -> None:
    """The configuring part of node.sh, run for real with a stand-in ``aws`` command."""
    values = {
        "/brokerbench/toy-run-1/password": "Pw0rd",
        "/brokerbench/toy-run-1/cluster": "C00kie",
    }
    context = replace(
        CONTEXT,
        secret_parameters={
            "password": "/brokerbench/toy-run-1/password",
            "cluster": "/brokerbench/toy-run-1/cluster",
        },
    )
    text = broker_user_data(context, NODE, SecretToyRecipe(), CLUSTER, params=None)
    assert not any(value in text for value in values.values())
    assert userdata_checks.user_data_credential_problems(text) == []
    document = yaml.safe_load(text)
    modes = {f["path"]: f["permissions"] for f in document["write_files"]}
    assert modes["/opt/brokerbench/files/etc/toy/users.conf"] == "0600"
    assert modes["/opt/brokerbench/files/etc/toy/toy.conf"] == "0644"
    script = userdata_checks.written_files(text)["/opt/brokerbench/node.sh"]
    assert 'toyctl add-user toy "$BROKERBENCH_PASSWORD"' in script

    # Stage the files where the script expects them (under tmp_path) and run the part that
    # reads the secrets and installs the files.
    root = tmp_path / "root"
    for path, content in userdata_checks.written_files(text).items():
        if path.startswith("/opt/brokerbench/files/"):
            staged = root / path.lstrip("/")
            staged.parent.mkdir(parents=True, exist_ok=True)
            staged.write_text(content)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_aws = bin_dir / "aws"
    cases = "".join(f"  {name}) printf %s {value};;\n" for name, value in values.items())
    fake_aws.write_text(
        '#!/bin/bash\nwhile [ "$1" != --name ]; do shift; done\n'
        f'case "$2" in\n{cases}  *) exit 254;;\nesac\n'
    )
    fake_aws.chmod(0o755)
    function = script[script.index("read_secret() {") : script.index("\n}\n") + 3]
    configuring = script[script.index("state configuring") : script.index("state starting")]
    part = re.sub(r" /(opt|etc)/", rf" {root}/\1/", function + configuring.split("\n", 1)[1])
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", part],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert not any(value in done.stdout + done.stderr for value in values.values())
    users = root / "etc/toy/users.conf"
    assert users.read_text() == "user = toy\npassword = Pw0rd\n"
    assert (root / "etc/toy/cookie").read_text() == "C00kie"
    assert users.stat().st_mode & 0o777 == 0o600
    assert (root / "etc/toy/toy.conf").stat().st_mode & 0o777 == 0o644
    assert (
        BROKER_PASSWORD.placeholder
        in (root / "opt/brokerbench/files/etc/toy/users.conf").read_text()
    )


class BigRecipe(ToyRecipe):
    """A recipe whose configuration alone is near EC2's 16 KiB of user-data."""

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: Any
    ) -> dict[str, str]:
        lines = [f"<property name='setting-{i}' value='{i * 7919 % 1000}'/>" for i in range(400)]
        return {"/etc/toy/broker.xml": "\n".join(lines) + "\n", "/etc/toy/small.conf": "a = 1\n"}


def test_large_files_are_packed_and_the_user_data_stays_within_ec2s_limit() -> None:
    files = BigRecipe().node_files("broker", 0, CLUSTER, None)
    assert len(files["/etc/toy/broker.xml"]) > 15_000
    text = broker_user_data(CONTEXT, NODE, BigRecipe(), CLUSTER, params=None)
    assert userdata_checks.cloud_config_problems(text) == []
    assert userdata_checks.size_problems({"broker-1": text}) == []
    document = yaml.safe_load(text)
    entries = {f["path"]: f for f in document["write_files"]}
    packed = entries["/opt/brokerbench/files/etc/toy/broker.xml"]
    assert packed["encoding"] == "gz+b64"
    assert "encoding" not in entries["/opt/brokerbench/files/etc/toy/small.conf"]  # readable
    written = userdata_checks.written_files(text)
    assert written["/opt/brokerbench/files/etc/toy/broker.xml"] == files["/etc/toy/broker.xml"]
    # the same bytes every time: a machine is not replaced for a timestamp
    assert broker_user_data(CONTEXT, NODE, BigRecipe(), CLUSTER, params=None) == text
    if userdata_checks.cloud_init_schema("#cloud-config\n{}\n") is not None:
        assert userdata_checks.cloud_init_schema(text) == []


def test_user_data_near_the_limit_is_found() -> None:
    assert userdata_checks.size_problems({"ok": "x" * 12_288, "big": "y" * 15_034}) == [
        "big: user-data of 15,034 bytes, more than 12,288 (16,384, EC2's limit, less 4,096 "
        "to spare): pack or shorten what it writes"
    ]


def test_every_machine_uploads_its_logs_and_a_client_stops_when_its_agent_exits(
    tmp_path: Path,
) -> None:
    broker = broker_user_data(CONTEXT, NODE, ToyRecipe(), CLUSTER, params=None)
    client = client_user_data(CONTEXT, SENDER)
    for text, machine in ((broker, "broker-1"), (client, "sender-2")):
        files = userdata_checks.written_files(text)
        script = files["/opt/brokerbench/upload-logs.sh"]
        assert f"to=s3://results-bucket/runs/toy-run-1/logs/boot/{machine}\n" in script
        unit = files["/etc/systemd/system/brokerbench-logs.service"]
        assert "ExecStop=/opt/brokerbench/upload-logs.sh" in unit  # when the machine stops
        assert "[systemctl, enable, --now, brokerbench-logs.service]" in text
        path = tmp_path / f"{machine}.sh"
        path.write_text(script)
        assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    # a failed set-up uploads them at once (the failure's last lines too)
    assert (
        "upload-logs.sh failed" in userdata_checks.written_files(broker)["/opt/brokerbench/node.sh"]
    )
    files = userdata_checks.written_files(client)
    assert "upload-logs.sh failed" in files["/opt/brokerbench/client.sh"]
    # the client machine stops once its agent exits, however the run went
    service = files["/etc/systemd/system/brokerbench-client.service"]
    assert "ExecStopPost=/usr/bin/systemctl --no-block poweroff" in service
