// @ts-check
/** The UI's one DOM helper: builds elements without HTML strings (so no markup
 * from the server is ever parsed) and a few small shared pieces. */

import { errorLabel } from './i18n.js';

/**
 * `h('button', { class: 'x', onclick: fn, 'aria-label': 'y' }, 'text', child)`.
 * Attributes starting with `on` become listeners; `false`/`null` ones are left out.
 * @param {string} tag
 * @param {Record<string, any> | null} [attrs]
 * @param {...any} children strings, nodes, arrays of them, null
 * @returns {HTMLElement}
 */
export function h(tag, attrs = null, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      el.addEventListener(name.slice(2), value);
    } else if (name === 'value' && 'value' in el) {
      /** @type {any} */ (el).value = value;
    } else if (name === 'checked' || name === 'selected' || name === 'disabled') {
      /** @type {any} */ (el)[name] = Boolean(value);
      if (value) el.setAttribute(name, '');
    } else {
      el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

/** @param {Element} el @param {any[]} children */
function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

/** Replaces every child of `el`. @param {Element} el @param {...any} children */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/** Lower case without diacritics, and for each character of the result the
 * index it came from in `text`. @param {string} text */
export function fold(text) {
  let folded = '';
  /** @type {number[]} */
  const from = [];
  for (let i = 0; i < text.length; i++) {
    const base = text[i].normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase();
    for (const ch of base) {
      folded += ch;
      from.push(i);
    }
  }
  return { folded, from };
}

/** `label` with the first match of `query` (case and diacritics ignored) in <mark>.
 * @param {string} label @param {string} query @returns {any[]} */
export function highlight(label, query) {
  const q = fold(query.trim()).folded;
  if (!q) return [label];
  const { folded, from } = fold(label);
  const at = folded.indexOf(q);
  if (at < 0) return [label];
  const start = from[at];
  const end = from[at + q.length - 1] + 1;
  return [label.slice(0, start), h('mark', null, label.slice(start, end)), label.slice(end)];
}

/** A visually hidden text for screen readers. @param {string} text */
export function srOnly(text) {
  return h('span', { class: 'sr-only' }, text);
}

/** An error as the curator sees it: what happened and what to do, in the
 * UI's language where the code is known (i18n `err.CODE`), else the server's
 * message and code; never a stack.
 * @param {any} e */
export function errorText(e) {
  const known = e && e.code ? errorLabel(e.code) : null;
  if (known) return known;
  const code = e && e.code ? ` (${e.code})` : '';
  return `${e && e.message ? e.message : String(e)}${code}`;
}
