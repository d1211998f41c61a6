// @ts-check
/**
 * Live updates: a GraphQL subscription over WebSocket (the graphql-transport-ws
 * protocol at /graphql/ws). The token goes in `connection_init`; a ping every
 * 20 s keeps the socket (the server drops one silent for 60 s). When the
 * socket drops, it reconnects with a growing pause and resubscribes with the
 * last event id it saw, so the server replays what happened in between.
 */
import { token } from './api.js';
import { NODE } from './workflow.js';

const QUERY = `subscription Changes($portal: ID!, $after: String) {
  assignmentChanged(portalId: $portal, after: $after) {
    id actor kind imported previousStatus assignment { ${NODE} }
  }
}`;

/**
 * Follows the changes of one portal's assignments.
 * @param {{ portalId: string }} vars
 * @param {(event: any) => void} onEvent
 * @param {(state: 'open' | 'closed') => void} onState
 * @returns {() => void} stops following
 */
export function subscribe(vars, onEvent, onState) {
  /** @type {string | null} */
  let after = null;
  /** @type {WebSocket | null} */
  let socket = null;
  let stopped = false;
  let pause = 500;
  let ids = 1;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retry;
  /** @type {ReturnType<typeof setInterval> | undefined} */
  let beat;

  const connect = () => {
    if (stopped) return;
    const url = new URL('/graphql/ws', location.href);
    url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
    const ws = new WebSocket(url, 'graphql-transport-ws');
    socket = ws;
    ws.onopen = () => {
      const bearer = token();
      ws.send(JSON.stringify({ type: 'connection_init', payload: bearer ? { Authorization: `Bearer ${bearer}` } : {} }));
    };
    ws.onmessage = (message) => {
      const msg = JSON.parse(String(message.data));
      if (msg.type === 'connection_ack') {
        pause = 500;
        onState('open');
        // The server drops a socket that says nothing for 60 s.
        clearInterval(beat);
        beat = setInterval(() => ws.readyState === WebSocket.OPEN && ws.send('{"type":"ping"}'), 20000);
        ws.send(JSON.stringify({ id: String(++ids), type: 'subscribe', payload: { query: QUERY, variables: { portal: vars.portalId, after } } }));
      } else if (msg.type === 'error' || (msg.type === 'next' && msg.payload && msg.payload.errors)) {
        const errors = msg.type === 'error' ? msg.payload : msg.payload.errors;
        const code = Array.isArray(errors) && errors[0] && errors[0].extensions ? errors[0].extensions.code : null;
        if (code === 'REPLAY_BUSY' || code === 'SUBSCRIPTIONS_FULL') {
          // The server is busy resuming others: try again with the same
          // `after` in a moment, so nothing is missed.
          clearTimeout(retry);
          retry = setTimeout(() => {
            if (!stopped && ws.readyState === WebSocket.OPEN) {
              ws.send(JSON.stringify({ id: String(++ids), type: 'subscribe', payload: { query: QUERY, variables: { portal: vars.portalId, after } } }));
            }
          }, pause);
          pause = Math.min(pause * 2, 15000);
          return;
        }
        // Resuming failed (too far behind, or the id expired): follow from
        // now on; the curator's next reload shows what was missed.
        after = null;
        ws.send(JSON.stringify({ id: String(++ids), type: 'subscribe', payload: { query: QUERY, variables: { portal: vars.portalId, after } } }));
      } else if (msg.type === 'next' && msg.payload && msg.payload.data) {
        const event = msg.payload.data.assignmentChanged;
        after = event.id;
        onEvent(event);
      } else if (msg.type === 'ping') {
        ws.send(JSON.stringify({ type: 'pong' }));
      }
    };
    ws.onclose = () => {
      clearInterval(beat);
      onState('closed');
      if (stopped) return;
      retry = setTimeout(connect, pause);
      pause = Math.min(pause * 2, 15000);
    };
  };
  connect();
  return () => {
    stopped = true;
    clearTimeout(retry);
    clearInterval(beat);
    if (socket) socket.close();
  };
}
