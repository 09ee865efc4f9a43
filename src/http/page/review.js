'use strict';
// The review panel: the events as they happen (pushed by the daemon as Server-Sent Events, no
// poll), newest first in local time, read as sentences, filtered by camera, label and zone, an
// ended track's best picture beside it (with snapshot.events); an ended event's clip plays in the panel's player with the event named; below, the chosen camera's
// clips from the clip index, a page at a time, each deletable with the token. A clip the server no
// longer has (retention removed it, or someone deleted it) says so instead of offering ▶.
(() => {
  const KEPT = 200;        // events the page keeps, as the daemon's ring
  const CLIPS_PAGE = 10;   // clips per page of the index
  const events = [];       // { camera, event }, oldest first
  const clipState = new Map();   // clip URL → 'ok' | 'gone' | 'recording'
  const $ = (id) => document.getElementById(id);
  const player = $('player');
  const filter = { camera: $('filter-camera'), label: $('filter-label'), zone: $('filter-zone') };

  const when = (ts) => {
    const date = new Date(ts);
    return date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
  };
  const joined = (list) => list.join(', ');
  const answers = (event) => Object.entries(event.attributes || {}).map(([, answer]) => ` ${answer.label}`).join('');
  const named = ({ camera, event }) => `${camera}: ${event.label}${answers(event)} #${event.track_id}`;

  // What an event says happened, as a sentence: the zones an update entered or left are found from
  // the track's previous event here.
  function happened({ camera, event }, previous) {
    const zones = event.zones || [];
    if (event.type === 'start') return zones.length ? `appeared in ${joined(zones)}` : 'appeared';
    if (event.type === 'end') return 'left';
    const changed = event.changed || [];
    const parts = [];
    if (event.crossed) parts.push(`crossed ${event.crossed.line} ${event.crossed.direction}`);
    if (changed.includes('zones')) {
      const before = previous ? previous.event.zones || [] : [];
      const entered = zones.filter((zone) => !before.includes(zone));
      const left = before.filter((zone) => !zones.includes(zone));
      if (entered.length) parts.push(`entered ${joined(entered)}`);
      if (left.length) parts.push(`left ${joined(left)}`);
      if (!entered.length && !left.length) parts.push(zones.length ? `in ${joined(zones)}` : 'out of every zone');
    }
    if (changed.includes('stationary')) parts.push(event.stationary ? 'stopped' : 'moves again');
    if (changed.includes('score')) parts.push(`seen better (${event.score})`);
    return parts.length ? parts.join(', ') : 'seen';
  }

  function previousOf(index) {
    const { camera, event } = events[index];
    for (let i = index - 1; i >= 0; i -= 1) {
      if (events[i].camera === camera && events[i].event.track_id === event.track_id) return events[i];
    }
    return null;
  }

  function shown(item) {
    const { camera, event } = item;
    return (!filter.camera.value || filter.camera.value === camera)
      && (!filter.label.value || filter.label.value === event.label)
      && (!filter.zone.value || (event.zones || []).includes(filter.zone.value));
  }

  function offer(select, value) {
    if (!value || [...select.options].some((option) => option.value === value)) return;
    select.append(new Option(value, value));
  }

  // Asks the server whether a clip is still there (HEAD: nothing is read), once it is complete.
  async function check(url) {
    if (clipState.has(url)) return;
    clipState.set(url, 'checking');
    try {
      const status = (await fetch(url, { method: 'HEAD' })).status;
      if (status === 404) {
        clipState.set(url, 'gone');
        render();
        renderClips();
      } else if (status === 409) {
        clipState.delete(url); // still recording: asked again at a later render
      } else {
        clipState.set(url, 'ok');
      }
    } catch (e) { clipState.delete(url); }
  }

  function clipControl(item) {
    const { clip } = item.event;
    if (clipState.get(clip.url) === 'gone') {
      const note = document.createElement('span');
      note.className = 'gone';
      note.textContent = 'clip deleted';
      return note;
    }
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'play';
    button.dataset.clip = clip.url;
    button.textContent = '▶ clip';
    button.addEventListener('click', () => play(clip.url, `${named(item)} ${happened(item, null)} at ${when(item.event.last_ts)}`, 0));
    check(clip.url);
    return button;
  }

  function render() {
    const list = $('events');
    const rows = [];
    for (let i = events.length - 1; i >= 0; i -= 1) {
      const item = events[i];
      if (!shown(item)) continue;
      const li = document.createElement('li');
      li.dataset.camera = item.camera;
      li.dataset.type = item.event.type;
      const time = document.createElement('time');
      time.dateTime = item.event.last_ts;
      time.textContent = when(item.event.last_ts);
      if (item.picture) {
        const thumb = document.createElement('img');
        thumb.className = 'thumb';
        thumb.alt = `best picture of ${named(item)}`;
        thumb.src = item.picture;
        li.append(thumb);
      }
      li.append(time, ` ${named(item)} ${happened(item, previousOf(i))} `);
      if (item.event.type === 'end' && item.event.clip) li.append(clipControl(item));
      rows.push(li);
    }
    list.replaceChildren(...rows);
  }

  const same = (a, b) => a.camera === b.camera && a.event.run === b.event.run && a.event.seq === b.event.seq
    && a.event.track_id === b.event.track_id && a.event.type === b.event.type && a.event.last_ts === b.event.last_ts;

  function add(item) {
    if (events.some((other) => same(other, item))) return;
    events.push(item);
    if (events.length > KEPT) events.shift();
    offer(filter.camera, item.camera);
    offer(filter.label, item.event.label);
    (item.event.zones || []).forEach((zone) => offer(filter.zone, zone));
  }

  // The events the daemon kept so far: at start, and after the stream missed some.
  async function refill() {
    try {
      const response = await fetch('/api/events?limit=' + KEPT);
      if (!response.ok) return;
      events.length = 0;
      (await response.json()).events.forEach(add);
      render();
    } catch (e) { /* the status badge says the daemon is unreachable */ }
  }

  // A clip is complete post_s after its event ended (409 until then): the player tries again
  // every 3 s, a minute at most. A clip gone from the server says so at once. A clip served whole
  // that still does not play is one this browser cannot decode (H.265 in most browsers): the page
  // offers it for download instead.
  function play(url, title, tries) {
    $('unplayable').hidden = true;
    const playing = $('playing');
    playing.textContent = title;
    playing.hidden = false;
    player.dataset.tries = String(tries);
    player.dataset.title = title;
    player.src = url;
    showClipBoxes(url);
    player.hidden = false;
    player.title = '';
    player.play().catch(() => {});
  }

  player.addEventListener('error', async () => {
    const url = player.getAttribute('src');
    const tries = Number(player.dataset.tries || 0);
    let status = 0;
    try { status = (await fetch(url, { method: 'HEAD' })).status; } catch (e) { status = 0; }
    if (player.getAttribute('src') !== url) return;
    if (status === 404) {
      clipState.set(url, 'gone');
      player.removeAttribute('src');
      player.hidden = true;
      $('playing').textContent = `${player.dataset.title}: the clip was deleted (retention, or by hand)`;
      render();
      renderClips();
      return;
    }
    if (status === 200) {
      player.pause();
      player.hidden = true;
      const link = $('download');
      link.href = url;
      link.download = url.split('/').pop();
      $('unplayable').hidden = false;
      return;
    }
    player.title = 'not ready yet (still recording?)';
    if (tries < 20) {
      setTimeout(() => { if (player.getAttribute('src') === url) play(url, player.dataset.title, tries + 1); }, 3000);
    }
  });

  // The chosen camera's clips (the first camera's while every camera is shown), a page at a time.
  let clipsCamera = null;
  let clips = [];
  async function loadClips(more) {
    const camera = filter.camera.value || (filter.camera.options[1] && filter.camera.options[1].value);
    if (!camera) return;
    if (camera !== clipsCamera || !more) { clips = []; clipsCamera = camera; }
    const oldest = clips.length ? `&before=${Date.parse(clips[clips.length - 1].start)}` : '';
    try {
      const response = await fetch(`/api/cameras/${encodeURIComponent(camera)}/clips?limit=${CLIPS_PAGE}${oldest}`);
      if (!response.ok) { $('clips').replaceChildren(); $('older-clips').hidden = true; return; }
      const page = (await response.json()).clips;
      clips.push(...page);
      $('older-clips').hidden = page.length < CLIPS_PAGE;
      renderClips();
    } catch (e) { /* the status badge says so */ }
  }

  function labelsOf(clip) {
    const labels = new Set(events.filter((item) => item.camera === clip.camera && clip.tracks.includes(item.event.track_id))
      .map((item) => item.event.label));
    return [...labels].join(', ');
  }

  function renderClips() {
    $('clips').replaceChildren(...clips.filter((clip) => clipState.get(clip.url) !== 'gone').map((clip) => {
      const li = document.createElement('li');
      li.dataset.clip = clip.url;
      const seconds = Math.round((Date.parse(clip.end) - Date.parse(clip.start)) / 1000);
      const labels = labelsOf(clip);
      li.textContent = `${when(clip.start)} ${clip.camera}${labels ? ` ${labels}` : ''} · ${seconds} s · #${clip.tracks.join(' #')} `;
      if (clip.recording) {
        li.append('(recording)');
        return li;
      }
      const playButton = document.createElement('button');
      playButton.type = 'button';
      playButton.textContent = '▶';
      playButton.addEventListener('click', () => play(clip.url, `${clip.camera} clip of ${when(clip.start)}`, 0));
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.className = 'delete-clip';
      remove.textContent = 'delete';
      remove.addEventListener('click', () => removeClip(clip));
      li.append(playButton, ' ', remove);
      return li;
    }));
  }

  async function removeClip(clip) {
    if (!window.confirm(`Delete the ${clip.camera} clip of ${when(clip.start)}? Its file is removed at once.`)) return;
    const token = $('token').value;
    const headers = token ? { Authorization: `Bearer ${token}` } : {};
    const response = await fetch(clip.url, { method: 'DELETE', headers });
    if (response.ok || response.status === 404) {
      clipState.set(clip.url, 'gone');
      clips = clips.filter((other) => other !== clip);
      renderClips();
      render();
      return;
    }
    const body = await response.json().catch(() => ({}));
    window.alert(`not deleted: ${body.error || response.status}${response.status === 401 ? ' (type the token above)' : ''}`);
  }

  for (const select of Object.values(filter)) select.addEventListener('change', render);
  filter.camera.addEventListener('change', () => loadClips(false));
  $('older-clips').addEventListener('click', () => loadClips(true));

  // The stream: each event as it happens. At every (re)connection, and once the stream says this
  // page fell behind (it then ends, and the browser reconnects), the page reads what it missed.
  // The stream is subscribed before the page reads what the daemon kept, so nothing falls between:
  // what comes both ways is shown once.
  const stream = new EventSource('/api/events/stream');
  stream.addEventListener('open', refill);
  stream.addEventListener('event', (message) => {
    const item = JSON.parse(message.data);
    add(item);
    render();
    if (item.event.type === 'end' && item.event.clip && item.camera === clipsCamera) loadClips(false);
  });
  stream.addEventListener('behind', refill);

  fetch('/api/status').then((response) => response.json()).then((status) => {
    status.cameras.forEach((camera) => offer(filter.camera, camera));
    loadClips(false);
  }).catch(() => {});
})();
