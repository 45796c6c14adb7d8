"""What produced a page: the build environment, recorded when a chapter executes (:func:`collect`, in
the executed notebook's ``rote`` metadata), shown under each chapter's title (:func:`stamp_dropdown`) and
on the site's *Build environment* page (:func:`environment_page`). Only :func:`gpu_name` imports torch."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import shutil
import subprocess
import time
from pathlib import Path

from ..config import PROJECT_ROOT
from ..fmt import md_cell

NOT_RECORDED = "not recorded"
NOT_GIT = "not a git checkout"
BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # the CPU flags that make bf16 native (rote.config.cpu_has_native_bf16)
MARKER = "<!-- rote:environment -->"  # book/environment.md: replaced at staging by environment_page()


# -- the facts ----------------------------------------------------------------------------------
def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)


def _no_paths(text: str) -> str:
    """A git message without the machine's paths (a page never shows them)."""
    return re.sub(r"'?/[^\s']*'?", "<path>", text).strip()


def git_state(root: Path = PROJECT_ROOT) -> dict:
    """``commit`` (None without one), ``dirty`` / ``changed`` (tracked files only), and ``note``: why
    there is no commit. A folder inside another repository is not a git checkout."""
    def none(note: str) -> dict:
        return {"commit": None, "dirty": None, "changed": None, "note": note}

    if shutil.which("git") is None:
        return none("git is not installed" if (Path(root) / ".git").exists() else NOT_GIT)
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        if top.returncode != 0:
            message = (top.stderr.strip().splitlines() or [f"exit {top.returncode}"])[-1]
            return none(NOT_GIT if "not a git repository" in message else f"git failed: {_no_paths(message)}")
        if Path(top.stdout.strip()).resolve() != Path(root).resolve():
            return none(NOT_GIT)
        head = _git(root, "rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            return none("a git checkout without commits")
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired) as err:
        return none(f"git failed: {type(err).__name__}")
    changed = len([line for line in status.stdout.splitlines() if line.strip()]) if status.returncode == 0 else None
    return {"commit": head.stdout.strip(), "dirty": None if changed is None else bool(changed), "changed": changed,
            "note": ""}


def package_version(name: str) -> str:
    """The installed version of a distribution, from its metadata."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_info(cpuinfo: str | None = None, lscpu: bool = True) -> tuple[str, set[str]]:
    """(CPU model, flags) from ``/proc/cpuinfo`` (``cpuinfo``: its text), else ``lscpu`` (with ``lscpu``),
    else Python's platform module (no flags)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
        if not cpuinfo and lscpu and shutil.which("lscpu"):
            try:
                cpuinfo = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.TimeoutExpired):
                cpuinfo = ""
    model, flags = "", set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name in ("model name", "Model name", "Model", "cpu model") and not model:
            model = value.strip()
        elif name in ("flags", "Flags") and not flags:
            flags = set(value.split())
    return model or platform.processor() or platform.machine() or "unknown", flags


def cpu_facts(cpuinfo: str | None = None) -> dict:
    """The CPU model and whether it has each flag of :data:`BF16_FLAGS` (:func:`cpu_info`)."""
    model, flags = cpu_info(cpuinfo)
    return {"model": model, **{flag: flag in flags for flag in BF16_FLAGS}}


def gpu_name() -> str | None:
    """The CUDA device training would use here (``rote.model.pick_device``), or None."""
    try:
        import torch

        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:  # no torch, a broken driver: no GPU to name
        return None


def collect(precision: dict[str, str] | None = None, root: Path = PROJECT_ROOT) -> dict:
    """The facts of this build: git state, the runs' code fingerprint, versions, CPU, GPU, and
    ``precision`` (task -> training precision, as the caller resolved it)."""
    from ..config import code_fingerprint

    return {"git": git_state(root), "code_fingerprint": code_fingerprint(), "python": platform.python_version(),
            "torch": package_version("torch"), "numpy": package_version("numpy"), "cpu": cpu_facts(),
            "gpu": gpu_name(), "precision": dict(precision or {})}


