// The only script of our own: keyboard sending, keeping the newest answer in view, landing on a
// search hit.
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

  // A form the socket swapped in a moment ago may not be wired by htmx yet (it wires what it swaps
  // as it settles): submitted now, it would be posted as a plain form, leaving the page. Wiring it
  // as the submit starts lets htmx's own handler, added to the form, take this very submit.
  document.addEventListener(
    "submit",
    function (event) {
      var form = event.target;
      if (window.htmx && form instanceof HTMLFormElement && form.hasAttribute("hx-post")) window.htmx.process(form);
    },
    true
  );

  // An Undo button sits in a card where htmx is disabled and submits the page's #undo-form
  // (base.html): the form carries the button's execution id (htmx leaves out a submitter outside it).
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest("button.change-undo") : null;
    var field = document.querySelector("#undo-form input[name=execution_id]");
    if (button && field) field.value = button.value;
  });

  // A note proposal's Save/Dismiss sits in a card where htmx may be disabled and submits the page's
  // #note-proposal-form (base.html): the form carries the button's decision ("save:<id>").
  document.addEventListener("click", function (event) {
    var button = event.target instanceof Element ? event.target.closest("button.note-proposal-decide") : null;
    var field = document.querySelector("#note-proposal-form input[name=decision]");
    if (button && field) field.value = button.value;
  });

  // Hermes's record of an execution, redrawn (controlroom/fragments.py `change_record`): it takes
  // the place of each drawing of it in the page, of which there may be none yet.
  function changeUpdatesApply() {
    var updates = document.querySelectorAll("#change-updates > template[data-replaces]");
    Array.prototype.forEach.call(updates, function (update) {
      document.querySelectorAll(update.getAttribute("data-replaces")).forEach(function (drawing) {
        var fresh = update.content.firstElementChild;
        if (!fresh) return;
        var copy = fresh.cloneNode(true);
        drawing.replaceWith(copy);
        if (window.htmx) window.htmx.process(copy);
      });
      update.remove();
    });
  }
  document.addEventListener("htmx:wsAfterMessage", changeUpdatesApply);
  document.addEventListener("htmx:afterSettle", changeUpdatesApply);

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
    if (landing) {
      land();
      return;
    }
    transcripts().forEach(function (box) {
      if (following.get(box) !== false) box.scrollTop = box.scrollHeight;
    });
  });

  // A search hit's link (controlroom/views/search.py) lands on a turn or a tool chip (`#…`) with
  // the words it matched (`hl`): the chip is opened, the words marked, and the place kept in view
  // while the page's socket draws the transcript again, until the operator scrolls, clicks or types.
  var landing = false;
  function landed() {
    if (!location.hash) return null;
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    return target && target.closest(".transcript") ? target : null;
  }
  function land() {
    var target = landed();
    if (!target) return;
    if (target.tagName === "DETAILS") target.open = true;
    target.classList.add("search-landed");
    var words = new URLSearchParams(location.search).getAll("hl").filter(function (word) {
      return word.trim() !== "";
    });
    if (words.length && !target.querySelector("mark.search-mark")) wordsMark(target, words);
    var first = target.querySelector("mark.search-mark");
    (first || target).scrollIntoView({ block: "center" });
  }
  function wordsMark(root, words) {
    // Text nodes only, each split around its matches: nothing is ever parsed as HTML.
    var pattern = new RegExp(
      words
        .map(function (word) {
          return word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
        })
        .join("|"),
      "gi"
    );
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    nodes.forEach(function (node) {
      var text = node.nodeValue;
      var fragment = document.createDocumentFragment();
      var last = 0;
      var match;
      pattern.lastIndex = 0;
      while ((match = pattern.exec(text)) !== null) {
        fragment.appendChild(document.createTextNode(text.slice(last, match.index)));
        var mark = document.createElement("mark");
        mark.className = "search-mark";
        mark.textContent = match[0];
        fragment.appendChild(mark);
        last = match.index + match[0].length;
      }
      if (last === 0) return;
      fragment.appendChild(document.createTextNode(text.slice(last)));
      node.parentNode.replaceChild(fragment, node);
    });
  }
  function landingEnd() {
    landing = false;
  }
  ["wheel", "touchstart", "keydown", "mousedown"].forEach(function (kind) {
    document.addEventListener(kind, landingEnd, { passive: true });
  });
  function landingStart() {
    if (!landed()) return;
    landing = true;
    land();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", landingStart);
  else landingStart();
  window.addEventListener("hashchange", landingStart);
})();
