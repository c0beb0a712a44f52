/* node/fleet_store: see fleet_store.h.
 *
 * Statements are prepared per call: the registry writes a version every few seconds per device,
 * so the parse costs nothing that matters, and no statement outlives a call. Every value read
 * from the database is checked as if the file came from elsewhere: types, ranges, blob sizes. */
#include "node/fleet_store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/limits.h"
#include "lib/log.h"

#define STORE_FORMAT 1

struct fleet_store {
	sqlite3 *db;
	bool writable;
	uint32_t n;              /* 0 until the meta is known */
	uint32_t snapshot_every;
};

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS base(id INTEGER PRIMARY KEY CHECK (id = 0), hash BLOB NOT NULL,"
	" payload BLOB NOT NULL);"
	"CREATE TABLE IF NOT EXISTS versions(device TEXT NOT NULL, version INTEGER NOT NULL,"
	" parent INTEGER NOT NULL, hash BLOB NOT NULL, strategy TEXT NOT NULL,"
	" bytes_tx INTEGER NOT NULL, bytes_stored INTEGER NOT NULL, t_sent REAL NOT NULL,"
	" t_stored REAL NOT NULL, chain_len INTEGER NOT NULL, payload BLOB NOT NULL,"
	" PRIMARY KEY(device, version)) WITHOUT ROWID;";

bool fleet_store_device_ok(const char *name)
{
	size_t len = name ? strlen(name) : 0;

	if (len == 0 || len > FLEET_STORE_DEVICE_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

static int sql_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_MISMATCH:
	case SQLITE_TOOBIG:
		return -EBADMSG;
	default:
		return -EIO;
	}
}

static int exec(struct fleet_store *self, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(self->db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		log_error("fleet store: %s: %s", sql, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return sql_errno(rc);
	}
	return 0;
}

static int prepare(struct fleet_store *self, const char *sql, sqlite3_stmt **st)
{
	int rc = sqlite3_prepare_v2(self->db, sql, -1, st, NULL);

	if (rc != SQLITE_OK) {
		log_error("fleet store: prepare: %s", sqlite3_errmsg(self->db));
		return sql_errno(rc);
	}
	return 0;
}

struct fleet_store *fleet_store_open(const char *path, bool writable, char *err, size_t errlen)
{
	struct fleet_store *self = calloc(1, sizeof *self);
	struct stat sb;
	int flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
	int rc;

	if (!self) {
		snprintf(err, errlen, "%s: out of memory", path);
		return NULL;
	}
	self->writable = writable;
	if (!writable && stat(path, &sb) < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!writable && !S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	rc = sqlite3_open_v2(path, &self->db, flags | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, self->db ? sqlite3_errmsg(self->db) : sqlite3_errstr(rc));
		goto fail;
	}
	/* Hostile-file hardening: no schema-defined functions or views run with our rights, no
	 * writes through a corrupt schema; blobs and strings bounded by what a model can be. */
	sqlite3_db_config(self->db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
	sqlite3_db_config(self->db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, NULL);
	sqlite3_limit(self->db, SQLITE_LIMIT_LENGTH, (int)fleet_codec_frame_max(LIMITS_MAX_PARAMS / 2));
	sqlite3_busy_timeout(self->db, 5000);
	if (writable) {
		if (exec(self, "PRAGMA journal_mode=WAL") < 0 || exec(self, "PRAGMA synchronous=FULL") < 0 ||
		    exec(self, schema_sql) < 0) {
			snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(self->db));
			goto fail;
		}
	} else if (exec(self, "PRAGMA query_only=1") < 0) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(self->db));
		goto fail;
	}
	return self;
fail:
	fleet_store_close(&self);
	return NULL;
}

void fleet_store_close(struct fleet_store **p)
{
	struct fleet_store *self = p ? *p : NULL;

	if (!self)
		return;
	if (self->db)
		sqlite3_close(self->db);
	free(self);
	*p = NULL;
}

