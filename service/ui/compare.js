// Owns the Compare page: one kernel's winners on several targets side by side, as `tessera
// compare` prints them. The service computes the comparison (POST /v1/compare runs the same code
// as the CLI); this page only lays its document out: one column per target (wrapping, never
// wider than the screen), one row per attribute any target has, the notes, why the choices
// differ, and a chart of each target's time and throughput (predicted ones marked). The kernel
// comes from a picker (search words, a key prefix) or its IR text; targets are chips or GPUs by name.
'use strict';

(function () {
  const T = window.Tessera;

  function render(doc) {
    T.$('cmp-result').hidden = false;
    T.text(T.$('cmp-kernel'), doc.kernel);
    const head = T.clear(document.querySelector('#cmp-table thead'));
    head.appendChild(T.el('tr', {}, T.el('th', {}, ''),
      doc.targets.map((t) => T.el('th', {dataset: {target: t.target}}, t.target + ' (' + t.model + ')'))));
    const body = T.clear(document.querySelector('#cmp-table tbody'));
    for (const attr of doc.attributes) {
      const cells = doc.targets.map((t) => (t.facts && t.facts[attr]) || '');
      if (!cells.some((c) => c)) continue;
      body.appendChild(T.el('tr', {dataset: {attr: attr}}, T.el('th', {}, attr),
        cells.map((c, i) => T.el('td', {dataset: {target: doc.targets[i].target}}, c))));
    }
    const notes = T.clear(T.$('cmp-notes'));
    for (const t of doc.targets) if (t.note) notes.appendChild(T.el('li', {}, t.target + ': ' + t.note));
    charts(doc);
    const why = T.clear(T.$('why'));
    for (const line of doc.why) why.appendChild(T.el('li', {}, line));
    if (!doc.why.length) why.appendChild(T.el('li', {class: 'muted'}, 'nothing to explain: fewer than two GPU targets have a winner'));
  }

  // Time (lower is better) and throughput per target; a target without a winner has no bar.
  function charts(doc) {
    const have = doc.targets.filter((t) => t.time_us > 0);
    const label = (t) => t.target + (t.source === 'estimated' ? ' (predicted)' : '');
    const color = (t) => (t.source === 'estimated' ? T.statusColors.estimated : T.statusColors.ok);
    const unit = have.some((t) => t.gbps !== undefined) ? 'GB/s' : 'GFLOP/s';
    T.chart('chart-cmp-time', {type: 'bar', data: {labels: have.map(label),
      datasets: [{label: 'time of the winner', data: have.map((t) => t.time_us), backgroundColor: have.map(color)}]},
    options: {plugins: {legend: {display: false}}, scales: {y: {title: {display: true, text: 'time'}, ticks: {callback: (v) => T.fmtTime(Number(v))}}}}});
    T.chart('chart-cmp-throughput', {type: 'bar', data: {labels: have.map(label),
      datasets: [{label: unit, data: have.map((t) => t.gflops !== undefined ? t.gflops : t.gbps), backgroundColor: have.map(color)}]},
    options: {plugins: {legend: {display: false}}, scales: {y: {title: {display: true, text: unit}, ticks: {callback: (v) => T.fmtThroughput(Number(v), unit)}}}}});
  }

  // A key_id from what was typed: the full key, or a prefix of 12 or more digits (as the CLI and
  // the report print them) that names exactly one kernel of this cache.
  async function resolveKey(text) {
    if (/^[0-9a-f]{64}$/.test(text)) return text;
    if (!/^[0-9a-f]{12,63}$/.test(text)) throw new Error('expected a key_id or a prefix of 12 or more hex digits (or pick a kernel from the list)');
    const found = (await T.api('v1/kernels?q=' + text + '&limit=5')).kernels.filter((k) => k.key_id.startsWith(text));
    if (found.length !== 1) throw new Error(found.length ? 'the prefix ' + text + ' names ' + found.length + ' kernels: give more digits' : 'no kernel of this cache starts with ' + text);
    return found[0].key_id;
  }

  // The picker: search words typed into the key box list the kernels they find.
  let searchTimer = null;
  function pick() {
    clearTimeout(searchTimer);
    const text = T.$('key').value.trim();
    if (!text || /^[0-9a-f]{12,}$/.test(text)) return;
    searchTimer = setTimeout(async () => {
      try {
        const data = await T.api('v1/kernels?q=' + encodeURIComponent(text) + '&limit=20');
        const list = T.clear(T.$('key-choices'));
        const picks = T.clear(T.$('key-picks'));
        for (const k of data.kernels) {
          const name = T.kernelName(k.key) + ' on ' + k.key.target;
          list.appendChild(T.el('option', {value: k.key_id}, name));
          picks.appendChild(T.el('li', {}, T.el('button', {type: 'button', class: 'pick-key', dataset: {key: k.key_id, target: k.key.target},
            on: {click: () => choose(k)}}, name), ' ', T.el('code', {}, k.key_id.slice(0, 12))));
        }
        picks.hidden = !data.kernels.length;
        picks.dataset.count = String(data.kernels.length);
      } catch (err) {
        if (!(err instanceof T.ApiError)) T.showError(err);
      }
    }, 300);
  }

  // A picked kernel: its key, and its own target first among the targets.
  function choose(k) {
    T.$('key').value = k.key_id;
    T.$('src-key').checked = true;
    const rest = T.$('targets').value.split(',').map((s) => s.trim()).filter((t) => t && t !== k.key.target);
    T.$('targets').value = [k.key.target].concat(rest).join(',');
    T.$('key-picks').hidden = true;
  }

  async function run(ev) {
    if (ev) ev.preventDefault();
    T.clearError();
    const targets = T.$('targets').value.split(',').map((s) => s.trim()).filter(Boolean);
    const body = {targets: targets};
    if (T.$('src-ir').checked) body.kernel = T.$('ir').value;
    else {
      try {
        body.key_id = await resolveKey(T.$('key').value.trim());
      } catch (err) {
        T.showError(err);
        return;
      }
    }
    T.text(T.$('cmp-busy'), 'comparing (compiles each GPU winner; a few seconds) ...');
    T.$('cmp-run').disabled = true;
    try {
      render(await T.api('v1/compare', {method: 'POST', body: body}));
    } catch (err) {
      if (!(err instanceof T.ApiError && err.status === 401)) T.showError(err);
    } finally {
      T.text(T.$('cmp-busy'), '');
      T.$('cmp-run').disabled = false;
    }
  }

  // GPUs by name (GET /v1/gpus: the target table's products), grouped by chip; a choice joins the targets.
  async function gpuChoices() {
    const sel = T.$('gpu-add');
    if (sel.options.length > 1) return;
    const data = await T.api('v1/gpus');
    const groups = {};
    for (const g of data.gpus) {
      if (!groups[g.arch]) sel.appendChild(groups[g.arch] = T.el('optgroup', {label: g.arch}));
      groups[g.arch].appendChild(T.el('option', {value: g.target, dataset: {arch: g.arch}}, g.name));
    }
    sel.dataset.count = String(data.gpus.length);
  }

  function addGpu() {
    const sel = T.$('gpu-add');
    const have = T.$('targets').value.split(',').map((s) => s.trim()).filter(Boolean);
    if (sel.value && !have.includes(sel.value)) T.$('targets').value = have.concat([sel.value]).join(',');
    sel.value = '';
  }

  let wired = false;
  T.start(function () {
    if (!wired) {
      wired = true;
      T.$('cmp-form').addEventListener('submit', run);
      T.$('key').addEventListener('input', () => {
        T.$('src-key').checked = true;
        pick();
      });
      T.$('ir').addEventListener('input', () => (T.$('src-ir').checked = true));
      T.$('gpu-add').addEventListener('change', addGpu);
    }
    gpuChoices().catch((err) => !(err instanceof T.ApiError && err.status === 401) && T.showError(err));
    const key = T.query('key');
    const targets = T.query('targets');
    if (targets && /^[A-Za-z0-9_.:+,-]+$/.test(targets)) T.$('targets').value = targets;
    if (key && /^[0-9a-f]{12,64}$/.test(key)) {
      T.$('key').value = key;
      return run();
    }
    return null;
  });
})();
