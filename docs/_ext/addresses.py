"""One setting for where the project lives: its repository and its hosted site.

Both addresses are written once, in ``pyproject.toml``'s ``[project.urls]``
(``Source``, the repository; ``Documentation``, the site). Until a person publishes
the site, they hold the placeholder account ``OWNER``. Everything that names an
address reads it from there:

* the theme's repository button and its launch buttons (Colab, Binder), which open
  each page's downloadable notebook, as published on the repository's
  ``notebooks`` branch (:data:`NOTEBOOKS_BRANCH`, written by
  ``docs/tools/notebooks_branch.py`` when the site is published);
* the sitemap (``sphinx-sitemap``) and the Open Graph tags (``sphinxext-opengraph``),
  whose links are absolute, on the site's address;
* the home page's ``git clone`` command (the ``address-console`` directive);
* the header of every download, chapter notebook and gallery script
  (``docs/_ext/downloads.py``), which names the page it came from.

The README cannot compute: ``tests/docs/test_addresses.py`` checks that every address
it names is one of these. A build can be given other addresses with Sphinx's
``-D attention_repository_url=...`` and ``-D attention_site_url=...``, which is how
that test builds a small site with a sample address and follows every link.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx
from sphinx.config import Config

ROOT = Path(__file__).resolve().parents[2]
PLACEHOLDER = "OWNER"
# The branch of the repository that holds the downloadable notebooks as the site offers
# them: Colab opens a notebook only from GitHub, and Binder builds from a repository.
NOTEBOOKS_BRANCH = "notebooks"
COLAB = "https://colab.research.google.com"
BINDER = "https://mybinder.org"


@dataclass(frozen=True)
class Addresses:
    """Where the project lives.

    Parameters
    ----------
    repository : str
        The GitHub repository, ``https://github.com/<account>/<name>``.
    site : str
        The hosted site's root, ending with a slash.

    Examples
    --------
    >>> where = Addresses("https://github.com/ada/attention", "https://ada.github.io/attention/")
    >>> where.account, where.name, where.placeholder
    ('ada', 'attention', False)
    >>> where.page("chapters/01-attention-without-weights")
    'https://ada.github.io/attention/chapters/01-attention-without-weights.html'
    """

    repository: str
    site: str

    def __post_init__(self) -> None:
        for field, value in (("repository", self.repository), ("site", self.site)):
            if not isinstance(value, str):
                raise TypeError(f"the {field} address must be a str, got {type(value).__name__}")
        parts = urlsplit(self.repository)
        path = parts.path.strip("/").split("/")
        if parts.scheme != "https" or parts.netloc != "github.com" or len(path) != 2:
            raise ValueError(
                "the repository address must be https://github.com/<account>/<name> "
                f"(Colab opens notebooks from GitHub only), got {self.repository!r}"
            )
        site = urlsplit(self.site)
        if site.scheme != "https" or not site.netloc or not self.site.endswith("/"):
            raise ValueError(
                f"the site address must be an https:// address ending with '/', got {self.site!r}"
            )

    @property
    def account(self) -> str:
        """The GitHub account (user or organisation) that holds the repository."""
        return urlsplit(self.repository).path.strip("/").split("/")[0]

    @property
    def name(self) -> str:
        """The repository's name, which is also the folder ``git clone`` makes."""
        return urlsplit(self.repository).path.strip("/").split("/")[1]

    @property
    def placeholder(self) -> bool:
        """Whether the addresses still hold the placeholder account, ``OWNER``."""
        return PLACEHOLDER in self.repository or PLACEHOLDER in self.site

    def page(self, pagename: str) -> str:
        """The hosted address of a page, from its Sphinx name."""
        return f"{self.site}{pagename}.html"


def from_pyproject(pyproject: Path = ROOT / "pyproject.toml") -> Addresses:
    """The addresses written in ``pyproject.toml``'s ``[project.urls]``.

    >>> from_pyproject().name
    'attention'
    """
    urls = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["urls"]
    return Addresses(repository=urls["Source"], site=urls["Documentation"])


def of(config: Config) -> Addresses:
    """The addresses a build uses: ``pyproject.toml``'s, or those given with ``-D``."""
    return Addresses(config.attention_repository_url, config.attention_site_url)


def launch_buttons() -> dict[str, str]:
    """sphinx-book-theme's ``launch_buttons`` option: Colab and Binder."""
    return {"colab_url": COLAB, "binderhub_url": BINDER, "notebook_interface": "jupyterlab"}


def on_config_inited(app: Sphinx, config: Config) -> None:
    """Feed the addresses to the theme, the sitemap and the Open Graph tags."""
    where = of(config)
    config.html_theme_options = {
        **config.html_theme_options,
        "repository_url": where.repository,
        "use_repository_button": True,
        # The launch buttons open the notebooks' branch; the theme takes its branch and
        # the notebooks' folder in the branch (its root) from these two options.
        "repository_branch": NOTEBOOKS_BRANCH,
        "path_to_docs": "",
        "launch_buttons": launch_buttons(),
    }
    config.html_baseurl = where.site  # the sitemap's and the canonical links' root
    config.ogp_site_url = where.site
    config.epub_identifier = where.site  # the EPUB's identifier (epub_scheme "URL")


def to_notebook(app: Sphinx, pagename: str, templatename, context: dict, doctree) -> None:
    """Point the theme's launch buttons at the page's notebook, not its MyST source.

    The theme opens ``<page>.md`` unless an ``.ipynb`` lies beside it in the sources;
    the notebook a reader downloads (``_sources/<page>.ipynb``) is published at
    ``<page>.ipynb`` on the notebooks' branch, which Colab and Binder can open.
    """
    source = f"{pagename}.md"
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group["buttons"]:
            if button.get("url", "").endswith(source):
                button["url"] = button["url"].removesuffix(source) + f"{pagename}.ipynb"


class AddressConsole(Directive):
    """A console block whose ``{repository}`` and ``{name}`` are this build's addresses.

    A code block cannot hold a substitution, so the home page's ``git clone`` command is
    written with this directive::

        ```{address-console}
        $ git clone {repository} && cd {name}
        ```
    """

    has_content = True

    def run(self) -> list[nodes.Node]:
        where = of(self.state.document.settings.env.config)
        text = "\n".join(self.content).format(repository=where.repository, name=where.name)
        block = nodes.literal_block(text, text, language="console")
        return [block]


def setup(app: Sphinx) -> dict:
    here = from_pyproject()
    app.add_config_value("attention_repository_url", here.repository, "env", str)
    app.add_config_value("attention_site_url", here.site, "env", str)
    app.add_directive("address-console", AddressConsole)
    # Before the theme reads its options, and before sphinx-sitemap and
    # sphinxext-opengraph read theirs.
    app.connect("config-inited", on_config_inited, priority=400)
    app.connect("html-page-context", to_notebook, priority=510)  # after the theme's (501)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
