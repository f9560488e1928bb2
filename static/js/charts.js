// Draws a page's Plotly charts from the figures the server embedded (telemetry.charts.charts_script:
// a list of {"id", "figure"} in #charts-data). Every chart page uses this one file.
//
// Charts marked [data-linked-x] (the run page's metrics) share one x range: zooming one zooms
// all, each y axis rescales to the points in view, one legend (the first chart's) stands for
// all, and the view (x0, x1, ylog, yclip, smooth) is kept in the URL so a link reproduces it.
// Clipping is on unless the view says yclip=0: a chart whose few outliers flatten the rest
// (one spike of grad_norm, the slow first steps of step_time_s) is scaled to its p1-p99 band
// and the outliers are marked at the band's edge, their values in the hover; a chart no few
// points dominate keeps its whole range either way (band() below).
(function () {
  "use strict";
  if (typeof Plotly === "undefined") { return; }
  // No "share"/"edit in Chart Studio" button and no link off the site: training data stays here.
  var CONFIG = {
    responsive: true, displaylogo: false, showLink: false, showSendToCloud: false,
    showEditInChartStudio: false, modeBarButtonsToRemove: ["sendDataToCloud", "editInChartStudio"]
  };
  var figures = {};
  var syncing = false;
  // hidden: attempt lines hidden from the page's legend, so charts drawn later hide them too.
  var view = { x: null, log: false, clip: true, smooth: 0, hidden: {} };
  var generation = 0;  // a newer draw() (a live swap) stops an older one's progressive drawing
  // The drawing under way: live.js waits for it before it polls again, or a run whose data
  // changes faster than its eight charts draw would restart the drawing for ever (the later
  // charts never drawn; seen in the benchmark's browser phase under ingest).
  var drawing = Promise.resolve();

  // Linked charts with a figure; linked(): those drawn so far.
  function allLinked() {
    return Array.prototype.filter.call(document.querySelectorAll("[data-linked-x]"),
      function (el) { return figures[el.id]; });
  }
  function linked() { return allLinked().filter(function (el) { return el.data; }); }
  function isDate(gd) { return (gd.layout || figures[gd.id].figure.layout).xaxis.type === "date"; }
  // Date axes hold naive UTC strings ("2026-01-02 03:04:05"); compare them as UTC ms.
  function toNumber(v, date) {
    if (v === null || v === undefined) { return NaN; }
    return date ? Date.parse(String(v).replace(" ", "T").replace(/Z?$/, "Z")) : Number(v);
  }
  function fromNumber(v, date) {
    return date ? new Date(v).toISOString().replace("T", " ").replace("Z", "") : v;
  }
  // The display zone (the topbar's "Times" switch). Figures carry naive UTC times on axes
  // titled "(UTC)"; on a page read in another zone those axes, their data, marks and labels
  // are moved into it and the title names it, as every table of the page does. The URL's
  // x0/x1 stay UTC milliseconds, so a link shows the same moments in any zone.
  var ZONE = document.body.dataset.displayZone || "UTC";
  var zoneParts = null;
  if (ZONE !== "UTC") {
    try {
      zoneParts = new Intl.DateTimeFormat("en-US", { timeZone: ZONE, hourCycle: "h23",
        year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric",
        second: "numeric" });
    } catch (e) { zoneParts = null; }  // a zone this browser does not know: stay in UTC
  }
  var zonedX = false;  // the linked charts' x axis is in the display zone
  var offsets = {};
  // The zone's offset from UTC (ms) at UTC time `ms`, looked up once per quarter hour.
  function zoneOffset(ms) {
    var key = Math.floor(ms / 900000);
    if (!(key in offsets)) {
      var at = key * 900000, p = {};
      zoneParts.formatToParts(new Date(at)).forEach(function (part) { p[part.type] = part.value; });
      offsets[key] = Date.UTC(+p.year, p.month - 1, +p.day, +p.hour, +p.minute, +p.second) - at;
    }
    return offsets[key];
  }
  function zoned(v) {
    var ms = typeof v === "number" ? v : toNumber(v, true);
    if (!isFinite(ms)) { return v; }
    var local = ms + zoneOffset(ms);
    return typeof v === "number" ? local : new Date(local).toISOString().replace("T", " ").replace("Z", "");
  }
  var zonedArrays = new Map();  // shared marks' arrays, converted once per draw for all charts
  function zonedArray(xs) {
    if (!zonedArrays.has(xs)) { zonedArrays.set(xs, xs.map(zoned)); }
    return zonedArrays.get(xs);
  }
  // A figure's "(UTC)" x axis moved into the display zone, in place; true if it was.
  function toDisplayZone(figure) {
    var layout = figure.layout || {}, axis = layout.xaxis || {};
    var title = axis.title && axis.title.text;
    if (!zoneParts || typeof title !== "string" || title.indexOf("(UTC)") < 0) { return false; }
    axis.title = Object.assign({}, axis.title, { text: title.replace("(UTC)", "(" + ZONE + ")") });
    (figure.data || []).forEach(function (t) {
      if ((t.xaxis || "x") === "x" && Array.isArray(t.x)) { t.x = zonedArray(t.x); }
    });
    (layout.shapes || []).forEach(function (shape) {
      if (shape.xref !== "x") { return; }
      if (shape.x0 !== undefined) { shape.x0 = zoned(shape.x0); }
      if (shape.x1 !== undefined) { shape.x1 = zoned(shape.x1); }
      if (shape.path) {
        // Many marks as one path, "M<x>,0L<x>,1...", a date's parts joined by "_".
        shape.path = shape.path.replace(/([ML])([^,MLZ]+),/g, function (all, command, x) {
          return command + String(zoned(x.replace("_", " "))).replace(" ", "_") + ",";
        });
      }
    });
    (layout.annotations || []).forEach(function (note) {
      if ((note.xref || "x") === "x" && note.x !== undefined) { note.x = zoned(note.x); }
    });
    if (Array.isArray(axis.range)) { axis.range = axis.range.map(zoned); }
    return true;
  }
  // The URL's x0/x1 (UTC ms on a time axis) to and from the axis's numbers.
  function fromUrl(v) { return zonedX ? v + zoneOffset(v) : v; }
  function toUrl(v) { return zonedX ? v - zoneOffset(v - zoneOffset(v)) : v; }

  function dataTraces(traces) {
    return (traces || []).filter(function (t) {
      return (t.yaxis || "y") === "y" && t.visible !== "legendonly" && t.visible !== false;
    });
  }
  // A chart's data traces: drawn, its _fullData (base64-encoded arrays decoded); not yet
  // drawn, its figure's (decoded here), so a chart is drawn once, already at the view.
  function shownTraces(gd) {
    if (gd.data) { return dataTraces(gd._fullData); }
    return dataTraces(figures[gd.id].figure.data).map(function (t) {
      return { x: decoded(t.x), y: decoded(t.y) };
    });
  }
  function xExtent(gd) {
    var date = isDate(gd), lo = Infinity, hi = -Infinity;
    shownTraces(gd).forEach(function (t) {
      var xs = t.x || [];
      for (var i = 0; i < xs.length; i++) {
        var v = toNumber(xs[i], date);
        if (isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
      }
    });
    return lo <= hi ? [lo, hi] : null;
  }
  // The p1-p99 band of the traces' finite values ({x, y} with decoded arrays), widened by
  // CLIP_MARGIN of its width each side (a noisy series' own tails, ~3.5 sigma, stay in), or
  // null when the whole range is less than CLIP_WORTH times the band: then no outlier
  // flattens the rest and the chart keeps its whole range.
  var CLIP_WORTH = 3, CLIP_MARGIN = 0.25;
  function band(traces) {
    var ys = [];
    traces.forEach(function (t) {
      (t.y || []).forEach(function (y) { if (y !== null && isFinite(y)) { ys.push(y); } });
    });
    if (ys.length < 20) { return null; }
    ys.sort(function (a, b) { return a - b; });
    var lo = ys[Math.floor(0.01 * (ys.length - 1))], hi = ys[Math.ceil(0.99 * (ys.length - 1))];
    var width = hi - lo, margin = CLIP_MARGIN * width;
    return ys[ys.length - 1] - ys[0] > CLIP_WORTH * width ? [lo - margin, hi + margin] : null;
  }
  // The marker trace of the values outside `b`, drawn at its edges; null if none.
  function outliers(traces, b) {
    var x = [], y = [], text = [], symbol = [];
    traces.forEach(function (t) {
      var xs = t.x || [], ys = t.y || [];
      for (var i = 0; i < ys.length; i++) {
        if (ys[i] === null || !isFinite(ys[i]) || (ys[i] >= b[0] && ys[i] <= b[1])) { continue; }
        var above = ys[i] > b[1];
        x.push(xs[i]); y.push(above ? b[1] : b[0]); text.push(String(ys[i]));
        symbol.push(above ? "triangle-up" : "triangle-down");
      }
    });
    if (!x.length) { return null; }
    return {
      type: "scatter", mode: "markers", name: "outside p1–p99 (clipped)", x: x, y: y, text: text,
      marker: { symbol: symbol, size: 8, color: "#d62728" }, showlegend: false, clipped: true,
      hovertemplate: "%{x}<br>%{text} (clipped to the p1–p99 band)<extra></extra>"
    };
  }
  // The y range of the points whose x is inside [x0, x1] (numbers), padded; null if none.
  // Clipped (view.clip), values outside the chart's band count as its edges.
  function yRange(gd, x0, x1) {
    var date = isDate(gd), log = view.log, lo = Infinity, hi = -Infinity;
    var b = view.clip ? figures[gd.id].band : null;
    shownTraces(gd).forEach(function (t) {
      var xs = t.x || [], ys = t.y || [];
      for (var i = 0; i < xs.length; i++) {
        var x = toNumber(xs[i], date), y = ys[i];
        if (y === null || !isFinite(y) || x < x0 || x > x1 || (log && y <= 0)) { continue; }
        if (b) { y = Math.min(Math.max(y, b[0]), b[1]); }
        lo = Math.min(lo, y); hi = Math.max(hi, y);
      }
    });
    if (!(lo <= hi)) { return null; }
    if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }
    var pad = (hi - lo) * 0.05 || Math.abs(hi) * 0.05 || 1;
    return [lo - pad, hi + pad];
  }
  // Every linked chart's points, drawn or not: the panels share one step range.
  function sharedExtent() {
    var lo = Infinity, hi = -Infinity;
    allLinked().forEach(function (gd) {
      var e = xExtent(gd);
      if (e) { lo = Math.min(lo, e[0]); hi = Math.max(hi, e[1]); }
    });
    return lo <= hi ? [lo, hi] : null;
  }
  // The axis ranges that show x range `shown` (numbers) on chart gd, y fitted, as a layout
  // update (an autoranged y when nothing is in view).
  function rangeUpdate(gd, shown) {
    var date = isDate(gd), update = {
      "xaxis.range": [fromNumber(shown[0], date), fromNumber(shown[1], date)],
      "xaxis.autorange": false
    };
    var y = yRange(gd, shown[0], shown[1]);
    if (y) { update["yaxis.range"] = y; update["yaxis.autorange"] = false; } else { update["yaxis.autorange"] = true; }
    return update;
  }

  function keepInUrl() {
    var params = new URLSearchParams(window.location.search);
    function set(key, value) { if (value === null || value === "" ) { params.delete(key); } else { params.set(key, value); } }
    set("x0", view.x ? String(toUrl(view.x[0])) : null);
    set("x1", view.x ? String(toUrl(view.x[1])) : null);
    set("ylog", view.log ? "1" : null);
    set("yclip", view.clip ? null : "0");
    set("smooth", view.smooth ? String(view.smooth) : null);
    var query = params.toString();
    window.history.replaceState(null, "", window.location.pathname + (query ? "?" + query : "") + window.location.hash);
  }

  // Every linked chart drawn so far to x range `range` (numbers; null: the whole shared
  // range), y fitted; the charts still to draw take view.x when they are drawn.
  function applyX(range) {
    var charts = linked();
    var whole = sharedExtent();
    // The whole range (a double click's reset to the first view) is no zoom to keep.
    if (range && whole && range[0] === whole[0] && range[1] === whole[1]) { range = null; }
    view.x = range;
    if (!charts.length) { return Promise.resolve(); }
    var shown = range || whole;
    if (!shown) { return Promise.resolve(); }
    syncing = true;
    return Promise.all(charts.map(function (gd) {
      return Plotly.relayout(gd, rangeUpdate(gd, shown));
    })).then(function () { syncing = false; keepInUrl(); }, function () { syncing = false; });
  }

  function onRelayout(gd, event) {
    if (syncing) { return; }
    var date = isDate(gd);
    // A double click resets the zoom; a resize (autosize) keeps it.
    if (event["xaxis.autorange"]) { applyX(null); return; }
    if (event.autosize) { applyX(view.x); return; }
    var a = event["xaxis.range[0]"], b = event["xaxis.range[1]"];
    if (a === undefined && event["xaxis.range"]) { a = event["xaxis.range"][0]; b = event["xaxis.range"][1]; }
    if (a === undefined) { return; }
    applyX([toNumber(a, date), toNumber(b, date)]);
  }

  function ema(ys, alpha) {
    var out = [], last = null;
    for (var i = 0; i < ys.length; i++) {
      var y = ys[i];
      if (y === null || !isFinite(y)) { out.push(y); last = null; continue; }
      last = last === null ? y : alpha * last + (1 - alpha) * y;
      out.push(last);
    }
    return out;
  }
  // plotly.py writes numpy arrays as {dtype, bdata} (base64); smoothing needs the numbers.
  var TYPED = { f8: Float64Array, f4: Float32Array, i4: Int32Array, i2: Int16Array, i1: Int8Array,
                u4: Uint32Array, u2: Uint16Array, u1: Uint8Array };
  function decoded(values) {
    if (!values || Array.isArray(values) || !values.bdata) { return values || []; }
    var bytes = Uint8Array.from(atob(values.bdata), function (c) { return c.charCodeAt(0); });
    return Array.from(new TYPED[values.dtype](bytes.buffer));
  }
  // An attempt's line ("lines+markers" when it holds a lone value).
  function isLine(t) { return t.mode === "lines" || t.mode === "lines+markers"; }
  function smoothable(t) {
    return (t.yaxis || "y") === "y" && isLine(t) && /(^|· )attempts? /.test(t.name || "");
  }
  // The figure's traces with smoothing applied: each line smoothed, its raw line kept faint.
  // The data lines (not the marks' hover markers) of a list of traces, arrays decoded.
  function lines(data) {
    return dataTraces(data).filter(isLine).map(function (t) {
      return { x: decoded(t.x), y: decoded(t.y) };
    });
  }
  // The figure's traces for the view; b: its p1-p99 band when the view clips.
  function traces(figure, b) {
    var data = JSON.parse(JSON.stringify(figure.data));
    data.forEach(function (t) { if (view.hidden[t.name]) { t.visible = "legendonly"; } });
    if (view.clip && b) {
      var marked = outliers(lines(data), b);
      // Hover markers (interruptions, non-finite values) at the data's top stay in view.
      data.forEach(function (t) {
        if ((t.yaxis || "y") === "y" && t.mode === "markers") {
          t.y = decoded(t.y).map(function (y) { return y === null ? y : Math.min(Math.max(y, b[0]), b[1]); });
        }
      });
      if (marked) { data.push(marked); }
    }
    if (!view.smooth) { return data; }
    var out = [];
    data.forEach(function (t) {
      if (!smoothable(t)) { out.push(t); return; }
      var raw = JSON.parse(JSON.stringify(t));
      raw.opacity = 0.25; raw.showlegend = false; raw.hoverinfo = "skip"; delete raw.hovertemplate;
      raw.legendgroup = t.name; t.legendgroup = t.name;
      t.y = ema(decoded(t.y), view.smooth);
      out.push(raw, t);
    });
    return out;
  }

  function render(gd, first) {
    var figure = figures[gd.id];
    var layout = first ? figure.figure.layout : gd.layout;
    if (gd.hasAttribute("data-linked-x")) {
      layout.yaxis = layout.yaxis || {};
      layout.yaxis.type = view.log ? "log" : "linear";
      // One legend per page: the first linked chart's.
      layout.showlegend = gd === document.querySelector("[data-linked-x]");
      if (first && layout.showlegend) {
        // Taller, with room under the x axis title for the page's legend (several rows).
        layout.height = (layout.height || 300) + 90;
        // Room enough for the legend's three rows and the axis below (144 px drawn): past
        // the margin, Plotly's automargin would draw the chart a second time.
        layout.margin = Object.assign({}, layout.margin, { b: 150 });
        layout.legend = Object.assign({}, layout.legend, { y: -0.32, yanchor: "top" });
      }
      // Drawn at the page's view at once: a relayout after drawing redraws the chart.
      var shown = view.x || sharedExtent();
      if (shown) {
        var update = rangeUpdate(gd, shown);
        layout.xaxis = Object.assign({}, layout.xaxis, { range: update["xaxis.range"], autorange: false });
        layout.yaxis = Object.assign({}, layout.yaxis, update["yaxis.range"]
          ? { range: update["yaxis.range"], autorange: false } : { autorange: true });
      }
    }
    return Plotly.react(gd, traces(figure.figure, figure.band), layout, CONFIG);
  }

  function restyleAll() {
    return Promise.all(linked().map(function (gd) { return render(gd, false); })).then(keepInUrl);
  }

  function bind(target) {
    if (!target.hasAttribute("data-linked-x") || target.dataset.chronicleBound) { return; }
    target.dataset.chronicleBound = "1";
    target.on("plotly_relayout", function (event) { onRelayout(target, event); });
    target.on("plotly_legendclick", function (event) {
      // The page's one legend shows or hides that attempt on every chart.
      var name = event.data[event.curveNumber].name;
      var visible = event.data[event.curveNumber].visible === "legendonly" ? true : "legendonly";
      if (visible === true) { delete view.hidden[name]; } else { view.hidden[name] = true; }
      linked().forEach(function (gd) {
        if (gd === target) { return; }
        var idx = [];
        gd.data.forEach(function (t, i) { if (t.name === name) { idx.push(i); } });
        if (idx.length) { Plotly.restyle(gd, { visible: visible }, idx); }
      });
      return true;
    });
  }

  // Text labels (the attempts' "attempt N" at their restart lines) that would print over an
  // earlier one are hidden, for the chart's width and zoom as drawn: the server staggers them
  // in three rows, but restarts close together on a narrow chart still collided. The
  // attempt's line and the legend still name it.
  function declutter(gd) {
    var kept = [];
    gd.querySelectorAll("g.annotation-text-g").forEach(function (label) {
      label.style.visibility = "";
      var box = label.getBoundingClientRect();
      // Boxes that only touch (a pixel of padding) do not clash.
      var clash = box.width > 0 && kept.some(function (other) {
        return box.left + 1 < other.right && other.left + 1 < box.right &&
          box.top + 1 < other.bottom && other.top + 1 < box.bottom;
      });
      if (clash) { label.style.visibility = "hidden"; } else { kept.push(box); }
    });
  }

  function mark(name) {
    // For `make bench`'s browser phase: when the page's first chart, and all, were drawn.
    if (!performance.getEntriesByName(name).length) { performance.mark(name); }
  }

  // After the browser has painted what is drawn: the next animation frame, then a task (a
  // hidden tab runs no frames; its charts are drawn by timers instead).
  function afterPaint(fn) {
    if (document.hidden) { setTimeout(fn, 0); return; }
    requestAnimationFrame(function () { setTimeout(fn, 0); });
  }

  // The first chart and every chart not linked (pages of a few small charts) are drawn at
  // once; the other linked charts one per frame, in page order, so the first is seen as soon
  // as it is drawn: a Llama-scale run page's eight charts took 0.3-0.6 s each, all drawn
  // before anything was shown.
  function draw() {
    var node = document.getElementById("charts-data");
    if (!node) { return Promise.resolve(); }
    var mine = ++generation;
    figures = {};
    zonedArrays = new Map();
    zonedX = false;
    var params = new URLSearchParams(window.location.search);
    view.log = params.get("ylog") === "1";
    view.clip = params.get("yclip") !== "0";
    view.smooth = Math.min(Math.max(Number(params.get("smooth")) || 0, 0), 0.99);
    var now = [], later = [];
    var entries = JSON.parse(node.textContent);
    // Charts the page caches apart from these (the run page's power and heat).
    var more = document.getElementById("charts-data-more");
    if (more) { entries = entries.concat(JSON.parse(more.textContent)); }
    // Marks traces and path shapes several charts share are written once
    // (telemetry.charts.shared_marks): each chart gets its own copy of the object (its arrays
    // are shared, not copied).
    var shared = [];
    entries.forEach(function (entry) { if (entry.id === "charts-shared") { shared = entry.traces; } });
    function own(item) { return item.shared === undefined ? item : Object.assign({}, shared[item.shared]); }
    entries.forEach(function (chart) {
      if (!chart.figure) { return; }
      chart.figure.data = (chart.figure.data || []).map(own);
      if (chart.figure.layout && chart.figure.layout.shapes) {
        chart.figure.layout.shapes = chart.figure.layout.shapes.map(own);
      }
      var target = document.getElementById(chart.id);
      if (!target) { return; }
      var inZone = toDisplayZone(chart.figure);
      chart.band = band(lines(chart.figure.data));
      if (target.hasAttribute("data-linked-x")) { zonedX = inZone; }
      figures[chart.id] = chart;
      (now.length && target.hasAttribute("data-linked-x") ? later : now).push(target);
    });
    // Kept as numbers: steps, or UTC milliseconds on the time axis.
    var x0 = params.get("x0"), x1 = params.get("x1");
    var range = x0 !== null && x1 !== null ? [Number(x0), Number(x1)] : null;
    if (range && !(isFinite(range[0]) && isFinite(range[1]) && range[0] < range[1])) { range = null; }
    view.x = range && [fromUrl(range[0]), fromUrl(range[1])];
    function one(target) {
      return render(target, true).then(function () {
        mark("chronicle:first-chart");
        bind(target);
        if (!target.dataset.chronicleDecluttered) {
          target.dataset.chronicleDecluttered = "1";
          target.on("plotly_afterplot", function () { declutter(target); });
        }
        declutter(target);
      });
    }
    return Promise.all(now.map(one)).then(function () {
      return new Promise(function (resolve) {
        (function next() {
          if (mine !== generation) { resolve(false); return; }
          var target = later.shift();
          if (!target) { resolve(true); return; }
          afterPaint(function () {
            if (mine !== generation) { resolve(false); return; }
            one(target).then(next, next);
          });
        })();
      });
    }).then(function (finished) {
      if (!finished) { return; }
      if (view.x) { keepInUrl(); }
      mark("chronicle:all-charts");
      document.dispatchEvent(new CustomEvent("chronicle:drawn"));
    });
  }

  function drawTracked() {
    drawing = draw();
    return drawing;
  }

  window.ChronicleCharts = {
    draw: drawTracked,
    whenDrawn: function () { return drawing; },
    applyX: applyX,
    setLog: function (on) { view.log = on; return restyleAll(); },
    setClip: function (on) { view.clip = on; return restyleAll(); },
    setSmoothing: function (alpha) { view.smooth = alpha; return restyleAll(); },
    view: view
  };
  document.addEventListener("chronicle:swapped", drawTracked);
  drawTracked();
})();
