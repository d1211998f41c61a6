// Composes kartei's Apollo Federation 2 subgraph (`kartei schema
// --federation`, what a server with --federation answers to `_service`) with
// a second subgraph that extends its Keyword entity, using The Guild's
// composition library (@theguild/federation-composition), as a gateway would.
//
//   node federation.mjs SUBGRAPH_SDL_FILE
//
// Prints `federation: composed (N types)` or the composition errors and
// exits 1.
import { readFileSync } from 'node:fs';
import { composeServices } from '@theguild/federation-composition';
import { parse } from 'graphql';

const [file] = process.argv.slice(2);
if (!file) {
  console.error('usage: node federation.mjs SUBGRAPH_SDL_FILE');
  process.exit(2);
}
const kartei = readFileSync(file, 'utf8');
// Another team's subgraph: notes on kartei's keywords, by their key.
const notes = `
extend schema @link(url: "https://specs.apollo.dev/federation/v2.3", import: ["@key"])
type Keyword @key(fields: "id") {
  id: ID!
  editorialNotes: [String!]!
}
type Query {
  notesCount: Int!
}
`;
const result = composeServices([
  { name: 'kartei', typeDefs: parse(kartei), url: 'http://127.0.0.1:8080/graphql' },
  { name: 'notes', typeDefs: parse(notes), url: 'http://127.0.0.1:8081/graphql' },
]);
if (result.errors && result.errors.length) {
  for (const e of result.errors) console.log(`federation: ${e.message}`);
  process.exit(1);
}
const supergraph = parse(result.supergraphSdl);
const keyword = supergraph.definitions.find((d) => d.kind === 'ObjectTypeDefinition' && d.name.value === 'Keyword');
const fields = keyword ? keyword.fields.map((f) => f.name.value) : [];
for (const wanted of ['label', 'editorialNotes']) {
  if (!fields.includes(wanted)) {
    console.log(`federation: the supergraph's Keyword lacks ${wanted} (${fields.join(', ')})`);
    process.exit(1);
  }
}
console.log(`federation: composed (${supergraph.definitions.length} definitions; Keyword joins kartei and notes)`);
