-- bench/floor-schema.sql — the floor's schema for bench/compare: the smallest schema that can
-- hold an admission (a claim row and an operation row; primary keys and the unique grant key,
-- nothing else). Not oncegate's schema: it is what that schema and statement are measured
-- against (docs/performance.md).
DROP TABLE IF EXISTS grant_consumptions, operations;
CREATE TABLE grant_consumptions (issuer text NOT NULL, grant_id text NOT NULL, operation_id uuid, consumed_at timestamptz NOT NULL, retain_until timestamptz NOT NULL, PRIMARY KEY (issuer, grant_id));
CREATE TABLE operations (operation_id uuid PRIMARY KEY, issuer text NOT NULL, grant_id text NOT NULL, caller_id text NOT NULL, account_id text NOT NULL, amount numeric NOT NULL, currency text NOT NULL, status text NOT NULL, owner_version integer NOT NULL, lease_until timestamptz NOT NULL, submit_by timestamptz NOT NULL, created_at timestamptz NOT NULL, UNIQUE (issuer, grant_id));
