// hookline console: small enhancements over server-rendered pages. Every
// page works without this script; it only
//   - shows <time datetime> elements in the browser's time zone (the
//     server's UTC text moves to the title, shown on hover);
//   - refreshes elements marked data-refresh="N" every N seconds, by
//     fetching the page again and swapping in the element with the same id;
//   - adds keyboard shortcuts (listed in the page's footer);
//   - makes a data-select-all checkbox select every row of its table.
(function () {
  'use strict';

  function pad(n) { return (n < 10 ? '0' : '') + n; }

  function zoneName(d) {
    try {
      var parts = new Intl.DateTimeFormat(undefined, { timeZoneName: 'short' }).formatToParts(d);
      for (var i = 0; i < parts.length; i++) {
        if (parts[i].type === 'timeZoneName') { return parts[i].value; }
      }
    } catch (e) { /* no Intl: no zone name */ }
    return '';
  }

  function localize(root) {
    var els = root.querySelectorAll('time[datetime]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (el.hasAttribute('data-local')) { continue; }
      var d = new Date(el.getAttribute('datetime'));
      if (isNaN(d.getTime())) { continue; }
      el.title = el.textContent.trim();
      el.textContent = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
        pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + ' ' + zoneName(d);
      el.setAttribute('data-local', '');
    }
  }

  // Refresh: one timer per marked element; a failed fetch waits for the next
  // turn; a page that is no longer ours (the session ended) reloads.
  function schedule(el) {
    var secs = parseInt(el.getAttribute('data-refresh'), 10);
    if (!el.id || !(secs > 0)) { return; }
    window.setTimeout(function () { refresh(el.id); }, secs * 1000);
  }

  function refresh(id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    if (document.hidden || el.contains(document.activeElement) && document.activeElement !== el) {
      schedule(el); // never swap what the operator is using
      return;
    }
    fetch(window.location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (resp) {
        if (resp.redirected || resp.status === 401 || resp.status === 403) {
          window.location.reload();
          return null;
        }
        return resp.ok ? resp.text() : null;
      })
      .then(function (html) {
        var cur = document.getElementById(id);
        if (!cur) { return; }
        if (html === null) { schedule(cur); return; }
        var fresh = new DOMParser().parseFromString(html, 'text/html').getElementById(id);
        if (!fresh) { schedule(cur); return; }
        fresh = document.importNode(fresh, true);
        cur.replaceWith(fresh);
        localize(fresh);
        schedule(fresh);
      })
      .catch(function () {
        var cur = document.getElementById(id);
        if (cur) { schedule(cur); }
      });
  }

  function selectAll(root) {
    var boxes = root.querySelectorAll('input[data-select-all]');
    for (var i = 0; i < boxes.length; i++) {
      boxes[i].addEventListener('change', function (ev) {
        var table = ev.target.closest('table');
        var rows = table ? table.querySelectorAll('tbody input[type=checkbox]') : [];
        for (var j = 0; j < rows.length; j++) { rows[j].checked = ev.target.checked; }
      });
    }
  }

  // Keyboard: g then o/e/d/t navigates, / focuses the filters, j/k move
  // through the rows' links, n/p page, ? shows the list.
  var pending = '';
  var places = { o: '/admin/ui/', e: '/admin/ui/events', d: '/admin/ui/dead', t: '/admin/ui/destinations' };

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  function moveRow(step) {
    var links = Array.prototype.slice.call(document.querySelectorAll('[data-row-link]'));
    if (!links.length) { return; }
    var i = links.indexOf(document.activeElement);
    i = i < 0 ? (step > 0 ? 0 : links.length - 1) : Math.min(links.length - 1, Math.max(0, i + step));
    links[i].focus();
    var row = links[i].closest('tr');
    if (row) { row.scrollIntoView({ block: 'nearest' }); }
  }

  function follow(sel) {
    var a = document.querySelector(sel);
    if (a) { window.location.href = a.href; }
  }

  function onKey(ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) { return; }
    var k = ev.key;
    if (pending === 'g') {
      pending = '';
      if (places[k]) { ev.preventDefault(); window.location.href = places[k]; }
      return;
    }
    switch (k) {
      case 'g': pending = 'g'; window.setTimeout(function () { pending = ''; }, 1500); return;
      case '/': {
        var input = document.querySelector('[data-search] input, [data-search] select');
        if (input) { ev.preventDefault(); input.focus(); }
        return;
      }
      case 'j': ev.preventDefault(); moveRow(1); return;
      case 'k': ev.preventDefault(); moveRow(-1); return;
      case 'n': follow('a[data-page=next]'); return;
      case 'p': follow('a[data-page=first]'); return;
      case '?': {
        var keys = document.getElementById('keys');
        if (keys) { keys.open = !keys.open; }
        return;
      }
    }
  }

  function start() {
    localize(document);
    selectAll(document);
    var marked = document.querySelectorAll('[data-refresh]');
    for (var i = 0; i < marked.length; i++) { schedule(marked[i]); }
    document.addEventListener('keydown', onKey);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
