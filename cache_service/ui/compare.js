// Owns the Compare page: one kernel's winners on several targets side by side, as `tessera
// compare` prints them. The service computes the comparison (POST /v1/compare runs the same code
// as the CLI); this page only lays its document out: one column per target, one row per
// attribute any target has, the notes, and why the choices differ.
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
    const why = T.clear(T.$('why'));
    for (const line of doc.why) why.appendChild(T.el('li', {}, line));
    if (!doc.why.length) why.appendChild(T.el('li', {class: 'muted'}, 'nothing to explain: fewer than two GPU targets have a winner'));
  }

  async function run(ev) {
    if (ev) ev.preventDefault();
    T.clearError();
    const targets = T.$('targets').value.split(',').map((s) => s.trim()).filter(Boolean);
    const body = {targets: targets};
    if (T.$('src-ir').checked) body.kernel = T.$('ir').value;
    else body.key_id = T.$('key').value.trim();
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

  let wired = false;
  T.start(function () {
    if (!wired) {
      wired = true;
      T.$('cmp-form').addEventListener('submit', run);
      T.$('key').addEventListener('input', () => (T.$('src-key').checked = true));
      T.$('ir').addEventListener('input', () => (T.$('src-ir').checked = true));
    }
    const key = T.query('key');
    const targets = T.query('targets');
    if (targets && /^[A-Za-z0-9_.:+,-]+$/.test(targets)) T.$('targets').value = targets;
    if (key && /^[0-9a-f]{64}$/.test(key)) {
      T.$('key').value = key;
      return run();
    }
    return null;
  });
})();
