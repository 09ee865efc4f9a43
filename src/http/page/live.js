'use strict';
// jetson-detectd's live video: a camera's own stream (live.mp4, fragmented MP4 read with fetch
// into a Media Source, no pixel re-encoded) and its boxes (live.boxes, one JSON line per processed
// frame with the presentation time of its picture), drawn over the video at the frame shown.
// A camera whose stream this browser cannot play (raw frames, H.265 without a decoder) keeps the
// JPEG picture. app.js calls startLive(cam) for each camera card, and review.js showClipBoxes(url)
// for the clip its player plays.

const LIVE_EDGE_S = 1.5;      // further behind its place than this, the player jumps ahead
const MIN_DELAY_S = 0.3;      // the player stays this far behind the newest picture at least,
const MAX_DELAY_S = 3;        // and as far as the boxes come behind it (detection's lag), at most this
const STEP_BACK_S = 0.25;     // nearer to the newest picture than the delay by this, it steps back
const KEEP_S = 10;            // video kept in the buffer behind the picture shown
const KEEP_BOXES = 600;       // box lines kept to find the one of the frame shown

const livePath = (name, rest) => `/api/cameras/${encodeURIComponent(name)}/${rest}`;

// Reads a streamed response chunk by chunk until it ends or `stop` aborts it.
async function readChunks(response, onChunk) {
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    onChunk(value);
  }
}

// Reads a streamed response of JSON lines (live.boxes, live.motion), handing each to `onLine`.
async function readJsonLines(response, onLine) {
  const decoder = new TextDecoder();
  let rest = '';
  await readChunks(response, (chunk) => {
    rest += decoder.decode(chunk, { stream: true });
    const parts = rest.split('\n');
    rest = parts.pop();
    for (const part of parts) if (part) onLine(JSON.parse(part));
  });
}

function startLive(cam) {
  if (!window.MediaSource) return;
  const video = cam.card.querySelector('.live-video');
  const layer = cam.card.querySelector('.boxes');
  const lines = [];
  const retry = 1000;
  // The newest picture's time, and how far behind it the player stays so that a picture's boxes
  // have come when it is shown.
  let newest = 0;
  let delay = MIN_DELAY_S;

  const again = () => setTimeout(play, retry);

  async function play() {
    let response;
    try { response = await fetch(livePath(cam.name, 'live.mp4')); } catch (e) { again(); return; }
    // A camera without a compressed stream (409), or live video not served (404): the JPEG stays.
    if (response.status === 404 || response.status === 409) return;
    if (!response.ok) { again(); return; }
    const type = response.headers.get('content-type');
    if (!MediaSource.isTypeSupported(type)) { video.dataset.unplayable = type; return; }
    const source = new MediaSource();
    video.src = URL.createObjectURL(source);
    await new Promise((resolve) => source.addEventListener('sourceopen', resolve, { once: true }));
    const buffer = source.addSourceBuffer(type);
    const queue = [];
    const pump = () => {
      if (buffer.updating || source.readyState !== 'open') return;
      const ranges = buffer.buffered;
      if (ranges.length && video.currentTime - ranges.start(0) > 2 * KEEP_S) {
        buffer.remove(ranges.start(0), video.currentTime - KEEP_S);
        return;
      }
      if (queue.length) buffer.appendBuffer(queue.shift());
    };
    buffer.addEventListener('updateend', () => {
      const ranges = buffer.buffered;
      if (ranges.length) {
        newest = ranges.end(ranges.length - 1);
        // The first picture is far from 0 on the stream's timeline; later, stay `delay` behind:
        // jump ahead when far behind, step back when the boxes come later than the picture.
        const behind = newest - video.currentTime;
        if (video.currentTime < ranges.start(0) || behind > delay + LIVE_EDGE_S || behind < delay - STEP_BACK_S) {
          video.currentTime = Math.max(ranges.start(ranges.length - 1), newest - delay);
        }
        video.dataset.delay = delay.toFixed(2);
        if (!cam.liveActive && video.readyState >= 2) showVideo(true);
      }
      pump();
    });
    video.play().catch(() => {});
    try {
      await readChunks(response, (chunk) => { queue.push(chunk); pump(); });
    } catch (e) { /* the connection broke: start again */ }
    showVideo(false);
    again();
  }

  function showVideo(on) {
    cam.liveActive = on;
    video.hidden = !on;
    cam.img.style.display = on ? 'none' : '';
    // An SVG element has no `hidden` property (and the browser's own [hidden] rule is for HTML
    // elements): the attribute, with style.css's .boxes[hidden] rule, hides it.
    layer.toggleAttribute('hidden', !on);
  }

  async function follow() {
    let response;
    try { response = await fetch(livePath(cam.name, 'live.boxes')); } catch (e) { setTimeout(follow, retry); return; }
    if (response.status === 404 || response.status === 409) return;
    if (!response.ok) { setTimeout(follow, retry); return; }
    try {
      await readJsonLines(response, (line) => {
        lines.push(line);
        const lag = newest - line.t;
        if (lag > 0) delay = Math.min(MAX_DELAY_S, Math.max(MIN_DELAY_S, lag + 0.15, delay * 0.99));
        if (lines.length > KEEP_BOXES) lines.splice(0, lines.length - KEEP_BOXES);
      });
    } catch (e) { /* start again */ }
    setTimeout(follow, retry);
  }

  // The boxes of the picture shown: the newest line at or before its presentation time.
  function drawFrame(mediaTime) {
    let shown = null;
    for (let i = lines.length - 1; i >= 0; i -= 1) {
      if (lines[i].t <= mediaTime + 0.001) { shown = lines[i]; break; }
    }
    drawBoxes(layer, shown ? shown.boxes : []);
    layer.dataset.mediaTime = String(mediaTime);
    layer.dataset.t = shown ? String(shown.t) : '';
  }

  const onFrame = (now, metadata) => {
    drawFrame(metadata.mediaTime);
    video.requestVideoFrameCallback(onFrame);
  };
  if (video.requestVideoFrameCallback) video.requestVideoFrameCallback(onFrame);
  else video.addEventListener('timeupdate', () => drawFrame(video.currentTime));

  play();
  follow();
}

