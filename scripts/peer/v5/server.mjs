// PostGraphile 5 for the peer bench (scripts/bench-peer.sh): the amber
// preset with production settings (no GraphiQL, no watch mode, no explain),
// on node:http. Connection from PGHOST (the cluster's socket directory),
// PGPORT, PGUSER, PGDATABASE; listens on 127.0.0.1:$PORT.
import { createServer } from "node:http";
import { postgraphile } from "postgraphile";
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";
import { makePgService } from "postgraphile/adaptors/pg";
import { grafserv } from "postgraphile/grafserv/node";

const port = Number(process.env.PORT);
const preset = {
  extends: [PostGraphileAmberPreset],
  pgServices: [
    makePgService({
      poolConfig: {
        host: process.env.PGHOST,
        port: Number(process.env.PGPORT),
        user: process.env.PGUSER,
        database: process.env.PGDATABASE,
      },
      schemas: ["public"],
    }),
  ],
  grafserv: { host: "127.0.0.1", port, graphiql: false, watch: false, graphqlOverGET: false, websockets: false },
  grafast: { explain: false },
};

const pgl = postgraphile(preset);
const serv = pgl.createServ(grafserv);
const server = createServer();
server.on("error", (e) => {
  console.error(e);
  process.exit(1);
});
await serv.addTo(server);
await pgl.getSchema();
server.listen(port, "127.0.0.1", () => console.log(`postgraphile ${process.version} on 127.0.0.1:${port}`));
