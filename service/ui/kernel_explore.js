// Owns the Kernel page's side-by-side view of two records (picked in the configs table): each
// knob of either config and where they differ, their times, trust and provenance; and the table's
// export as CSV (the rows the table shows, every column). Record fields come from clients: they
// are set as text, and a CSV cell that would run as a formula is quoted (chart_tools.js).
'use strict';

(function () {
  const T = window.Tessera;
  const E = {picked: []};  // at most two records, the older pick first
  T.kernelExplore = E;

  const val = (v) => (v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

  // A click on a row's box picks it; a third pick lets the older of the two go.
  E.toggle = function (r) {
    const i = E.picked.findIndex((p) => p.id === r.id);
    if (i >= 0) E.picked.splice(i, 1);
    else {
      E.picked.push(r);
      if (E.picked.length > 2) E.picked.shift();
    }
    E.render();
  };
  E.isPicked = (r) => E.picked.some((p) => p.id === r.id);

  E.render = function () {
    const box = T.$('rec-compare');
    const body = T.clear(document.querySelector('#rec-compare-table tbody'));
    const head = T.clear(document.querySelector('#rec-compare-table thead'));
    for (const cb of document.querySelectorAll('#configs input.pick')) cb.checked = E.picked.some((p) => String(p.id) === cb.dataset.id);
    T.text(T.$('rec-compare-hint'), E.picked.length < 2 ? 'pick ' + (2 - E.picked.length) + ' more record' +
      (E.picked.length ? '' : 's') + ' in the table below (the box in each row)' : '');
    box.dataset.picked = String(E.picked.length);
    if (E.picked.length < 2) return;
    const [a, b] = E.picked;
    head.appendChild(T.el('tr', {}, T.el('th', {}, ''), T.el('th', {dataset: {id: a.id}}, 'record ' + a.id),
      T.el('th', {dataset: {id: b.id}}, 'record ' + b.id)));
    const timed = (r) => (r.status === 'ok' || r.status === 'estimated' ? T.fmtTime(r.result.median_us) + (r.status === 'estimated' ? ' (predicted)' : '') : r.status);
    const rows = [['time', timed(a), timed(b), false], ['trust', (T.trustOf(a) || {}).word, (T.trustOf(b) || {}).word, false]];
    const knobs = [...new Set(Object.keys(a.config || {}).concat(Object.keys(b.config || {})))].sort();
    for (const k of knobs) rows.push([k, val((a.config || {})[k]), val((b.config || {})[k]), true]);
    const pa = a.provenance || {}, pb = b.provenance || {};
    rows.push(['writer', a.writer || '(local)', b.writer || '(local)', false], ['host', pa.host, pb.host, false],
      ['cpu', pa.cpu_model, pb.cpu_model, false], ['measured', pa.created_at, pb.created_at, false],
      ['received', a.received_at || '', b.received_at || '', false], ['tessera', pa.tessera_version, pb.tessera_version, false]);
    for (const [name, x, y, knob] of rows) {
      const differs = String(x || '') !== String(y || '');
      body.appendChild(T.el('tr', {class: differs ? 'differs' : null, dataset: {row: name, knob: knob ? '1' : '0', differs: differs ? '1' : '0'}},
        T.el('th', {}, name), T.el('td', {}, x || '-'), T.el('td', {}, y || '-')));
    }
  };

  // The table as shown: its header and rows (cells' text; a record's config in full).
  E.tableCsv = function () {
    const heads = [...document.querySelectorAll('#configs thead th')].map((th) => th.dataset.sort || th.textContent);
    const rows = [...document.querySelectorAll('#configs tbody tr')].map((tr) => [...tr.children].map((td) => {
      const cb = td.querySelector('input.pick');
      return cb ? (cb.checked ? 'picked' : '') : td.textContent;
    }));
    return T.csv(heads, rows);
  };

  E.wire = function () {
    T.$('cfg-csv').addEventListener('click', () => T.download((document.title.split(' - ')[0] + ' configs').replace(/[^A-Za-z0-9_.-]+/g, '_') + '.csv',
      new Blob([E.tableCsv()], {type: 'text/csv'})));
    T.$('rec-compare-clear').addEventListener('click', () => {
      E.picked = [];
      E.render();
    });
    E.render();
  };
})();
