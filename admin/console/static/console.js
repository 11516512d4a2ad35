// hookline console: small enhancements over server-rendered pages. Every
// page works without this script; it only
//   - shows <time datetime> elements in the browser's time zone (the
//     server's UTC text moves to the title, shown on hover), and reads a
//     time typed into a filter (data-when) in that zone too;
//   - refreshes elements marked data-refresh="N" every N seconds, by
//     fetching the page again and swapping in the element with the same id
//     (see refresh), and says so when a refresh fails;
//   - reloads a page the browser restores from its back/forward cache;
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

  function clock(d) { return pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()); }

  function localize(root) {
    var els = root.querySelectorAll('time[datetime]');
    for (var i = 0; i < els.length; i++) {
      var el = els[i];
      if (el.hasAttribute('data-local')) { continue; }
      var d = new Date(el.getAttribute('datetime'));
      if (isNaN(d.getTime())) { continue; }
      el.title = el.textContent.trim();
      el.textContent = d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
        clock(d) + ' ' + zoneName(d);
      el.setAttribute('data-local', '');
    }
  }

  // Time filters: the server reads a date and time without a zone as UTC.
  // Typed here, such a time (also as the pages show one, "2026-01-02
  // 15:04:05 IST") means the browser's zone, so it is sent as RFC 3339 with
  // that zone's offset on that date. A time that ends in UTC, RFC 3339, a
  // duration (15m, 1h, 7d) or a mistake go as typed.
  var typedTime = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{1,2}):(\d{2})(?::(\d{2}))?)?(?:\s+(\S+))?$/;

  function offset(d) {
    var m = -d.getTimezoneOffset(), sign = m < 0 ? '-' : '+';
    m = Math.abs(m);
    return sign + pad(Math.floor(m / 60)) + ':' + pad(m % 60);
  }

  function instant(v) {
    var m = typedTime.exec(v.trim());
    if (!m || (m[7] && /^UTC$/i.test(m[7]))) { return v; }
    var h = +(m[4] || 0), min = +(m[5] || 0), sec = +(m[6] || 0);
    if (h > 23 || min > 59 || sec > 59) { return v; }
    var d = new Date(+m[1], +m[2] - 1, +m[3], h, min, sec);
    if (isNaN(d.getTime())) { return v; }
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + 'T' + clock(d) + offset(d);
  }

  function zoneLabel() {
    try {
      var z = Intl.DateTimeFormat().resolvedOptions().timeZone;
      if (z) { return z; }
    } catch (e) { /* no Intl */ }
    return zoneName(new Date()) || 'your time zone';
  }

  function timeFilters(root) {
    var inputs = root.querySelectorAll('input[data-when]');
    if (!inputs.length) { return; }
    var zone = zoneLabel();
    for (var i = 0; i < inputs.length; i++) {
      inputs[i].placeholder = inputs[i].placeholder.replace('(UTC)', '(' + zone + ')');
      inputs[i].title = 'A date and time here is in your browser\'s time zone (' + zone +
        '), unless it ends in UTC; or 15m, 1h, 7d ago; or RFC 3339.';
      var form = inputs[i].form;
      if (form && !form.hasAttribute('data-when-form')) {
        form.setAttribute('data-when-form', '');
        form.addEventListener('submit', function (ev) {
          var fields = ev.target.querySelectorAll('input[data-when]');
          for (var j = 0; j < fields.length; j++) { fields[j].value = instant(fields[j].value); }
        });
      }
    }
  }

  // Refresh: one timer per marked element. Each turn fetches the page again,
  // saying which element it wants (X-Console-Refresh: a page may then leave
  // out what the refresh does not show, such as an event's payload), and
  // swaps in the element with the same id:
  //   - when it is unchanged, nothing is swapped, and the next turn waits
  //     twice as long, up to data-refresh-max seconds (default: no longer
  //     than data-refresh); a change starts again at data-refresh;
  //   - while the operator uses the element (focus inside it) or has text
  //     selected in it, it is not swapped;
  //   - a refresh that fails (an error status, no answer) shows a notice in
  //     #refresh-status (role=alert) and dims the element until one succeeds;
  //   - a page that is no longer ours (the session ended) reloads.
  var live = {}; // element id -> {base, max, wait, last (its HTML as last fetched), shown (when it was current)}

  function track(el, html) {
    var base = parseInt(el.getAttribute('data-refresh'), 10);
    if (!el.id || !(base > 0)) { delete live[el.id]; return; }
    var max = parseInt(el.getAttribute('data-refresh-max'), 10);
    var t = live[el.id] || { shown: new Date() };
    t.base = base;
    t.max = max > base ? max : base;
    t.wait = base;
    t.last = html || el.outerHTML;
    live[el.id] = t;
    later(el.id);
  }

  function later(id) {
    var t = live[id];
    if (t) { window.setTimeout(function () { refresh(id); }, t.wait * 1000); }
  }

  // busy: the operator is using el (focus inside it, or a text selection in it).
  function busy(el) {
    if (el.contains(document.activeElement) && document.activeElement !== el) { return true; }
    var sel = window.getSelection ? window.getSelection() : null;
    if (sel && !sel.isCollapsed) {
      for (var i = 0; i < sel.rangeCount; i++) {
        if (sel.getRangeAt(i).intersectsNode(el)) { return true; }
      }
    }
    return false;
  }

  function failed(id, what) {
    var t = live[id], el = document.getElementById(id), box = document.getElementById('refresh-status');
    if (el) { el.classList.add('stale'); }
    if (box) {
      var msg = 'Not refreshed: ' + what + ' What you see is from ' + clock(t.shown) +
        '; trying again every ' + t.base + ' s.';
      var p = box.querySelector('p');
      if (!p) {
        p = document.createElement('p');
        p.className = 'error';
        box.appendChild(p);
      }
      if (p.textContent !== msg) { p.textContent = msg; } // said once, not at every try
    }
    t.wait = t.base;
    later(id);
  }

  function recovered(id) {
    var el = document.getElementById(id), box = document.getElementById('refresh-status');
    if (el) { el.classList.remove('stale'); }
    if (box && box.firstChild) { box.textContent = ''; }
    live[id].shown = new Date();
  }

  // reason is what an error page says (its alert), else the status.
  function reason(resp, doc) {
    var p = doc.querySelector('main p.error[role=alert]');
    var said = p ? p.textContent.trim() : '';
    return 'the server answered ' + resp.status + (said ? ': ' + said : '.');
  }

  function refresh(id) {
    var el = document.getElementById(id), t = live[id];
    if (!el || !t) { return; }
    if (document.hidden || busy(el)) { later(id); return; } // never swap what the operator is using
    fetch(window.location.href, { credentials: 'same-origin', headers: { 'Accept': 'text/html', 'X-Console-Refresh': id } })
      .then(function (resp) {
        if (resp.redirected || resp.status === 401 || resp.status === 403) {
          window.location.reload();
          return null;
        }
        return resp.text().then(function (html) { return { resp: resp, html: html }; });
      })
      .then(function (r) {
        if (!r) { return; }
        var doc = new DOMParser().parseFromString(r.html, 'text/html');
        if (!r.resp.ok) { failed(id, reason(r.resp, doc)); return; }
        recovered(id);
        var cur = document.getElementById(id), fresh = doc.getElementById(id);
        if (!cur) { return; }
        if (!fresh || fresh.outerHTML === t.last) {
          t.wait = Math.min(t.wait * 2, t.max);
          later(id);
          return;
        }
        if (busy(cur)) { later(id); return; } // a selection made meanwhile: the next turn swaps
        var html = fresh.outerHTML;
        fresh = document.importNode(fresh, true);
        cur.replaceWith(fresh);
        track(fresh, html); // stops when the fresh element is no longer marked (an event that ended)
        localize(fresh);
      })
      .catch(function () { failed(id, 'the server did not answer.'); });
  }

  // A page the browser restores from its back/forward cache shows what it
  // showed when the operator left it: a dead event's Retry button after the
  // retry, say. Cache-Control: no-store no longer keeps every browser from
  // restoring it, so it is loaded afresh.
  window.addEventListener('pageshow', function (ev) {
    if (ev.persisted) { window.location.reload(); }
  });

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
    var marked = document.querySelectorAll('[data-refresh]');
    for (var i = 0; i < marked.length; i++) { track(marked[i]); } // before localize: as the server sent it
    localize(document);
    timeFilters(document);
    selectAll(document);
    document.addEventListener('keydown', onKey);
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
