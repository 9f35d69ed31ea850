"""The documentation site builds strictly and renders in a real browser.

Builds the site with ``mkdocs build --strict`` into ``build/docs/browser-check/site`` (the gallery of
:data:`GALLERY`, every example run with ``--quick --figures``, and one quick benchmark, so the build-time
parts are exercised; see docs/hooks/build_hook.py), serves it on localhost and opens it in Debian's
headless Chromium driven by Playwright: the home page, an API search, the gallery index (every figure
loads) and one gallery page. No page may log a console error or fail to load a resource. Screenshots land
in ``build/docs/browser-check/`` (never committed: ``build/`` is ignored).

The gallery's examples read real data sets (through :func:`tests.conftest.require_data`): outside CI an
example whose data is missing is left out of the build; under CI that is a failure.

Needs the ``chromium`` Debian package (``/usr/bin/chromium``; never downloaded by Playwright) and the
``playwright``, ``mkdocs``, ``mkdocs-material`` and ``mkdocstrings[python]`` packages; outside CI the test
skips when they are missing, under CI it fails.
"""
import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import pytest

from tests.conftest import ROOT, require_data, require_module, skip_unless_ci

CHROMIUM = pathlib.Path(os.environ.get("STRUCTLEARN_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
OUT = ROOT / "build" / "docs" / "browser-check"
# The gallery the build renders: each example (run with --quick --figures) and the real data sets it reads.
# Seconds of each run with Numba's cache warm / cold on a loaded 2-core machine (most of a cold run is
# compiling); the build runs them two at a time, about 6 min in all when cold.
GALLERY = {
    "hhmm_figure1": (),                                         # ~5 / 26 s
    "old_faithful": ("old_faithful",),                          # 14 / 43 s
    "hsmm_order": ("earthquakes",),                             # 75 / 130 s
    "kasteren_activities": ("kasteren2008",),                   # 36 / 67 s
    "hhmm_placelab": ("mit_placelab_tapia",),                   # 5 / 23 s
    # dcrf_activities is left out: its --quick is one cell of the full experiment (about 10 CPU-minutes, so
    # that it ranks the methods as the full run); tests/data/test_dcrf_data.py runs it briefly instead
    "conll2000_chunking": ("conll2000",),                       # 11 / 70 s
    "cws_gsdsimp": ("uner_chinese_gsdsimp",),                   # 31 / 83 s
    "sst_tree_crf": ("sst",),                                   # 17 / 81 s
}
GALLERY_EXAMPLE = "sst_tree_crf"      # the gallery page opened in the browser
BENCHMARK = "bench_factor_graph"      # ~5-30 s with --quick

pytestmark = pytest.mark.slow         # a site build plus a browser: 3-7 minutes on 2 cores


def gallery_examples():
    """(the examples of :data:`GALLERY` whose data sets are found — all of them under CI, where a missing
    one fails —, the folder holding those data sets)."""
    names, data_root = [], None
    for name, datasets in GALLERY.items():
        try:
            for dataset in datasets:
                data_root = require_data(dataset).parent
        except pytest.skip.Exception as exc:
            print(f"gallery: {name} left out of the build: {exc.msg}")
            continue
        names.append(name)
    return names, data_root


def built_examples():
    """The gallery examples the site fixture's build ran."""
    path = OUT / "gallery.txt"
    return path.read_text().split() if path.exists() else []


@pytest.fixture(scope="module")
def site():
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        require_module(module)
    if os.environ.get("STRUCTLEARN_DOCS_SKIP_BUILD") and (OUT / "site" / "index.html").exists():
        return OUT / "site"
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    examples, data_root = gallery_examples()
    (OUT / "gallery.txt").write_text("\n".join(examples) + "\n")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", STRUCTLEARN_DOCS_EXAMPLES=",".join(examples) or "none",
               STRUCTLEARN_DOCS_BENCHMARKS=BENCHMARK)
    if data_root is not None:   # the examples read the data sets require_data found
        env.setdefault("STRUCTLEARN_DATA", str(data_root))
    _drop_inherited_threading_layer(env)
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                           "-d", str(OUT / "site")], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1500)
    (OUT / "build.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-6000:]}"
    return OUT / "site"


def _drop_inherited_threading_layer(env):
    """Importing structlearn (tests/conftest.py does) may export the Numba threading layer it chose for
    this process; the build's scripts choose their own."""
    try:
        from structlearn import _threading
    except ImportError:
        return
    chosen = getattr(_threading, "CHOSEN", None)
    if chosen and env.get("NUMBA_THREADING_LAYER") == chosen:
        del env["NUMBA_THREADING_LAYER"]


@pytest.fixture(scope="module")
def server(site):
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    require_module("playwright")
    if not CHROMIUM.exists():
        skip_unless_ci(f"{CHROMIUM} not found (apt-get install chromium chromium-driver)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def _page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("console", lambda msg: errors.append(f"console {msg.type}: {msg.text}") if msg.type == "error"
            else None)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("requestfailed", lambda req: errors.append(f"request failed: {req.url} ({req.failure})"))
    return page, errors


def test_site_is_built(site):
    for page in ("index.html", "api/estimators/index.html", f"gallery/{GALLERY_EXAMPLE}/index.html",
                 "how-it-works/index.html", "performance/index.html", "search/search_index.json",
                 "assets/architecture.svg"):
        assert (site / page).exists(), page
    assert "LinearChainCRF" in (site / "api" / "estimators" / "index.html").read_text()
    performance = (site / "performance" / "index.html").read_text()
    assert f"benchmarks/{BENCHMARK}.py --quick" in performance
    assert "<table>" in performance and "| ---" not in performance   # the --markdown tables are rendered


def test_gallery_has_figures(site):
    """Every example the build ran shows its figures (a failed run already fails the strict build)."""
    examples = built_examples()
    if os.environ.get("CI"):
        assert sorted(examples) == sorted(GALLERY)
    index = (site / "gallery" / "index.html").read_text()
    for name in examples:
        pngs = sorted(p.name for p in (site / "gallery" / name).glob("*.png"))
        assert pngs, f"gallery/{name}: no figures"
        page = (site / "gallery" / name / "index.html").read_text()
        assert all(f'src="{png}"' in page or f'src="../{name}/{png}"' in page for png in pngs), (name, pngs)
        assert f"{name}/{pngs[0]}" in index, name


def test_home_search_and_gallery(server, browser):
    page, errors = _page(browser)

    page.goto(server + "/", wait_until="networkidle")
    assert "structlearn" in page.title()
    assert page.locator("h1").first.inner_text().strip().rstrip("¶") == "structlearn"
    page.screenshot(path=str(OUT / "home.png"))

    page.locator("input.md-search__input").click()
    page.keyboard.type("LinearChainCRF")
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=20_000)
    text = page.locator(".md-search-result").inner_text()
    assert "LinearChainCRF" in text
    hrefs = [a.get_attribute("href") for a in page.locator(".md-search-result__item a").all()]
    assert any("api/estimators" in (h or "") for h in hrefs), hrefs
    page.screenshot(path=str(OUT / "search.png"))

    page.goto(server + "/gallery/", wait_until="networkidle")
    widths = page.evaluate("Array.from(document.querySelectorAll('.md-content img'))"
                           ".map(img => img.complete ? img.naturalWidth : -1)")
    assert len(widths) >= len(built_examples()) and all(w > 0 for w in widths), widths
    page.screenshot(path=str(OUT / "gallery-index.png"), full_page=True)

    page.goto(server + f"/gallery/{GALLERY_EXAMPLE}/", wait_until="networkidle")
    assert page.locator("h1").first.inner_text().strip()
    widths = page.evaluate("Array.from(document.querySelectorAll('.md-content img'))"
                           ".map(img => img.complete ? img.naturalWidth : -1)")
    if GALLERY_EXAMPLE in built_examples():
        assert len(widths) >= 3 and all(w > 0 for w in widths), widths
    page.screenshot(path=str(OUT / "gallery.png"), full_page=True)

    page.goto(server + "/how-it-works/", wait_until="networkidle")
    assert page.locator("img[src$='architecture.svg']").evaluate("img => img.naturalWidth") > 0
    page.close()
    assert not errors, "\n".join(errors)


