'use strict';
// jetson-detectd's page: live video where the camera's stream plays here (live.js), else live
// pictures (JPEG polling, one request after the other, none while the tab is hidden), figures,
// and an editor of zones, lines and motion masks that saves through the API (a save sends only
// what it changes: zones and lines, or masks). The motion debug view is motion.js's, the events
// and their clips review.js's.
const SVG = 'http://www.w3.org/2000/svg';
const cameras = new Map();
const tokenInput = document.getElementById('token');
tokenInput.value = sessionStorage.getItem('token') || '';
tokenInput.addEventListener('change', () => sessionStorage.setItem('token', tokenInput.value));

const path = (name, rest) => `/api/cameras/${encodeURIComponent(name)}/${rest}`;
const json = async (url) => { const r = await fetch(url); if (!r.ok) throw new Error(r.status); return r.json(); };

function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
const points = (list) => list.map((p) => p.join(',')).join(' ');

function draw(cam) {
  const overlay = cam.overlay;
  overlay.replaceChildren();
  cam.scene.masks.forEach((mask, i) => {
    overlay.append(svg('polygon', { class: 'mask', 'data-index': i, points: points(mask) }));
  });
  for (const zone of cam.scene.zones) {
    overlay.append(svg('polygon', { class: 'zone', 'data-name': zone.name, points: points(zone.polygon) }));
    overlay.append(svg('text', { x: zone.polygon[0][0], y: zone.polygon[0][1] }, zone.name));
  }
  for (const line of cam.scene.lines) {
    const [a, b] = line.points;
    overlay.append(svg('line', { class: 'line', 'data-name': line.name, x1: a[0], y1: a[1], x2: b[0], y2: b[1] }));
    overlay.append(svg('text', { x: a[0], y: a[1] }, line.name));
  }
  if (cam.draft && cam.draft.points.length) {
    const tag = cam.draft.kind === 'line' ? 'polyline' : 'polygon';
    overlay.append(svg(tag, { class: 'draft', points: points(cam.draft.points) }));
  }
  const list = cam.card.querySelector('.scene');
  list.replaceChildren();
  for (const [kind, items] of [['zone', cam.scene.zones], ['line', cam.scene.lines]]) {
    for (const item of items) {
      const li = document.createElement('li');
      li.textContent = `${kind} ${item.name}` + (item.labels && item.labels.length ? ` (${item.labels.join(', ')})` : '');
      const remove = document.createElement('button');
      remove.textContent = 'delete';
      remove.addEventListener('click', () => {
        if (!window.confirm(`Delete ${kind} ${item.name} of camera ${cam.name}? It is removed from the zones file at once.`)) return;
        const key = kind === 'zone' ? 'zones' : 'lines';
        save(cam, { [key]: cam.scene[key].filter((other) => other !== item) });
      });
      li.append(remove);
      list.append(li);
    }
  }
  cam.scene.masks.forEach((mask, i) => {
    const li = document.createElement('li');
    li.textContent = `mask ${i + 1} (motion)`;
    const remove = document.createElement('button');
    remove.textContent = 'delete';
    remove.addEventListener('click', () => {
      if (!window.confirm(`Delete mask ${i + 1} of camera ${cam.name}? Motion there counts again at once.`)) return;
      save(cam, { masks: cam.scene.masks.filter((other) => other !== mask) });
    });
    li.append(remove);
    list.append(li);
  });
}

// Saves what `change` names ({zones, lines} or {masks}); the rest stays as the daemon has it.
async function save(cam, change) {
  const message = cam.card.querySelector('.message');
  const headers = { 'Content-Type': 'application/json' };
  if (tokenInput.value) headers.Authorization = `Bearer ${tokenInput.value}`;
  const response = await fetch(path(cam.name, 'zones'), { method: 'PUT', headers, body: JSON.stringify(change) });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    message.textContent = `not saved: ${body.field ? body.field + ': ' : ''}${body.error || response.status}`;
    return false;
  }
  cam.scene = body;
  cam.draft = null;
  message.textContent = 'saved';
  draw(cam);
  return true;
}

function startDraft(cam, kind) {
  cam.draft = { kind, points: [] };
  cam.card.querySelector('.finish').disabled = kind === 'line';
  cam.card.querySelector('.message').textContent = kind === 'line' ? 'click both ends' : 'click the corners, then Finish';
  draw(cam);
}

function finishDraft(cam) {
  const draft = cam.draft;
  if (draft && draft.kind === 'mask') { save(cam, { masks: [...cam.scene.masks, draft.points] }); return; }
  const name = cam.card.querySelector('input.name').value.trim();
  const labels = cam.card.querySelector('input.labels').value.split(',').map((s) => s.trim()).filter(Boolean);
  if (!draft || !name) { cam.card.querySelector('.message').textContent = 'draw a shape and name it'; return; }
  const change = { zones: [...cam.scene.zones], lines: [...cam.scene.lines] };
  if (draft.kind === 'zone') change.zones.push({ name, polygon: draft.points, labels });
  else change.lines.push({ name, points: draft.points });
  save(cam, change);
}

