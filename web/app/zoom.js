// @ts-check
/**
 * A zoomable view of one image over the IIIF Image API: it shows the whole
 * image scaled to the box, and on zoom or pan asks the server for just the
 * region in view at the size it is shown (`/iiif/3/{ref}/x,y,w,h/!W,H/0/default.jpg`),
 * so a large original is never sent whole. Buttons, the wheel, dragging and
 * the keyboard (+, -, 0, arrows) work.
 */
import { h } from './dom.js';
import { t } from './i18n.js';

/**
 * @param {string} infoUrl the image's info.json URL (`/iiif/3/REF/info.json`)
 * @param {string} label what the image shows, for its alternative text
 */
export async function zoomView(infoUrl, label) {
  const info = await (await fetch(infoUrl)).json();
  const base = infoUrl.replace(/\/info\.json$/, '');
  const W = info.width;
  const H = info.height;
  const img = /** @type {HTMLImageElement} */ (h('img', { alt: label, draggable: 'false' }));
  const box = h('div', { class: 'zoom', tabindex: 0, role: 'img', 'aria-label': label }, img);
  const size = () => ({ bw: box.clientWidth || 640, bh: box.clientHeight || 400 });
  // The view: `s` screen pixels per image pixel, and the image point at the
  // box's top left (x0, y0; negative where the image does not fill the box).
  let s = 1;
  let x0 = 0;
  let y0 = 0;
  let pending = 0;
  const fit = () => {
    const { bw, bh } = size();
    s = Math.min(bw / W, bh / H);
    x0 = (W - bw / s) / 2;
    y0 = (H - bh / s) / 2;
  };
  /** Keeps the image's centre reachable and the scale between fit and 16x fit. */
  const clamp = () => {
    const { bw, bh } = size();
    const least = Math.min(bw / W, bh / H);
    s = Math.max(least, Math.min(s, least * 16));
    const w = bw / s;
    const hh = bh / s;
    x0 = w >= W ? (W - w) / 2 : Math.max(0, Math.min(x0, W - w));
    y0 = hh >= H ? (H - hh) / 2 : Math.max(0, Math.min(y0, H - hh));
  };
  const draw = () => {
    const { bw, bh } = size();
    const rx = Math.max(0, Math.floor(x0));
    const ry = Math.max(0, Math.floor(y0));
    const rw = Math.max(1, Math.min(W, Math.ceil(x0 + bw / s)) - rx);
    const rh = Math.max(1, Math.min(H, Math.ceil(y0 + bh / s)) - ry);
    const tw = Math.max(1, Math.round(rw * s));
    const th = Math.max(1, Math.round(rh * s));
    // Larger than the region (a small image, or zoomed in far) needs the
    // IIIF upscaling prefix `^`; a request without it would be a 400.
    const up = tw > rw || th > rh ? '^' : '';
    clearTimeout(pending);
    pending = window.setTimeout(() => {
      img.src = `${base}/${rx},${ry},${rw},${rh}/${up}!${tw},${th}/0/default.jpg`;
      img.width = tw;
      img.height = th;
      img.style.left = `${Math.round((rx - x0) * s)}px`;
      img.style.top = `${Math.round((ry - y0) * s)}px`;
    }, 60);
  };
  /** @param {number} factor @param {number} [fx] @param {number} [fy] the fixed point, box fractions */
  const zoom = (factor, fx = 0.5, fy = 0.5) => {
    const { bw, bh } = size();
    const px = x0 + (fx * bw) / s;
    const py = y0 + (fy * bh) / s;
    s *= factor;
    x0 = px - (fx * bw) / s;
    y0 = py - (fy * bh) / s;
    clamp();
    draw();
  };
  /** @param {number} dx @param {number} dy screen pixels */
  const pan = (dx, dy) => {
    x0 += dx / s;
    y0 += dy / s;
    clamp();
    draw();
  };
  const reset = () => {
    fit();
    draw();
  };
  box.addEventListener('wheel', (e) => {
    e.preventDefault();
    const r = box.getBoundingClientRect();
    zoom(e.deltaY < 0 ? 1.25 : 0.8, (e.clientX - r.left) / r.width, (e.clientY - r.top) / r.height);
  });
  /** @type {{ px: number, py: number } | null} */
  let drag = null;
  box.addEventListener('pointerdown', (e) => {
    drag = { px: e.clientX, py: e.clientY };
    box.setPointerCapture(e.pointerId);
  });
  box.addEventListener('pointermove', (e) => {
    if (!drag) return;
    pan(drag.px - e.clientX, drag.py - e.clientY);
    drag = { px: e.clientX, py: e.clientY };
  });
  box.addEventListener('pointerup', () => (drag = null));
  box.addEventListener('keydown', (e) => {
    const keys = /** @type {Record<string, () => void>} */ ({
      '+': () => zoom(1.25),
      '-': () => zoom(0.8),
      0: reset,
      ArrowLeft: () => pan(-40, 0),
      ArrowRight: () => pan(40, 0),
      ArrowUp: () => pan(0, -40),
      ArrowDown: () => pan(0, 40),
    });
    if (keys[e.key]) {
      e.preventDefault();
      keys[e.key]();
    }
  });
  const controls = h(
    'div',
    { class: 'zoom-controls' },
    h('button', { type: 'button', onclick: () => zoom(1.5) }, t('zoomIn')),
    h('button', { type: 'button', onclick: () => zoom(1 / 1.5) }, t('zoomOut')),
    h('button', { type: 'button', onclick: reset }, t('zoomReset')),
  );
  requestAnimationFrame(reset);
  return h('div', null, controls, box);
}
