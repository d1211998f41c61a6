// The graphql-http audit suite (GraphQL over HTTP, the spec's MUSTs, SHOULDs
// and MAYs) against a running kartei: node audit.mjs http://127.0.0.1:PORT/graphql
// Prints each audit; exits 1 unless every one is ok.
import { serverAudits } from 'graphql-http';

const url = process.argv[2];
if (!url) {
  console.error('usage: node audit.mjs URL');
  process.exit(2);
}
let ok = 0, warn = 0, error = 0;
for (const audit of serverAudits({ url })) {
  const result = await audit.fn();
  const line = `${result.status.padEnd(5)} ${audit.id} ${audit.name}`;
  if (result.status === 'ok') ok++;
  else if (result.status === 'warn') warn++;
  else error++;
  console.log(result.status === 'ok' ? line : `${line}\n      ${result.reason}`);
}
console.log(`graphql-http audit: ${ok} ok, ${warn} warnings, ${error} errors`);
process.exit(warn + error === 0 ? 0 : 1);
