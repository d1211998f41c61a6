-- The peer bench's PostgreSQL model of kartei's vocabulary and assignments
-- (scripts/bench-peer.sh). Keys as kartei's: an assignment is
-- (portal, ddb id, keyword, creator); the page's index leads with the portal
-- and the status and then follows kartei's page order (ddb id, keyword id,
-- creator), so `WHERE portal_id = $1 AND status = $2 ORDER BY <primary key>
-- LIMIT 50` is one index range scan. The cluster is made with --no-locale,
-- so text sorts by bytes, as kartei's keys do.
CREATE TYPE assignment_status AS ENUM
  ('AUTOSUGGESTED', 'SUGGESTED', 'ACCEPTED', 'REJECTED', 'PUBLISHED', 'DELETESUGGESTED', 'DELETED');
CREATE TYPE assignment_type AS ENUM ('MACHINE', 'ARCHIVE', 'ANYBODY');

CREATE TABLE categories (
  id text PRIMARY KEY,
  parent_id text REFERENCES categories (id),
  label text NOT NULL
);
CREATE INDEX ON categories (parent_id);

CREATE TABLE keywords (
  id text PRIMARY KEY,
  label text NOT NULL,
  synonyms text[] NOT NULL DEFAULT '{}',
  category_id text NOT NULL REFERENCES categories (id),
  created_at timestamptz NOT NULL
);
CREATE INDEX ON keywords (category_id);

CREATE TABLE assignments (
  portal_id text NOT NULL REFERENCES categories (id),
  ddb_id text NOT NULL,
  keyword_id text NOT NULL REFERENCES keywords (id),
  creator text NOT NULL,
  status assignment_status NOT NULL,
  child_category_id text NOT NULL REFERENCES categories (id),
  assignment_type assignment_type NOT NULL,
  created_at timestamptz NOT NULL,
  modified_at timestamptz NOT NULL,
  confidence double precision,
  PRIMARY KEY (portal_id, ddb_id, keyword_id, creator)
);
CREATE INDEX assignments_page ON assignments (portal_id, status, ddb_id, keyword_id, creator);
CREATE INDEX ON assignments (keyword_id);
CREATE INDEX ON assignments (child_category_id);
