"""The install is reproducible: one Python version, and a lock that pins every requirement."""

import re
import subprocess
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from rote.config import PROJECT_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - the project's Python is 3.11
    tomllib = None


def _requirements(path):
    lines = (line.split("#")[0].strip() for line in (PROJECT_ROOT / path).read_text().splitlines())
    return [Requirement(line) for line in lines if line]


def _lock() -> dict[str, Version]:
    pins = {}
    for req in _requirements("requirements.lock"):
        (spec,) = req.specifier
        assert spec.operator == "==", f"requirements.lock: {req} is not an exact pin"
        pins[canonicalize_name(req.name)] = Version(spec.version)
    return pins


def _python_requires() -> str:
    """pyproject.toml's requires-python, "~=3.X.Y": 3.X.Y or a later 3.X."""
    text = (PROJECT_ROOT / "pyproject.toml").read_text()
    match = re.search(r'^requires-python = "~=(\d+\.\d+\.\d+)"', text, re.M)
    assert match, "pyproject.toml's requires-python names one minor version and its oldest patch, as ~=3.X.Y"
    return match.group(1)


def test_lock_pins_every_requirement():
    """Fails when requirements.txt changed without `make lock` (then run it and commit the lock)."""
    pins = _lock()
    direct = _requirements("requirements.txt")
    if tomllib is not None:
        project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
        direct += [Requirement(d) for d in project["dependencies"]]
    for req in direct:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock: run `make lock`"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock pins {req.name}=={pins[name]}, outside {req}: run `make lock`"
    assert "rote" not in pins  # the project itself is installed from the checkout, not pinned


def test_lock_pins_hold_on_every_index():
    """No local version labels (torch's +cpu): PyPI and the CPU index both satisfy the pins."""
    assert all(not version.local for version in _lock().values())


def test_one_python_version():
    oldest = _python_requires()
    minor = oldest.rsplit(".", 1)[0]
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert set(re.findall(r"Python (\d+\.\d+)", readme)) == {minor} and oldest in readme
    assert f"Python {minor}" in (PROJECT_ROOT / "requirements.lock").read_text().splitlines()[0]
    makefile = (PROJECT_ROOT / "Makefile").read_text()
    assert not re.search(r"python3\.\d+|3\.\d+\.\d+", makefile), "the Makefile reads the version from pyproject.toml"


def test_oldest_python_allowed_installs_every_pinned_package():
    """Every package pinned in the lock (as installed here) accepts the oldest Python allowed."""
    oldest = _python_requires()
    pins = _lock()
    checked = 0
    for dist in metadata.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        if name not in pins or Version(dist.version).public != str(pins[name]):
            continue
        requires = dist.metadata.get("Requires-Python")
        assert not requires or SpecifierSet(requires).contains(oldest), \
            f"{name}=={dist.version} needs Python {requires}: raise requires-python in pyproject.toml"
        checked += 1
    assert checked >= len(pins) // 2  # this environment was installed from the lock


@pytest.mark.parametrize("index, flag", [("", None),
                                         ("https://download.pytorch.org/whl/cpu",
                                          "--extra-index-url https://download.pytorch.org/whl/cpu")])
def test_install_command(index, flag, tmp_path):
    """`make install` uses the lock, the pyproject's Python and TORCH_INDEX only when it is set."""
    result = subprocess.run(["make", "-n", "-B", "install", f"VENV={tmp_path / 'venv'}", f"TORCH_INDEX={index}"],
                            cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    pip_line = next(line for line in result.stdout.splitlines() if "-r requirements.txt" in line)
    assert "-c requirements.lock" in pip_line
    assert (flag in pip_line) if flag else ("--extra-index-url" not in pip_line and "--index-url" not in pip_line)
    assert f"python{_python_requires().rsplit('.', 1)[0]} -m venv" in result.stdout
