"""The calculator's config reader: the package's own Python, run in the page by Pyodide.

A reader pastes or drops a ``config.json`` on the calculator (``docs/explorer.md``)
and gets the recipe, the layer strip and the bill per layer kind. The page computes
them with the package's functions, not a copy: this extension ships into the built
site, under ``_static/config-reader/``,

* ``pyodide/``: Pyodide's core (the npm package ``pyodide``, pinned in
  ``package.json``, installed by ``npm ci``), the files a page needs to start Python;
* ``python/attention/...``: the modules of the package that :func:`read` needs
  (:func:`bundle_modules`, found by following their imports), byte for byte;
* ``python/browser_config.py``: the stand-in for ``transformers``' config classes,
  which the browser lacks (``docs/_ext/browser_config.py``);
* ``config-classes.json``: each read model type's config class, exported from
  ``transformers`` at build time (:func:`export_config_classes`): its name, its fields'
  defaults, its ``attribute_map`` and RoPE defaults;
* ``manifest.json``: the Python files, for the page's script to fetch.

The page's script (``_static/config_reader.js``) loads all of it only when the reader
asks to read a config. Nothing is fetched from anywhere but the site.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "attention"
BROWSER_CONFIG = Path(__file__).with_name("browser_config.py")
PYODIDE = ROOT / "node_modules" / "pyodide"
#: What a page needs of Pyodide to start Python with its standard library, no packages.
PYODIDE_FILES = (
    "pyodide.mjs",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
    "package.json",
)
#: The modules whose functions the page calls (browser_config.read).
ENTRY_MODULES = ("attention.models.readers", "attention.models.costs", "attention.models.text")
OUT = Path("_static") / "config-reader"


def module_path(module: str) -> Path:
    """The source file of one of the package's modules (not a package's __init__)."""
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def top_level_imports(path: Path) -> list[str]:
    """The package modules a module imports when it is imported: its top-level imports,
    not those inside a function or under ``if TYPE_CHECKING:``."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attention"):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                # ``from attention import _checks`` imports a module; else a name of one.
                found.append(name if module_path(name).is_file() else node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("attention")]
    return found


def bundle_modules() -> list[str]:
    """The package's modules the page imports: the entry modules and, in turn, what
    they import at their top level; sorted."""
    seen: set[str] = set()
    todo = list(ENTRY_MODULES)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo += top_level_imports(module_path(module))
    return sorted(seen)


def json_value(value: Any) -> Any:
    """A default as JSON holds it: a tuple as a list, a dict's keys as strings."""
    if isinstance(value, tuple | list):
        return [json_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): json_value(item) for key, item in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return None  # a class or an object: nothing the readers read


