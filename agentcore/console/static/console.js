// Live run pages: follow the run's server-sent events and re-render its body on each one.
(function () {
  "use strict";
  function follow(root) {
    var after = root.getAttribute("data-after");
    var source = new EventSource(root.getAttribute("data-stream") + "?after=" + after);
    var pending = false;
    function refresh() {
      if (pending) { return; }
      pending = true;
      fetch(root.getAttribute("data-body"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          pending = false;
          if (html === null) { return; }
          var focused = document.activeElement;
          if (focused && root.contains(focused) && focused.value) { return; } // someone is typing
          root.innerHTML = html;
          var live = document.getElementById("live");
          if (live) { live.hidden = false; }
        })
        .catch(function () { pending = false; });
    }
    source.addEventListener("transcript", function (e) { root.setAttribute("data-after", e.lastEventId); refresh(); });
    source.addEventListener("end", function () { source.close(); }); // the run is over
    source.addEventListener("open", function () { var live = document.getElementById("live"); if (live) { live.hidden = false; } });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var root = document.getElementById("run-body");
    if (root && window.EventSource) { follow(root); }
  });
})();
