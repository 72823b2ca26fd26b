"""User-facing errors of the workload side; each carries its exit code and a one-line message."""


class UserError(Exception):
    """Bad input: printed as one line, exit code 2."""

    exit_code = 2


class ScenarioError(UserError):
    """A scenario file is missing, not TOML, or does not match the model."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class RunFailed(Exception):
    """A run could not complete (broker unreachable or died, a node failed): exit code 1."""

    exit_code = 1
