// Live pages: poll the page's small "has it changed" endpoint (#live[data-live-url]); when the
// version moves, fetch the page again and swap the parts marked [data-live-swap] (the whole
// <main> when none is marked), then tell the charts to redraw ("chronicle:swapped"). Polls
// slow down while the tab is hidden, as healthchecks' pages do, and "updated N s ago" says
// how fresh the page is.
(function () {
  "use strict";
  var node = document.getElementById("live");
  if (!node) { return; }
  var url = node.dataset.liveUrl;
  var version = node.dataset.liveVersion || null;
  var VISIBLE_MS = Number(node.dataset.liveInterval || 5000);
  var HIDDEN_MS = 60000;
  var checkedAt = Date.now();
  var timer = null;
  var label = document.getElementById("live-updated");

  function ago() {
    var s = Math.round((Date.now() - checkedAt) / 1000);
    label.textContent = s < 2 ? "updated just now" : "updated " + s + " s ago";
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    var parts = document.querySelectorAll("[data-live-swap]");
    if (parts.length === 0) {
      document.querySelector("main").innerHTML = fresh.querySelector("main").innerHTML;
    }
    parts.forEach(function (part) {
      var other = fresh.getElementById(part.id);
      if (other) { part.replaceWith(document.importNode(other, true)); }
    });
    document.dispatchEvent(new CustomEvent("chronicle:swapped"));
  }

  function refresh() {
    return fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(swap);
  }
  window.ChronicleLive = { refresh: refresh };

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(poll, document.hidden ? HIDDEN_MS : VISIBLE_MS);
  }

  // Resolves when the page's charts (if any) are drawn: a poll, and the swap it may bring,
  // waits for the drawing under way to finish (charts.js).
  function drawn() {
    return window.ChronicleCharts ? window.ChronicleCharts.whenDrawn() : Promise.resolve();
  }

  function poll() {
    drawn()
      .then(function () {
        return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(r.status); })
      .then(function (body) {
        var changed = version !== null && body.version !== version;
        version = body.version;
        return changed ? refresh().then(drawn) : null;
      })
      .then(function () { checkedAt = Date.now(); node.classList.remove("live-failed"); ago(); })
      .catch(function () { node.classList.add("live-failed"); })
      .then(schedule);
  }

  document.addEventListener("visibilitychange", function () {
    if (!document.hidden) { poll(); }
  });
  setInterval(ago, 1000);
  if (version === null) { poll(); } else { schedule(); }
})();
