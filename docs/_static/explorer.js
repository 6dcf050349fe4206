/* The attention explorer (explorer.html): hover, tap or focus a token to see where it
 * attends. Plain JavaScript and SVG, no library, nothing fetched: the numbers come
 * from explorer-data.js, written at build time by docs/_ext/explorer_data.py, which
 * loads before this file and sets window.ATTENTION_EXPLORER.
 *
 * The data holds raw scores; this file turns them into weights,
 *   softmax(scale * scores / temperature) over the keys a query may see,
 * so the temperature slider and the causal toggle work live. The site tests check
 * these weights against torch.softmax (tests/site/test_explorer.py).
 *
 * The calculator (the view "calculator") bills a model's cache and weights from the
 * numbers the build exported per group of layers; tests/docs/test_explorer_data.py runs
 * calculatorBill in Node and compares it with attention.atlas.bill.
 */
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const TEMPERATURE = { min: 0.05, max: 3, step: 0.05 };

  /** Weights of query i: a stable softmax of its scaled scores over the visible keys. */
  function softmaxRow(scores, i, scale, temperature, causal) {
    const row = scores[i];
    const z = row.map((s, j) => (causal && j > i ? -Infinity : (s * scale) / temperature));
    const max = Math.max(...z);
    const e = z.map((v) => (v === -Infinity ? 0 : Math.exp(v - max)));
    const sum = e.reduce((a, b) => a + b, 0);
    return e.map((v) => v / sum);
  }

  function el(tag, attributes, text) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function place(node, row, column) {
    node.style.gridRow = String(row);
    node.style.gridColumn = String(column);
    return node;
  }

  /** "softmax(scores / T)", or with the module's 1/sqrt(d_k) when it has one. */
  function formula(scale) {
    if (scale === 1) return "weights = softmax(scores / T)";
    const dk = Math.round(1 / (scale * scale));
    return `weights = softmax(scores / (\u221A${dk} \u00B7 T))`;
  }

  function build(root, view, name) {
    const n = view.tokens.length;
    const heads = view.states[0].heads.length;
    const st = {
      query: view.query || 0,
      hover: null,
      temperature: 1,
      causal: view.causal,
      state: 0,
      heads: Array.from({ length: heads }, () => true),
    };
    root.textContent = "";
    root.classList.add("ae-ready");

    // -- Controls ------------------------------------------------------------------
    const controls = el("div", { class: "ae-controls" });
    const sliderId = `ae-${name}-temperature`;
    const temperature = el("div", { class: "ae-control ae-temperature" });
    const label = el("label", { for: sliderId }, "temperature T ");
    const slider = el("input", {
      type: "range",
      id: sliderId,
      min: TEMPERATURE.min,
      max: TEMPERATURE.max,
      step: TEMPERATURE.step,
      value: 1,
    });
    const shown = el("output", { for: sliderId, class: "ae-temperature-value" }, "1.00");
    temperature.append(label, slider, shown, el("span", { class: "ae-formula" }, formula(view.scale)));
    controls.append(temperature);

    let causalBox = null;
    if (view.causal_toggle) {
      const wrap = el("div", { class: "ae-control ae-causal" });
      const id = `ae-${name}-causal`;
      causalBox = el("input", { type: "checkbox", id });
      causalBox.checked = st.causal;
      wrap.append(causalBox, el("label", { for: id }, "causal mask: a token sees only itself and the tokens before it"));
      controls.append(wrap);
    } else if (view.causal) {
      controls.append(el("p", { class: "ae-control ae-fixed" }, "Causal: each token sees only itself and the tokens before it."));
    }

    const headButtons = [];
    if (heads > 1) {
      const group = el("div", { class: "ae-control ae-heads", role: "group", "aria-label": "Heads to show" });
      group.append(el("span", { class: "ae-group-label" }, "show "));
      view.states[0].heads.forEach((head, h) => {
        const button = el("button", { type: "button", class: `ae-head ae-head-${h}`, "aria-pressed": "true" }, head.label);
        button.addEventListener("click", () => {
          const on = !st.heads[h];
          if (!on && st.heads.filter(Boolean).length === 1) return; // keep at least one head
          st.heads[h] = on;
          render();
        });
        headButtons.push(button);
        group.append(button);
      });
      controls.append(group);
    }

    const stateInputs = [];
    if (view.states.length > 1) {
      const group = el("div", { class: "ae-control ae-states", role: "radiogroup", "aria-label": "Which weights" });
      view.states.forEach((state, s) => {
        const id = `ae-${name}-state-${s}`;
        const input = el("input", { type: "radio", name: `ae-${name}-state`, id, value: String(s) });
        input.checked = s === 0;
        input.addEventListener("change", () => {
          if (input.checked) {
            st.state = s;
            render();
          }
        });
        const item = el("span", { class: "ae-state" });
        item.append(input, el("label", { for: id }, state.label));
        group.append(item);
        stateInputs.push(input);
      });
      controls.append(group);
    }
    root.append(controls);

    // -- The grid: query tokens | lines | key tokens | one weight column per head ----
    const stage = el("div", { class: "ae-stage" });
    stage.style.setProperty("--ae-heads", String(heads));
    stage.style.gridTemplateRows = `auto repeat(${n}, var(--ae-row))`;
    stage.append(place(el("div", { class: "ae-header" }, "query"), 1, 1));
    stage.append(place(el("div", { class: "ae-header ae-key-header" }, "key"), 1, 3));
    const headHeaders = view.states[0].heads.map((head, h) =>
      place(el("div", { class: `ae-header ae-weight-header ae-head-${h}` }, heads > 1 ? head.label : "weight"), 1, 4 + h),
    );
    stage.append(...headHeaders);

    const group = el("div", { class: "ae-queries", role: "group", "aria-label": "Query tokens: choose one" });
    group.style.display = "contents";
    const queryButtons = view.tokens.map((token, i) => {
      const button = el("button", { type: "button", class: "ae-token ae-query", "data-index": String(i), "aria-pressed": "false" });
      if (view.states.length > 1) {
        button.append(el("span", { class: "ae-pos", "aria-hidden": "true" }, String(i)), document.createTextNode(token));
        button.setAttribute("aria-label", `${token}, position ${i}`);
      } else {
        button.textContent = token;
      }
      place(button, i + 2, 1);
      button.addEventListener("mouseenter", () => {
        st.hover = i;
        render();
      });
      button.addEventListener("mouseleave", () => {
        st.hover = null;
        render();
      });
      button.addEventListener("focus", () => select(i));
      button.addEventListener("click", () => select(i));
      button.addEventListener("keydown", (event) => {
        const moves = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 };
        let target = null;
        if (event.key in moves) target = Math.min(n - 1, Math.max(0, i + moves[event.key]));
        else if (event.key === "Home") target = 0;
        else if (event.key === "End") target = n - 1;
        if (target === null) return;
        event.preventDefault();
        queryButtons[target].focus();
      });
      group.append(button);
      return button;
    });
    stage.append(group);

    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("class", "ae-lines");
    svg.setAttribute("viewBox", `0 0 100 ${n}`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("aria-hidden", "true");
    svg.style.gridRow = `2 / span ${n}`;
    svg.style.gridColumn = "2";
    stage.append(svg);

    const keyLabels = view.tokens.map((token, j) => {
      const key = el("div", { class: "ae-token ae-key" });
      if (view.states.length > 1) key.append(el("span", { class: "ae-pos", "aria-hidden": "true" }, String(j)), document.createTextNode(token));
      else key.textContent = token;
      stage.append(place(key, j + 2, 3));
      return key;
    });
    const cells = view.states[0].heads.map((head, h) =>
      view.tokens.map((token, j) => {
        const cell = el("div", { class: `ae-weight ae-head-${h}`, "data-head": String(h), "data-key": String(j) });
        stage.append(place(cell, j + 2, 4 + h));
        return cell;
      }),
    );
    root.append(stage);

    const summary = el("p", { class: "ae-summary", "aria-live": "polite" });
    root.append(summary);
    if (view.previous_token_weight) {
      const p = view.previous_token_weight;
      const note = el(
        "p",
        { class: "ae-note" },
        `On ${p.sequences} random sequences the head never trained on, the weight on the previous token ` +
          `averages ${p.before.toFixed(4)} before training and ${p.after.toFixed(4)} after.`,
      );
      root.append(note);
    }

    /** A token as the summary names it; the trained model's repeat, so with a position. */
    function keyName(j) {
      return view.states.length > 1 ? `${view.tokens[j]} at ${j}` : `"${view.tokens[j]}"`;
    }

    function select(i) {
      st.query = i;
      render();
    }

    function render() {
      const i = st.hover === null ? st.query : st.hover;
      const state = view.states[st.state];
      root.dataset.query = String(i);
      root.dataset.temperature = String(st.temperature);
      root.dataset.causal = String(st.causal);
      root.dataset.state = String(st.state);
      queryButtons.forEach((button, k) => {
        button.setAttribute("aria-pressed", String(k === st.query));
        button.classList.toggle("ae-active", k === i);
      });
      keyLabels.forEach((key, j) => key.classList.toggle("ae-future", st.causal && j > i));
      svg.replaceChildren();
      const parts = [];
      state.heads.forEach((head, h) => {
        const on = st.heads[h];
        headHeaders[h].hidden = !on;
        if (headButtons[h]) headButtons[h].setAttribute("aria-pressed", String(on));
        const w = softmaxRow(head.scores, i, view.scale, st.temperature, st.causal);
        const offset = heads > 1 ? (h - (heads - 1) / 2) * 0.12 : 0;
        const listed = [];
        w.forEach((weight, j) => {
          const cell = cells[h][j];
          const masked = st.causal && j > i;
          cell.hidden = !on;
          cell.textContent = weight.toFixed(4);
          cell.dataset.weight = String(weight);
          cell.classList.toggle("ae-masked", masked);
          cell.title = masked ? "masked: this token comes later" : "";
          cell.style.setProperty("--ae-w", String(weight));
          if (!masked) listed.push(`${keyName(j)}: ${weight.toFixed(4)}`);
          if (!on || weight <= 0) return;
          const line = document.createElementNS(SVG, "line");
          line.setAttribute("x1", "0");
          line.setAttribute("y1", String(i + 0.5 + offset));
          line.setAttribute("x2", "100");
          line.setAttribute("y2", String(j + 0.5 + offset));
          line.setAttribute("vector-effect", "non-scaling-stroke");
          line.setAttribute("class", `ae-line ae-head-${h}`);
          line.style.strokeWidth = `${Math.max(0.75, 14 * weight)}px`;
          line.style.strokeOpacity = String(0.3 + 0.7 * weight);
          svg.append(line);
        });
        if (on) parts.push(`${heads > 1 ? `${head.label} \u2192 ` : ""}${listed.join(", ")}`);
      });
      const hidden = st.causal ? n - 1 - i : 0;
      const masked = hidden ? ` The ${hidden === 1 ? "later token is" : `${hidden} later tokens are`} masked.` : "";
      summary.textContent = `${keyName(i)} attends to ${parts.join("; ")}.${masked}`;
    }

    slider.addEventListener("input", () => {
      st.temperature = slider.valueAsNumber;
      shown.textContent = st.temperature.toFixed(2);
      render();
    });
    if (causalBox) {
      causalBox.addEventListener("change", () => {
        st.causal = causalBox.checked;
        render();
      });
    }
    render();
  }

  /** The mask view: one boolean grid, queries as rows and keys as columns, for each
   * pattern and slider value that the build exported from the package's masks. */
  function buildMasks(root, view, name) {
    const n = view.tokens.length;
    const st = {
      pattern: 0,
      values: view.patterns.map((p) => p.value),
      query: view.query || 0,
      hover: null,
    };
    root.textContent = "";
    root.classList.add("ae-ready", "ae-masks");

    // -- Controls: the pattern, and its window, chunk or length -----------------------
    const controls = el("div", { class: "ae-controls" });
    const patterns = el("div", { class: "ae-control ae-states ae-patterns", role: "radiogroup", "aria-label": "Mask pattern" });
    const radios = view.patterns.map((pattern, p) => {
      const id = `ae-${name}-pattern-${pattern.name}`;
      const input = el("input", { type: "radio", name: `ae-${name}-pattern`, id, value: pattern.name });
      input.checked = p === st.pattern;
      input.addEventListener("change", () => {
        if (input.checked) {
          st.pattern = p;
          render();
        }
      });
      const item = el("span", { class: "ae-state" });
      item.append(input, el("label", { for: id }, pattern.label));
      patterns.append(item);
      return input;
    });
    controls.append(patterns);

    const sliderId = `ae-${name}-size`;
    const size = el("div", { class: "ae-control ae-size" });
    const sizeLabel = el("label", { for: sliderId });
    const slider = el("input", { type: "range", id: sliderId, min: 1, max: n, step: 1, value: 1 });
    const sizeShown = el("output", { for: sliderId, class: "ae-temperature-value" });
    size.append(sizeLabel, slider, sizeShown);
    controls.append(size);
    const call = el("p", { class: "ae-control ae-formula ae-call" });
    const rule = el("p", { class: "ae-control ae-fixed ae-rule" });
    controls.append(call, rule);
    root.append(controls);

    // -- The grid: query | one column per key | how many keys the query sees ---------
    const grid = el("div", { class: "ae-mask-grid" });
    grid.style.setProperty("--ae-keys", String(n));
    grid.append(place(el("div", { class: "ae-header ae-corner" }, "query \u2193 key \u2192"), 1, 1));
    const keyLabels = view.tokens.map((token, j) => {
      const label = el("div", { class: "ae-col-key", "data-key": String(j) }, token);
      grid.append(place(label, 1, j + 2));
      return label;
    });
    grid.append(place(el("div", { class: "ae-header ae-count-header" }, "sees"), 1, n + 2));

    const group = el("div", { class: "ae-queries", role: "group", "aria-label": "Query tokens: choose one" });
    group.style.display = "contents";
    const queryButtons = view.tokens.map((token, i) => {
      const button = el("button", { type: "button", class: "ae-token ae-query", "data-index": String(i), "aria-pressed": "false" }, token);
      place(button, i + 2, 1);
      button.addEventListener("mouseenter", () => hover(i));
      button.addEventListener("mouseleave", () => hover(null));
      button.addEventListener("focus", () => select(i));
      button.addEventListener("click", () => select(i));
      button.addEventListener("keydown", (event) => {
        const moves = { ArrowDown: 1, ArrowRight: 1, ArrowUp: -1, ArrowLeft: -1 };
        let target = null;
        if (event.key in moves) target = Math.min(n - 1, Math.max(0, i + moves[event.key]));
        else if (event.key === "Home") target = 0;
        else if (event.key === "End") target = n - 1;
        if (target === null) return;
        event.preventDefault();
        queryButtons[target].focus();
      });
      group.append(button);
      return button;
    });
    grid.append(group);

    const cells = view.tokens.map((_, i) =>
      view.tokens.map((__, j) => {
        const cell = el("div", { class: "ae-cell", "data-query": String(i), "data-key": String(j) });
        cell.addEventListener("mouseenter", () => hover(i));
        cell.addEventListener("mouseleave", () => hover(null));
        grid.append(place(cell, i + 2, j + 2));
        return cell;
      }),
    );
    const counts = view.tokens.map((_, i) => {
      const count = el("div", { class: "ae-count", "data-query": String(i) });
      grid.append(place(count, i + 2, n + 2));
      return count;
    });
    root.append(grid);

    const legend = el("p", { class: "ae-legend" });
    legend.append(
      el("span", { class: "ae-swatch ae-allowed", "aria-hidden": "true" }),
      document.createTextNode(" may attend (True) "),
      el("span", { class: "ae-swatch ae-masked", "aria-hidden": "true" }),
      document.createTextNode(" hidden (False)"),
    );
    root.append(legend);
    const summary = el("p", { class: "ae-summary", "aria-live": "polite" });
    root.append(summary);

    function hover(i) {
      st.hover = i;
      render();
    }

    function select(i) {
      st.query = i;
      render();
    }

    function current() {
      const pattern = view.patterns[st.pattern];
      const option = pattern.options.find((o) => o.value === st.values[st.pattern]);
      // The padded text's own tokens, then "pad"; every other pattern: the sentence.
      const tokens = view.tokens.map((token, j) => (option.real && !option.real[0][j] ? "pad" : token));
      return { pattern, option, tokens };
    }

    function render() {
      const { pattern, option, tokens } = current();
      const i = st.hover === null ? st.query : st.hover;
      const value = st.values[st.pattern];
      root.dataset.pattern = pattern.name;
      root.dataset.value = value === null ? "" : String(value);
      root.dataset.query = String(i);

      radios.forEach((radio, p) => (radio.checked = p === st.pattern));
      size.hidden = pattern.parameter === null;
      if (pattern.parameter !== null) {
        sizeLabel.textContent = `${pattern.parameter} `;
        slider.value = String(value);
        sizeShown.textContent = String(value);
      }
      rule.textContent = `True where ${option.rule}`;
      // The package call that built this mask; a long one breaks only at its "&".
      const parts = option.call.split(" & ");
      call.replaceChildren();
      parts.forEach((part, k) => {
        if (k > 0) call.append(document.createTextNode(" "));
        call.append(el("span", { class: "ae-nowrap" }, k < parts.length - 1 ? `${part} &` : part));
      });

      const padded = (j) => Boolean(option.real) && !option.real[0][j];
      queryButtons.forEach((button, k) => {
        button.textContent = tokens[k];
        button.setAttribute("aria-label", padded(k) ? `padding, position ${k}` : `${tokens[k]}, position ${k}`);
        button.setAttribute("aria-pressed", String(k === st.query));
        button.classList.toggle("ae-active", k === i);
        button.classList.toggle("ae-pad", padded(k));
      });
      const seen = [];
      keyLabels.forEach((label, j) => {
        label.textContent = tokens[j];
        label.classList.toggle("ae-pad", padded(j));
        label.classList.toggle("ae-seen", option.allowed[i][j]);
        if (option.allowed[i][j]) seen.push(`"${tokens[j]}"`);
      });
      cells.forEach((row, q) =>
        row.forEach((cell, j) => {
          const allowed = option.allowed[q][j];
          cell.dataset.allowed = String(allowed);
          cell.classList.toggle("ae-allowed", allowed);
          cell.classList.toggle("ae-masked", !allowed);
          cell.classList.toggle("ae-in-row", q === i);
          cell.title = `${tokens[q]} \u2192 ${tokens[j]}: ${allowed ? "may attend" : "hidden"}`;
        }),
      );
      counts.forEach((count, q) => {
        count.textContent = String(option.allowed[q].filter(Boolean).length);
        count.classList.toggle("ae-in-row", q === i);
      });

      const who = padded(i) ? `the padding at position ${i}` : `"${tokens[i]}"`;
      const keys = seen.length === 1 ? seen[0] : `${seen.slice(0, -1).join(", ")} and ${seen[seen.length - 1]}`;
      const unused = padded(i) ? " Its output is never used." : "";
      summary.textContent = `${pattern.label}: ${who} may attend to ${keys}, ${seen.length} of ${n} keys.${unused}`;
    }

    slider.addEventListener("input", () => {
      st.values[st.pattern] = slider.valueAsNumber;
      render();
    });
    render();
  }

  /** Numbers one layer of a group keeps in the cache's type after `tokens` tokens: its
   * keys and values (a window's worth at most where `cap` is set), its convolution
   * window, its indexer keys and DeepSeek-V4's compressed entries, as the package's
   * ModelFacts.layer_cache_numbers counts them. */
  function layerNumbers(group, tokens) {
    const kept = group.cap === null ? tokens : Math.min(tokens, group.cap);
    let numbers = group.per_token * kept + group.fixed + group.index * tokens;
    const c = group.compressed;
    if (c) {
      const entries = Math.floor(tokens / c.rate);
      const waiting = tokens % c.rate;
      const overlap = c.overlap && entries ? 2 * c.rate : 0;
      for (const w of c.widths) numbers += entries * w + waiting * 2 * c.wide * w + overlap * w;
    }
    return numbers;
  }

  /** The bill of `batch` sequences of `tokens` tokens, as attention.atlas.bill computes
   * it: each layer's numbers times their bits, rounded up to whole bytes, per kind of
   * layer; the weights, where the table cites the parameters. */
  function calculatorBill(view, model, tokens, batch, cacheDtype, weightDtype) {
    const data = view.models[model];
    const bits = view.bits;
    const perKind = {};
    for (const k of data.kinds) perKind[k.kind] = 0;
    for (const group of data.groups) {
      const layer = Math.ceil((layerNumbers(group, tokens) * bits[cacheDtype] + group.state * bits[view.state_dtype]) / 8);
      perKind[group.kind] += group.count * batch * layer;
    }
    const cache = Object.values(perKind).reduce((a, b) => a + b, 0);
    const weights = data.parameters === null ? null : Math.ceil((data.parameters * bits[weightDtype]) / 8);
    return { per_kind: perKind, cache, weights };
  }

  /** Bytes as the model pages write them: 2 decimals from a GiB up, 1 from a KiB. */
  function size(bytes) {
    const units = [["TiB", 40, 2], ["GiB", 30, 2], ["MiB", 20, 1], ["KiB", 10, 1]];
    for (const [unit, power, decimals] of units) {
      if (bytes >= 2 ** power) {
        const value = bytes / 2 ** power;
        return `${value.toLocaleString("en-US", { minimumFractionDigits: decimals, maximumFractionDigits: decimals })} ${unit}`;
      }
    }
    return `${bytes.toLocaleString("en-US")} bytes`;
  }

  /** The calculator: a model, a context and a batch, the cache's and the weights' number
   * types; the bill per kind of layer, computed here from the numbers the build exported. */
  function buildCalculator(root, view, name) {
    const st = { model: view.model, tokens: view.tokens, batch: view.batch, cache: view.dtypes[0], weights: view.dtypes[0] };
    root.textContent = "";
    root.classList.add("ae-ready", "ae-calculator");
    const controls = el("div", { class: "ae-controls" });

    const modelId = `ae-${name}-model`;
    const modelControl = el("div", { class: "ae-control" });
    const select = el("select", { id: modelId });
    view.models.forEach((m, i) => select.append(el("option", { value: String(i) }, m.name)));
    select.value = String(st.model);
    const page = el("a", { class: "ae-page" }, "its page");
    modelControl.append(el("label", { for: modelId }, "model "), select, page);
    controls.append(modelControl);

    function numberControl(key, label, min, max) {
      const id = `ae-${name}-${key}`;
      const wrap = el("div", { class: `ae-control ae-${key}` });
      const slider = el("input", { type: "range", id: `${id}-slider`, min: String(min), max: String(max), step: "1", "aria-label": `${label} (slider)` });
      const box = el("input", { type: "number", id, min: "0", step: "1", inputmode: "numeric" });
      wrap.append(el("label", { for: id }, `${label} `), box, slider);
      controls.append(wrap);
      return { slider, box };
    }
    const context = numberControl("tokens", "context, tokens", 0, view.contexts.length - 1);
    const batch = numberControl("batch", "batch", 1, 256);
    batch.box.min = "1";

    function radios(key, label) {
      const group = el("div", { class: "ae-control ae-states", role: "radiogroup", "aria-label": label });
      group.append(el("span", { class: "ae-group-label" }, `${label} `));
      const inputs = view.dtypes.map((dtype) => {
        const id = `ae-${name}-${key}-${dtype}`;
        const input = el("input", { type: "radio", name: `ae-${name}-${key}`, id, value: dtype });
        input.checked = dtype === st[key];
        input.addEventListener("change", () => {
          if (input.checked) {
            st[key] = dtype;
            render();
          }
        });
        const item = el("span", { class: "ae-state" });
        item.append(input, el("label", { for: id }, dtype));
        group.append(item);
        return input;
      });
      controls.append(group);
      return inputs;
    }
    radios("cache", "cache in");
    radios("weights", "weights in");
    root.append(controls);

    const table = el("table", { class: "ae-bill" });
    const head = el("thead");
    const headRow = el("tr");
    for (const text of ["", "layers", "memory"]) headRow.append(el("th", { scope: "col" }, text));
    head.append(headRow);
    const body = el("tbody");
    table.append(head, body);
    const wrap = el("div", { class: "ae-bill-wrap" });
    wrap.append(table);
    root.append(wrap);
    const summary = el("p", { class: "ae-summary", "aria-live": "polite" });
    const note = el("p", { class: "ae-note" });
    root.append(summary, note);

    function row(label, layers, bytes, share, cls) {
      const tr = el("tr", { class: cls || "" });
      tr.append(el("th", { scope: "row" }, label), el("td", { class: "ae-count" }, layers));
      const cell = el("td", { class: "ae-bytes" });
      if (bytes === null) {
        cell.textContent = "not cited";
      } else {
        cell.dataset.bytes = String(bytes);
        cell.title = `${bytes.toLocaleString("en-US")} bytes`;
        cell.textContent = size(bytes);
        if (share !== null) {
          const bar = el("span", { class: "ae-bar", "aria-hidden": "true" });
          bar.style.setProperty("--ae-share", String(share));
          cell.prepend(bar);
        }
      }
      tr.append(cell);
      body.append(tr);
      return tr;
    }

    function render() {
      const m = view.models[st.model];
      const bill = calculatorBill(view, st.model, st.tokens, st.batch, st.cache, st.weights);
      root.dataset.model = m.name;
      root.dataset.tokens = String(st.tokens);
      root.dataset.batch = String(st.batch);
      root.dataset.cache = st.cache;
      root.dataset.weights = st.weights;
      page.href = m.page;
      page.textContent = `${m.name}'s page`;
      context.box.value = String(st.tokens);
      batch.box.value = String(st.batch);
      batch.slider.value = String(Math.min(256, st.batch));
      const stop = view.contexts.findIndex((t) => t >= st.tokens);
      context.slider.value = String(stop === -1 ? view.contexts.length - 1 : stop);
      body.replaceChildren();
      const total = bill.weights === null ? bill.cache : bill.cache + bill.weights;
      for (const k of m.kinds) {
        const layers = m.groups.filter((g) => g.kind === k.kind).reduce((a, g) => a + g.count, 0);
        const bytes = bill.per_kind[k.kind];
        row(k.label, String(layers), bytes, total ? bytes / total : 0, "ae-kind").dataset.kind = k.kind;
      }
      row(`cache, ${st.cache}`, String(m.layers), bill.cache, null, "ae-total ae-cache");
      row(`weights, ${st.weights}`, "", bill.weights, null, "ae-total ae-weights");
      row("in all", "", bill.weights === null ? null : total, null, "ae-total ae-all");
      const sequences = st.batch === 1 ? "one sequence" : `${st.batch} sequences`;
      summary.textContent =
        `${m.name}, ${sequences} of ${st.tokens.toLocaleString("en-US")} tokens: the cache takes ${size(bill.cache)} in ${st.cache}` +
        (bill.weights === null ? "; the site's table cites no parameter count for its weights." : `, the weights ${size(bill.weights)} in ${st.weights}: ${size(total)} in all.`);
      const notes = [`Recurrent states in ${view.state_dtype}, as transformers keeps them; quantized caches and weights also keep scales, not counted here.`];
      if (m.cross) notes.unshift("Its cross-attention's keys and values of the encoded context are cached once beside this and not counted here: see its page.");
      if (m.encoder) notes.unshift("An encoder attends both ways and generates nothing: it keeps no cache.");
      const limit = m.max_position_embeddings; // null: ALiBi, no limit
      if (limit !== null && st.tokens > limit) notes.unshift(`Beyond the ${limit.toLocaleString("en-US")} positions its config allows.`);
      else if (st.tokens > m.trained_context) notes.unshift(`Beyond its ${m.context_label} of ${m.trained_context.toLocaleString("en-US")} tokens.`);
      note.textContent = notes.join(" ");
    }

    select.addEventListener("change", () => {
      st.model = Number(select.value);
      render();
    });
    context.slider.addEventListener("input", () => {
      st.tokens = view.contexts[context.slider.valueAsNumber];
      render();
    });
    context.box.addEventListener("change", () => {
      const value = Math.floor(context.box.valueAsNumber);
      if (Number.isFinite(value) && value >= 0) st.tokens = value;
      render();
    });
    batch.slider.addEventListener("input", () => {
      st.batch = batch.slider.valueAsNumber;
      render();
    });
    batch.box.addEventListener("change", () => {
      const value = Math.floor(batch.box.valueAsNumber);
      if (Number.isFinite(value) && value >= 1) st.batch = value;
      render();
    });
    render();
  }

  function start() {
    const data = window.ATTENTION_EXPLORER;
    for (const root of document.querySelectorAll(".attention-explorer[data-view]")) {
      const name = root.dataset.view;
      if (!data || !data.views[name]) {
        root.textContent = `The data for this view (${name}) did not load.`;
        console.error(`attention explorer: no data for the view ${name}`);
        continue;
      }
      const view = data.views[name];
      if (view.kind === "masks") buildMasks(root, view, name);
      else if (view.kind === "calculator") buildCalculator(root, view, name);
      else build(root, view, name);
    }
  }

  window.attentionExplorer = { softmaxRow, calculatorBill };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