static int meta_get(struct fleet_store *self, const char *key, int64_t *out)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out = 0;       /* unless the key is there */
	if ((rc = prepare(self, "SELECT value FROM meta WHERE key = ?1", &st)) < 0)
		return rc;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) == SQLITE_INTEGER) {
		*out = sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = rc == SQLITE_ROW ? -EBADMSG : rc == SQLITE_DONE ? -ENOENT : sql_errno(rc);
	}
	sqlite3_finalize(st);
	return rc;
}

int fleet_store_get_meta(struct fleet_store *self, uint32_t *n, uint32_t *snapshot_every)
{
	int64_t nn, k, fmt;
	int rc;

	if ((rc = meta_get(self, "format", &fmt)) < 0 || (rc = meta_get(self, "n", &nn)) < 0 ||
	    (rc = meta_get(self, "snapshot_every", &k)) < 0)
		return rc;
	if (fmt != STORE_FORMAT || nn < 1 || nn > LIMITS_MAX_PARAMS || k < 1 || k > FLEET_STORE_MAX_CHAIN)
		return -EBADMSG;
	self->n = (uint32_t)nn;
	self->snapshot_every = (uint32_t)k;
	*n = (uint32_t)nn;
	*snapshot_every = (uint32_t)k;
	return 0;
}

int fleet_store_set_meta(struct fleet_store *self, uint32_t n, uint32_t snapshot_every)
{
	uint32_t on, ok;
	char sql[256];
	int rc = fleet_store_get_meta(self, &on, &ok);

	if (rc == 0)
		return on == n && ok == snapshot_every ? 0 : -EEXIST;
	if (rc != -ENOENT)
		return rc;
	if (n < 1 || n > LIMITS_MAX_PARAMS || snapshot_every < 1 || snapshot_every > FLEET_STORE_MAX_CHAIN)
		return -EINVAL;
	snprintf(sql, sizeof sql,
		 "BEGIN; INSERT OR REPLACE INTO meta VALUES('format', %d), ('n', %u),"
		 " ('snapshot_every', %u); COMMIT;", STORE_FORMAT, n, snapshot_every);
	if ((rc = exec(self, sql)) < 0) {
		exec(self, "ROLLBACK");
		return rc;
	}
	self->n = n;
	self->snapshot_every = snapshot_every;
	return 0;
}

/* The model size, from the meta table on first use. */
static int need_n(struct fleet_store *self)
{
	uint32_t n, k;

	if (self->n)
		return 0;
	return fleet_store_get_meta(self, &n, &k);
}

int fleet_store_put_base(struct fleet_store *self, const uint8_t *frame, size_t len)
{
	struct fleet_frame_info in;
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = need_n(self)) < 0)
		return rc;
	if (fleet_codec_peek(frame, len, &in) < 0 || in.strategy != FLEET_FULL || in.n != self->n)
		return -EINVAL;
	if ((rc = prepare(self, "SELECT hash FROM base WHERE id = 0", &st)) < 0)
		return rc;
	if (sqlite3_step(st) == SQLITE_ROW) {
		const void *h = sqlite3_column_blob(st, 0);

		rc = sqlite3_column_bytes(st, 0) == FLEET_HASH_BYTES && h &&
				     !memcmp(h, in.hash, FLEET_HASH_BYTES) ? 0 : -EEXIST;
		sqlite3_finalize(st);
		return rc;
	}
	sqlite3_finalize(st);
	if ((rc = prepare(self, "INSERT INTO base(id, hash, payload) VALUES(0, ?1, ?2)", &st)) < 0)
		return rc;
	sqlite3_bind_blob(st, 1, in.hash, FLEET_HASH_BYTES, SQLITE_STATIC);
	sqlite3_bind_blob64(st, 2, frame, len, SQLITE_STATIC);
	rc = sqlite3_step(st);
	rc = rc == SQLITE_DONE ? 0 : sql_errno(rc);
	if (rc < 0)
		log_error("fleet store: base: %s", sqlite3_errmsg(self->db));
	sqlite3_finalize(st);
	return rc;
}

