// The calculator's config reader (docs/_ext/config_reader.py): a pasted, dropped or
// chosen config.json read by the package's own Python, run here by Pyodide. Nothing
// loads until the reader asks: then Pyodide's core and the package's modules come
// from this site's _static/config-reader/, never from elsewhere.
(function () {
  "use strict";
  const script = document.currentScript;
  const base = new URL("config-reader/", script.src);
  let reader = null; // the Python function, once loaded (a promise while loading)

  async function load(status) {
    const manifest = await (await fetch(new URL("manifest.json", base))).json();
    status("Starting Python in the page (Pyodide, about 13 MB, loaded once)…");
    const { loadPyodide } = await import(new URL(manifest.pyodide, base).href);
    const pyodide = await loadPyodide({ indexURL: new URL("pyodide/", base).href });
    for (const path of manifest.python) {
      const text = await (await fetch(new URL("python/" + path, base))).text();
      const target = "/home/pyodide/" + path;
      pyodide.FS.mkdirTree(target.slice(0, target.lastIndexOf("/")));
      pyodide.FS.writeFile(target, text);
    }
    const classes = await (await fetch(new URL("config-classes.json", base))).text();
    pyodide.globals.set("config_classes", classes);
    return pyodide.runPython(`
import json
import browser_config
exported = json.loads(config_classes)

def read_config(text, tokens, batch, cache_dtype):
    return json.dumps(browser_config.read(
        text, exported, tokens=tokens, batch=batch, cache_dtype=cache_dtype))

read_config
`);
  }

  function setUp(box) {
    const $ = (name) => box.querySelector(name);
    const text = $(".cr-text");
    const result = $(".cr-result");
    const status = (message, error) => {
      $(".cr-status").textContent = message;
      $(".cr-status").classList.toggle("cr-error", Boolean(error));
    };
    // Each answer, a result or an error, counts one read (for the site's tests to wait on).
    const answer = (message, error) => {
      status(message, error);
      box.dataset.reads = String(Number(box.dataset.reads || 0) + 1);
    };

    function number(input, least) {
      const value = Number(input.value);
      return Number.isInteger(value) && value >= least ? value : null;
    }

    async function run() {
      if (!text.value.trim()) {
        answer("Paste a config.json first, or drop or choose the file.", true);
        return;
      }
      const tokens = number($(".cr-tokens"), 0);
      const batch = number($(".cr-batch"), 1);
      if (tokens === null || batch === null) {
        answer("The context must be a whole number of tokens, and the batch at least 1.", true);
        return;
      }
      try {
        reader = reader || load(status);
        const read = await reader;
        const page = JSON.parse(read(text.value, tokens, batch, $(".cr-cache").value));
        show(page, tokens, batch);
      } catch (error) {
        reader = null;
        answer("Python could not start in this page (" + error + "). The reader needs the " +
          "site served over http(s), not opened as a file.", true);
      }
    }

    function show(page, tokens, batch) {
      if (page.error) {
        result.hidden = true;
        answer(page.error, true);
        return;
      }
      $(".cr-recipe").textContent = page.recipe;
      $(".cr-strip").textContent = page.strip;
      const rows = page.per_kind.map((row) => {
        const tr = document.createElement("tr");
        for (const cell of [row.name, row.text]) {
          const td = document.createElement("td");
          td.textContent = cell;
          tr.append(td);
        }
        return tr;
      });
      $(".cr-bill tbody").replaceChildren(...rows);
      $(".cr-bill tfoot td:last-child").textContent = page.cache_text;
      $(".cr-bill caption").textContent =
        `The cache at ${tokens.toLocaleString("en")} tokens, batch ${batch}`;
      result.hidden = false;
      answer(`Read as ${page.model_type}, by the package's own Python.`);
    }

    async function readFile(file) {
      if (file) {
        text.value = await file.text();
        run();
      }
    }

    $(".cr-read").addEventListener("click", run);
    $(".cr-file").addEventListener("change", (event) => readFile(event.target.files[0]));
    for (const input of box.querySelectorAll(".cr-tokens, .cr-batch, .cr-cache")) {
      input.addEventListener("change", () => { if (!result.hidden) run(); });
    }
    box.addEventListener("dragover", (event) => {
      event.preventDefault();
      box.classList.add("cr-dragging");
    });
    box.addEventListener("dragleave", () => box.classList.remove("cr-dragging"));
    box.addEventListener("drop", (event) => {
      event.preventDefault();
      box.classList.remove("cr-dragging");
      readFile(event.dataTransfer.files[0]);
    });
  }

  function start() {
    document.querySelectorAll(".config-reader").forEach(setUp);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