// Draws `boxes` ({label, score, track, zones, box: [x1, y1, x2, y2] as fractions}) into the SVG
// `layer`, each captioned with its label, track, score and the zones its track is in.
function drawBoxes(layer, boxes) {
  const SVGNS = 'http://www.w3.org/2000/svg';
  layer.replaceChildren(...boxes.flatMap((b) => {
    const [x1, y1, x2, y2] = b.box;
    const rect = document.createElementNS(SVGNS, 'rect');
    rect.setAttribute('class', 'box');
    rect.setAttribute('data-label', b.label);
    for (const [k, v] of Object.entries({ x: x1, y: y1, width: x2 - x1, height: y2 - y1 })) rect.setAttribute(k, v);
    const text = document.createElementNS(SVGNS, 'text');
    text.setAttribute('x', x1);
    text.setAttribute('y', Math.max(0.03, y1));
    const zones = b.zones && b.zones.length ? ` · ${b.zones.join(', ')}` : '';
    text.textContent = `${b.label}${b.track !== undefined ? ` #${b.track}` : ''} ${Math.round(b.score * 100)}%${zones}`;
    return [rect, text];
  }));
}

// The boxes of a clip's metadata track ({t, d, boxes} on the clip's timeline, from
// clips/<file>/boxes), drawn over review.js's clip player at the frame it shows.
const clipBoxes = { url: null, samples: [] };

function showClipBoxes(url) {
  const player = document.getElementById('player');
  const layer = document.getElementById('player-boxes');
  if (!player || !layer) return;
  clipBoxes.url = url;
  clipBoxes.samples = [];
  layer.replaceChildren();
  fetch(`${url}/boxes`)
    .then((r) => (r.ok ? r.json() : { samples: [] }))
    .then((answer) => { if (clipBoxes.url === url) clipBoxes.samples = answer.samples; })
    .catch(() => {});
  if (player.dataset.boxesDrawn) return;
  player.dataset.boxesDrawn = 'yes';
  const draw = (mediaTime) => {
    const shown = clipBoxes.samples.find((s) => s.t <= mediaTime + 0.001 && mediaTime < s.t + s.d);
    drawBoxes(layer, shown ? shown.boxes : []);
    layer.dataset.mediaTime = String(mediaTime);
    layer.dataset.t = shown ? String(shown.t) : '';
  };
  const onFrame = (now, metadata) => { draw(metadata.mediaTime); player.requestVideoFrameCallback(onFrame); };
  if (player.requestVideoFrameCallback) player.requestVideoFrameCallback(onFrame);
  else player.addEventListener('timeupdate', () => draw(player.currentTime));
}
