"""The book's settings (seeds, profile, folders, progress display) are passed as arguments, never through the
environment (issue 45 part 2): the environment is read in one place, :func:`rote.settings.read_environment`, which the
command line and the notebooks' parameters cell call with ``os.environ``; the library never reads or writes it for
them, and the build never writes it for its children to read."""

import ast
import json
import os
import threading
from pathlib import Path

import pytest

from rote import settings as S
from rote.build import book, driver
from rote.config import ConfigError

ROTE = Path(__file__).resolve().parents[1] / "rote"
VARIABLES = set(S.ENVIRONMENT.values())
# module -> why it may touch os.environ (each read names its variable; none writes it)
READS = {
    "build/cli.py": "the command line: the one place that reads the settings (rote.settings.read_environment)",
    "build/engine.py": "a training worker's process: this environment and its thread counts",
    "build/timings.py": "ROTE_NO_PROBE, not a setting of the book",
    "build/staging.py": "ROTE_SITE, where the site is staged, not a setting of the book",
    "build/publish.py": "the repository URL, not a setting of the book",
}
WRITERS = {"update", "pop", "setdefault", "clear", "popitem", "__setitem__", "__delitem__"}


def _is_environ(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name) \
        and node.value.id == "os"


def environment_uses(source: str) -> dict[str, list[str]]:
    """What a module does with the environment: "reads" (each os.environ / os.getenv use, with the variable where a
    literal names it), "writes" (assignments, deletions and mutating calls on os.environ, os.putenv / unsetenv)."""
    found: dict[str, list[str]] = {"reads": [], "writes": []}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            found["writes"] += [ast.unparse(t) for t in targets
                                if isinstance(t, ast.Subscript) and _is_environ(t.value)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if _is_environ(node.func.value) and node.func.attr in WRITERS:
                found["writes"].append(ast.unparse(node))
            elif isinstance(node.func.value, ast.Name) and node.func.value.id == "os" and \
                    node.func.attr in ("putenv", "unsetenv"):
                found["writes"].append(ast.unparse(node))
            elif (isinstance(node.func.value, ast.Name) and node.func.value.id == "os" and node.func.attr == "getenv") \
                    or (_is_environ(node.func.value) and node.func.attr == "get"):
                found["reads"].append(ast.unparse(node))
        elif isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load):
            found["reads"].append(ast.unparse(node))
        elif _is_environ(node):
            found["reads"].append("os.environ")
    return found


def setting_reads(uses: dict[str, list[str]]) -> list[str]:
    """The reads that name a setting's variable (:data:`rote.settings.ENVIRONMENT`)."""
    return [r for r in uses["reads"] if any(f'"{v}"' in r or f"'{v}'" in r for v in VARIABLES)]


