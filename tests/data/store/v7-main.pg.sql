-- A PostgreSQL store at schema version 7, written by tessera at 08e5ece
-- (before the one SQL layer) and dumped with pg_dump --inserts, its schema
-- prefix dropped so that tests/store/test_store_compat.c can load it into a
-- schema of its own. tests/data/store/v7-main.db is the same store on SQLite.
CREATE TABLE arrays (
    id bigint NOT NULL,
    size integer NOT NULL,
    next integer NOT NULL,
    open integer DEFAULT 1 NOT NULL
);
CREATE TABLE events (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    t_s double precision NOT NULL,
    kind text NOT NULL,
    detail text,
    epoch bigint DEFAULT (COALESCE(NULLIF(current_setting('tessera.epoch'::text, true), ''::text), '0'::text))::bigint NOT NULL
);
CREATE SEQUENCE events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE events_id_seq OWNED BY events.id;
CREATE TABLE jobs (
    id bigint NOT NULL,
    tenant text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    owner text DEFAULT ''::text NOT NULL,
    idem_key text DEFAULT ''::text NOT NULL,
    state integer NOT NULL,
    tier integer NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    gpus integer DEFAULT 0 NOT NULL,
    gpu_model text DEFAULT ''::text NOT NULL,
    submit_s double precision DEFAULT 0 NOT NULL,
    start_s double precision DEFAULT 0 NOT NULL,
    end_s double precision DEFAULT 0 NOT NULL,
    preemptions integer DEFAULT 0 NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    why text,
    spec_json text NOT NULL,
    placement_json text,
    gen bigint DEFAULT 1 NOT NULL,
    epoch bigint DEFAULT (COALESCE(NULLIF(current_setting('tessera.epoch'::text, true), ''::text), '0'::text))::bigint NOT NULL,
    result_json text,
    run_user text DEFAULT ''::text NOT NULL,
    run_uid bigint DEFAULT '-1'::integer NOT NULL
);
CREATE SEQUENCE jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE jobs_id_seq OWNED BY jobs.id;
CREATE TABLE lease (
    id integer NOT NULL,
    holder text DEFAULT ''::text NOT NULL,
    epoch bigint DEFAULT 0 NOT NULL,
    expires_at timestamp with time zone DEFAULT '1970-01-01 00:00:00+00'::timestamp with time zone NOT NULL,
    url text DEFAULT ''::text NOT NULL,
    CONSTRAINT lease_id_check CHECK ((id = 1))
);
CREATE TABLE schema_version (
    version integer NOT NULL
);
CREATE TABLE settings (
    key text NOT NULL,
    value text NOT NULL
);
CREATE TABLE tokens (
    id bigint NOT NULL,
    name text NOT NULL,
    role integer NOT NULL,
    tenant text DEFAULT ''::text NOT NULL,
    hash bytea NOT NULL,
    created_s double precision NOT NULL,
    revoked_s double precision DEFAULT 0 NOT NULL,
    unix_user text DEFAULT ''::text NOT NULL,
    uid bigint DEFAULT '-1'::integer NOT NULL,
    expires_s double precision DEFAULT 0 NOT NULL
);
CREATE SEQUENCE tokens_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE tokens_id_seq OWNED BY tokens.id;
ALTER TABLE ONLY events ALTER COLUMN id SET DEFAULT nextval('events_id_seq'::regclass);
ALTER TABLE ONLY jobs ALTER COLUMN id SET DEFAULT nextval('jobs_id_seq'::regclass);
ALTER TABLE ONLY tokens ALTER COLUMN id SET DEFAULT nextval('tokens_id_seq'::regclass);
INSERT INTO arrays VALUES (3, 100, 2, 1);
INSERT INTO events VALUES (1, 1, 1764550800.5, 'started', 'on n-001', 0);
INSERT INTO events VALUES (2, 1, 1764554400, 'run-ended', 'start=1764550000 end=1764554000 gpus=2 model=H100-80GB tier=1', 0);
INSERT INTO jobs VALUES (2, 'cv', 'eval', 'alice', '', 0, 1, 3, 4, '', 1764547200.1234567, 0, 0, 0, '', NULL, '{"gpus":4}', NULL, 1, 0, NULL, 'alice', 1001);
INSERT INTO jobs VALUES (1, 'ml', 'train', 'alice', 'k1', 4, 1, 3, 4, 'H100-80GB', 1764547200.1234567, 1764550800.5, 1764558000.25, 0, '', NULL, '{"gpus":4}', '{"n-001":[0,1,2,3]}', 2, 0, '{"exit":0}', 'alice', 1001);
INSERT INTO jobs VALUES (3, 'ml', 'sweep', 'alice', '', 0, 1, 3, 4, '', 1764547200.1234567, 0, 0, 0, '', NULL, '{"gpus":4}', NULL, 1, 0, NULL, 'alice', 1001);
INSERT INTO jobs VALUES (4, 'ml', 'sweep', 'alice', '', 0, 1, 3, 4, '', 1764547200.1234567, 0, 0, 0, '', NULL, '{"gpus":4}', NULL, 1, 0, NULL, 'alice', 1001);
INSERT INTO lease VALUES (1, '', 0, '1970-01-01 00:00:00+00', '');
INSERT INTO schema_version VALUES (7);
INSERT INTO settings VALUES ('tenants', 'tenants:
  ml: {}
  cv: {}
');
INSERT INTO settings VALUES ('secrets', 'ciphertext');
INSERT INTO tokens VALUES (1, 'alice', 2, 'ml', '\x01080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3da', 1764547000.5, 0, 'alice', 1001, 1800000000);
INSERT INTO tokens VALUES (2, 'bob', 2, 'ml', '\xff080f161d242b323940474e555c636a71787f868d949ba2a9b0b7bec5ccd3da', 1764547000.5, 1764547999, 'alice', 1001, 1800000000);
SELECT pg_catalog.setval('events_id_seq', 2, true);
SELECT pg_catalog.setval('jobs_id_seq', 102, true);
SELECT pg_catalog.setval('tokens_id_seq', 2, true);
ALTER TABLE ONLY arrays
    ADD CONSTRAINT arrays_pkey PRIMARY KEY (id);
ALTER TABLE ONLY events
    ADD CONSTRAINT events_pkey PRIMARY KEY (id);
ALTER TABLE ONLY jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);
ALTER TABLE ONLY lease
    ADD CONSTRAINT lease_pkey PRIMARY KEY (id);
ALTER TABLE ONLY settings
    ADD CONSTRAINT settings_pkey PRIMARY KEY (key);
ALTER TABLE ONLY tokens
    ADD CONSTRAINT tokens_hash_key UNIQUE (hash);
ALTER TABLE ONLY tokens
    ADD CONSTRAINT tokens_name_key UNIQUE (name);
ALTER TABLE ONLY tokens
    ADD CONSTRAINT tokens_pkey PRIMARY KEY (id);
CREATE INDEX events_job_id ON events USING btree (job_id, id);
CREATE INDEX jobs_owner_id ON jobs USING btree (owner, id);
CREATE UNIQUE INDEX jobs_owner_idem ON jobs USING btree (owner, idem_key) WHERE (idem_key <> ''::text);
CREATE INDEX jobs_state_id ON jobs USING btree (state, id);
CREATE INDEX jobs_tenant_id ON jobs USING btree (tenant, id);
CREATE INDEX jobs_tenant_state ON jobs USING btree (tenant, state);
CREATE INDEX tokens_tenant_id ON tokens USING btree (tenant, id);
