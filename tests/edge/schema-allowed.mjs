// @ts-check
/**
 * A rule for `graphql-inspector diff --rule` (run by scripts/schema-diff.sh):
 * the breaking changes that docs/schema-breaking-allowed.txt lists, each with
 * a reason, are accepted (reported with the dangerous ones, with their
 * reason); any other breaking change still fails the check, and its message
 * says the line that would accept it. A line without a reason, or one that no
 * change matches, is reported as a breaking change of its own: the list says
 * exactly what a release breaks. KARTEI_SCHEMA_ALLOWED names another list
 * (to try the check out).
 */
import { readFileSync } from 'node:fs';
import { CriticalityLevel } from '@graphql-inspector/core';

const file = process.env.KARTEI_SCHEMA_ALLOWED || 'docs/schema-breaking-allowed.txt';
const listed = process.env.KARTEI_SCHEMA_ALLOWED || new URL(`../../${file}`, import.meta.url).pathname;

/** A change's key in the list: its path (when it has one) and its type. */
const keyOf = (/** @type {{ path?: string, type: string }} */ c) => (c.path ? `${c.path} ${c.type}` : c.type);

/** A fault of the list itself, reported (and failing) like a breaking change. */
const fault = (/** @type {string} */ message) => ({
  type: 'SCHEMA_ALLOWLIST',
  message,
  criticality: { level: CriticalityLevel.Breaking },
});

/**
 * The list's entries (key -> reason) and its faulty lines. A key is the path
 * and the type of a change, as a failing check prints them; the reason
 * follows after two or more spaces.
 * @param {string} text
 */
export function parse(text) {
  /** @type {Map<string, string>} */
  const entries = new Map();
  const faults = [];
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const m = /^(\S+(?: \S+)?)\s{2,}(\S.*)$/.exec(line);
    if (m) entries.set(m[1], m[2]);
    else faults.push(fault(`${file}:${i + 1} "${line}" gives no reason (the key, two spaces, then why clients may break)`));
  });
  return { entries, faults };
}

/** @param {{ changes: any[] }} input */
export default function acceptListed({ changes }) {
  const { entries, faults } = parse(readFileSync(listed, 'utf8'));
  const used = new Set();
  const out = changes.map((c) => {
    if (c.criticality.level !== CriticalityLevel.Breaking) return c;
    const key = keyOf(c);
    const reason = entries.get(key);
    if (reason === undefined) return { ...c, message: `${c.message} (to accept it: "${key}  <reason>" in ${file})` };
    used.add(key);
    return { ...c, message: `${c.message} (accepted: ${reason})`, criticality: { ...c.criticality, level: CriticalityLevel.Dangerous } };
  });
  for (const key of entries.keys()) {
    if (!used.has(key)) faults.push(fault(`${file} accepts "${key}", a change the schema does not make: remove the line`));
  }
  return [...out, ...faults];
}