def field_defaults(cls: type) -> dict[str, Any]:
    """A config class's fields and their defaults, before its ``__post_init__`` runs (or,
    for a class that is no dataclass, its ``__init__``'s keyword defaults)."""
    defaults = {}
    if not dataclasses.is_dataclass(cls):
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and parameter.default is not inspect.Parameter.empty:
                defaults[name] = json_value(parameter.default)
        return defaults
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = json_value(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = json_value(field.default_factory())
    return defaults


def export_config_classes() -> dict[str, Any]:
    """What the browser needs of ``transformers``' config classes, as JSON values.

    ``types``: for each model type the readers read that the installed ``transformers``
    knows, its class's name, field defaults,
    ``attribute_map``, ``default_theta`` and ``default_rope_type``; ``text_configs``:
    each multimodal type whose ``text_config`` class is a read type, and that type;
    ``loaded_as``: the package's ``LOADED_AS``.
    """
    import transformers

    from attention.models import LOADED_AS, read_model_types

    # A reader may be registered for a type newer than the installed transformers, whose
    # class is absent: nothing to export, and the page refuses the type, as the package
    # does with this transformers.
    read = tuple(t for t in read_model_types() if t in transformers.CONFIG_MAPPING)
    types = {}
    for model_type in read:
        cls = transformers.CONFIG_MAPPING[model_type]
        types[model_type] = {
            "config_class": cls.__name__,
            "defaults": field_defaults(cls),
            # Computed attributes (Jamba's layer_types): a reader asks whether the class has them.
            "properties": sorted(
                {
                    name
                    for c in cls.__mro__
                    for name, v in vars(c).items()
                    if isinstance(v, property)
                }
            ),
            "attribute_map": dict(cls.attribute_map),
            "default_theta": json_value(cls.default_theta),
            "default_rope_type": cls.default_rope_type,
            "model_type": cls.model_type,
            # MPT's and DBRX's attn_config: a config of its own, built from a dict.
            "sub_configs": {
                name: field_defaults(sub)
                for name, sub in getattr(cls, "sub_configs", {}).items()
                if dataclasses.is_dataclass(sub)
            },
            "extra": {},
        }
    if "deepseek_v4" in types:
        # The layer kind each of the old per-layer compression ratios names, as the
        # class reads them: asked of the class, one layer at a time.
        cls = transformers.CONFIG_MAPPING["deepseek_v4"]
        rates = cls.default_compress_rates
        by_ratio = {
            str(ratio): cls(num_hidden_layers=1, compress_ratios=[ratio]).layer_types[0]
            for ratio in (0, *rates.values())
        }
        types["deepseek_v4"]["extra"] = {
            "default_compress_rates": dict(rates),
            "default_partial_rotary_factor": cls.default_partial_rotary_factor,
            "compress_ratio_to_layer_type": by_ratio,
        }
    text_configs = {}
    for model_type, cls in transformers.CONFIG_MAPPING.items():
        text = getattr(cls, "sub_configs", {}).get("text_config")
        if text is not None and getattr(text, "model_type", None) in read:
            text_configs[model_type] = text.model_type
    return {"types": types, "text_configs": text_configs, "loaded_as": dict(LOADED_AS)}


def write_bundle(folder: Path, exported: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write the reader's files into ``folder`` (the site's ``_static/config-reader``);
    returns the manifest. ``exported`` defaults to :func:`export_config_classes`."""
    missing = [name for name in PYODIDE_FILES if not (PYODIDE / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"config_reader: expected Pyodide's files in {PYODIDE} (run `npm ci` in {ROOT}), "
            f"missing {', '.join(missing)}"
        )
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "pyodide").mkdir(parents=True)
    for name in PYODIDE_FILES:
        shutil.copyfile(PYODIDE / name, folder / "pyodide" / name)
    python = folder / "python"
    files = []
    for module in bundle_modules():
        relative = module_path(module).relative_to(ROOT)
        (python / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / relative, python / relative)
        files.append(relative.as_posix())
    shutil.copyfile(BROWSER_CONFIG, python / BROWSER_CONFIG.name)
    files.append(BROWSER_CONFIG.name)
    exported = export_config_classes() if exported is None else exported
    (folder / "config-classes.json").write_text(json.dumps(exported), encoding="utf-8")
    manifest = {"python": files, "pyodide": f"pyodide/{PYODIDE_FILES[0]}"}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def reader_html() -> str:
    """The reader's form: the text, the file, the context, batch and cache type, and
    where the recipe, the strip and the bill go."""
    from attention.models import BITS

    # selected="selected", not a bare `selected`: the page is XHTML in the EPUB too.
    chosen = ' selected="selected"'
    options = "".join(
        f'<option value="{name}"{chosen if name == "bf16" else ""}>{name}</option>' for name in BITS
    )
    return f"""<div class="attention-explorer config-reader">
<label class="cr-label" for="cr-text">Paste a <code>config.json</code>, or drop or choose the
file:</label>
<textarea class="cr-text" id="cr-text" rows="7" spellcheck="false"
 placeholder='{{"model_type": "llama", "num_hidden_layers": 32, ...}}'></textarea>
<div class="ae-controls cr-controls">
<label>file <input class="cr-file" type="file" accept=".json,application/json" /></label>
<label>context <input class="cr-tokens" type="number" min="0" step="1" value="32768" /></label>
<label>batch <input class="cr-batch" type="number" min="1" step="1" value="1" /></label>
<label>cache <select class="cr-cache">{options}</select></label>
<button class="cr-read" type="button">Read the config</button>
</div>
<p class="cr-status" role="status" aria-live="polite"></p>
<div class="cr-result" hidden="hidden">
<p class="cr-recipe"></p>
<pre class="cr-strip"></pre>
<table class="cr-bill"><caption></caption>
<thead><tr><th scope="col">layers</th><th scope="col">cache</th></tr></thead>
<tbody></tbody><tfoot><tr><th scope="row">all</th><td></td></tr></tfoot></table>
</div>
</div>
"""


class ConfigReaderDirective(Directive):
    """``.. config-reader::``: the form that reads a pasted ``config.json``."""

    def run(self) -> list[nodes.Node]:
        return [nodes.raw("", reader_html(), format="html", classes=["config-reader-box"])]


def on_html_page_context(app, pagename, templatename, context, doctree) -> None:
    if doctree is not None and any(
        "config-reader-box" in node["classes"] for node in doctree.findall(nodes.raw)
    ):
        app.add_css_file("config_reader.css")
        app.add_js_file("config_reader.js")


def on_build_finished(app, exception) -> None:
    # Not into the EPUB (nox -s book), which runs no script.
    if exception is None and app.builder.format == "html" and app.builder.name != "epub":
        write_bundle(Path(app.outdir) / OUT)


def setup(app) -> dict[str, Any]:
    app.add_directive("config-reader", ConfigReaderDirective)
    app.connect("html-page-context", on_html_page_context)
    app.connect("build-finished", on_build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
