// bide console: live refresh of the region marked data-refresh, and nothing else. The pages work
// without this file; it only saves the operator a reload.
"use strict";
(function () {
  var PERIOD_MS = 3000;
  function live() {
    var box = document.getElementById("live");
    return !box || box.checked;
  }
  function busy() {
    var active = document.activeElement;
    return active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName) && active.id !== "live";
  }
  function refresh() {
    var region = document.getElementById("live-region");
    if (!region || !live() || busy() || document.hidden) return;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (text) {
        if (text === null) return;
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("live-region");
        if (fresh) {
          region.replaceWith(document.adoptNode(fresh));
          document.body.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () {});
  }
  window.setInterval(refresh, PERIOD_MS);
})();
