// Runs the calculator's config reader, as the site ships it, in Node: the same Pyodide,
// the same Python files, the same exported config classes as the page
// (docs/_ext/config_reader.py writes them). tests/docs/test_config_reader.py runs it.
//
//   node docs/tools/config_reader_node.mjs BUNDLE_FOLDER < cases.json > results.json
//
// cases.json: [{"text": "<a config.json>", "tokens": 4096, "batch": 1,
//               "cache_dtype": "bf16", "state_dtype": "fp32"}, ...]
// results.json: {"load_seconds": ..., "results": [what browser_config.read returns, ...]}
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const folder = resolve(process.argv[2]);
const manifest = JSON.parse(readFileSync(join(folder, "manifest.json"), "utf8"));
const cases = JSON.parse(readFileSync(0, "utf8"));

const started = performance.now();
const { loadPyodide } = await import(pathToFileURL(join(folder, manifest.pyodide)).href);
const pyodide = await loadPyodide({ indexURL: join(folder, "pyodide") + "/" });
for (const path of manifest.python) {
  const target = `/home/pyodide/${path}`;
  pyodide.FS.mkdirTree(target.slice(0, target.lastIndexOf("/")));
  pyodide.FS.writeFile(target, readFileSync(join(folder, "python", path)));
}
pyodide.globals.set("exported_text", readFileSync(join(folder, "config-classes.json"), "utf8"));
const read = pyodide.runPython(`
import json
import browser_config
exported = json.loads(exported_text)

def read_case(case_text):
    case = json.loads(case_text)
    text = case.pop("text")
    return json.dumps(browser_config.read(text, exported, **case))

read_case
`);
const loadSeconds = (performance.now() - started) / 1000;
const results = cases.map((one) => JSON.parse(read(JSON.stringify(one))));
process.stdout.write(JSON.stringify({ load_seconds: loadSeconds, results }));
