// Live pages: follow server-sent events and re-render the page's body on each one. A run's
// page follows its transcript and marks the events that arrive (the first one scrolled
// into view); the runs list follows the listing.
(function () {
  "use strict";
  function showLive() {
    var live = document.getElementById("live");
    if (live) { live.hidden = false; }
  }
  function lastSeq(root) {
    var seqs = Array.prototype.map.call(root.querySelectorAll(".entry[data-seq]"), function (e) {
      return Number(e.getAttribute("data-seq"));
    });
    return seqs.length ? Math.max.apply(null, seqs) : -1;
  }
  function markNew(root, shown) {
    var fresh = Array.prototype.filter.call(root.querySelectorAll(".entry[data-seq]"), function (e) {
      return Number(e.getAttribute("data-seq")) > shown;
    });
    fresh.forEach(function (e) { e.classList.add("new"); });
    if (fresh.length) { fresh[0].scrollIntoView({ block: "nearest" }); }
  }
  function follow(root, url, kind, timeline) {
    var source = new EventSource(url);
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
          var shown = timeline ? lastSeq(root) : -1;
          var marked = Array.prototype.map.call(root.querySelectorAll(".entry.new"), function (e) {
            return e.getAttribute("data-seq");
          });
          root.innerHTML = html;
          if (timeline) {
            marked.forEach(function (seq) {
              var e = root.querySelector('.entry[data-seq="' + seq + '"]');
              if (e) { e.classList.add("new"); }
            });
            markNew(root, shown);
          }
          showLive();
        })
        .catch(function () { pending = false; });
    }
    source.addEventListener(kind, refresh);
    source.addEventListener("end", function () { source.close(); }); // the run is over
    source.addEventListener("open", showLive);
  }
  document.addEventListener("DOMContentLoaded", function () {
    if (!window.EventSource) { return; }
    var run = document.getElementById("run-body");
    if (run) {
      var at = /^#seq-(\d+)$/.exec(window.location.hash); // back from a decision: mark what it recorded
      if (at) { markNew(run, Number(at[1]) - 1); }
      follow(run, run.getAttribute("data-stream") + "?after=" + run.getAttribute("data-after"), "transcript", true);
    }
    var runs = document.getElementById("runs-body");
    if (runs) { follow(runs, runs.getAttribute("data-stream"), "runs", false); }
  });
})();