def scan(root: Path = ROTE) -> dict[str, dict[str, list[str]]]:
    """Module (path under ``root``) -> its environment uses, for the modules that have any."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        uses = environment_uses(path.read_text())
        if uses["reads"] or uses["writes"]:
            out[path.relative_to(root).as_posix()] = uses
    return out


def test_the_scan_finds_a_planted_read_and_write(tmp_path):
    (tmp_path / "planted.py").write_text('import os\nos.environ["ROTE_SEEDS"] = "1"\nos.environ.update(A="1")\n'
                                         'root = os.environ.get("ROTE_RUNS")\nx = os.getenv("ROTE_FIGURES")\n'
                                         'del os.environ["ROTE_RESULTS"]\n')
    uses = scan(tmp_path)["planted.py"]
    assert len(uses["writes"]) == 3 and len(setting_reads(uses)) == 2


def test_no_module_writes_the_environment():
    assert {m: u["writes"] for m, u in scan().items() if u["writes"]} == {}


def test_only_the_allowed_modules_touch_the_environment_and_no_library_module_reads_a_setting_there():
    uses = scan()
    assert set(uses) <= set(READS), f"a module reads the environment: {sorted(set(uses) - set(READS))}"
    library = [m for m in uses if not m.startswith("build/")]
    assert library == [], library  # the library reads no environment: settings arrive as arguments
    reads = {m: setting_reads(u) for m, u in uses.items() if setting_reads(u)}
    assert reads == {}, reads  # settings.py reads a given mapping; the command line hands it os.environ


def test_the_settings_are_read_from_the_mapping_given_the_options_first():
    environ = {"ROTE_SEEDS": "1", "ROTE_RUNS": "runs", "ROTE_RESULTS": "", "ROTE_PLAIN_PROGRESS": "1",
               "ROTE_PROFILE": "smoke"}
    got = S.read_environment(environ)
    assert (got.profile, got.seeds, got.seed_list, got.results, got.plain_progress) == ("smoke", 1, [0], None, True)
    assert got.runs == Path("runs").resolve()  # absolute: a chapter's kernel runs in book/
    assert S.read_environment(environ, seeds=2, profile="quick").seed_list == [0, 1]  # --seeds, --profile win
    assert S.read_environment({}) == S.Settings()  # nothing set: the defaults (3 seeds, the project's folders)
    assert S.Settings(**got.parameter(), profile="smoke") == got  # the papermill parameter round-trips
    json.dumps(got.parameter())
    for bad in ({"ROTE_SEEDS": "three"}, {"ROTE_SEEDS": "0"}, {"ROTE_PROFILE": "nightly"}):
        with pytest.raises(ConfigError):
            S.read_environment(bad)


def test_the_library_ignores_a_planted_environment(monkeypatch, tmp_path):
    from rote import analysis_cache, claims, plan, plots, runs

    defaults = (runs.runs_root(), claims.results_root(), analysis_cache.analysis_root(), plots.figures_root())
    for variable in VARIABLES:
        monkeypatch.setenv(variable, str(tmp_path / variable) if variable != "ROTE_SEEDS" else "1")
    assert plan.seed_list("smoke") == [0, 1, 2]
    assert (runs.runs_root(), claims.results_root(), analysis_cache.analysis_root(), plots.figures_root()) == defaults


@pytest.fixture
def captured(monkeypatch, tmp_path):
    """run_chapter with papermill replaced: what it was given, and the environment during and after."""
    import papermill

    monkeypatch.setattr(driver.site, "BUILD_DIR", tmp_path / "_build")
    seen = {}

    def execute(source, out, parameters, **kwargs):
        seen.update(parameters=parameters, environ=dict(os.environ))
        Path(out).write_text(Path(source).read_text())

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    return seen


def test_the_driver_passes_the_settings_as_a_parameter_and_leaves_the_environment_alone(captured, tmp_path):
    before = dict(os.environ)
    book_settings = S.Settings(profile="smoke", seeds=1, runs=tmp_path / "runs", results=tmp_path / "results")
    result = driver.run_chapter("tasks", "smoke", {"profile": "smoke"}, settings=book_settings)
    assert result.ok, result.error
    assert dict(os.environ) == before == captured["environ"]  # nothing written, not even while it executes
    given = captured["parameters"]["settings"]
    assert given["seeds"] == 1 and given["runs"] == str(tmp_path / "runs") and given["plain_progress"] is True
    assert given["figures"] == str(result.figures) and captured["parameters"]["profile"] == "smoke"
    meta = json.loads(result.notebook.read_text())["metadata"]["rote"]
    assert meta["parameters"] == {"profile": "smoke"}  # the stamp and the page's folder: its own parameters only


def test_a_chapter_process_gets_its_settings_on_its_command_line(monkeypatch, tmp_path):
    calls = []

    def run(cmd, **kwargs):
        calls.append((cmd, kwargs.get("env")))
        return type("Done", (), {"stdout": "", "returncode": 1})()

    monkeypatch.setattr(driver.subprocess, "run", run)
    before = dict(os.environ)
    job = driver.ChapterJob("learning_dynamics", {"profile": "smoke"}, results=tmp_path / "stability")
    driver.execute_job(job, "smoke", S.Settings(seeds=1, runs=tmp_path / "runs"))
    (cmd, env), = calls
    given = S.Settings(**json.loads(cmd[cmd.index("learning_dynamics") + 2]))
    assert (given.profile, given.seeds, given.runs, given.results) == ("smoke", 1, tmp_path / "runs",
                                                                      tmp_path / "stability")
    assert given.plain_progress is True  # plain progress lines in the page: a setting, not the environment
    assert dict(os.environ) == before and env is None  # the child inherits this environment, unchanged


def test_the_book_passes_its_seeds_to_its_chapters_without_the_environment(monkeypatch):
    before, seen = dict(os.environ), []
    lock = threading.Lock()

    def chapter(job, profile, settings=None):
        with lock:
            seen.append((job.name, settings.seeds, dict(os.environ)))
        return driver.ChapterResult(job.name, True, 0.0, Path(), Path())

    monkeypatch.setattr(driver, "execute_job", chapter)
    monkeypatch.setattr(book, "book_plan", lambda *a, **k: [])
    assert book.build_book("smoke", ["tasks", "scorecard"], {}, book.BookOptions(render=False, seeds=1)) == 0
    assert [(name, seeds) for name, seeds, _ in seen] == [("tasks", 1), ("scorecard", 1)]
    assert all(environ == before for _, _, environ in seen) and dict(os.environ) == before


BOOK = ROTE.parent / "book"
# a notebook call that stores or reads in a folder of the book's settings, and how it passes the folder on
FOLDER_CALLS = {"save_and_show": 3, "save_figure": 3, "load_shown": 3, "other_records": 3, "save": 2}


def folder_calls_without_folder(source: str) -> list[str]:
    """The calls of :data:`FOLDER_CALLS` in ``source`` that do not pass a folder (too few arguments)."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute) and node.func.attr in FOLDER_CALLS
            and len(node.args) + len(node.keywords) < FOLDER_CALLS[node.func.attr]]


