"""What produced a page (rote.build.provenance): the facts recorded when a chapter executes, the stamp's
"Build environment" dropdown, and the Build environment page written at staging."""

import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from rote.build import driver, provenance, site, staging

ENV = {"git": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": True, "changed": 2, "note": ""},
       "code_fingerprint": "65de01d5e287", "python": "3.11.7", "torch": "2.13.0+cpu", "numpy": "2.4.6",
       "cpu": {"model": "Intel(R) Xeon(R) Platinum 8481C", "avx512_bf16": True, "amx_bf16": True}, "gpu": None,
       "precision": {"fda": "fp32", "thr": "bf16"}}


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_names_the_commit_and_whether_tracked_files_changed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    state = provenance.git_state(repo)
    assert re.fullmatch(r"[0-9a-f]{40}", state["commit"]) and state["dirty"] is False and state["changed"] == 0
    (repo / "new.py").write_text("")  # untracked: not dirty
    assert provenance.git_state(repo)["dirty"] is False
    (repo / "a.py").write_text("x = 2\n")
    assert provenance.git_state(repo)["dirty"] is True and provenance.git_state(repo)["changed"] == 1
    inner = repo / "sub"  # a folder inside a checkout is not a checkout of its own
    inner.mkdir()
    assert provenance.git_state(inner) == {"commit": None, "dirty": None, "changed": None, "note": "not a git checkout"}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert provenance.git_state(plain)["note"] == "not a git checkout"


def test_git_state_without_git(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance.shutil, "which", lambda name: None)
    assert provenance.git_state(tmp_path)["note"] == "not a git checkout"
    (tmp_path / ".git").mkdir()
    assert provenance.git_state(tmp_path)["note"] == "git is not installed"


def test_cpu_facts_read_the_model_and_the_bf16_flags():
    amx = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\nflags\t\t: fpu avx2 avx512_bf16 amx_bf16 amx_tile\n"
    assert provenance.cpu_facts(amx) == {"model": "Intel(R) Xeon(R) Platinum 8481C", "avx512_bf16": True,
                                         "amx_bf16": True}
    epyc = "model name\t: AMD EPYC 7B13\nflags\t\t: fpu avx2 avx512f\n"
    assert provenance.cpu_facts(epyc) == {"model": "AMD EPYC 7B13", "avx512_bf16": False, "amx_bf16": False}
    assert "bf16 flags (avx512_bf16, amx_bf16): none" in provenance.cpu_text(provenance.cpu_facts(epyc))
    lscpu = "Architecture: x86_64\nModel name: AMD EPYC 9654\nFlags: fpu avx512_bf16\n"
    assert provenance.cpu_facts(lscpu) == {"model": "AMD EPYC 9654", "avx512_bf16": True, "amx_bf16": False}


def test_importing_provenance_does_not_import_torch():
    code = "import sys, rote.build.provenance, rote.build.site; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=site.PROJECT_ROOT)


def test_collect_has_every_fact(monkeypatch):
    monkeypatch.setattr(provenance, "gpu_name", lambda: "NVIDIA H200")
    env = provenance.collect({"fda": "fp32"})
    assert set(env) == set(ENV)
    assert env["torch"] == provenance.package_version("torch") and env["python"].startswith("3.")
    assert env["gpu"] == "NVIDIA H200" and env["precision"] == {"fda": "fp32"}
    from rote.config import code_fingerprint

    assert env["code_fingerprint"] == code_fingerprint()
    assert "- GPU: NVIDIA H200" in provenance.facts_lines(env)


def test_the_stamp_has_a_build_environment_dropdown():
    meta = {"chapter": "tasks", "profile": "smoke", "parameters": {"profile": "smoke"}, "seconds": 11.2,
            "executed": "2026-11-30 16:38 UTC", "ok": True, "error": "", "environment": ENV}
    text = site.stamp_markdown(meta, {"profile": '"smoke"'})
    assert text.startswith("::::{note}") and text.endswith(":::\n::::")
    dropdown = text[text.index(":::{dropdown} Build environment"):]
    assert ":class-container: rote-environment" in dropdown
    for fact in ["- commit: `0123456789abcdef0123456789abcdef01234567` (dirty: 2 tracked files changed)",
                 "- code fingerprint of the runs: `65de01d5e287`", "- Python 3.11.7, torch 2.13.0+cpu, numpy 2.4.6",
                 "- CPU: Intel(R) Xeon(R) Platinum 8481C; bf16 flags (avx512_bf16, amx_bf16): avx512_bf16, amx_bf16",
                 "- GPU: none", "- training precision: fda: fp32, thr: bf16"]:
        assert fact in dropdown, fact
    clean = {**ENV, "git": {**ENV["git"], "dirty": False, "changed": 0}}
    assert "(clean)" in provenance.stamp_dropdown(clean)
    outside = {**ENV, "git": {"commit": None, "dirty": None, "changed": None, "note": "not a git checkout"}}
    assert "- commit: not a git checkout" in provenance.stamp_dropdown(outside)


