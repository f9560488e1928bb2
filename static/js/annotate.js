// The run page's annotation form: posts JSON to /api/v1/annotations (session auth, CSRF
// token from the cookie), deletes with the list's buttons, then reloads so the charts show
// the change. Errors are shown as text, never as HTML.
(function () {
  "use strict";
  var form = document.getElementById("annotate-form");
  var errorBox = document.getElementById("annotate-error");

  function csrfToken() {
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) { return decodeURIComponent(match[1]); }
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }

  function showError(text) {
    if (errorBox) { errorBox.textContent = text; }
  }

  // The form's own words for the API's field names ("To step", not "stepEnd").
  var LABELS = { text: "Text", tags: "Tags", step: "Step", stepEnd: "To step", time: "Time",
    timeEnd: "To (time)", run: "Run", non_field_errors: "", detail: "" };

  function describe(body) {
    // DRF answers {"field": ["message", ...]} or {"detail": "..."}.
    if (!body || typeof body !== "object") { return "The annotation was not saved."; }
    return Object.keys(body).map(function (key) {
      var value = body[key];
      var label = Object.prototype.hasOwnProperty.call(LABELS, key) ? LABELS[key] : key;
      return (label ? label + ": " : "") + (Array.isArray(value) ? value.join(" ") : String(value));
    }).join("; ");
  }

  function send(method, url, payload) {
    return fetch(url, {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: payload === undefined ? undefined : JSON.stringify(payload)
    }).then(function (response) {
      if (response.ok) { window.location.reload(); return; }
      return response.json().catch(function () { return null; }).then(function (body) {
        showError(describe(body) || ("HTTP " + response.status));
      });
    }).catch(function () { showError("Chronicle could not be reached; nothing was saved."); });
  }

  function wholeNumber(input) {
    var raw = input.value.trim();
    return raw === "" ? null : Number(raw);
  }

  function epochMs(input) {
    // datetime-local is in the display zone the label names: UTC, or the browser's own
    // (which Date assumes for a string without an offset).
    if (!input.value) { return null; }
    var moment = new Date(input.value + (form.dataset.utc ? "Z" : ""));
    return isNaN(moment.getTime()) ? NaN : moment.getTime();
  }

  if (form) {
    var mode = document.getElementById("annotate-mode");
    var toggle = function () {
      var byTime = mode.value === "time";
      // style.display as well as hidden: the form's CSS gives labels display:flex.
      var show = function (node, visible) {
        node.hidden = !visible;
        node.style.display = visible ? "" : "none";
      };
      form.querySelectorAll(".annotate-step").forEach(function (n) { show(n, !byTime); });
      form.querySelectorAll(".annotate-time").forEach(function (n) { show(n, byTime); });
    };
    mode.addEventListener("change", toggle);
    toggle();

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      showError("");
      var payload = {
        run: Number(form.dataset.run),
        text: document.getElementById("annotate-text").value,
        tags: document.getElementById("annotate-tags").value.split(",")
          .map(function (tag) { return tag.trim(); })
          .filter(function (tag) { return tag !== ""; })
      };
      if (mode.value === "time") {
        var start = epochMs(document.getElementById("annotate-time"));
        var end = epochMs(document.getElementById("annotate-time-end"));
        if (start === null || isNaN(start)) { showError("Give the time to mark."); return; }
        payload.time = start;
        if (end !== null) { payload.timeEnd = end; }
      } else {
        var step = wholeNumber(document.getElementById("annotate-step"));
        var stepEnd = wholeNumber(document.getElementById("annotate-step-end"));
        if (step === null) { showError("Give the step to mark."); return; }
        payload.step = step;
        if (stepEnd !== null) { payload.stepEnd = stepEnd; }
      }
      send("POST", form.dataset.api, payload);
    });
  }

  document.querySelectorAll(".annotate-delete").forEach(function (button) {
    button.addEventListener("click", function () {
      if (window.confirm("Delete this annotation?")) { send("DELETE", button.dataset.url); }
    });
  });
})();
