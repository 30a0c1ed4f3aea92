"""A real headless browser for pages the package writes: Chromium's DOM of a file (after its scripts ran), read
into a small tree, and its screenshots. Without Chromium a test skips, except in CI (``CI=true``), where
``make test`` installs it (``make browser``) and a missing browser fails the test."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable",
         "/Applications/Chromium.app/Contents/MacOS/Chromium",
         "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome")
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def chromium() -> str:
    """The browser's executable, else skip the test (fail it in CI)."""
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    reason = "no Chromium on this machine (`make browser` installs it as root: apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def _headless(page: Path, profile: Path, width: int, height: int, *options: str) -> str:
    done = subprocess.run([chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                           f"--user-data-dir={profile}", f"--window-size={width},{height}", *options,
                           page.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def dom(page: Path, profile: Path, width: int = 1280, height: int = 900) -> Element:
    """The document Chromium builds from ``page`` (``profile``: a directory of its own for the browser's state)."""
    return parse(_headless(page, profile, width, height, "--dump-dom"))


def screenshot(page: Path, png: Path, profile: Path, width: int = 1280, height: int = 2400) -> None:
    _headless(page, profile, width, height, f"--screenshot={png}")
    assert png.stat().st_size > 0


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def select(self, tag: str | None = None, **attrs: str) -> list[Element]:
        """The elements below this one with ``tag`` (any with None) and these attributes (``class_`` for class)."""
        wanted = {k.rstrip("_").replace("_", "-"): v for k, v in attrs.items()}
        found = []
        for child in self.children:
            if isinstance(child, Element):
                if (tag is None or child.tag == tag) and all(child.attrs.get(k) == v for k, v in wanted.items()):
                    found.append(child)
                found += child.select(tag, **attrs)
        return found

    def one(self, tag: str | None = None, **attrs: str) -> Element:
        [found] = self.select(tag, **attrs)
        return found


def parse(markup: str) -> Element:
    """A serialized DOM (every element closed, as Chromium writes it) as a tree of :class:`Element`."""
    root = Element("#document", {})
    stack = [root]

    class Builder(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            element = Element(tag, {k: v or "" for k, v in attrs})
            stack[-1].children.append(element)
            if tag not in VOID:
                stack.append(element)

        def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

        def handle_endtag(self, tag: str) -> None:
            while len(stack) > 1 and stack.pop().tag != tag:
                pass

        def handle_data(self, data: str) -> None:
            stack[-1].children.append(data)

    builder = Builder(convert_charrefs=True)
    builder.feed(markup)
    builder.close()
    return root
