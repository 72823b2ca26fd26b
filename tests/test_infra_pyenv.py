"""The analysis job's packed Python environment: found, built the same way twice, cached,
uploaded by the stack (under Pulumi's mocks) and named by the manifest."""

from __future__ import annotations

import hashlib
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from infra import checks, pyenv
from infra.mocking import deploy
from infra.program import build
from infra.pyenv import PackError, PythonHome
from infra.settings import StackConfigError
from tests.test_infra_stacks import REGION, deployable, with_recipes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
EPOCH = 1_700_000_000


def fake_home(root: Path, version: str = "3.11") -> Path:
    """A folder shaped like a relocatable CPython (an executable and its lib folder)."""
    (root / "bin").mkdir(parents=True)
    executable = root / "bin" / f"python{version}"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    (root / "bin" / "python3").symlink_to(f"python{version}")
    (root / "lib" / f"python{version}" / "encodings").mkdir(parents=True)
    (root / "lib" / f"python{version}" / "encodings" / "__init__.py").write_text("")
    return root


def toy_wheel(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "toypkg-1.0-py3-none-any.whl"
    files = {
        "toypkg/__init__.py": "VALUE = 1\n",
        "toypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: toypkg\nVersion: 1.0\n",
        "toypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "toypkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in {**files, "toypkg-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return path


def test_the_newest_interpreter_uv_keeps_is_found(tmp_path: Path) -> None:
    for name in (
        "cpython-3.10.14-linux-x86_64-gnu",
        "cpython-3.11.9-linux-x86_64-gnu",
        "cpython-3.12.4-linux-x86_64-gnu",
        "cpython-3.13.0-macos-aarch64-none",
    ):
        fake_home(tmp_path / name, ".".join(name.split("-")[1].split(".")[:2]))  # fmt: skip
    found = pyenv.find_python_home(None, tmp_path)
    assert found == PythonHome(tmp_path / "cpython-3.12.4-linux-x86_64-gnu", "3.12")
    assert pyenv.find_python_home(None, tmp_path / "none") is None
    with pytest.raises(PackError, match=r"no relocatable CPython >= 3\.11"):
        pyenv.find_python_home(tmp_path / "cpython-3.10.14-linux-x86_64-gnu")


def test_the_analysis_needs_everything_but_what_spark_brings() -> None:
    pins = pyenv.analysis_constraints("3.11").pins
    assert {"pyarrow", "pydantic", "boto3", "numpy", "plotly"} <= set(pins)
    assert not {"pyspark", "py4j"} & set(pins)


def test_the_environment_is_the_same_bytes_twice_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = pyenv.python_home(fake_home(tmp_path / "cpython"))
    wheel = toy_wheel(tmp_path / "dist")
    links = [tmp_path / "dist"]  # offline: the wheel's own folder is the only index
    first = pyenv.build_environment(home, wheel, {}, tmp_path / "a", EPOCH, links)
    second = pyenv.build_environment(home, wheel, {}, tmp_path / "b", EPOCH, links)
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second)]
    assert digest[0] == digest[1]
    with tarfile.open(first) as archive:
        members = {m.name: m for m in archive.getmembers()}
    assert members["bin/python"].issym() and members["bin/python"].linkname == "python3.11"
    assert members["bin/python3.11"].mode == 0o755
    package = members["lib/python3.11/site-packages/toypkg/__init__.py"]
    assert (package.uid, package.uname, package.mtime, package.mode) == (0, "root", EPOCH, 0o644)
    assert list(members) == sorted(members)

    def no_second_build(*args: object) -> None:
        raise AssertionError("built again")

    monkeypatch.setattr(pyenv, "_pip_install", no_second_build)
    assert pyenv.build_environment(home, wheel, {}, tmp_path / "a", EPOCH, links) == first


def test_the_stack_uploads_the_environment_and_the_application_has_no_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    monkeypatch.setattr(pyenv, "_pip_install", lambda site, *args: None)
    monkeypatch.setattr(pyenv, "default_out_dir", lambda: tmp_path / "cache")
    import infra.program

    monkeypatch.setattr(infra.program, "default_out_dir", lambda: tmp_path / "cache")
    wheel = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    home = fake_home(tmp_path / "cpython-3.11.9-linux-x86_64-gnu")
    settings = deployable("redis").model_copy(update={"emr_python_home": home})
    deployment, resources = deploy(lambda: build(settings, "redis", REGION, wheel=wheel))
    (app,) = checks.of_type(resources, "emrserverless/application:Application")
    assert not app.inputs.get("imageConfiguration")
    objects = {
        o.inputs["key"]: o for o in checks.of_type(resources, "s3/bucketObjectv2:BucketObjectv2")
    }
    key = deployment.layout.environment_key
    assert key == f"artifacts/{deployment.run_id}/pyenv.tar.gz"
    assert Path(objects[key].inputs["source"].path).name.startswith("pyenv-")
    manifest = json.loads(objects[deployment.layout.manifest_key].inputs["content"])
    assert manifest["emr_environment"] == key

    # with a custom image: no environment, the manifest names none
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/brokerbench-emr:7.5.0"
    settings = settings.model_copy(update={"emr_image": image})
    deployment, resources = deploy(lambda: build(settings, "redis", REGION, wheel=wheel))
    objects = {
        o.inputs["key"]: o for o in checks.of_type(resources, "s3/bucketObjectv2:BucketObjectv2")
    }
    assert deployment.layout.environment_key not in objects
    assert (
        json.loads(objects[deployment.layout.manifest_key].inputs["content"])["emr_environment"]
        == ""
    )

    # an interpreter folder that is none: one line naming the key
    settings = settings.model_copy(update={"emr_image": None, "emr_python_home": tmp_path})
    with pytest.raises(StackConfigError, match=r"brokerbench:emrPythonHome: .*no relocatable"):
        build(settings, "redis", REGION, wheel=wheel)