# -- the facts on a page --------------------------------------------------------------------------
def commit_text(git: dict | None) -> str:
    """"`<hash>` (clean)", "`<hash>` (dirty: 2 tracked files changed)", or why there is no commit."""
    if not git:
        return NOT_RECORDED
    if not git.get("commit"):
        return git.get("note") or NOT_GIT
    dirty, changed = git.get("dirty"), git.get("changed")
    state = ("clean or dirty: unknown" if dirty is None else "clean" if not dirty
             else f"dirty: {changed} tracked file{'s' if changed != 1 else ''} changed" if isinstance(changed, int)
             else "dirty")
    return f"`{git['commit']}` ({state})"


def cpu_text(cpu: dict | None) -> str:
    if not cpu:
        return NOT_RECORDED
    flags = [f for f in BF16_FLAGS if cpu.get(f)]
    return f"{cpu.get('model') or 'unknown'}; bf16 flags ({', '.join(BF16_FLAGS)}): {', '.join(flags) or 'none'}"


def precision_text(precision: dict | None) -> str:
    """"fda: fp32, thr: bf16" (task: precision)."""
    return ", ".join(f"{task}: {p}" for task, p in precision.items()) if precision else NOT_RECORDED


def facts_lines(env: dict | None) -> list[str]:
    """The facts of :func:`collect` as a markdown list ("not recorded" for what is missing)."""
    if not env:
        return [f"The build environment was {NOT_RECORDED} for this page (it was executed before builds "
                "recorded it); rebuild the page to record it."]

    def get(key):
        return env.get(key) or NOT_RECORDED

    fingerprint = env.get("code_fingerprint")
    return [f"- commit: {commit_text(env.get('git'))}",
            f"- code fingerprint of the runs: {f'`{fingerprint}`' if fingerprint else NOT_RECORDED}",
            f"- Python {get('python')}, torch {get('torch')}, numpy {get('numpy')}",
            f"- CPU: {cpu_text(env.get('cpu'))}", f"- GPU: {env.get('gpu', NOT_RECORDED) or 'none'}",
            f"- training precision: {precision_text(env.get('precision'))}"]


def stamp_dropdown(env: dict | None) -> str:
    """The build stamp's "Build environment" dropdown (sphinx-design), closed until opened."""
    return "\n".join([":::{dropdown} Build environment", ":class-container: rote-environment", "", *facts_lines(env),
                      ":::"])


# -- the Build environment page -------------------------------------------------------------------
def locked_packages(lock: Path = PROJECT_ROOT / "requirements.lock") -> list[tuple[str, str]]:
    """(name, version) of every pin of ``requirements.lock``; a line that is not ``name==version``
    keeps its whole requirement as the version."""
    out = []
    for raw in lock.read_text().splitlines():
        line = raw.split(" #", 1)[0].split(";", 1)[0].strip()
        if not line or line.startswith(("#", "-")):
            continue
        name, sep, version = line.partition("==")
        out.append((name.strip(), version.strip()) if sep else (re.split(r"[\s<>=!~@\[]", line, 1)[0], line))
    return out


def python_requirement(pyproject: Path = PROJECT_ROOT / "pyproject.toml") -> str:
    import tomllib

    return tomllib.loads(pyproject.read_text()).get("project", {}).get("requires-python", NOT_RECORDED)


def environment_page(env: dict | None = None, root: Path = PROJECT_ROOT) -> str:
    """The generated part of the *Build environment* page: the staging build's facts (``env``; None:
    :func:`collect` now), the Python requirement and ``requirements.lock``'s packages as installed here."""
    if env is None:
        from ..config import TASKS, precision_for

        env = collect({task: precision_for(task) for task in TASKS}, root)
    packages = locked_packages(root / "requirements.lock")
    lines = ["## The build that staged this site", "",
             f"Staged {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Each chapter's stamp (under its title) "
             "has the same facts for the build that executed that chapter. The training precision is what "
             "`auto` resolves to on this machine.", "",
             ":::{container} rote-environment", *facts_lines(env), ":::", "", "## Python", "",
             f"`requires-python = \"{python_requirement(root / 'pyproject.toml')}\"` (`pyproject.toml`); this "
             f"build ran Python {env.get('python') or NOT_RECORDED}.", "", "## Locked packages", "",
             f"The {len(packages)} packages that `requirements.lock` pins (`make install` installs under these "
             "constraints; `make lock` regenerates the file), with the version installed where the site was "
             "staged.", "",
             "| package | locked | installed here |", "|:--|:--|:--|"]
    lines += [f"| {md_cell(name)} | {md_cell(version)} | {md_cell(package_version(name))} |" for name, version in packages]
    return "\n".join(lines) + "\n"
