"""The Python code blocks of the documentation run and do what they say.

Every ```` ```python ```` block of a page (getting started, guides, home, threads, README) runs, in order, in
one namespace per page, in a temporary working directory (pages save model files). A block whose first
line is ``# peer: MODULE`` is another library's code shown side by side: it runs when MODULE is
importable (hmmlearn, torchcrf and torch_struct are in the dev extra) and is skipped otherwise. Blocks in
other languages (bash, R, text) are not run. Pages that import torch or pgmpy are marked slow (the imports
alone take 10-40 s on 2 busy cores); the others take a few seconds each.
"""
import contextlib
import io
import importlib.util
import os
import re
import warnings

import pytest

from tests.conftest import ROOT, require_module

DOCS = ROOT / "docs"
PAGES = sorted(str(p.relative_to(ROOT)) for p in
               [*DOCS.glob("getting-started/*.md"), *DOCS.glob("guides/*.md"), DOCS / "index.md",
                DOCS / "threads.md", DOCS / "how-it-works.md", ROOT / "README.md"])
# Pages that import torch or pgmpy take 10-40 s (the imports): marked slow.
HEAVY = ("import torch", "from pgmpy")
# README blocks that stand for a user's data (X_train, …) are shown, not run.
README_NOT_RUN = ("X_train",)

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)\s*(?P<info>[^\n`]*)$")


def code_blocks(text):
    """[(info, code)] of the fenced blocks of a Markdown text (indented ones, e.g. in tabs, included)."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        body, i = [], i + 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        blocks.append((info, "\n".join(body)))
        i += 1
    return blocks


def python_blocks(page):
    text = (ROOT / page).read_text()
    out = []
    for info, code in code_blocks(text):
        lang = info.split()[0].lstrip(".{") if info else ""
        if lang not in ("python", "py"):
            continue
        if page == "README.md" and any(name in code for name in README_NOT_RUN):
            continue
        out.append(code)
    return out


def test_blocks_are_found():
    assert len(python_blocks("docs/getting-started/crf.md")) >= 3
    assert code_blocks("    ```python\n    x = 1\n    ```\n") == [("python", "x = 1")]


@pytest.mark.parametrize("page", [
    pytest.param(p, marks=pytest.mark.slow) if any(h in (ROOT / p).read_text() for h in HEAVY) else p
    for p in PAGES if python_blocks(p)])  # pages without Python code (how-it-works, …) have nothing to run
def test_page_code_runs(page, tmp_path, monkeypatch):
    blocks = python_blocks(page)
    if any("torch" in b for b in blocks if not b.startswith("# peer:")):
        require_module("torch")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "docs_" + re.sub(r"\W", "_", page)}
    ran = 0
    for n, code in enumerate(blocks):
        first = code.splitlines()[0] if code else ""
        if first.startswith("# peer:"):
            module = first.split(":", 1)[1].strip()
            if importlib.util.find_spec(module) is None:
                continue
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                exec(compile(code, f"{page} block {n + 1}", "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{page}: block {n + 1} failed: {type(exc).__name__}: {exc}\n"
                                     f"---\n{code}") from exc
        ran += 1
    assert ran > 0
    assert os.getcwd() == str(tmp_path)
