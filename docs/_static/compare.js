// The compare view (docs/models/compare.md): two models side by side.
//
// Every number comes from the JSON the build wrote into the page
// (docs/_ext/model_cards.py, compare_data): the key numbers as the model pages print
// them, each recipe by topic, each strip as text and the cache at each context, all
// computed by the package. This script only picks, lays out and draws them; it works
// offline and fetches nothing.
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var COLOURS = ["#0072b2", "#d55e00"]; // two of Okabe and Ito's, told apart by dashes too
  var DASHES = ["", "6 4"];

  function element(tag, attributes, text) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (key) {
      node.setAttribute(key, attributes[key]);
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svgElement(tag, attributes) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attributes).forEach(function (key) {
      node.setAttribute(key, attributes[key]);
    });
    return node;
  }

  function gib(bytes) {
    return bytes / Math.pow(2, 30);
  }

  function tokensLabel(tokens) {
    if (tokens >= 1048576) return tokens / 1048576 + "M";
    return tokens / 1024 + "k";
  }

  // A table of rows [label, value for A, value for B, mark], with a header.
  function table(header, rows, className) {
    var wrapper = element("div", { class: "mc-table-wrapper" });
    var t = element("table", { class: "mc-table " + (className || "") });
    var head = element("tr");
    header.forEach(function (cell) {
      head.appendChild(element("th", { scope: "col" }, cell));
    });
    t.appendChild(element("thead")).appendChild(head);
    var body = element("tbody");
    rows.forEach(function (row) {
      var tr = element("tr", row.differs ? { class: "mc-differs" } : {});
      row.cells.forEach(function (cell, i) {
        tr.appendChild(element(i === 0 ? "th" : "td", i === 0 ? { scope: "row" } : {}, cell));
      });
      body.appendChild(tr);
    });
    t.appendChild(body);
    wrapper.appendChild(t);
    return wrapper;
  }

  function keyRows(a, b) {
    // The rows of both, in A's order then B's extras; "–" where a model has none.
    var labels = [];
    var value = [{}, {}];
    [a, b].forEach(function (model, i) {
      model.key.forEach(function (row) {
        // Each model names its context as its source does (trained, supported or
        // configured): the rows line up on the context alone.
        var label = row[0].replace(/, its (trained|supported|configured) context$/, "")
          .replace(/its (trained|supported|configured) context$/, "its context");
        if (labels.indexOf(label) < 0) labels.push(label);
        value[i][label] = row[1];
      });
    });
    return labels.map(function (label) {
      return { cells: [label, value[0][label] || "–", value[1][label] || "–"] };
    });
  }

  function recipeRows(data, a, b) {
    return Object.keys(data.topics).map(function (topic) {
      var same = a.recipe[topic] === b.recipe[topic];
      return {
        differs: !same,
        cells: [data.topics[topic], a.recipe[topic], b.recipe[topic], same ? "same" : "≠ differs"],
      };
    });
  }

  // Both caches against the context, log scales, a dot at each model's own context.
  function plot(a, b) {
    var width = 640, height = 320, left = 64, right = 16, top = 16, bottom = 48;
    var all = a.cache.concat(b.cache);
    var xs = all.map(function (p) { return Math.log2(p[0]); });
    var ys = all.map(function (p) { return Math.log10(Math.max(gib(p[1]), 1e-6)); });
    var x0 = Math.min.apply(null, xs), x1 = Math.max.apply(null, xs);
    var y0 = Math.floor(Math.min.apply(null, ys)), y1 = Math.ceil(Math.max.apply(null, ys));
    if (y1 === y0) y1 = y0 + 1;
    function X(tokens) {
      return left + (Math.log2(tokens) - x0) / (x1 - x0) * (width - left - right);
    }
    function Y(bytes) {
      var v = Math.log10(Math.max(gib(bytes), 1e-6));
      return top + (y1 - v) / (y1 - y0) * (height - top - bottom);
    }
    var summary = [a, b].map(function (m) {
      var last = m.cache[m.cache.length - 1];
      return m.name + " reaches " + gib(last[1]).toFixed(2) + " GiB at " +
        tokensLabel(last[0]) + " tokens";
    }).join("; ");
    var svg = svgElement("svg", {
      viewBox: "0 0 " + width + " " + height, class: "mc-plot", role: "img",
      "aria-label": "One sequence's cache in bf16 against the context, log scales: " + summary + ".",
    });
    for (var p = Math.ceil(x0); p <= x1; p += 2) {
      var x = X(Math.pow(2, p));
      svg.appendChild(svgElement("line", { x1: x, x2: x, y1: top, y2: height - bottom, class: "mc-grid" }));
      var label = svgElement("text", { x: x, y: height - bottom + 16, "text-anchor": "middle", class: "mc-axis" });
      label.textContent = tokensLabel(Math.pow(2, p));
      svg.appendChild(label);
    }
    for (var q = y0; q <= y1; q += 1) {
      var y = top + (y1 - q) / (y1 - y0) * (height - top - bottom);
      svg.appendChild(svgElement("line", { x1: left, x2: width - right, y1: y, y2: y, class: "mc-grid" }));
      var tick = svgElement("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "mc-axis" });
      tick.textContent = Math.pow(10, q) >= 1 ? String(Math.pow(10, q)) : Math.pow(10, q).toPrecision(1);
      svg.appendChild(tick);
    }
    var xTitle = svgElement("text", { x: (left + width - right) / 2, y: height - 8, "text-anchor": "middle", class: "mc-axis" });
    xTitle.textContent = "tokens of context (a dot: each model's context, as its source says)";
    svg.appendChild(xTitle);
    var yTitle = svgElement("text", { x: 14, y: (top + height - bottom) / 2, "text-anchor": "middle", class: "mc-axis", transform: "rotate(-90 14 " + (top + height - bottom) / 2 + ")" });
    yTitle.textContent = "cache (GiB, bf16)";
    svg.appendChild(yTitle);
    [a, b].forEach(function (m, i) {
      var points = m.cache.map(function (pt) { return X(pt[0]) + "," + Y(pt[1]); }).join(" ");
      svg.appendChild(svgElement("polyline", {
        points: points, fill: "none", stroke: COLOURS[i], "stroke-width": 2.5,
        "stroke-dasharray": DASHES[i], class: "mc-line", "data-model": m.name,
      }));
      var trained = m.cache.filter(function (pt) { return pt[0] === m.trained_context; })[0];
      if (trained) {
        svg.appendChild(svgElement("circle", { cx: X(trained[0]), cy: Y(trained[1]), r: 5, fill: COLOURS[i] }));
      }
    });
    return svg;
  }

  function legend(a, b) {
    var list = element("ul", { class: "mc-legend" });
    [a, b].forEach(function (m, i) {
      var item = element("li");
      var swatch = element("span", { class: "mc-swatch mc-swatch-" + i });
      swatch.style.borderColor = COLOURS[i];
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(m.name));
      list.appendChild(item);
    });
    return list;
  }

  function render(root, data, picks) {
    var a = data.models[picks[0]], b = data.models[picks[1]];
    var out = root.querySelector(".mc-out");
    out.textContent = "";
    var links = element("p");
    [a, b].forEach(function (m, i) {
      if (i) links.appendChild(document.createTextNode(" and "));
      links.appendChild(element("a", { href: m.page }, m.name + "'s page"));
    });
    out.appendChild(links);
    out.appendChild(element("h2", {}, "Key numbers"));
    out.appendChild(table(["", a.name, b.name], keyRows(a, b), "mc-key"));
    out.appendChild(element("h2", {}, "Their recipes, clause by clause"));
    out.appendChild(table(["", a.name, b.name, ""], recipeRows(data, a, b), "mc-recipe"));
    out.appendChild(element("h2", {}, "Their layers, one letter each"));
    [a, b].forEach(function (m) {
      out.appendChild(element("p", { class: "mc-strip-name" }, m.name));
      out.appendChild(element("pre", { class: "mc-strip" }, m.strip));
    });
    out.appendChild(element("h2", {}, "Their caches against the context"));
    out.appendChild(legend(a, b));
    out.appendChild(plot(a, b));
  }

  function start() {
    var root = document.getElementById("model-compare");
    var source = document.getElementById("model-compare-data");
    if (!root || !source) return;
    var data = JSON.parse(source.textContent);
    var names = data.models.map(function (m) { return m.name; });
    var first = data.pairs[0];
    var picks = [names.indexOf(first[0]), names.indexOf(first[1])];
    root.textContent = "";
    var form = element("div", { class: "mc-pickers" });
    ["first model", "second model"].forEach(function (what, i) {
      var label = element("label", { class: "mc-picker" }, what + " ");
      var select = element("select", { "data-pick": String(i) });
      names.forEach(function (name, j) {
        var option = element("option", { value: String(j) }, name);
        if (j === picks[i]) option.selected = true;
        select.appendChild(option);
      });
      select.addEventListener("change", function () {
        picks[i] = Number(select.value);
        render(root, data, picks);
      });
      label.appendChild(select);
      form.appendChild(label);
    });
    root.appendChild(form);
    root.appendChild(element("div", { class: "mc-out", "aria-live": "polite" }));
    render(root, data, picks);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
