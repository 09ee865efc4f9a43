'use strict';
// jetson-detectd's motion debug view: while a camera card's "motion" box is ticked, the regions
// its motion gate sees (live.motion, one JSON line per judged frame) are drawn over the picture or
// the video, dashed, apart from the detections' boxes; the card says whether the frame was kept
// from inference and when the light changed. Unticked, the stream is closed and the gate copies
// nothing out. Over live video, a frame's motion is drawn as late as the player plays behind the
// newest picture (live.js keeps that delay in the video's data-delay). app.js calls
// startMotionView(cam) for each camera card.

const MOTION_RETRY_MS = 1000;

function startMotionView(cam) {
  const toggle = cam.card.querySelector('input.show-motion');
  const layer = cam.card.querySelector('svg.motion');
  const status = cam.card.querySelector('.motion-state');
  const video = cam.card.querySelector('.live-video');
  let controller = null;

  const draw = (line) => {
    const SVGNS = 'http://www.w3.org/2000/svg';
    layer.replaceChildren(...line.regions.map(([x1, y1, x2, y2]) => {
      const rect = document.createElementNS(SVGNS, 'rect');
      rect.setAttribute('class', 'region');
      for (const [k, v] of Object.entries({ x: x1, y: y1, width: x2 - x1, height: y2 - y1 })) rect.setAttribute(k, v);
      return rect;
    }));
    layer.dataset.regions = String(line.regions.length);
    layer.dataset.frames = String(Number(layer.dataset.frames || 0) + 1);
    const what = line.light_change ? 'light changed' : line.state;
    status.textContent = `motion: ${what}${line.gated ? ' · not detected (gated)' : ''}`;
  };

  // The player plays this far behind the newest picture when the video shows (else none).
  const lag = () => (cam.liveActive ? Number(video.dataset.delay || 0) * 1000 : 0);

  async function follow(signal) {
    let response;
    try { response = await fetch(livePath(cam.name, 'live.motion'), { signal }); } catch (e) {
      if (!signal.aborted) setTimeout(() => follow(signal), MOTION_RETRY_MS);
      return;
    }
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      status.textContent = `motion: ${body.error || response.status}`;
      if (response.status === 503 && !signal.aborted) setTimeout(() => follow(signal), MOTION_RETRY_MS);
      return;
    }
    try {
      await readJsonLines(response, (line) => {
        const wait = lag();
        if (wait > 0) setTimeout(() => { if (!signal.aborted) draw(line); }, wait); else draw(line);
      });
    } catch (e) { /* aborted, or the connection broke */ }
    if (!signal.aborted) setTimeout(() => follow(signal), MOTION_RETRY_MS);
  }

  toggle.addEventListener('change', () => {
    if (controller) controller.abort();
    controller = null;
    layer.replaceChildren();
    layer.toggleAttribute('hidden', !toggle.checked);
    status.textContent = '';
    if (toggle.checked) {
      controller = new AbortController();
      follow(controller.signal);
    }
  });
}