def test_the_check_finds_a_planted_figure_saved_without_the_pages_folder():
    assert folder_calls_without_folder('plots.save_and_show(fig, f"c5_{u}_z")\nclaims.save(rec)\n') == [
        "plots.save_and_show(fig, f'c5_{u}_z')", "claims.save(rec)"]
    assert folder_calls_without_folder('plots.save_and_show(fig, "x", book.figures)') == []


@pytest.mark.parametrize("path", sorted(BOOK.glob("*.ipynb")), ids=lambda p: p.stem)
def test_a_notebook_passes_its_settings_folders_to_every_call_that_stores(path):
    """A figure saved, a record saved or read in a chapter goes to the folder of the page's settings (the build's,
    passed as the ``settings`` parameter), never to a default the chapter's process would pick."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    missing = [call for c in cells for call in folder_calls_without_folder("".join(c["source"]))]
    assert missing == [], missing


def test_training_shows_plain_progress_when_asked_by_argument_not_by_the_environment(monkeypatch):
    import rote.train as T
    from rote.config import make_config
    from rote.tasks import build_task

    used, bar = [], T.text_tqdm
    monkeypatch.setattr(T, "tqdm", lambda *a, **k: used.append("live") or bar(*a, **{**k, "disable": True}))
    monkeypatch.setattr(T, "text_tqdm", lambda *a, **k: used.append("plain") or bar(*a, **{**k, "disable": True}))
    config = make_config("fda", "smoke", steps=2, warmup_steps=1, eval_every=1, checkpoint_every=2)
    monkeypatch.setenv("ROTE_PLAIN_PROGRESS", "1")  # planted: the library must not read it
    T.train(config, build_task(config), device="cpu", progress=True)
    T.train(config, build_task(config), device="cpu", progress="plain")
    assert used == ["live", "plain"]
