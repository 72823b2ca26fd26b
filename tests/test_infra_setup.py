"""An AWS-only user's set-up: ``pulumi install`` creates the virtualenv ``Pulumi.yaml``
names and installs this project into it, and docs/aws.md says so."""

from __future__ import annotations

import re
import tomllib

import yaml

from infra.settings import ROOT


def test_pulumis_own_install_step_finds_this_project_with_its_aws_extra() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": ".venv"}}
    # Pulumi's pip step runs `pip install -r requirements.txt` in the program's directory.
    program = ROOT / project["main"]
    lines = [
        line.strip()
        for line in (program / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(lines) == 1
    match = re.fullmatch(r"-e (?P<path>[^\[]+)\[(?P<extras>[a-z,]+)\]", lines[0])
    assert match is not None, lines[0]
    assert (program / match["path"]).resolve() == ROOT
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(match["extras"].split(","))
    assert extras == {"aws", "brokers"} and extras <= set(
        pyproject["project"]["optional-dependencies"]
    )
    assert any(
        r.startswith("setuptools") for r in pyproject["project"]["optional-dependencies"]["aws"]
    )


def test_the_readme_on_aws_starts_from_the_one_set_up_command() -> None:
    readme = (ROOT / "docs" / "aws.md").read_text()
    on_aws = readme[readme.index("# On AWS") :]
    on_aws = on_aws[: on_aws.index("\n## ", 1)]
    block = on_aws[on_aws.index("```sh") :]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:]]
    assert commands[0] == "pulumi install"
    assert "stacks/requirements.txt" in on_aws and ".venv" in on_aws
    assert commands.index("pulumi install") < commands.index("pulumi up")