def test_guide_columns_and_api_pages(server, browser):
    """At 1280 px the guides' side-by-side code columns hide no code (long lines wrap: a column's code is no
    wider than the column), and the API reference shows the factor-graph files and the Notes of a cost."""
    page, errors = _page(browser)
    for guide in ("sklearn-crfsuite", "pgmpy", "hmmlearn"):
        page.goto(server + f"/guides/{guide}/", wait_until="networkidle")
        widths = page.evaluate("Array.from(document.querySelectorAll('.md-typeset .grid pre > code'))"
                               ".map(c => [c.scrollWidth, c.clientWidth])")
        assert widths and all(scroll <= client for scroll, client in widths), (guide, widths)
    page.locator(".grid").first.screenshot(path=str(OUT / "guide-columns.png"))

    page.goto(server + "/api/io/", wait_until="networkidle")
    for name in ("libdai.read_fg", "libdai.write_fg", "uai.read_uai", "uai.write_uai", "uai.read_evid",
                 "uai.evidence_mask"):
        assert page.locator(f"[id='structlearn.io.{name}']").count() == 1, name
    page.goto(server + "/api/metrics/", wait_until="networkidle")
    doc = page.locator("div.doc-object:has(> [id='structlearn.metrics.segments_from_labels']) > .doc-contents")
    doc = doc.inner_text()
    assert "Notes" in doc and "Cost: time O(T)." in doc, doc
    page.close()
    assert not errors, "\n".join(errors)
