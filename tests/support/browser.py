"""Headless chromium for the page tests: a page opened as a user opens it, its DOM after the
scripts ran, read back into elements with their attributes, text and children. A machine
without chromium fails the tests that need it, saying how to install it."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic")
VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "source", "area", "base", "col", "embed"}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""
    children: list["Element"] = field(default_factory=list)

    def cells(self) -> list[str]:
        """A row's cells, as text."""
        return [c.text for c in self.children if c.tag in ("td", "th")]


class DOM(HTMLParser):
    """The elements of a serialised DOM, each with its attributes and its whole text."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self._open: list[Element] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        e = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(e)
        if self._open:
            self._open[-1].children.append(e)
        if tag not in VOID:
            self._open.append(e)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data):
        for e in self._open:
            e.text += data

    def all(self, tag: str, cls: str | None = None, **attrs: str) -> list[Element]:
        return [e for e in self.elements if e.tag == tag
                and (cls is None or cls in e.attrs.get("class", "").split())
                and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def one(self, tag: str, **attrs: str) -> Element:
        found = self.all(tag, **attrs)
        assert len(found) == 1, (tag, attrs, len(found))
        return found[0]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Opens a page in headless chromium and returns its DOM after the scripts ran."""
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed: the page tests need Debian's chromium "
                    "(`apt-get install chromium`; tools/setup.sh installs it)")
    profiles = tmp_path_factory.mktemp("chromium")

    def open_page(page: Path, shown: str = "") -> DOM:
        profile = profiles / str(len(list(profiles.iterdir())))  # a fresh profile per run
        url = page.as_uri() + ("#" + quote(shown, safe="") if shown else "")
        r = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
                           capture_output=True, text=True, timeout=600)  # a hang fails, no timing
        assert r.returncode == 0 and "<body" in r.stdout, r.stderr[-2000:]
        return DOM(r.stdout)
    return open_page