/* Decode a stored frame (checked against the expected hash) into out. */
static int decode_checked(struct fleet_store *self, const void *blob, int blen, const uint8_t *want,
			  const float *base, float *out)
{
	struct fleet_frame_info in;
	int rc;

	if (!blob || blen <= 0 || (size_t)blen > fleet_codec_frame_max(self->n))
		return -EBADMSG;
	if (fleet_codec_peek(blob, (size_t)blen, &in) < 0 || memcmp(in.hash, want, FLEET_HASH_BYTES))
		return -EBADMSG;
	rc = fleet_codec_decode(blob, (size_t)blen, base, self->n, out);
	return rc == 0 || rc == -ENOMEM ? rc : -EBADMSG;
}

int fleet_store_get_base(struct fleet_store *self, float *out)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if ((rc = need_n(self)) < 0)
		return rc;
	if ((rc = prepare(self, "SELECT hash, payload FROM base WHERE id = 0", &st)) < 0)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		rc = sqlite3_column_bytes(st, 0) != FLEET_HASH_BYTES || !sqlite3_column_blob(st, 0)
			? -EBADMSG
			: decode_checked(self, sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1),
					 sqlite3_column_blob(st, 0), NULL, out);
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : sql_errno(rc);
	}
	sqlite3_finalize(st);
	return rc;
}

int fleet_store_put(struct fleet_store *self, const struct fleet_version *v, const uint8_t *payload,
		    size_t len)
{
	struct fleet_version old;
	sqlite3_stmt *st = NULL;
	int rc;

	if (!fleet_store_device_ok(v->device) || v->version < 1 || v->parent < 0 ||
	    v->parent >= v->version || !fleet_strategy_name(v->strategy) || !payload || !len)
		return -EINVAL;
	rc = fleet_store_get(self, v->device, v->version, &old);
	if (rc == 0)
		return memcmp(old.hash, v->hash, FLEET_HASH_BYTES) ? -EEXIST : 1;
	if (rc != -ENOENT)
		return rc;
	if ((rc = prepare(self,
			  "INSERT INTO versions(device, version, parent, hash, strategy, bytes_tx,"
			  " bytes_stored, t_sent, t_stored, chain_len, payload)"
			  " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", &st)) < 0)
		return rc;
	sqlite3_bind_text(st, 1, v->device, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, v->version);
	sqlite3_bind_int64(st, 3, v->parent);
	sqlite3_bind_blob(st, 4, v->hash, FLEET_HASH_BYTES, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, fleet_strategy_name(v->strategy), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)v->bytes_tx);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)len);
	sqlite3_bind_double(st, 8, v->t_sent);
	sqlite3_bind_double(st, 9, v->t_stored);
	sqlite3_bind_int64(st, 10, v->chain_len);
	sqlite3_bind_blob64(st, 11, payload, len, SQLITE_STATIC);
	/* One statement outside BEGIN is its own transaction: committed (WAL, synchronous=FULL:
	 * fsync'd) when step returns DONE. */
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		log_error("fleet store: put %s@%lld: %s", v->device, (long long)v->version,
			  sqlite3_errmsg(self->db));
	rc = rc == SQLITE_DONE ? 0 : sql_errno(rc);
	sqlite3_finalize(st);
	return rc;
}

/* Fill a row from columns 0..9 (device ... chain_len). */
static int row_read(sqlite3_stmt *st, struct fleet_version *v)
{
	const unsigned char *dev = sqlite3_column_text(st, 0);
	const char *strat = (const char *)sqlite3_column_text(st, 4);

	memset(v, 0, sizeof *v);
	if (!dev || !fleet_store_device_ok((const char *)dev) || !strat ||
	    fleet_strategy_parse(strat, &v->strategy) < 0 ||
	    sqlite3_column_bytes(st, 3) != FLEET_HASH_BYTES || !sqlite3_column_blob(st, 3))
		return -EBADMSG;
	snprintf(v->device, sizeof v->device, "%s", (const char *)dev);
	v->version = sqlite3_column_int64(st, 1);
	v->parent = sqlite3_column_int64(st, 2);
	memcpy(v->hash, sqlite3_column_blob(st, 3), FLEET_HASH_BYTES);
	v->bytes_tx = (uint64_t)sqlite3_column_int64(st, 5);
	v->bytes_stored = (uint64_t)sqlite3_column_int64(st, 6);
	v->t_sent = sqlite3_column_double(st, 7);
	v->t_stored = sqlite3_column_double(st, 8);
	v->chain_len = (uint32_t)sqlite3_column_int64(st, 9);
	if (v->version < 1 || v->parent < 0 || v->parent >= v->version)
		return -EBADMSG;
	return 0;
}

