// The only script of our own: keyboard sending and keeping the newest answer in view.
// No inline handlers anywhere, so a strict Content-Security-Policy can forbid them.
(function () {
  "use strict";

  // Enter sends, Shift+Enter adds a line (and an IME composition is never cut short).
  document.addEventListener("keydown", function (event) {
    var field = event.target;
    if (event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    if (!(field instanceof HTMLTextAreaElement) || !field.form || !field.form.classList.contains("composer")) return;
    event.preventDefault();
    if (field.value.trim() === "") return;
    // htmx wires content it swapped in only as it settles (20 ms later): a composer that has just
    // appeared (New chat) would otherwise be posted as a plain form, leaving the page. Wiring is
    // idempotent.
    if (window.htmx) window.htmx.process(field.form);
    field.form.requestSubmit();
  });

  // A notice (a new investigation) goes away when dismissed; the page keeps the five newest.
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest(".notice-dismiss") : null;
    if (button && button.parentElement) button.parentElement.remove();
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var notices = document.querySelectorAll("#notices > *");
    for (var i = 5; i < notices.length; i++) notices[i].remove();
  });

  // Follow the conversation as it streams, unless the operator scrolled up to read.
  var following = new WeakMap();
  function transcripts() {
    return document.querySelectorAll(".transcript");
  }
  // A thinking element or tool chip the operator opened stays open when its turn is redrawn
  // (a turn is drawn again whole when it finishes).
  var opened = [];
  document.addEventListener("htmx:wsBeforeMessage", function () {
    transcripts().forEach(function (box) {
      following.set(box, box.scrollHeight - box.scrollTop - box.clientHeight < 80);
    });
    opened = Array.prototype.map.call(document.querySelectorAll(".transcript details[open][id]"), function (el) {
      return el.id;
    });
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    opened.forEach(function (id) {
      var element = document.getElementById(id);
      if (element && element.tagName === "DETAILS") element.open = true;
    });
    transcripts().forEach(function (box) {
      if (following.get(box) !== false) box.scrollTop = box.scrollHeight;
    });
  });
})();
