// bide console: live updates of the regions marked data-refresh, and nothing else. The pages work
// without this file; it only saves the operator a reload. A run's page follows the run's event
// stream (server-sent events, resumed by the browser after its last event id) and refreshes when
// an event arrives; other pages, or a browser without EventSource, look again every 3 s.
"use strict";
(function () {
  var PERIOD_MS = 3000;
  var SETTLE_MS = 150;
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
  function follow(href) {
    var source = new EventSource(href);
    var pending = null;
    source.onmessage = function (message) {
      var event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.cursor) document.body.setAttribute("data-last-event", event.cursor);
      if (event.type === "text_delta" || event.type === "turn_started") return;
      if (pending === null) {
        pending = window.setTimeout(function () { pending = null; refresh(); }, SETTLE_MS);
      }
      if (event.type === "end") source.close();
    };
    document.body.setAttribute("data-following", href);
  }
  var region = document.getElementById("live-region");
  var href = region && region.getAttribute("data-events");
  if (href && window.EventSource) {
    follow(href);
  } else {
    window.setInterval(refresh, PERIOD_MS);
  }
})();
