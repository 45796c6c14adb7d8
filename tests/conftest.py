import pytest
import torch

from rote.config import make_config
from rote.model import HookedTransformer, ModelShape
from rote.runs import get_or_train


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test writes runs and results into temporary folders, never the user's cache."""
    monkeypatch.setenv("ROTE_RUNS", str(tmp_path_factory.getbasetemp() / "runs"))
    monkeypatch.setenv("ROTE_RESULTS", str(tmp_path_factory.getbasetemp() / "results"))
    monkeypatch.setenv("ROTE_FIGURES", str(tmp_path_factory.getbasetemp() / "figures"))
    monkeypatch.setenv("ROTE_ANALYSIS", str(tmp_path_factory.getbasetemp() / "analysis"))
    monkeypatch.delenv("ROTE_SEEDS", raising=False)  # the default seeds (3) unless a test sets them
    # estimates from the static table: no test pays for timing a probe (tests/test_timings.py turns it on)
    monkeypatch.setenv("ROTE_NO_PROBE", "1")


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return HookedTransformer(ModelShape(n_layers=2, d_model=16, n_heads=2, vocab_size=13, n_ctx=14)).eval()


@pytest.fixture(scope="session")
def smoke_runs(tmp_path_factory):
    """Smoke-profile runs of both tasks, trained once per test session."""
    root = tmp_path_factory.mktemp("smoke_runs")
    return {task: get_or_train(make_config(task, "smoke"), root=root, progress=False, device="cpu")
            for task in ("fda", "thr")}


@pytest.fixture(scope="session")
def browser():
    """The system Chromium under Playwright, once per session for every browser test (tests/test_site.py, which says
    when it is skipped, and the modules that import its fixtures)."""
    from test_site import CHROMIUM, TIMEOUT_MS, sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"],
                                      timeout=TIMEOUT_MS)
        yield chromium
        chromium.close()
