"""Sphinx configuration for the attention documentation site."""

import os
import sys
from pathlib import Path

import attention

DOCS = Path(__file__).parent
sys.path.insert(0, str(DOCS / "_ext"))

from downloads import install_cell  # docs/_ext, just put on the path
from live_cache import live_cache

project = "Attention, step by step"
author = "The attention authors"
copyright = "2026, the attention authors"
release = version = attention.__version__

extensions = [
    "myst_nb",
    "page_runs",  # the pages run ahead, by jupyter-cache's parallel executor, before the gallery
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",  # the API page links each object to its highlighted source
    "viewcode_backlinks",  # and each source block links back to its object's own anchor
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx_gallery.gen_gallery",
    "verify_outputs",
    "verify_gallery",
    "downloads",
    "explorer_data",  # the attention explorer's numbers, checked against the chapters
    "config_reader",  # the calculator's config reader: Pyodide and the package's modules
    "model_cards",  # a page per model of MODELS, written into docs/models/ as the build starts
    "reading_path",  # each Part's "you are here" strip, and its landing page's and recap's lists
    "source_excerpts",  # literalinclude without the package's argument checks
    "dropdown_cells",  # the hidden cells after a dropdown (its checks) go inside it
    # The repository's and the site's addresses, from pyproject.toml's [project.urls], for
    # the theme's repository and launch buttons, the sitemap, the Open Graph tags and the
    # downloads' headers.
    "addresses",
    "sphinx_sitemap",  # sitemap.xml, so that search engines find every model page
    "sphinxext.opengraph",  # og: tags, so that a shared link shows the page's title and figure
    "epub_book",  # the EPUB's formulas as MathML (nox -s book); the site keeps MathJax
    "gallery_alt",  # the gallery figures' alt text escaped (sphinx-gallery writes it raw)
]

exclude_patterns = [
    "_build",
    "jupyter_execute",
    # sphinx-gallery writes a notebook next to each generated page; myst-nb would
    # otherwise read those notebooks as pages of their own.
    "auto_gallery/*.ipynb",
    "auto_gallery/*.py",
    "auto_gallery/*.zip",
    "auto_gallery/*.md5",
    "auto_gallery/*.json",
    "**/.ipynb_checkpoints",
]

# DOCS_SKIP_GALLERY=1 builds the chapters alone, for quick authoring. `nox -s docs` never sets it.
if os.environ.get("DOCS_SKIP_GALLERY"):
    extensions.remove("sphinx_gallery.gen_gallery")
    exclude_patterns.append("auto_gallery")
    suppress_warnings = ["toc.not_readable", "ref.doc", "ref.ref"]  # links to the gallery

# -- Strictness -----------------------------------------------------------------
nitpicky = True
# torch's own types do not resolve offline (no intersphinx inventory is fetched).
nitpick_ignore_regex = [
    (r"py:.*", r"torch(\..*)?"),
    (r"py:.*", r"nn\..*"),
    (r"py:.*", r"matplotlib(\..*)?"),
]
intersphinx_mapping = {}  # nothing is fetched at build time

# -- MyST notebooks ---------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# transformers imports tqdm, which warns on stderr (and so fails the build) in a
# Jupyter kernel without ipywidgets. Harmless; silenced for the kernels this build runs.
os.environ["PYTHONWARNINGS"] = "ignore:IProgress not found"
# Every page runs on every build, before Sphinx reads it: docs/_ext/page_runs.py empties
# myst-nb's cache, runs every notebook page into it with jupyter-cache's parallel
# executor, a kernel per core (the log gives each page's seconds), and myst-nb takes
# the outputs from there. The cache's folder is named after a hash of the package's
# source, the constraints file and the Python version (docs/_ext/live_cache.py).
nb_execution_mode = "cache"
cache = live_cache(DOCS.parent, DOCS / "_build")
nb_execution_cache_path = str(cache)
# Reuse mode (ATTENTION_DOCS_CACHE, set by `nox -s docs -- --reuse` and `nox -s
# docs-live`): the cache is kept between builds, so that a page re-runs only when its
# code, the package, the constraints or Python have changed.
LIVE_CACHE = os.environ.get("ATTENTION_DOCS_CACHE")
page_runs_reuse = bool(LIVE_CACHE)
# A cell that raises is a warning naming the page (and fails the build under -W), not
# an abort: the build goes on, so that every other problem is reported in the same run.
nb_execution_raise_on_error = False
nb_execution_show_tb = True
nb_execution_timeout = 300
nb_output_stderr = "warn"  # a warning printed by a cell fails the build under -W
# Off: myst-nb's merging rewrites the saved notebook's outputs in place (myst-nb 1.4);
# verify_outputs joins a cell's printed chunks on the page instead (join_printed_chunks).
nb_merge_streams = False
# Markdown a cell displays (the home page's model table) is read as MyST, tables included.
nb_render_markdown_format = "myst"