function addCamera(name) {
  const card = document.getElementById('camera-template').content.firstElementChild.cloneNode(true);
  card.dataset.camera = name;
  card.querySelector('.camera-name').textContent = name;
  const cam = { name, card, overlay: card.querySelector('.overlay'), img: card.querySelector('.live'),
    scene: { zones: [], lines: [], masks: [] }, draft: null };
  cameras.set(name, cam);
  document.getElementById('cameras').append(card);
  cam.overlay.addEventListener('click', (event) => {
    if (!cam.draft) return;
    const box = cam.overlay.getBoundingClientRect();
    const round = (v) => Math.round(Math.min(1, Math.max(0, v)) * 1000) / 1000;
    cam.draft.points.push([round((event.clientX - box.left) / box.width), round((event.clientY - box.top) / box.height)]);
    if (cam.draft.kind === 'line' && cam.draft.points.length === 2) cam.card.querySelector('.finish').disabled = false;
    draw(cam);
  });
  card.querySelector('.draw-zone').addEventListener('click', () => startDraft(cam, 'zone'));
  card.querySelector('.draw-line').addEventListener('click', () => startDraft(cam, 'line'));
  card.querySelector('.draw-mask').addEventListener('click', () => startDraft(cam, 'mask'));
  card.querySelector('.finish').addEventListener('click', () => finishDraft(cam));
  card.querySelector('.save').addEventListener('click', () => (cam.draft ? finishDraft(cam)
    : save(cam, { zones: cam.scene.zones, lines: cam.scene.lines })));
  json(path(name, 'zones')).then((scene) => { cam.scene = scene; draw(cam); }).catch(() => {});
  // At most two pictures a second per camera: each one costs the daemon a JPEG encode.
  let asked = 0;
  const load = () => {
    if (document.hidden || cam.liveActive) { setTimeout(load, 1000); return; }
    asked = Date.now();
    cam.img.src = `${path(name, 'latest.jpg')}?zones=false&t=${asked}`;
  };
  cam.img.addEventListener('load', () => {
    cam.img.dataset.frames = Number(cam.img.dataset.frames || 0) + 1;
    setTimeout(load, Math.max(0, 500 - (Date.now() - asked)));
  });
  cam.img.addEventListener('error', () => setTimeout(load, 1000));
  load();
  startLive(cam);
  startMotionView(cam);
}

function ms(latency, stage) { return latency && latency[stage] ? `${latency[stage].p50} ms` : '–'; }

async function refreshStatus() {
  try {
    const status = await json('/api/status');
    const health = document.getElementById('health');
    health.textContent = status.healthy ? 'healthy' : `stalled: ${status.health_reason}`;
    health.className = `badge ${status.healthy ? 'ok' : 'bad'}`;
    const t = status.telemetry;
    const engine = t.engine || {};
    // The model file each camera runs: `[model]`'s is the engine's own, a named detector's is in
    // `engine.models`. The header names every model that runs, not only `[model]`.
    const modelOf = (table) => (table === 'model' ? engine.model
      : ((engine.models || {})[String(table).replace(/^models\./, '')] || {}).model) || '';
    const cameraModels = status.camera_models || {};
    const running = [...new Set(Object.values(cameraModels).map(modelOf))].filter(Boolean).join(', ');
    const outlets = t.outlets || {};
    const connections = Object.entries(outlets)
      .filter(([, figures]) => typeof figures.connected === 'boolean')
      .map(([name, figures]) => ` · ${name} ${figures.connected ? 'connected' : 'away'}`)
      .join('');
    const rec = outlets.record;
    const record = rec ? ` · clips ${rec.clips}${rec.paused ? ` · recording paused: ${rec.paused_reason}` : ''}` : '';
    const build = engine.build ? engine.build : null;
    const building = build && build.status !== 'ready'
      ? ` · engine ${build.status}${build.percent != null ? ` ${Math.round(build.percent)}%` : ''} (serving: ${build.serving})`
      : '';
    document.getElementById('summary').textContent =
      `${engine.kind || ''} · ${running || engine.model || ''}${building}${connections}${record}`;
    for (const [name, c] of Object.entries(t.cameras || {})) {
      const cam = cameras.get(name);
      if (!cam) continue;
      const state = cam.card.querySelector('.state');
      state.textContent = c.state ? `${c.state} since ${c.since}` : '';
      state.className = `state badge ${c.state || ''}`;
      const model = modelOf(cameraModels[name] || 'model');
      cam.card.querySelector('.figures').textContent =
        `${model ? `${model.split('/').pop()} · ` : ''}${c.fps} fps · ${c.frames} frames · ${c.dropped} dropped · ` +
        `latency p50 infer ${ms(c.latency_ms, 'infer')}, total ${ms(c.latency_ms, 'total')}`;
    }
  } catch (e) {
    document.getElementById('health').textContent = 'daemon unreachable';
  }
}

json('/api/status').then((status) => {
  status.cameras.forEach(addCamera);
  refreshStatus();
  setInterval(refreshStatus, 2000);
});
