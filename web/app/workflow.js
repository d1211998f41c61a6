// @ts-check
/**
 * The assignment workflow as DESIGN.md gives it (the server enforces it; the
 * UI only offers what it would allow), and the ways the UI changes
 * statuses: `transitionAssignments`, one call per current status, and
 * `undoTransitions`, which takes the caller's own latest change back.
 */
import { gql } from './api.js';

/** Allowed moves and the roles that may make them (admin may do all). */
const RULES = {
  'AUTOSUGGESTED>ACCEPTED': ['editor'],
  'AUTOSUGGESTED>REJECTED': ['editor'],
  'SUGGESTED>ACCEPTED': ['editor'],
  'SUGGESTED>REJECTED': ['editor'],
  'ACCEPTED>REJECTED': ['editor'],
  'PUBLISHED>DELETESUGGESTED': ['contributor', 'archive', 'editor'],
  'DELETESUGGESTED>DELETED': ['editor'],
  'DELETESUGGESTED>PUBLISHED': ['editor'],
};

/** The actions a row can offer: label key and target status. */
export const ACTIONS = [
  { key: 'accept', to: 'ACCEPTED', shortcut: 'a' },
  { key: 'reject', to: 'REJECTED', shortcut: 'r' },
  { key: 'proposeDeletion', to: 'DELETESUGGESTED', shortcut: 'd' },
  { key: 'delete', to: 'DELETED', shortcut: '' },
  { key: 'keep', to: 'PUBLISHED', shortcut: '' },
];

/**
 * Whether a caller who `can` the roles may move `from` -> `to`.
 * @param {string} from @param {string} to @param {(role: string) => boolean} can
 */
export function allowed(from, to, can) {
  const roles = /** @type {Record<string, string[]>} */ (RULES)[`${from}>${to}`];
  return !!roles && roles.some((r) => can(r));
}

/** @typedef {{ portalId: string, ddbId: string, keywordId: string, creator: string }} Key */

/** @param {Key} k */
export function keyOf(k) {
  return [k.portalId, k.ddbId, k.keywordId, k.creator].join('\u001f');
}

export const NODE = `portalId ddbId keywordId creator childCategoryId status confidence createdAt modifiedAt assignmentType
  keyword { id label } childCategory { id label } object { title institution url }`;

/**
 * Moves every row in `rows` to `to`: one `transitionAssignments` call per
 * current status, all at once. Resolves with one result per row key.
 * @param {{ status: string, portalId: string, ddbId: string, keywordId: string, creator: string }[]} rows
 * @param {string} to
 * @returns {Promise<Map<string, { applied: boolean, assignment: any, error: { code: string, message: string, currentStatus: string | null } | null }>>}
 */
export async function transition(rows, to) {
  /** @type {Map<string, Key[]>} */
  const byStatus = new Map();
  for (const r of rows) {
    const key = { portalId: r.portalId, ddbId: r.ddbId, keywordId: r.keywordId, creator: r.creator };
    byStatus.set(r.status, [...(byStatus.get(r.status) || []), key]);
  }
  const results = new Map();
  await Promise.all(
    [...byStatus].map(async ([expected, keys]) => {
      const data = await gql(
        `mutation Move($expected: AssignmentStatus!, $to: AssignmentStatus!, $keys: [AssignmentKeyInput!]!) {
          transitionAssignments(expected: $expected, to: $to, keys: $keys) {
            applied
            key { portalId ddbId keywordId creator }
            assignment { ${NODE} }
            error { code message currentStatus }
          }
        }`,
        { expected, to, keys },
      );
      for (const r of data.transitionAssignments) results.set(keyOf(r.key), r);
    }),
  );
  return results;
}

/** How long after an action the server lets its maker undo it. */
export const UNDO_MS = 10 * 60 * 1000;

/**
 * Takes back the caller's latest change of every row in `rows`, each now
 * `expected` as that change left it (`undoTransitions`). Resolves with one
 * result per row key, as `transition` does.
 * @param {{ portalId: string, ddbId: string, keywordId: string, creator: string }[]} rows
 * @param {string} expected
 * @returns {Promise<Map<string, { applied: boolean, assignment: any, error: { code: string, message: string, currentStatus: string | null } | null }>>}
 */
export async function undoChanges(rows, expected) {
  const keys = rows.map((r) => ({ portalId: r.portalId, ddbId: r.ddbId, keywordId: r.keywordId, creator: r.creator }));
  const data = await gql(
    `mutation Undo($expected: AssignmentStatus!, $keys: [AssignmentKeyInput!]!) {
      undoTransitions(expected: $expected, keys: $keys) {
        applied
        key { portalId ddbId keywordId creator }
        assignment { ${NODE} }
        error { code message currentStatus }
      }
    }`,
    { expected, keys },
  );
  const results = new Map();
  for (const r of data.undoTransitions) results.set(keyOf(r.key), r);
  return results;
}