# -- Math --------------------------------------------------------------------------
# MathJax 3.2.2 (Apache-2.0) is served from the site itself, not a CDN, so the site
# works offline and makes no third-party request. tex-svg.js is one self-contained
# file: TeX input, SVG output, its fonts inlined as paths. From `npm pack mathjax@3.2.2`,
# file es5/tex-svg.js; its LICENSE sits beside it.
mathjax_path = "mathjax/tex-svg.js"
# The site's renderer, named: epub_book (below) registers a second one, for the EPUB.
html_math_renderer = "mathjax"

# -- API reference ----------------------------------------------------------------
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # the NumPy-style docstrings already give types and shapes
autodoc_default_options = {"members": True}
# No table-of-contents entry per documented object: the API page would have some two
# thousand, copied into every page's sidebar; its sections are entries enough.
toc_object_entries = False
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_custom_sections = [("Shapes", "notes_style")]
# Render "x : torch.Tensor, shape (n, d)" as text: a shape is not a cross-reference.
napoleon_use_param = False
napoleon_use_rtype = False
napoleon_preprocess_types = False
autodoc_inherit_docstrings = False  # nn.Module's own docstrings are not ours to show

# -- Gallery ------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(DOCS.parent / "gallery"),
    "gallery_dirs": "auto_gallery",
    "filename_pattern": r".*\.py$",  # run every script, so each one is verified
    "download_all_examples": True,
    "remove_config_comments": True,
    "write_computation_times": False,  # its table loads scripts from CDNs
    "show_memory": False,
    "min_reported_time": 10**9,
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "reset_modules": ("matplotlib", "seaborn"),
    # Only what print() shows, so that the page shows what the downloaded script prints.
    "capture_repr": (),
    # Run scripts side by side, as many as sphinx-build's -j (sphinx-gallery's own option).
    "parallel": True,
    # Every downloaded notebook installs the package at this site's version first.
    "first_notebook_cell": install_cell(release),
    "within_subsection_order": "FileNameSortKey",
}
if LIVE_CACHE and not cache.exists():
    # In reuse mode sphinx-gallery re-runs only the scripts whose text changed (its md5
    # files), and all of them once after a change to the package, constraints or Python
    # (a new cache folder). `nox -s docs` deletes the generated gallery: all of them run.
    sphinx_gallery_conf["run_stale_examples"] = True

# -- Copy buttons: copy code, never the prompts or outputs ------------------------
copybutton_exclude = ".linenos, .gp, .go"
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

# -- HTML ------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = "Attention, step by step"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
# Marks the figures that scroll sideways on a phone, for the cue custom.css draws.
html_js_files = ["figures.js"]
# A tiny causal heatmap; without an icon, browsers ask for a /favicon.ico that is not there.
html_favicon = "_static/favicon.png"
# The repository button and the launch buttons (Colab, Binder) are set by
# docs/_ext/addresses.py, from pyproject.toml's [project.urls].
html_theme_options = {
    "use_download_button": True,
    "show_toc_level": 2,
    "navigation_with_keys": True,
    # pydata-sphinx-theme 0.20 would add a search field in a top bar of its own, above
    # the book theme's layout, doubling the sidebar's search; keep the book layout.
    "navbar_persistent": [],
}
# The highlighted source pages (viewcode) keep the logo and search but not the chapters'
# tree: a reader there came from the API page and goes back to it through the [docs]
# links. The tree cost a fifth of a second a page, and these 37 pages are written one
# after another at the end of the build.
html_sidebars = {
    "_modules/**": ["navbar-logo.html", "icon-links.html", "search-button-field.html"],
}
html_last_updated_fmt = None
# The page follows the reader's system setting until they pick light or dark. Without
# this, a first visit (nothing in localStorage) logs "Got invalid theme mode" to the console.
html_context = {"default_mode": "auto"}

# -- Sitemap and Open Graph tags: their absolute links use the site's address ----------
# (html_baseurl and ogp_site_url, set by docs/_ext/addresses.py).
sitemap_url_scheme = "{link}"  # no language or version folder in the site's paths
sitemap_excludes = ["search.html", "genindex.html", "py-modindex.html", "_modules/*"]
# The page's first figure is its preview (a model page's layer strip); the icon otherwise.
ogp_use_first_image = True
ogp_image = "_static/favicon.png"
ogp_type = "article"
# No generated social card per page: matplotlib would draw some two hundred of them.
ogp_social_cards = {"enable": False}


# -- The book offline: EPUB (nox -s book) -------------------------------------------
# The same pages as the site, in Sphinx's own EPUB builder; the PDF is the site built
# as one page (singlehtml) and printed by Chromium (noxfile.py's book session).
epub_basename = "attention-step-by-step"
epub_title = project
epub_author = author
epub_publisher = author
epub_copyright = copyright
epub_language = "en"
epub_scheme = "URL"
epub_identifier = ""  # the site's address, set by docs/_ext/addresses.py
epub_show_urls = "no"  # an address printed after each link would break the sentences
# The search page and MathJax (its scripts are not in the EPUB; its formulas are MathML).
epub_exclude_files = ["search.html", "_static/mathjax/LICENSE"]
