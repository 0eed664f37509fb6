// Owns the Kernel page's charts, drawn from the service's digest of the key (GET
// /v1/kernels/{key_id}?digest=1, dashboard_digest.h): every record over time, each tune's trials
// and best so far (measured, or predicted when a tune only has the model's estimates), outcomes
// by status, the roofline, time against a knob, and the per-knob effect of measured and of
// predicted times. Every string a chart shows (knob values, statuses, writers) is drawn on a
// canvas, never parsed as HTML.
'use strict';

(function () {
  const T = window.Tessera;
  const K = {};
  T.kernelCharts = K;
  const FAILED = ['invalid-config', 'compile-error', 'timeout', 'crash', 'wrong-result'];
  const timeAxis = (title) => ({
    type: 'logarithmic', title: {display: true, text: title},
    ticks: {callback: T.logTicks((v) => T.fmtTime(v))},
  });
  const isTimed = (s) => s === 'ok' || s === 'estimated';
  // A point's hover: what was tried (its config) and where it came from.
  const describe = (p) => [(p.id ? 'record ' + p.id + ': ' : '') + (p.y !== null && isTimed(p.status) ? T.fmtTime(p.y) : p.status) +
    (p.status === 'estimated' ? ' (predicted)' : '')].concat(p.config ? [T.fmtConfig(p.config)] : [])
    .concat(p.writer !== undefined ? ['by ' + (p.writer || '(local)') + (p.at ? ', ' + T.fmtDate(p.at) : '')] : []);

  // x: when each record was measured (its provenance), or when the store received it.
  K.timeChart = function (digest, axis) {
    const pts = digest.time.points;
    const when = (p) => (axis === 'measured' && p[2] ? p[2] : p[1] || p[2]);
    const top = (digest.slowest || 1) * 1.5;
    const xs = pts.map(when).filter((t) => t);
    const span = xs.length ? T.max(xs) - T.min(xs) : 0;
    const datasets = [];
    for (const status of ['ok', 'estimated'].concat(FAILED)) {
      const rs = pts.filter((p) => p[4] === status);
      if (!rs.length) continue;
      const failed = FAILED.includes(status);
      datasets.push({
        label: (status === 'estimated' ? 'estimated (predicted)' : failed ? 'refused: ' + status : status) + ' (' + rs.length + ')' +
          (failed ? ', drawn above the slowest' : ''),
        data: rs.map((p) => ({x: when(p), y: failed ? top : p[3], id: p[0], status: p[4], config: p[5], writer: p[6], at: when(p)})),
        backgroundColor: T.statusColors[status], borderColor: T.statusColors[status],
        pointStyle: failed ? 'crossRot' : status === 'estimated' ? 'triangle' : 'circle', pointRadius: failed ? 5 : 3,
      });
    }
    T.chart('chart-time', {
      type: 'scatter', data: {datasets: datasets},
      options: {
        scales: {x: {type: 'linear', title: {display: true, text: axis === 'measured' ? 'measured (UTC)' : 'received (UTC)'},
          ticks: {maxTicksLimit: 8, callback: (v) => T.fmtTick(Number(v), span)}},
          y: timeAxis('median time')},
        plugins: {tooltip: {callbacks: {label: (c) => describe(c.raw)}}},
      },
    });
  };

  // Per tune: each trial (refusals as crosses above the slowest) and the best so far.
  K.trialsChart = function (digest) {
    const top = (digest.slowest || 1) * 1.5;
    const datasets = [];
    digest.tunes.forEach((t, i) => {
      const color = T.palette[i % T.palette.length];
      const name = 'tune ' + t.index + (t.estimated ? ' (predicted)' : '');
      const best = t.points.filter((p) => p[3] !== null).map((p) => ({x: p[0], y: p[3], id: p[4], status: t.estimated ? 'estimated' : 'ok'}));
      const each = t.points.filter((p) => p[1] !== null).map((p) => ({x: p[0], y: p[1], id: p[4], status: p[2]}));
      const refused = t.points.filter((p) => !isTimed(p[2])).map((p) => ({x: p[0], y: top, id: p[4], status: p[2]}));
      datasets.push({label: name + ': best so far', data: best, showLine: true, stepped: 'before', borderColor: color,
        backgroundColor: color, pointRadius: 0});
      datasets.push({label: name + ': each trial', data: each, borderColor: color, backgroundColor: color + '80', pointRadius: 2,
        pointStyle: t.estimated ? 'triangle' : 'circle'});
      if (refused.length) {
        datasets.push({label: name + ': refused (' + refused.length + ')', data: refused, borderColor: '#c43d52',
          backgroundColor: '#c43d52', pointStyle: 'crossRot', pointRadius: 5});
      }
    });
    T.chart('chart-trials', {
      type: 'scatter', data: {datasets: datasets},
      options: {scales: {x: {type: 'linear', title: {display: true, text: 'trial'}}, y: timeAxis('time (best so far, each trial)')},
        plugins: {tooltip: {callbacks: {label: (c) => c.dataset.label + ', trial ' + c.raw.x + ': ' +
          (isTimed(c.raw.status) || c.raw.status === undefined ? T.fmtTime(c.raw.y) : c.raw.status) + ' (record ' + c.raw.id + ')'}}}},
    });
  };

  K.statusChart = function (digest) {
    const tunes = digest.tunes;
    const statuses = ['ok', 'estimated'].concat(FAILED).filter((s) => tunes.some((t) => t.statuses[s]));
    T.chart('chart-status', {
      type: 'bar',
      data: {
        labels: tunes.map((t) => 'tune ' + t.index + (t.estimated ? ' (predicted)' : '')),
        datasets: statuses.map((s) => ({label: s === 'estimated' ? 'estimated (predicted)' : s, backgroundColor: T.statusColors[s],
          data: tunes.map((t) => t.statuses[s] || 0)})),
      },
      options: {scales: {x: {stacked: true}, y: {stacked: true, title: {display: true, text: 'records'}}}},
    });
  };

  // x: FLOP per byte (the tuner's counts), y: achieved GFLOP/s; the roofs as lines. The points are
  // the digest's sample (the fastest records).
  K.rooflineChart = function (summary, records) {
    const roof = summary.roofline || {};
    const note = T.$('roof-note');
    const points = [];
    for (const r of records) {
      if (!isTimed(r.status) || !(r.result.gflops > 0)) continue;
      const x = r.result.gbps > 0 ? r.result.gflops / r.result.gbps : roof.intensity;
      if (x > 0) points.push({x: x, y: r.result.gflops, id: r.id, status: r.status, config: r.config});
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
    T.$('chart-roofline').parentNode.hidden = false;
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
        showLine: true, pointRadius: 0, borderColor: '#888'});
    }
    const predicted = points.some((p) => p.status === 'estimated');
    datasets.push({label: 'this kernel\'s configs (' + points.length + (predicted ? ', predicted' : '') + ')', data: points,
      backgroundColor: '#2f6fdf', pointRadius: 3});
    if (near.length) datasets.push({label: 'winners of nearby shapes', data: near, backgroundColor: '#e8772e', pointStyle: 'rectRot', pointRadius: 5});
    T.chart('chart-roofline', {
      type: 'scatter', data: {datasets: datasets},
      options: {
        scales: {x: {type: 'logarithmic', title: {display: true, text: 'arithmetic intensity (FLOP/byte)'},
          ticks: {callback: T.logTicks((v) => String(+v.toPrecision(3)))}},
        y: {type: 'logarithmic', title: {display: true, text: 'throughput'},
          ticks: {callback: T.logTicks((v) => T.fmtThroughput(v, 'GFLOP/s'))}}},
        plugins: {tooltip: {callbacks: {label: (c) => (c.raw.shape ? c.raw.shape + ': ' : c.raw.id ? 'record ' + c.raw.id + ': ' : '') +
          T.fmtThroughput(c.raw.y, 'GFLOP/s') + ' at ' + Number(c.raw.x).toFixed(2) + ' FLOP/byte' +
          (c.raw.config ? ' (' + T.fmtConfig(c.raw.config) + ')' : '')}}},
      },
    });
  };

  // Time against one knob's values, over the digest's points (measured and predicted apart); with
  // a second knob, one colour per value of it (KTdashboard's view of two parameters at once).
  K.scatterChart = function (digest, knob, colorKnob) {
    const pts = digest.time.points.filter((p) => isTimed(p[4]) && p[5] && p[5][knob] !== undefined);
    const numeric = pts.every((p) => typeof p[5][knob] === 'number');
    const cats = numeric ? [] : [...new Set(pts.map((p) => String(p[5][knob])))].sort();
    const x = (p) => (numeric ? p[5][knob] : cats.indexOf(String(p[5][knob])));
    const second = colorKnob && colorKnob !== knob ? colorKnob : '';
    const val = (p) => (p[5][second] === undefined ? '(none)' : typeof p[5][second] === 'object' ? JSON.stringify(p[5][second]) : String(p[5][second]));
    const groups = second ? [...new Set(pts.map(val))].sort((a, b) => (isFinite(a) && isFinite(b) ? a - b : a < b ? -1 : a > b ? 1 : 0)) : [''];
    const datasets = [];
    groups.forEach((g, gi) => {
      for (const s of ['ok', 'estimated']) {
        const data = pts.filter((p) => p[4] === s && (!second || val(p) === g))
          .map((p) => ({x: x(p), y: p[3], id: p[0], status: p[4], config: p[5], writer: p[6], at: p[2] || p[1]}));
        if (!data.length) continue;
        const color = second ? T.palette[gi % T.palette.length] : T.statusColors[s];
        datasets.push({label: (second ? second + '=' + g + ', ' : '') + (s === 'ok' ? 'measured' : 'predicted'), backgroundColor: color,
          borderColor: color, pointStyle: s === 'ok' ? 'circle' : 'triangle', pointRadius: 3, data: data});
      }
    });
    T.chart('chart-scatter', {
      type: 'scatter', data: {datasets: datasets},
      options: {
        scales: {x: numeric ? {type: 'linear', title: {display: true, text: knob}}
          : {type: 'linear', min: -0.5, max: cats.length - 0.5, title: {display: true, text: knob},
            ticks: {stepSize: 1, callback: (v) => cats[v] !== undefined ? cats[v] : ''}},
        y: timeAxis('median time')},
        plugins: {tooltip: {callbacks: {label: (c) => describe(c.raw)}}},
      },
    });
  };

  K.knobCharts = function (effects, container) {
    T.clear(container);
    effects.slice(0, 12).forEach((e, i) => {
      const id = 'chart-knob-' + i;
      const what = e.predicted ? 'predicted' : 'measured';
      container.appendChild(T.el('div', {class: 'knob'}, T.el('h3', {}, e.knob + ' (' + what + ', spread ' + e.spread.toFixed(2) + 'x)'),
        T.el('div', {class: 'chart small'}, T.el('canvas', {id: id, dataset: {knob: e.knob, predicted: e.predicted ? '1' : '0'}}))));
      T.chart(id, {
        type: 'bar',
        data: {labels: e.values.map((v) => v.value),
          datasets: [{label: 'median ' + what + ' time', data: e.values.map((v) => v.median),
            backgroundColor: e.predicted ? T.statusColors.estimated : T.palette[i % T.palette.length]}]},
        options: {plugins: {legend: {display: false},
          tooltip: {callbacks: {label: (c) => T.fmtTime(c.raw) + ' (' + e.values[c.dataIndex].n + (e.predicted ? ' estimates)' : ' measurements)')}}},
        scales: {y: {title: {display: true, text: 'median ' + what + ' time'}, ticks: {callback: (v) => T.fmtTime(Number(v))}},
          x: {title: {display: true, text: e.knob}}}},
      });
    });
  };
})();
