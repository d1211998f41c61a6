// PostGraphile 4.14 for the peer bench (scripts/bench-peer.sh), with the
// production settings of its documentation (no GraphiQL, no watch, no query
// log, no extended errors), on node:http. Connection from PGHOST (the
// cluster's socket directory), PGPORT, PGUSER, PGDATABASE; listens on
// 127.0.0.1:$PORT.
"use strict";
const http = require("http");
const { postgraphile } = require("postgraphile");

const port = Number(process.env.PORT);
const middleware = postgraphile(
  {
    host: process.env.PGHOST,
    port: Number(process.env.PGPORT),
    user: process.env.PGUSER,
    database: process.env.PGDATABASE,
  },
  "public",
  {
    graphiql: false,
    enhanceGraphiql: false,
    watchPg: false,
    disableQueryLog: true,
    retryOnInitFail: false,
    dynamicJson: true,
    setofFunctionsContainNulls: false,
    ignoreRBAC: false,
    legacyRelations: "omit",
    extendedErrors: ["errcode"],
    showErrorStack: false,
  },
);
const server = http.createServer(middleware);
server.on("error", (e) => {
  console.error(e);
  process.exit(1);
});
// The schema is built on the first request unless asked for now.
middleware.getGraphQLSchema().then(
  () => server.listen(port, "127.0.0.1", () => console.log(`postgraphile 4 ${process.version} on 127.0.0.1:${port}`)),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