def test_a_page_executed_before_the_environment_was_recorded_says_so():
    old = {"chapter": "tasks", "profile": "smoke", "parameters": {"profile": "smoke"}, "seconds": 1.0,
           "executed": "then", "ok": True, "error": ""}
    text = site.stamp_markdown(old)
    assert ":::{dropdown} Build environment" in text and "not recorded" in text
    partial = provenance.stamp_dropdown({"python": "3.11.7"})  # a fact missing from the record: "not recorded"
    assert "- commit: not recorded" in partial and "torch not recorded" in partial


def test_run_chapter_records_the_environment(tmp_path, monkeypatch):
    import papermill

    chapters = tmp_path / "book"
    chapters.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Planted"),
                nbformat.v4.new_code_cell("profile = 'smoke'", metadata={"tags": ["parameters"]})]
    nbformat.write(nb, chapters / "01_planted.ipynb")
    monkeypatch.setattr(site, "BOOK_DIR", chapters)
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    monkeypatch.setattr(provenance, "gpu_name", lambda: None)
    monkeypatch.setattr(papermill, "execute_notebook",  # nothing executes: the page is the source
                        lambda source, out, **kw: shutil.copy(source, out))
    result = driver.run_chapter("planted", "smoke", {"profile": "smoke", "overrides": {"precision": "fp32"}})
    assert result.ok, result.error
    env = nbformat.read(result.notebook, as_version=4).metadata["rote"]["environment"]
    assert env["precision"] == {"fda": "fp32", "thr": "fp32"}
    assert env["torch"] == provenance.package_version("torch") and env["cpu"]["model"]
    assert env["git"] == provenance.git_state(site.PROJECT_ROOT)


def test_locked_packages_and_the_python_requirement(tmp_path):
    (tmp_path / "requirements.lock").write_text("# generated\n\nnumpy==2.4.6\ntorch==2.13.0  # the CPU wheel\n"
                                                "tomli==2.0.1 ; python_version < '3.11'\n")
    assert provenance.locked_packages(tmp_path / "requirements.lock") == [
        ("numpy", "2.4.6"), ("torch", "2.13.0"), ("tomli", "2.0.1")]
    assert provenance.python_requirement() == "~=3.11.5"
    assert len(provenance.locked_packages()) > 50


def test_environment_page_lists_every_locked_package():
    page = provenance.environment_page(ENV)
    assert '`requires-python = "~=3.11.5"`' in page and "this build ran Python 3.11.7" in page
    assert "- commit: `0123456789abcdef0123456789abcdef01234567`" in page
    rows = [line for line in page.splitlines() if line.startswith("| ") and not line.startswith("| package")]
    packages = provenance.locked_packages()
    assert len(rows) == len(packages)
    for (name, version), row in zip(packages, rows):
        assert row.startswith(f"| {name} | {version} | "), row


def test_staging_fills_the_generated_pages_and_stamps(tmp_path, monkeypatch):
    monkeypatch.setenv("ROTE_SITE", str(tmp_path / "site"))
    monkeypatch.setattr(site, "BUILD_DIR", tmp_path / "_build")
    monkeypatch.setattr(provenance, "gpu_name", lambda: None)
    pages = {}
    for name, env in (("tasks", ENV), ("learning_dynamics", None)):  # a page with the facts, and an older one
        source = driver.chapters()[name]
        executed = driver.output_dir(name, "smoke", {"profile": "smoke"}) / f"{name}.ipynb"
        executed.parent.mkdir(parents=True)
        nbformat.write(nbformat.read(source, as_version=4), executed)
        meta = {"chapter": name, "profile": "smoke", "parameters": {"profile": "smoke"}, "seconds": 3.0,
                "executed": "now", "ok": True, "error": "", "source_sha": driver.source_hash(source)}
        driver._stamp(executed, "stamp", {**meta, "environment": env} if env else meta)
        pages[name] = source.name
    staged = staging.stage_site("smoke") / "book"

    def stamp(name):
        cells = nbformat.read(staged / pages[name], as_version=4).cells
        return next(c.source for c in cells if driver.STAMP_TAG in c.metadata.get("tags", []))

    assert "0123456789abcdef0123456789abcdef01234567" in stamp("tasks") and "torch 2.13.0+cpu" in stamp("tasks")
    assert "not recorded" in stamp("learning_dynamics")
    environment = (staged / "environment.md").read_text()
    assert provenance.MARKER not in environment and "| package | locked | installed here |" in environment
    assert f"torch {provenance.package_version('torch')}" in environment
    parameters = (staged / "parameters.md").read_text()
    from rote.build import reference

    assert reference.MARKER not in parameters and "## Run parameters" in parameters
    assert staging.fill_generated_pages(staged) == []  # filled once: no marker left
