"""The documentation site (``make docs``): built with ``mkdocs build --strict`` as ``make docs`` builds it, every
internal link and anchor resolving, every page of the nav built and in the search index, the pages rendered from
data showing that data, and a newcomer's path (home, install, run, check, rewrite) followed in a real headless
browser (Chromium), each page showing what its Markdown source says."""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import browser
import pytest
import yaml

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr
    return out


def nav_pages() -> list[str]:
    """Every page of mkdocs.yml's nav, as its source path under docs/."""
    def walk(items: list) -> list[str]:
        found = []
        for item in items:
            for value in item.values() if isinstance(item, dict) else [item]:
                found += walk(value) if isinstance(value, list) else [value]
        return found

    class Loader(yaml.SafeLoader):  # mkdocs.yml may hold !!python/name tags; the nav needs none of them
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    return walk(yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)["nav"])


def built(page: str) -> str:
    return re.sub(r"\.md$", ".html", page)


class Anchors(HTMLParser):
    """The ids of a built page and the links of its content (its ``<article>``, and the nav's)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if named.get("id"):
            self.ids.add(named["id"] or "")
        if tag == "a" and named.get("href"):
            self.links.append(named["href"] or "")


@functools.cache
def anchors(path: Path) -> Anchors:
    parser = Anchors()
    parser.feed(path.read_text())
    return parser


def source_title(page: str) -> str:
    """The page's title as its Markdown says it: the first heading, without its Markdown."""
    first = next(line for line in (DOCS / page).read_text().splitlines() if line.startswith("# "))
    return first.removeprefix("# ").replace("`", "")


def test_every_nav_page_is_built_and_every_internal_link_and_anchor_resolves(site):
    pages = nav_pages()
    assert len(pages) == len(set(pages))
    sources = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(pages) == sources  # every page is in the nav, and every nav entry has a page
    broken = []
    for page in pages:
        path = site / built(page)
        assert path.is_file(), f"{page} was not built"
        for href in anchors(path).links:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith("mailto:"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{page}: {href} (no {target})")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in anchors(target).ids:
                broken.append(f"{page}: {href} (no anchor #{parts.fragment})")
    assert not broken, "\n".join(broken)


def test_the_search_index_holds_every_page(site):
    index = json.loads((site / "search" / "search_index.json").read_text())
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert {built(page) for page in nav_pages() if page != "index.md"} <= locations
    titles = {doc["title"] for doc in index["docs"]}
    assert {"Install", "<code>torchdevice run</code>", "Rewrite rules", "Limits"} <= titles
    text = " ".join(doc["text"] for doc in index["docs"])
    assert "never replaces" in text and "TORCHDEVICE_INSTALL" in text


def test_the_pages_rendered_from_data_show_that_data(site):
    from torchdevice_generated.rewrite_rules import RULES
    from torchdevice_generated.standins import COVERED, MISSING

    from torchdevice.device.gpus import CARDS

    rules = (site / "commands" / "rewrite-rules.html").read_text()
    assert {r.code for r in RULES} <= set(re.findall(r"TD\d{3}", rules))
    assert all(f"<code>{r.name}</code>" in rules for r in RULES)
    standins = (site / "standins.html").read_text()
    assert all(f"<code>{name}</code>" in standins for name in [*COVERED, *MISSING])
    cards = (site / "targets" / "cuda-sim.html").read_text()
    assert all(card.name in cards for card in CARDS.values())
    performance = (site / "performance.html").read_text()
    recorded = json.loads((DOCS / "measurements" / "bench.json").read_text())["results"]
    assert all(f"<code>{r['command']}</code>" in performance for r in recorded)
    from torchdevice.pytest_plugin import OPTIONS

    plugin = (site / "pytest-plugin.html").read_text()
    assert all(f"<code>torchdevice_{name}</code>" in plugin for name, _, _ in OPTIONS)
    from torchdevice_generated.releases import DIFFERS, KNOWN

    releases = (site / "releases.html").read_text()
    rows = [re.findall(r"<td>(.*?)</td>", row, re.S) for row in re.findall(r"<tr>(.*?)</tr>", releases, re.S)]
    facts = {row[0].split()[0]: row for row in rows if len(row) == 8}  # the facts table: 8 columns
    assert list(facts) == list(KNOWN)
    assert all(facts[release][-1] == str(len(DIFFERS.get(release, ()))) for release in KNOWN)
    run = (site / "commands" / "run.html").read_text()
    assert "--gpu-memory SIZE" in run and "usage: torchdevice run" in run


def heading(dom: browser.Element) -> str:
    [h1] = dom.one("article").select("h1")
    return h1.text().replace("¶", "").strip()


def link_to(dom: browser.Element, text: str) -> str:
    """The href of the content's link whose text is ``text``."""
    found = [a.attrs["href"] for a in dom.one("article").select("a") if a.text().strip() == text]
    assert found, f"no link '{text}' in the page"
    return found[0]


PATH = [("Install", "install.md", ["never replaces", "torchdevice-toolkit"]),
        ("Run", "commands/run.md", ["torchdevice run train.py --epochs 3", "usage: torchdevice run"]),
        ("Check", "commands/check.md", ["blockers (2):", "usage: torchdevice check"]),
        ("Rewrite", "commands/rewrite.md", ["current_accelerator(check_available=True)", "usage: torchdevice rewrite"])]
"""A newcomer's path: the link followed on each page (by its text), the page it must lead to, and what that page
must show (texts of its Markdown source, and of the tables and help rendered into it)."""


def test_a_newcomer_follows_home_install_run_check_rewrite_in_a_browser(site, tmp_path):
    browser.chromium()  # skips, or fails in CI, where there is none
    page = site / "index.html"
    dom = browser.dom(page, tmp_path / "profile")
    assert heading(dom) == source_title("index.md") == "torchdevice"
    assert "make test" in dom.one("article").text()
    for text, source, contents in PATH:
        href = link_to(dom, text)
        page = (page.parent / unquote(urlsplit(href).path)).resolve()
        assert page == (site / built(source)).resolve(), f"'{text}' leads to {href}"
        assert page.is_file(), f"'{text}' leads to {href}, which is not built"
        dom = browser.dom(page, tmp_path / "profile")
        assert heading(dom) == source_title(source)
        shown = dom.one("article").text()
        for content in contents:
            assert content in shown, f"{source}: '{content}' not shown"
        # the site's nav leads home from every page
        home = [a.attrs["href"] for a in dom.select("a") if a.attrs.get("href", "").endswith("index.html")]
        assert any((page.parent / h).resolve() == (site / "index.html").resolve() for h in home), source
