// Live pages: poll the page's small "has it changed" endpoint (#live[data-live-url]); when the
// version moves, fetch the page again and swap the parts marked [data-live-swap], then tell
// the charts to redraw ("chronicle:swapped"). Only those parts: the filters a reader is
// typing into, the "updated" label and the handlers on the rest of the page stay as they are,
// and boxes ticked in a swapped part (the run list's Compare column) stay ticked. Polls slow
// down while the tab is hidden, as healthchecks' pages do, and "updated N s ago" says how
// fresh the page is.
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

  function ticked(part) {
    var keys = {};
    part.querySelectorAll("input[type=checkbox]:checked").forEach(function (box) {
      keys[box.name + "=" + box.value] = true;
    });
    return keys;
  }

  function swap(html) {
    var fresh = new DOMParser().parseFromString(html, "text/html");
    document.querySelectorAll("[data-live-swap]").forEach(function (part) {
      var other = fresh.getElementById(part.id);
      if (!other) { return; }
      var keep = ticked(part);
      var copy = document.importNode(other, true);
      copy.querySelectorAll("input[type=checkbox]").forEach(function (box) {
        if (keep[box.name + "=" + box.value]) { box.checked = true; }
      });
      part.replaceWith(copy);
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
