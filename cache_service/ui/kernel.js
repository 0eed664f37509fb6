// Owns the Kernel page: one key's winner, every measurement of it as charts (over time, over the
// trials of each tune, the roofline, the knobs' effect) and its configs in a sortable table. It
// reads GET /v1/kernels/{key_id} and the key's records (GET /v1/records), or, in a report written
// by `tessera report`, the same documents from the page itself.
'use strict';

(function () {
  const T = window.Tessera;
  const C = T.kernelCharts;
  const MAX_RECORDS = 20000;  // what one page fetches at most (a report says its own cap)
  const ROWS = 100;
  const table = {records: [], knobs: [], sort: 'time', dir: 1, offset: 0};

  async function fetchKernel(key) {
    const summary = await T.api('v1/kernels/' + encodeURIComponent(key));
    const records = [];
    let after = 0;
    while (records.length < MAX_RECORDS) {
      const page = await T.api('v1/records?key_id=' + encodeURIComponent(key) + '&limit=1000' + (after ? '&after=' + after : ''));
      records.push(...page.records);
      if (!page.next_after) break;
      after = page.next_after;
    }
    return {summary: summary, records: records.slice(0, MAX_RECORDS), records_total: summary.records};
  }

  function card(title, value, sub) {
    return T.el('div', {class: 'card'}, T.el('div', {class: 'card-title'}, title), T.el('div', {class: 'card-value'}, value),
      sub ? T.el('div', {class: 'card-sub'}, sub) : null);
  }

  function header(data) {
    const s = data.summary;
    const k = s.key;
    T.text(T.$('title'), T.kernelName(k) + ' on ' + k.target);
    document.title = T.kernelName(k) + ' on ' + k.target + ' - Tessera';
    T.text(T.$('subtitle'), 'layout ' + k.layout + ', arch ' + k.arch + ', ' + k.units + ' units, workload ' + k.workload +
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
    const tags = T.el('span', {}, T.tag(s.label));
    if (r.result.remeasured) tags.appendChild(T.tag('remeasured'));
    if (s.stale) tags.appendChild(T.tag('stale'));
    if (r.confirmed === false) tags.appendChild(T.tag('unconfirmed'));
    w.appendChild(card(s.label === 'estimated' ? 'fastest estimate' : 'winner', T.fmtTime(r.result.median_us),
      'p20 ' + T.fmtTime(r.result.p20_us) + ', p80 ' + T.fmtTime(r.result.p80_us) + ', n=' + r.result.n));
    w.appendChild(card('throughput', T.fmtThroughput(tp.value, tp.unit), T.fmtPct(r.result.peak_fraction) + ' of peak'));
    w.appendChild(card('labels', tags, r.estimate ? 'model ' + r.estimate.model + ', ' + r.estimate.bound + '-bound' : ''));
    w.appendChild(card('config', JSON.stringify(r.config), 'record ' + r.id));
    w.appendChild(card('stored', r.received_at || r.provenance.created_at, 'by ' + (r.writer || '(local store)')));
    const p = r.provenance;
    w.appendChild(card('measured on', p.cpu_model || '-', [p.host, p.user].filter(Boolean).join(', ') +
      ' / tessera ' + p.tessera_version + ', LLVM ' + p.llvm_version + (p.cuda_version ? ', toolkit ' + p.cuda_version : '')));
  }

  const columns = [
    {id: 'id', title: 'id', num: true, get: (r) => r.id},
    {id: 'status', title: 'status', get: (r) => r.status},
    {id: 'time', title: 'time', num: true, get: (r) => (r.status === 'ok' || r.status === 'estimated' ? r.result.median_us : Infinity),
      show: (r) => (r.status === 'ok' || r.status === 'estimated' ? T.fmtTime(r.result.median_us) : '-')},
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
    const col = cols.find((c) => c.id === table.sort) || cols[2];
    const rows = table.records.slice().sort((a, b) => {
      const x = col.get(a), y = col.get(b);
      return (x < y ? -1 : x > y ? 1 : a.id - b.id) * table.dir;
    });
    const body = T.clear(document.querySelector('#configs tbody'));
    for (const r of rows.slice(table.offset, table.offset + ROWS)) {
      body.appendChild(T.el('tr', {dataset: {id: r.id, status: r.status}},
        cols.map((c) => T.el('td', {class: c.num ? 'num' : null, dataset: {col: c.id}}, c.show ? c.show(r) : String(c.get(r))))));
    }
    T.text(T.$('cfg-page'), (rows.length ? table.offset + 1 : 0) + '-' + Math.min(rows.length, table.offset + ROWS) + ' of ' + rows.length);
    T.$('cfg-prev').disabled = table.offset === 0;
    T.$('cfg-next').disabled = table.offset + ROWS >= rows.length;
  }

  function sortBy(id) {
    table.dir = table.sort === id ? -table.dir : 1;
    table.sort = id;
    table.offset = 0;
    renderTable();
  }

  function knobTable(effects) {
    const body = T.clear(document.querySelector('#knob-table tbody'));
    for (const e of effects) {
      body.appendChild(T.el('tr', {dataset: {knob: e.knob}},
        T.el('td', {}, e.knob), T.el('td', {}, String(e.values.length)),
        T.el('td', {dataset: {col: 'best'}}, e.best.value), T.el('td', {class: 'num', dataset: {col: 'best-median', value: e.best.median}}, T.fmtTime(e.best.median)),
        T.el('td', {dataset: {col: 'worst'}}, e.worst.value), T.el('td', {class: 'num', dataset: {col: 'worst-median', value: e.worst.median}}, T.fmtTime(e.worst.median)),
        T.el('td', {class: 'num', dataset: {col: 'spread', value: e.spread}}, e.spread.toFixed(2) + 'x')));
    }
    if (!effects.length) body.appendChild(T.el('tr', {}, T.el('td', {colspan: 7}, 'no knob took two values in the ok measurements')));
  }

  function show(data) {
    header(data);
    const records = data.records;
    const capped = T.$('capped');
    capped.hidden = data.records_total <= records.length;
    T.text(capped, 'showing the first ' + records.length + ' of ' + data.records_total + ' records');
    const tunes = C.tunes(records);
    C.timeChart(records);
    C.trialsChart(tunes);
    C.statusChart(tunes);
    C.rooflineChart(data.summary, records);
    const effects = C.knobEffects(records);
    knobTable(effects);
    C.knobCharts(effects, T.$('knobs'));
    const knobs = new Set();
    for (const r of records) for (const k of Object.keys(r.config || {})) knobs.add(k);
    table.records = records;
    table.knobs = [...knobs].sort();
    table.sort = 'time';
    table.dir = 1;
    table.offset = 0;
    renderTable();
  }

  let wired = false;
  function wire() {
    if (wired) return;
    wired = true;
    T.$('cfg-prev').addEventListener('click', () => {
      table.offset = Math.max(0, table.offset - ROWS);
      renderTable();
    });
    T.$('cfg-next').addEventListener('click', () => {
      table.offset += ROWS;
      renderTable();
    });
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
      T.showError('no kernel chosen: open a kernel from the overview');
      return;
    }
    T.$('compare-link').setAttribute('href', T.safeHref('compare.html?key=' + key));
    show(await fetchKernel(key));
  });
})();
