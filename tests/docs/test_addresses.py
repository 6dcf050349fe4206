"""The one address setting (docs/_ext/addresses.py): pyproject.toml's [project.urls]
feeds every link to the repository and the hosted site.

A small site is built with Sphinx, the book theme, myst-nb and the project's own
extensions, given a sample address with ``-D`` as a person publishing the site would
write it in pyproject.toml; every launch, repository, sitemap and Open Graph link of
that site must use it. The README, which cannot compute, must name the addresses
pyproject.toml holds, and no other file may write one of its own.
"""

from __future__ import annotations

import re
import struct
import warnings
import zlib
from pathlib import Path
from types import SimpleNamespace
from xml.etree import ElementTree

import addresses
import nbformat
import pytest
from addresses import BINDER, COLAB, NOTEBOOKS_BRANCH, Addresses, from_pyproject
from bs4 import BeautifulSoup
from downloads import add_script_headers
from sphinx.application import Sphinx
from sphinx.deprecation import RemovedInSphinx11Warning

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Addresses("https://github.com/sample-account/sample-repo", "https://example.org/book/")
PAGE = "chapters/one"

CONF = """
import sys
sys.path.insert(0, {extensions!r})
project = "Sample"
extensions = ["myst_nb", "addresses", "downloads", "sphinx_sitemap", "sphinxext.opengraph"]
html_theme = "sphinx_book_theme"
nb_execution_mode = "force"
sitemap_url_scheme = "{{link}}"
ogp_use_first_image = True
ogp_image = "icon.png"
ogp_social_cards = {{"enable": False}}
"""

INDEX = """# Sample

```{{address-console}}
$ git clone {{repository}} && cd {{name}}
```

```{{toctree}}
{page}
```
"""

CHAPTER = """---
file_format: mystnb
kernelspec:
  name: python3
  display_name: Python 3
---

# One chapter

A chapter with a figure and a cell, as every chapter has.

```{{image}} ../figure.png
:alt: a one-pixel figure
```

```{{code-cell}} python
print(6 * 7)
```
"""


def png() -> bytes:
    """A one-pixel PNG, written by hand so that the test needs no image library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    chunks = chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + chunks


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small site built with the sample address; its HTML folder."""
    source = tmp_path_factory.mktemp("site")
    extensions = str(ROOT / "docs" / "_ext")
    (source / "conf.py").write_text(CONF.format(extensions=extensions), encoding="utf-8")
    (source / "index.md").write_text(INDEX.format(page=PAGE), encoding="utf-8")
    (source / f"{PAGE}.md").parent.mkdir()
    (source / f"{PAGE}.md").write_text(CHAPTER.format(), encoding="utf-8")
    (source / "figure.png").write_bytes(png())
    html = source / "_build" / "html"
    with warnings.catch_warnings():
        # The theme and sphinx-sitemap 2.9.0 (the newest of each) read `.app` attributes
        # that Sphinx 9 deprecates for removal in Sphinx 11; a build only prints that,
        # but pytest's filterwarnings would make it an error here.
        warnings.filterwarnings("ignore", category=RemovedInSphinx11Warning)
        build(source, html)
    return html


def build(source: Path, html: Path) -> None:
    app = Sphinx(
        str(source),
        str(source),
        str(html),
        str(source / "_build" / "doctrees"),
        "html",
        confoverrides={
            "attention_repository_url": SAMPLE.repository,
            "attention_site_url": SAMPLE.site,
        },
        status=None,
        warningiserror=True,
    )
    app.build()


def links(page: Path) -> list[str]:
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    return [tag["href"] for tag in soup.find_all(["a", "link"], href=True)]


def meta(page: Path) -> dict[str, str]:
    soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
    return {
        tag.get("property") or tag.get("name"): tag["content"]
        for tag in soup.find_all("meta", content=True)
    }


def test_launch_buttons_open_the_pages_notebook_on_the_sample_repository(site: Path) -> None:
    hrefs = links(site / f"{PAGE}.html")
    path = f"{PAGE}.ipynb"
    colab = f"{COLAB}/github/{SAMPLE.account}/{SAMPLE.name}/blob/{NOTEBOOKS_BRANCH}/{path}"
    repository = f"{SAMPLE.account}/{SAMPLE.name}"
    binder = f"{BINDER}/v2/gh/{repository}/{NOTEBOOKS_BRANCH}?urlpath=lab/tree/{path}"
    assert colab in hrefs
    assert binder in hrefs


def test_every_repository_and_launch_link_uses_the_sample_address(site: Path) -> None:
    outside = re.compile(r"github\.com|github\.io|colab\.|mybinder\.")
    checked = 0
    for page in site.rglob("*.html"):
        for href in filter(outside.search, links(page)):
            checked += 1
            assert f"/{SAMPLE.account}/{SAMPLE.name}" in href, (page.name, href)
        assert addresses.PLACEHOLDER not in page.read_text(encoding="utf-8"), page.name
    assert checked >= 3  # the repository button and the two launch buttons at least
    assert SAMPLE.repository in links(site / "index.html")  # the repository button