#define ROW_COLS "device, version, parent, hash, strategy, bytes_tx, bytes_stored, t_sent," \
		 " t_stored, chain_len"

static int get_row(struct fleet_store *self, const char *sql, const char *device, int64_t version,
		   struct fleet_version *out)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!fleet_store_device_ok(device))
		return -ENOENT;
	if ((rc = prepare(self, sql, &st)) < 0)
		return rc;
	sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, version);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = row_read(st, out);
	else
		rc = rc == SQLITE_DONE ? -ENOENT : sql_errno(rc);
	sqlite3_finalize(st);
	return rc;
}

int fleet_store_get(struct fleet_store *self, const char *device, int64_t version,
		    struct fleet_version *out)
{
	return get_row(self, "SELECT " ROW_COLS " FROM versions WHERE device = ?1 AND version = ?2",
		       device, version, out);
}

int fleet_store_latest(struct fleet_store *self, const char *device, struct fleet_version *out)
{
	return get_row(self, "SELECT " ROW_COLS " FROM versions WHERE device = ?1 AND ?2 = ?2"
			     " ORDER BY version DESC LIMIT 1", device, 0, out);
}

int fleet_store_rebuild(struct fleet_store *self, const char *device, int64_t version, float *out,
			uint32_t *chain)
{
	int64_t *steps = NULL;
	size_t nsteps = 0, cap = 0;
	float *tmp = NULL;
	sqlite3_stmt *st = NULL;
	struct fleet_version v;
	int64_t cur = version;
	bool from_base = false;
	int rc;

	if ((rc = need_n(self)) < 0)
		return rc;
	/* Walk back: versions strictly descend (row_read checks parent < version), so the walk
	 * ends; the cap bounds its length whatever the file says. */
	for (;;) {
		if ((rc = fleet_store_get(self, device, cur, &v)) < 0) {
			if (rc == -ENOENT && cur != version)
				rc = -EBADMSG; /* a parent the chain names is missing */
			goto out;
		}
		if (nsteps == cap) {
			int64_t *p;

			cap = cap ? cap * 2 : 16;
			if (cap > FLEET_STORE_MAX_CHAIN + 1)
				cap = FLEET_STORE_MAX_CHAIN + 1;
			if (nsteps == cap) {
				rc = -EBADMSG;
				goto out;
			}
			p = realloc(steps, cap * sizeof *p);
			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			steps = p;
		}
		steps[nsteps++] = cur;
		if (v.strategy == FLEET_FULL)
			break;
		if (v.parent == 0) {
			from_base = true;
			break;
		}
		cur = v.parent;
	}
	tmp = malloc((size_t)self->n * sizeof(float));
	rc = -ENOMEM;
	if (!tmp)
		goto out;
	if (from_base && (rc = fleet_store_get_base(self, out)) < 0) {
		if (rc == -ENOENT)
			rc = -EBADMSG;
		goto out;
	}
	if ((rc = prepare(self, "SELECT hash, payload FROM versions WHERE device = ?1 AND version = ?2",
			  &st)) < 0)
		goto out;
	for (size_t i = nsteps; i-- > 0;) {
		sqlite3_reset(st);
		sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, steps[i]);
		if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_bytes(st, 0) != FLEET_HASH_BYTES) {
			rc = -EBADMSG;
			goto out;
		}
		rc = decode_checked(self, sqlite3_column_blob(st, 1), sqlite3_column_bytes(st, 1),
				    sqlite3_column_blob(st, 0), i == nsteps - 1 && !from_base ? NULL : out,
				    tmp);
		if (rc < 0)
			goto out;
		memcpy(out, tmp, (size_t)self->n * sizeof(float));
	}
	if (chain)
		*chain = (uint32_t)nsteps;
	rc = 0;
