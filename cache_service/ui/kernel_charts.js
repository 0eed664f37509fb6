// Owns the Kernel page's derived views and charts: tunes found in a key's records, the time and
// search-progress charts, the roofline, and the per-knob effect (median time per knob value).
// Every string a chart shows (knob values, statuses) is drawn on a canvas, never parsed as HTML.
'use strict';

(function () {
  const T = window.Tessera;
  const K = {};
  T.kernelCharts = K;
  const FAILED = ['invalid-config', 'compile-error', 'timeout', 'crash', 'wrong-result'];
  const timeAxis = (title) => ({
    type: 'logarithmic', title: {display: true, text: title},
    ticks: {callback: (v) => T.fmtTime(Number(v))},
  });

  // A tune's records carry its trial numbers 1..N (the tuner's `trials`), so a tune starts at a
  // record of trial 1 when the current one already has its trial 1 (workers may report out of
  // order). Records without a trial number (imported tables) belong to no tune.
  K.tunes = function (records) {
    const tunes = [];
    let cur = null;
    for (const r of records.slice().sort((a, b) => a.id - b.id)) {
      const trial = r.result ? r.result.trials : 0;
      if (!(trial >= 1)) continue;
      if (!cur || (trial === 1 && cur.hasFirst)) {
        cur = {records: [], hasFirst: false};
        tunes.push(cur);
      }
      cur.hasFirst = cur.hasFirst || trial === 1;
      cur.records.push(r);
    }
    tunes.forEach((t, i) => {
      t.estimated = t.records.every((r) => r.status === 'estimated');
      t.label = 'tune ' + (i + 1) + (t.estimated ? ' (estimated)' : '') + ', ' + (t.records[0].received_at || t.records[0].provenance.created_at);
    });
    return tunes;
  };

  K.timeChart = function (records) {
    const when = (r) => T.epoch(r.received_at) || T.epoch(r.provenance.created_at);
    const timed = records.filter((r) => r.status === 'ok' || r.status === 'estimated');
    const top = timed.length ? T.max(timed.map((r) => r.result.median_us)) * 1.5 : 1;
    const times = records.map(when).filter((t) => t !== null);
    const span = times.length ? T.max(times) - T.min(times) : 0;
    const datasets = [];
    for (const status of ['ok', 'estimated'].concat(FAILED)) {
      const rs = records.filter((r) => r.status === status);
      if (!rs.length) continue;
      const failed = FAILED.includes(status);
      datasets.push({
        label: status + ' (' + rs.length + ')' + (failed ? ', drawn above the slowest' : ''),
        data: rs.map((r) => ({x: when(r), y: failed ? top : r.result.median_us, id: r.id})),
        backgroundColor: T.statusColors[status], borderColor: T.statusColors[status],
        pointStyle: failed ? 'crossRot' : status === 'estimated' ? 'triangle' : 'circle', pointRadius: failed ? 5 : 3,
      });
    }
    T.chart('chart-time', {
      type: 'scatter', data: {datasets: datasets},
      options: {
        scales: {x: {type: 'linear', title: {display: true, text: 'received (UTC)'},
          ticks: {maxTicksLimit: 8, callback: (v) => T.fmtTick(Number(v), span)}},
          y: timeAxis('median time')},
        plugins: {tooltip: {callbacks: {label: (c) => 'record ' + c.raw.id + ': ' + T.fmtTime(c.raw.y) + ' at ' + T.fmtDate(c.raw.x)}}},
      },
    });
  };

  K.trialsChart = function (tunes) {
    const datasets = tunes.map((t, i) => {
      let best = Infinity;
      const pts = [];
      const want = t.estimated ? 'estimated' : 'ok';
      for (const r of t.records.slice().sort((a, b) => a.result.trials - b.result.trials)) {
        if (r.status === want) best = Math.min(best, r.result.median_us);
        if (isFinite(best)) pts.push({x: r.result.trials, y: best});
      }
      return {label: t.label, data: pts, showLine: true, stepped: 'before', borderColor: T.palette[i % T.palette.length],
        backgroundColor: T.palette[i % T.palette.length], pointRadius: 1.5};
    });
    T.chart('chart-trials', {
      type: 'scatter', data: {datasets: datasets},
      options: {scales: {x: {type: 'linear', title: {display: true, text: 'trial'}}, y: timeAxis('best time so far')}},
    });
  };

  K.statusChart = function (tunes) {
    const statuses = ['ok', 'estimated'].concat(FAILED).filter((s) => tunes.some((t) => t.records.some((r) => r.status === s)));
    T.chart('chart-status', {
      type: 'bar',
      data: {
        labels: tunes.map((t, i) => 'tune ' + (i + 1)),
        datasets: statuses.map((s) => ({label: s, backgroundColor: T.statusColors[s],
          data: tunes.map((t) => t.records.filter((r) => r.status === s).length)})),
      },
      options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'records'}}}},
    });
  };

  // x: FLOP per byte (the tuner's counts), y: achieved GFLOP/s; the roofs as lines.
  K.rooflineChart = function (summary, records) {
    const roof = summary.roofline || {};
    const note = T.$('roof-note');
    const points = [];
    for (const r of records) {
      if (!(r.status === 'ok' || r.status === 'estimated') || !(r.result.gflops > 0)) continue;
      const x = r.result.gbps > 0 ? r.result.gflops / r.result.gbps : roof.intensity;
      if (x > 0) points.push({x: x, y: r.result.gflops, id: r.id, status: r.status});
    }
    const near = (summary.nearest || []).filter((n) => n.intensity > 0 && n.gflops > 0)
      .map((n) => ({x: n.intensity, y: n.gflops, shape: T.fmtShape(n.shape)}));
    const parts = [];
    parts.push(roof.compute_gflops ? 'compute roof ' + T.fmtThroughput(roof.compute_gflops, 'GFLOP/s') + ' (' + roof.compute_source + ')'
      : 'compute roof: ' + (roof.compute_source || 'unknown'));
    parts.push(roof.bandwidth_gbs ? 'bandwidth roof ' + T.fmtThroughput(roof.bandwidth_gbs, 'GB/s') + ' (' + roof.bandwidth_source + ')'
      : 'bandwidth roof: ' + (roof.bandwidth_source || 'unknown'));
    if (roof.intensity) parts.push('arithmetic intensity ' + roof.intensity.toFixed(2) + ' FLOP/byte (' + roof.intensity_source + ')');
    // A config above the compute roof beat the peak it was measured against: never shown without
    // the reason. A host's roof is the tuner's own FMA probe, which a loaded machine reads low; a
    // GPU's is the table's default product, which another product of the chip may exceed.
    const above = roof.compute_gflops ? points.concat(near).filter((p) => p.y > roof.compute_gflops * 1.02).length : 0;
    if (above) {
      parts.push(above + (above > 1 ? ' points' : ' point') + ' above the compute roof: ' +
        (/target table/.test(roof.compute_source || '') ? 'the table\'s product is not the one measured'
          : 'the probe read the peak low (a loaded or shared machine)'));
    }
    T.text(note, parts.join('; '));
    if (!points.length && !near.length) {
      T.$('chart-roofline').parentNode.hidden = true;
      T.text(note, note.textContent + '; no throughput to place on it');
      return;
    }
    const xs = points.concat(near).map((p) => p.x);
    const ridge = roof.compute_gflops && roof.bandwidth_gbs ? roof.compute_gflops / roof.bandwidth_gbs : null;
    const lo = Math.min(T.min(xs), ridge || Infinity) / 4;
    const hi = Math.max(T.max(xs), ridge || 0) * 4;
    const datasets = [];
    if (roof.bandwidth_gbs) {
      const end = ridge || hi;
      datasets.push({label: 'bandwidth roof', data: [{x: lo, y: roof.bandwidth_gbs * lo}, {x: end, y: roof.bandwidth_gbs * end}],
        showLine: true, pointRadius: 0, borderColor: '#888', borderDash: [6, 4]});
    }
    if (roof.compute_gflops) {
      datasets.push({label: 'compute roof', data: [{x: ridge || lo, y: roof.compute_gflops}, {x: hi, y: roof.compute_gflops}],
        showLine: true, pointRadius: 0, borderColor: '#444'});
    }
    datasets.push({label: 'this kernel\'s configs (' + points.length + ')', data: points, backgroundColor: '#2f6fdf', pointRadius: 3});
    if (near.length) datasets.push({label: 'winners of nearby shapes', data: near, backgroundColor: '#e8772e', pointStyle: 'rectRot', pointRadius: 5});
    T.chart('chart-roofline', {
      type: 'scatter', data: {datasets: datasets},
      options: {
        scales: {x: {type: 'logarithmic', title: {display: true, text: 'arithmetic intensity (FLOP/byte)'}},
          y: {type: 'logarithmic', title: {display: true, text: 'GFLOP/s'}}},
        plugins: {tooltip: {callbacks: {label: (c) => (c.raw.shape ? c.raw.shape + ': ' : c.raw.id ? 'record ' + c.raw.id + ': ' : '') +
          T.fmtThroughput(c.raw.y, 'GFLOP/s') + ' at ' + Number(c.raw.x).toFixed(2) + ' FLOP/byte'}}},
      },
    });
  };

  // Median time per value of each knob over the ok measurements; knobs by spread (worst / best).
  K.knobEffects = function (records) {
    const ok = records.filter((r) => r.status === 'ok' && r.config && typeof r.config === 'object');
    const byKnob = new Map();
    for (const r of ok) {
      for (const [knob, value] of Object.entries(r.config)) {
        if (!byKnob.has(knob)) byKnob.set(knob, new Map());
        const vals = byKnob.get(knob);
        const v = typeof value === 'object' ? JSON.stringify(value) : String(value);
        if (!vals.has(v)) vals.set(v, {value: v, numeric: typeof value === 'number', times: []});
        vals.get(v).times.push(r.result.median_us);
      }
    }
    const effects = [];
    for (const [knob, vals] of byKnob) {
      const values = [...vals.values()].map((e) => ({value: e.value, numeric: e.numeric, n: e.times.length, median: T.median(e.times)}));
      if (values.length < 2) continue;
      if (values.every((v) => v.numeric)) values.sort((a, b) => Number(a.value) - Number(b.value));
      else values.sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
      const best = values.reduce((a, b) => (b.median < a.median ? b : a));
      const worst = values.reduce((a, b) => (b.median > a.median ? b : a));
      effects.push({knob: knob, values: values, best: best, worst: worst, spread: worst.median / best.median});
    }
    effects.sort((a, b) => b.spread - a.spread || (a.knob < b.knob ? -1 : 1));
    return effects;
  };

  K.knobCharts = function (effects, container) {
    T.clear(container);
    effects.slice(0, 12).forEach((e, i) => {
      const id = 'chart-knob-' + i;
      container.appendChild(T.el('div', {class: 'knob'}, T.el('h3', {}, e.knob + ' (spread ' + e.spread.toFixed(2) + 'x)'),
        T.el('div', {class: 'chart small'}, T.el('canvas', {id: id, dataset: {knob: e.knob}}))));
      T.chart(id, {
        type: 'bar',
        data: {labels: e.values.map((v) => v.value),
          datasets: [{label: 'median time', data: e.values.map((v) => v.median), backgroundColor: T.palette[i % T.palette.length]}]},
        options: {plugins: {legend: {display: false},
          tooltip: {callbacks: {label: (c) => T.fmtTime(c.raw) + ' (' + e.values[c.dataIndex].n + ' measurements)'}}},
        scales: {y: {title: {display: true, text: 'median time'}, ticks: {callback: (v) => T.fmtTime(Number(v))}},
          x: {title: {display: true, text: e.knob}}}},
      });
    });
  };
})();