def test_the_clone_command_names_the_sample_repository(site: Path) -> None:
    soup = BeautifulSoup((site / "index.html").read_text(encoding="utf-8"), "html.parser")
    blocks = [block.get_text() for block in soup.select("div.highlight-console pre")]
    assert f"$ git clone {SAMPLE.repository} && cd {SAMPLE.name}\n" in blocks


def test_the_sitemap_lists_every_page_at_the_sample_site(site: Path) -> None:
    tree = ElementTree.parse(site / "sitemap.xml")
    locations = {element.text for element in tree.iter() if element.tag.endswith("loc")}
    assert {SAMPLE.page("index"), SAMPLE.page(PAGE)} <= locations
    assert all(location.startswith(SAMPLE.site) for location in locations)


def test_open_graph_tags_name_the_page_and_its_figure_at_the_sample_site(site: Path) -> None:
    tags = meta(site / f"{PAGE}.html")
    assert tags["og:url"] == SAMPLE.page(PAGE)
    assert tags["og:title"] == "One chapter"
    assert tags["og:description"].startswith("A chapter with a figure")
    assert tags["og:image"].startswith(SAMPLE.site) and tags["og:image"].endswith(".png")
    canonical = f'<link rel="canonical" href="{SAMPLE.page(PAGE)}"'
    assert canonical in (site / f"{PAGE}.html").read_text(encoding="utf-8")


def test_the_downloaded_notebook_names_its_page_and_installs_the_package(site: Path) -> None:
    # The theme's launch buttons copy the executed notebook to the same place; the
    # download must still be the one with the install cell.
    notebook = nbformat.read(site / "_sources" / f"{PAGE}.ipynb", as_version=4)
    first = notebook.cells[0].source
    assert first.startswith(f"# From {SAMPLE.page(PAGE)}\n")
    assert "%pip install" in first
    assert notebook.cells[-1].outputs[0]["text"] == "42\n"


def test_gallery_downloads_name_their_page_at_the_sample_site(tmp_path: Path) -> None:
    folder = tmp_path / "_downloads" / "abc"
    folder.mkdir(parents=True)
    (folder / "plot_demo.py").write_text('"""Demo."""\n\nprint(1)\n', encoding="utf-8")
    cell = nbformat.v4.new_code_cell("%pip install something")
    notebook = nbformat.v4.new_notebook(cells=[cell, nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(notebook, folder / "plot_demo.ipynb")
    config = SimpleNamespace(
        release="1.2.3",
        attention_repository_url=SAMPLE.repository,
        attention_site_url=SAMPLE.site,
    )
    add_script_headers(SimpleNamespace(outdir=str(tmp_path), config=config), None)
    page = SAMPLE.page("auto_gallery/plot_demo")
    script = (folder / "plot_demo.py").read_text(encoding="utf-8")
    assert script.startswith(f"# From {page}\n# Runs on attention-step-by-step 1.2.3")
    first = nbformat.read(folder / "plot_demo.ipynb", as_version=4).cells[0].source
    assert first.startswith(f"# From {page}\n")


def test_the_readme_names_the_addresses_pyproject_holds() -> None:
    where = from_pyproject()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"https://(?:github\.com|[\w-]+\.github\.io)/[^\s>)`]*", readme))
    assert named, "the README names no repository or site address"
    assert named <= {where.repository, where.site}, named - {where.repository, where.site}
    assert where.site in readme and where.repository in readme


def test_no_other_file_writes_an_address_of_its_own() -> None:
    # Only pyproject.toml holds the addresses; the README is checked above.
    account = re.escape(from_pyproject().account)
    written = re.compile(rf"github\.com/{account}/|{account}\.github\.io")
    files = [
        path
        for folder in ("docs", "gallery", "attention", ".github", ".ci")
        for path in (ROOT / folder).rglob("*")
        if path.is_file()
        and path.suffix in {".py", ".md", ".rst", ".yml", ".yaml", ".txt", ".js", ".html"}
        and "_build" not in path.parts
        and path.relative_to(ROOT).parts[:2] != ("docs", "models")  # generated, ignored
    ]
    files += [ROOT / "noxfile.py", ROOT / ".readthedocs.yaml"]
    offenders = [str(path.relative_to(ROOT)) for path in files if written.search(path.read_text())]
    assert not offenders


@pytest.mark.parametrize(
    ("repository", "site", "error", "message"),
    [
        (None, "https://a.github.io/b/", TypeError, "repository address must be a str"),
        ("https://gitlab.com/a/b", "https://a.github.io/b/", ValueError, "github.com"),
        ("https://github.com/a", "https://a.github.io/b/", ValueError, "<account>/<name>"),
        ("https://github.com/a/b", "https://a.github.io/b", ValueError, "ending with '/'"),
    ],
)
def test_a_wrong_address_is_refused_with_what_was_expected(
    repository: object, site: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        Addresses(repository, site)  # type: ignore[arg-type]
