// Owns the Kernel page: one key's winner (with whose word it stands on), its charts and its
// configs. One request draws the page: GET /v1/kernels/{key_id}?digest=1 answers the summary and
// the service's digest of every record (dashboard_digest.h); the full record table is paged from
// GET /v1/records only when asked for. While the page is open it waits for new records (the same
// route with after= and wait=, a long poll the service bounds per token) and redraws. In a report
// written by `tessera report` the same documents come from the page itself.
'use strict';

(function () {
  const T = window.Tessera;
  const C = T.kernelCharts;
  const ROWS = 100;
  const LIVE_WAIT_S = 20;
  const table = {mode: 'fast', records: [], knobs: [], sort: 'time', dir: 1, offset: 0, afters: [0], page: 0, next: 0};
  let current = null;  // {summary (with .digest), records (a report's own, else null)}

  function card(title, value, sub, attrs) {
    return T.el('div', Object.assign({class: 'card'}, attrs || {}), T.el('div', {class: 'card-title'}, title),
      T.el('div', {class: 'card-value'}, value), sub ? T.el('div', {class: 'card-sub'}, sub) : null);
  }

  // An unconfirmed winner never looks like a measured one: the card says whose word it is.
  function winnerTitle(r, trust) {
    if (trust.tier === 'estimate') return 'fastest estimate (predicted: nothing ran)';
    if (trust.tier === 'reproduced') return 'winner (measured, reproduced)';
    if (trust.tier === 'claim') return 'claimed winner: ' + (r.writer || '(local)') + '\'s measurement, not reproduced';
    if (trust.tier === 'disputed') return 'disputed winner: another measurement contradicts it';
    return 'unconfirmed winner';
  }

  function header(s) {
    const k = s.key;
    T.text(T.$('title'), T.kernelName(k) + ' on ' + k.target);
    document.title = T.kernelName(k) + ' on ' + k.target + ' - Tessera';
    T.text(T.$('subtitle'), T.fmtShapeNamed(k) + '; layout ' + k.layout + ', arch ' + k.arch + ', ' + k.units + ' units, workload ' + k.workload +
      ', key ' + s.key_id + ', ' + s.records + ' records');
    const w = T.clear(T.$('winner'));
    const r = s.shown;
    // The kernel itself, as the IR text the store keeps (what a bundle compiles again), or why not.
    const src = T.$('kernel-source');
    if (src) {
      T.text(T.$('kernel-rebuild'), s.rebuildable ? 'rebuildable: the store keeps this kernel\'s IR text (workload ' + k.workload + ')'
        : 'not rebuildable from this store: it has no text of this kernel (its records came without one; a tune of it ' +
          'that pushes here files it; until then bundle or compare it by its flags or IR file)');
      src.hidden = !s.kernel_text;
      T.text(src, s.kernel_text || '');
    }
    if (!r) {
      w.appendChild(card('winner', 'none', 'no ok measurement or estimate of this kernel'));
      return;
    }
    const tp = s.throughput;
    const trust = T.trustOf(r);
    const estimate = r.status === 'estimated';
    const tags = T.el('span', {}, T.tag(s.label), T.trustTag(r));
    if (r.result.remeasured) tags.appendChild(T.tag('remeasured'));
    if (s.stale) tags.appendChild(T.tag('stale'));
    w.appendChild(card(winnerTitle(r, trust), T.fmtTime(r.result.median_us),
      estimate ? 'predicted by ' + (r.estimate ? r.estimate.model + ', ' + r.estimate.bound + '-bound' : 'the analytic model')
        : 'p20 ' + T.fmtTime(r.result.p20_us) + ', p80 ' + T.fmtTime(r.result.p80_us) + ', n=' + r.result.n,
      {class: 'card card-winner trust-' + trust.tier, id: 'winner-card', dataset: {trust: trust.tier}}));
    const pf = r.result.peak_fraction;
    w.appendChild(card('throughput' + (estimate ? ' (predicted)' : ''), T.fmtThroughput(tp.value, tp.unit), T.fmtPct(pf) + ' of peak' +
      (pf > 1 ? ': above the peak the tuner measured against (its probe reads the peak low on a loaded machine)' : '')));
    w.appendChild(card('labels', tags, trust.title));
    w.appendChild(card('config', T.fmtConfig(r.config), 'record ' + r.id, {class: 'card card-config'}));
    w.appendChild(card('stored', r.received_at || r.provenance.created_at, 'by ' + (r.writer || '(local store)')));
    const p = r.provenance;
    w.appendChild(card(estimate ? 'predicted for' : 'measured on', estimate ? k.target + ' (' + (p.cpu_model || k.arch) + ')' : p.cpu_model || '-',
      [p.host, p.user].filter(Boolean).join(', ') + ' / tessera ' + p.tessera_version + ', LLVM ' + p.llvm_version +
      (p.cuda_version ? ', toolkit ' + p.cuda_version : '')));
  }

  const timedStatus = (r) => r.status === 'ok' || r.status === 'estimated';
  const X = T.kernelExplore;
  const columns = [
    {id: 'pick', title: 'pick', get: (r) => (X.isPicked(r) ? 0 : 1),
      show: (r) => T.el('input', {type: 'checkbox', class: 'pick', 'aria-label': 'pick record ' + r.id, dataset: {id: r.id},
        checked: X.isPicked(r), on: {change: () => X.toggle(r)}})},
    {id: 'id', title: 'id', num: true, get: (r) => r.id},
    {id: 'status', title: 'status', get: (r) => r.status},
    {id: 'trust', title: 'trust', get: (r) => (T.trustOf(r) || {}).word || '', show: (r) => T.trustTag(r)},
    {id: 'time', title: 'time', num: true, get: (r) => (timedStatus(r) ? r.result.median_us : Infinity),
      show: (r) => (timedStatus(r) ? T.fmtTime(r.result.median_us) : '-')},
    {id: 'spread', title: 'p20-p80', num: true, get: (r) => r.result.p80_us - r.result.p20_us,
      show: (r) => (r.status === 'ok' ? T.fmtTime(r.result.p20_us) + ' - ' + T.fmtTime(r.result.p80_us) : '')},
    {id: 'throughput', title: 'GFLOP/s', num: true, get: (r) => r.result.gflops, show: (r) => (r.result.gflops ? r.result.gflops.toFixed(1) : '')},
    {id: 'gbps', title: 'GB/s', num: true, get: (r) => r.result.gbps, show: (r) => (r.result.gbps ? r.result.gbps.toFixed(1) : '')},
    {id: 'peak', title: 'of peak', num: true, get: (r) => r.result.peak_fraction, show: (r) => T.fmtPct(r.result.peak_fraction)},
    {id: 'trial', title: 'trial', num: true, get: (r) => r.result.trials},
    {id: 'received', title: 'received', get: (r) => r.received_at || ''},
    {id: 'writer', title: 'writer', get: (r) => r.writer || ''},
  ];

  function knobValue(r, knob) {
    const v = r.config ? r.config[knob] : undefined;
    return v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : v;
  }

  function renderTable() {
    const knobCols = table.knobs.map((k) => ({id: 'knob:' + k, title: k, knob: k, get: (r) => knobValue(r, k)}));
    const cols = columns.concat(knobCols);
    const head = T.clear(document.querySelector('#configs thead'));
    head.appendChild(T.el('tr', {}, cols.map((c) => T.el('th', {class: (c.num ? 'num ' : '') + 'sortable' + (table.sort === c.id ? ' sorted' : ''),
      dataset: {sort: c.id}, on: {click: () => sortBy(c.id)}}, c.title + (table.sort === c.id ? (table.dir > 0 ? ' \u25b2' : ' \u25bc') : '')))));
    const col = cols.find((c) => c.id === table.sort) || cols[4];
    const rows = table.records.slice().sort((a, b) => {
      const x = col.get(a), y = col.get(b);
      return (x < y ? -1 : x > y ? 1 : a.id - b.id) * table.dir;
    });
    const local = table.mode === 'fast' || current.records;
    const shown = local ? rows.slice(table.offset, table.offset + ROWS) : rows;
    const body = T.clear(document.querySelector('#configs tbody'));
    for (const r of shown) {
      body.appendChild(T.el('tr', {dataset: {id: r.id, status: r.status}},
        cols.map((c) => T.el('td', {class: c.num ? 'num' : null, dataset: {col: c.id}}, c.show ? c.show(r) : String(c.get(r))))));
    }
    const total = local ? rows.length : current.summary.digest.records;
    const first = local ? table.offset : table.page * ROWS;
    T.text(T.$('cfg-page'), (shown.length ? first + 1 : 0) + '-' + (first + shown.length) + ' of ' + total);
    T.$('cfg-prev').disabled = local ? table.offset === 0 : table.page === 0;
    T.$('cfg-next').disabled = local ? table.offset + ROWS >= rows.length : !table.next;
    const d = current.summary.digest;
    T.text(T.$('cfg-source'), table.mode === 'fast'
      ? (d.records > table.records.length ? 'the fastest ' + table.records.length + ' of ' + d.records + ' records (then refusals), ' : 'every record, ') +
        'from the summary; click a column to sort'
      : 'every record in id order' + (local ? '' : ', 100 a page from the records API') + '; click a column to sort the page');
    T.$('cfg-all').hidden = table.mode === 'all';
    T.$('cfg-fast').hidden = table.mode === 'fast';
  }

  function sortBy(id) {
    table.dir = table.sort === id ? -table.dir : 1;
    table.sort = id;
    if (table.mode === 'fast' || current.records) table.offset = 0;
    renderTable();
  }

  function setRecords(records) {
    const knobs = new Set();
    for (const r of records) for (const k of Object.keys(r.config || {})) knobs.add(k);
    table.records = records;
    table.knobs = [...knobs].sort();
  }

  // The whole table on demand: a report has every record; the service pages them (GET /v1/records).
  async function loadAll(page) {
    table.mode = 'all';
    if (current.records) {
      setRecords(current.records);
      table.sort = 'id';
      table.dir = 1;
      renderTable();
      return;
    }
    const key = current.summary.key_id;
    T.loading('cfg-loading', 'loading records ...');
    try {
      const after = table.afters[page];
      const data = await T.api('v1/records?key_id=' + key + '&limit=' + ROWS + (after ? '&after=' + after : ''));
      table.page = page;
      table.afters = table.afters.slice(0, page + 1);
      table.next = data.next_after || 0;
      if (table.next) table.afters.push(table.next);
      setRecords(data.records);
      table.sort = 'id';
      table.dir = 1;
      renderTable();
    } catch (err) {
      if (!(err instanceof T.ApiError && err.status === 401)) T.showError(err);
    } finally {
      T.loading('cfg-loading', '');
    }
  }

  function showFastest() {
    table.mode = 'fast';
    setRecords(current.summary.digest.sample);
    table.sort = 'time';
    table.dir = 1;
    table.offset = 0;
    renderTable();
  }

  function knobTable(measured, predicted) {
    const body = T.clear(document.querySelector('#knob-table tbody'));
    const row = (e, kind) => T.el('tr', kind === 'measured' ? {dataset: {knob: e.knob}} : {dataset: {predictedKnob: e.knob}},
      T.el('td', {}, e.knob), T.el('td', {}, kind), T.el('td', {}, String(e.values.length)),
      T.el('td', {dataset: {col: 'best'}}, e.best.value), T.el('td', {class: 'num', dataset: {col: 'best-median', value: e.best.median}}, T.fmtTime(e.best.median)),
      T.el('td', {dataset: {col: 'worst'}}, e.worst.value), T.el('td', {class: 'num', dataset: {col: 'worst-median', value: e.worst.median}}, T.fmtTime(e.worst.median)),
      T.el('td', {class: 'num', dataset: {col: 'spread', value: e.spread}}, e.spread.toFixed(2) + 'x'),
      T.el('td', {class: 'num', dataset: {col: 'importance', value: e.importance}}, (100 * e.importance).toFixed(0) + '%'));
    for (const e of measured) body.appendChild(row(e, 'measured'));
    for (const e of predicted) body.appendChild(row(e, 'predicted'));
    if (!measured.length && !predicted.length) {
      body.appendChild(T.el('tr', {}, T.el('td', {colspan: 9}, 'no knob took two values in the measured or predicted times')));
    }
  }

  function axis() {
    return T.$('time-axis').value;
  }

  function scatter() {
    const d = current.summary.digest;
    const sel = T.$('scatter-knob');
    const color = T.$('scatter-color');
    const want = sel.value;
    const wantColor = color.value;
    const knobs = [...new Set(d.knobs.measured.concat(d.knobs.predicted).map((e) => e.knob))];
    T.clear(sel);
    T.clear(color).appendChild(T.el('option', {value: ''}, '(nothing)'));
    for (const k of knobs) {
      sel.appendChild(T.el('option', {value: k}, k));
      color.appendChild(T.el('option', {value: k}, k));
    }
    sel.parentNode.parentNode.hidden = !knobs.length;
    T.$('chart-scatter').parentNode.hidden = !knobs.length;
    if (!knobs.length) return;
    sel.value = knobs.includes(want) ? want : knobs[0];
    color.value = knobs.includes(wantColor) ? wantColor : '';
    C.scatterChart(d, sel.value, color.value);
  }

  function show(data) {
    current = data;
    const s = data.summary;
    const d = s.digest;
    T.loading('loading', '');
    header(s);
    const capped = T.$('capped');
    capped.hidden = !d.capped && !d.time.thinned;
    T.text(capped, d.capped ? 'the summary covers the first ' + d.records + ' of ' + s.records + ' records'
      : 'charts over time draw every ' + Math.ceil(d.records / 2000) + '-th record and the fastest (' + d.records + ' records)');
    C.timeChart(d, axis());
    C.trialsChart(d);
    C.statusChart(d);
    C.rooflineChart(s, d.sample);
    const predicted = d.knobs.predicted.map((e) => Object.assign({predicted: true}, e));
    knobTable(d.knobs.measured, d.knobs.predicted);
    C.knobCharts(d.knobs.measured.concat(predicted), T.$('knobs'));
    scatter();
    if (table.mode === 'fast') showFastest();
    // When the page first showed data, in ms since navigation began (the tests and the bench read it).
    if (T.shownAt === undefined) T.shownAt = performance.now();
  }

  let wired = false;
  function wire() {
    if (wired) return;
    wired = true;
    T.$('cfg-prev').addEventListener('click', () => {
      if (table.mode === 'all' && !current.records) return loadAll(Math.max(0, table.page - 1));
      table.offset = Math.max(0, table.offset - ROWS);
      return renderTable();
    });
    T.$('cfg-next').addEventListener('click', () => {
      if (table.mode === 'all' && !current.records) return loadAll(table.page + 1);
      table.offset += ROWS;
      return renderTable();
    });
    T.$('cfg-all').addEventListener('click', () => {
      table.afters = [0];
      return loadAll(0);
    });
    T.$('cfg-fast').addEventListener('click', showFastest);
    T.$('time-axis').addEventListener('change', () => current && C.timeChart(current.summary.digest, axis()));
    for (const id of ['scatter-knob', 'scatter-color'])
      T.$(id).addEventListener('change', () => current && C.scatterChart(current.summary.digest, T.$('scatter-knob').value, T.$('scatter-color').value));
    X.wire();
  }

  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  // Waits for records newer than the page's (the service holds the request up to LIVE_WAIT_S)
  // and redraws; a refused or failed wait backs off.
  async function follow(key) {
    const live = T.$('live');
    live.hidden = false;
    for (;;) {
      const d = current.summary.digest;
      live.dataset.records = String(d.records);
      live.dataset.maxId = String(d.max_id);
      T.text(live, 'live: ' + d.records + ' records, newest ' + d.max_id + '; waiting for new ones');
      const t0 = Date.now();
      let data;
      try {
        data = await T.api('v1/kernels/' + key + '?digest=1&after=' + d.max_id + '&wait=' + LIVE_WAIT_S);
      } catch (err) {
        if (err instanceof T.ApiError && err.status === 401) return;
        T.text(live, 'live: the service did not answer (' + err.message + '); trying again');
        await pause(5000);
        continue;
      }
      if (data.unchanged) {
        if (Date.now() - t0 < 1000) await pause(3000);  // the service had no wait slot left
        continue;
      }
      show({summary: data, records: null});
      live.dataset.updated = String(Date.now());
    }
  }

  T.start(async function () {
    wire();
    if (T.report) {
      const data = JSON.parse(T.$('tessera-report').textContent);
      T.$('links').hidden = true;
      const note = T.$('report-note');
      note.hidden = false;
      T.text(note, 'Report written ' + data.generated_at + ' from ' + data.source + ' by tessera report.');
      const pick = T.$('pick');
      data.kernels.forEach((k, i) => pick.appendChild(T.el('option', {value: String(i)},
        T.kernelName(k.summary.key) + ' on ' + k.summary.key.target + ' (' + k.summary.key_id.slice(0, 12) + ')')));
      T.$('report-picker').hidden = data.kernels.length < 2;
      pick.addEventListener('change', () => show(data.kernels[Number(pick.value)]));
      show(data.kernels[0]);
      return;
    }
    const key = T.query('key') || '';
    if (!/^[0-9a-f]{64}$/.test(key)) {
      T.loading('loading', '');
      T.showError('no kernel chosen: open a kernel from the overview');
      return;
    }
    T.loading('loading', 'loading the kernel\'s summary ...');
    const summary = await T.api('v1/kernels/' + key + '?digest=1');
    show({summary: summary, records: null});
    // Compare opens with this kernel's own target first, then the usual others.
    const own = summary.key.target;
    const targets = [own].concat(['sm_90', 'gfx942', 'host'].filter((t) => t !== own)).join(',');
    T.$('compare-link').setAttribute('href', T.safeHref('compare.html?key=' + key + '&targets=' + targets));
    follow(key);
  });
})();