out:
	sqlite3_finalize(st);
	free(steps);
	free(tmp);
	return rc;
}

int fleet_store_payload(struct fleet_store *self, const char *device, int64_t version,
			struct fleet_version *row, uint8_t **out, size_t *len)
{
	sqlite3_stmt *st = NULL;
	const void *blob;
	int rc, blen;

	*out = NULL;
	*len = 0;
	if ((rc = need_n(self)) < 0 || (rc = fleet_store_get(self, device, version, row)) < 0)
		return rc;
	if ((rc = prepare(self, "SELECT payload FROM versions WHERE device = ?1 AND version = ?2", &st)) < 0)
		return rc;
	sqlite3_bind_text(st, 1, device, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, version);
	rc = -EBADMSG;
	if (sqlite3_step(st) != SQLITE_ROW)
		goto out;
	blob = sqlite3_column_blob(st, 0);
	blen = sqlite3_column_bytes(st, 0);
	if (!blob || blen <= 0 || (size_t)blen > fleet_codec_frame_max(self->n))
		goto out;
	rc = -ENOMEM;
	if (!(*out = malloc((size_t)blen)))
		goto out;
	memcpy(*out, blob, (size_t)blen);
	*len = (size_t)blen;
	rc = 0;
out:
	sqlite3_finalize(st);
	return rc;
}

int fleet_store_each(struct fleet_store *self,
		     int (*fn)(const struct fleet_version *v, void *arg), void *arg)
{
	sqlite3_stmt *st = NULL;
	struct fleet_version v;
	int rc;

	if ((rc = prepare(self, "SELECT " ROW_COLS " FROM versions ORDER BY device, version", &st)) < 0)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if ((rc = row_read(st, &v)) < 0 || (rc = fn(&v, arg)) != 0)
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : sql_errno(rc);
out:
	sqlite3_finalize(st);
	return rc;
}

int fleet_store_ingest(struct fleet_store *self, const char *device, int64_t version, int64_t parent,
		       uint32_t parent_chain, const float *parent_model, const uint8_t *frame,
		       size_t len, double t_sent, double t_now, float *model_out,
		       struct fleet_version *row)
{
	struct fleet_frame_info in;
	struct fleet_version v = { .version = version, .parent = parent, .bytes_tx = len,
				   .t_sent = t_sent, .t_stored = t_now };
	uint8_t *full = NULL;
	const uint8_t *keep = frame;
	size_t keep_len = len;
	int rc;

	if ((rc = need_n(self)) < 0)
		return rc;
	if (!fleet_store_device_ok(device) || version < 1 || parent < 0 || parent >= version)
		return -EINVAL;
	if ((rc = fleet_codec_peek(frame, len, &in)) < 0)
		return rc;
	if ((rc = fleet_codec_decode(frame, len, in.strategy == FLEET_FULL ? NULL : parent_model,
				     self->n, model_out)) < 0)
		return rc;
	snprintf(v.device, sizeof v.device, "%s", device);
	memcpy(v.hash, in.hash, FLEET_HASH_BYTES);
	v.strategy = in.strategy;
	v.chain_len = in.strategy == FLEET_FULL ? 0 : parent_chain + 1;
	if (v.chain_len >= self->snapshot_every) {
		/* A full snapshot bounds the chain a recovery must replay. */
		if ((rc = fleet_codec_encode(FLEET_FULL, model_out, NULL, self->n, &full, &keep_len)) < 0)
			return rc;
		keep = full;
		v.strategy = FLEET_FULL;
		v.chain_len = 0;
	}
	v.bytes_stored = keep_len;
	rc = fleet_store_put(self, &v, keep, keep_len);
	if (rc >= 0 && row)
		*row = v;
	free(full);
	return rc;
}
