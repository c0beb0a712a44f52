/* orchestrator/hostshare: host sysctls shared by concurrent runs (see hostshare.h). */
#include "orchestrator/hostshare.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/rtdir.h"
#include "lib/sysctl.h"
#include "orchestrator/cleanup.h"
#include "orchestrator/journal.h"

#define MAX_TOKENS 32
#define TOKEN_MAX 32

/* ---- pure ------------------------------------------------------------------------------------ */

bool hostshare_is_list(const char *key)
{
	return !strcmp(key, HOSTSHARE_CC_KEY);
}

struct tokens {
	int n;
	char t[MAX_TOKENS][TOKEN_MAX];
};

/* Split a space-separated list; names longer than TOKEN_MAX or beyond MAX_TOKENS: -EINVAL. */
static int split(const char *s, struct tokens *out)
{
	out->n = 0;
	while (*s) {
		size_t l;

		while (*s == ' ')
			s++;
		l = strcspn(s, " ");
		if (!l)
			break;
		if (l >= TOKEN_MAX || out->n == MAX_TOKENS)
			return -EINVAL;
		memcpy(out->t[out->n], s, l);
		out->t[out->n][l] = '\0';
		out->n++;
		s += l;
	}
	return 0;
}

static bool has(const struct tokens *ts, const char *t)
{
	for (int i = 0; i < ts->n; i++)
		if (!strcmp(ts->t[i], t))
			return true;
	return false;
}

static const char *orig_of(const struct hostshare_claim *c)
{
	return c->orig[0] ? c->orig : c->old_value;
}

/* The names claim c holds: NEW minus OLD (its own name; OLD is the value without it) and not
 * in ORIG. An old record without NEW holds nothing knowable. */
static int held(const struct hostshare_claim *c, struct tokens *out)
{
	struct tokens n, o, g;

	out->n = 0;
	if (!c->new_value[0])
		return 0;
	if (split(c->new_value, &n) < 0 || split(c->old_value, &o) < 0 || split(orig_of(c), &g) < 0)
		return -EINVAL;
	for (int i = 0; i < n.n; i++)
		if (!has(&o, n.t[i]) && !has(&g, n.t[i]))
			snprintf(out->t[out->n++], TOKEN_MAX, "%s", n.t[i]);
	return 0;
}

static bool number(const char *s, long *v)
{
	char *end;

	if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 10)
		return false;
	*v = strtol(s, &end, 10);
	return true;
}

static bool plausible_list(const char *s)
{
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_ ") == strlen(s);
}

static bool has_name(const char *list, const char *name)
{
	struct tokens t;

	return split(list, &t) == 0 && has(&t, name);
}

/* Is c's change still in place in cur? (Its ORIG may be inherited.) */
static bool in_effect(const struct hostshare_claim *c, const char *cur, bool list)
{
	if (list) {
		struct tokens h, t;

		/* A claim holding no name says nothing about where the list came from. */
		if (!c->new_value[0] || held(c, &h) < 0 || !h.n || split(cur, &t) < 0)
			return false;
		for (int i = 0; i < h.n; i++)
			if (!has(&t, h.t[i]))
				return false;
		return true;
	}
	return c->new_value[0] && !strcmp(c->new_value, cur);
}

int hostshare_take(struct hostshare_claim *c, const char *cur, const char *need,
		   const struct hostshare_claim *others, size_t n)
{
	bool list = hostshare_is_list(c->key);
	const char *orig = cur;
	int w;

	for (size_t i = 0; i < n; i++)
		if (!strcmp(others[i].key, c->key) && in_effect(&others[i], cur, list)) {
			orig = orig_of(&others[i]);
			break;
		}
	if (snprintf(c->old_value, sizeof c->old_value, "%s", cur) >= (int)sizeof c->old_value ||
	    snprintf(c->orig, sizeof c->orig, "%s", orig) >= (int)sizeof c->orig)
		return -ENOSPC;
	if (list) {
		struct tokens t;

		if (!plausible_list(cur) || !plausible_list(need) || strchr(need, ' ') || !*need ||
		    split(cur, &t) < 0)
			return -EINVAL;
		if (has(&t, need)) {
			/* Listed already (by the host or another run): OLD is the list without it,
			 * so the claim still names what this run needs. */
			size_t len = 0;

			c->old_value[0] = '\0';
			for (int i = 0; i < t.n; i++)
				if (strcmp(t.t[i], need))
					len += (size_t)snprintf(c->old_value + len, sizeof c->old_value - len,
								"%s%s", len ? " " : "", t.t[i]);
			if (!len || has_name(orig, need)) /* the host's own: nothing to hold */
				snprintf(c->old_value, sizeof c->old_value, "%s", cur);
			snprintf(c->new_value, sizeof c->new_value, "%s", cur);
			return 0;
		}
		w = snprintf(c->new_value, sizeof c->new_value, "%s%s%s", cur, *cur ? " " : "", need);
		return w >= (int)sizeof c->new_value ? -ENOSPC : 1;
	} else {
		long v, want;

		if (!number(cur, &v) || !number(need, &want))
			return -EINVAL;
		snprintf(c->new_value, sizeof c->new_value, "%ld", v >= want ? v : want);
		return v < want;
	}
}

int hostshare_release(const struct hostshare_claim *mine, const char *cur,
		      const struct hostshare_claim *live, size_t n, char *out, size_t outlen)
{
	bool list = hostshare_is_list(mine->key);

	if (list) {
		struct tokens mh, t, oh;
		size_t len = 0;
		bool removed = false;

		if (held(mine, &mh) < 0 || split(cur, &t) < 0)
			return 0;
		if (outlen)
			out[0] = '\0';
		for (int i = 0; i < t.n; i++) {
			bool drop = has(&mh, t.t[i]);

			for (size_t k = 0; drop && k < n; k++)
				if (!strcmp(live[k].key, mine->key) && held(&live[k], &oh) == 0 &&
				    has(&oh, t.t[i]))
					drop = false; /* another live run still needs it */
			if (drop) {
				removed = true;
				continue;
			}
			int w = snprintf(out + len, outlen - len, "%s%s", len ? " " : "", t.t[i]);

			if (w < 0 || (size_t)w >= outlen - len)
				return -ENOSPC;
			len += (size_t)w;
		}
		return removed;
	} else {
		long c, best = -1, v;
		bool ours = mine->new_value[0] && !strcmp(cur, mine->new_value);

		if (!number(cur, &c))
			return 0;
		for (size_t k = 0; k < n; k++) {
			if (strcmp(live[k].key, mine->key) || !number(live[k].new_value, &v))
				continue;
			ours |= v == c;
			if (v > best)
				best = v;
		}
		if (!ours)
			return 0; /* changed by hand since: leave it */
		if (best < 0) {
			if (!strcmp(cur, orig_of(mine)))
				return 0;
			return snprintf(out, outlen, "%s", orig_of(mine)) >= (int)outlen ? -ENOSPC : 1;
		}
		if (best >= c)
			return 0;
		return snprintf(out, outlen, "%ld", best) >= (int)outlen ? -ENOSPC : 1;
	}
}

int hostshare_from_record(struct hostshare_claim *c, int nfields, char *const *fields)
{
	bool list;

	memset(c, 0, sizeof *c);
	if (nfields < 3 || nfields > 5 || strcmp(fields[0], "-"))
		return -EINVAL;
	list = hostshare_is_list(fields[1]);
	if (snprintf(c->key, sizeof c->key, "%s", fields[1]) >= (int)sizeof c->key)
		return -EINVAL;
	for (int i = 2; i < nfields; i++) {
		char *dst = i == 2 ? c->old_value : i == 3 ? c->new_value : c->orig;
		long v;

		if (list ? !plausible_list(fields[i]) : !number(fields[i], &v))
			return -EINVAL;
		if (snprintf(dst, HOSTSHARE_VALUE_MAX, "%s", fields[i]) >= HOSTSHARE_VALUE_MAX)
			return -EINVAL;
	}
	return 0;
}

/* ---- host ------------------------------------------------------------------------------------ */

int hostshare_lock(void)
{
	char path[PATH_MAX];
	int fd, rc;

	if (snprintf(path, sizeof path, "%s/.sysctl.lock", journal_registry_dir()) >= (int)sizeof path)
		return -ENAMETOOLONG;
	rc = rtdir_ensure_dir(journal_registry_dir());
	if (rc < 0)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	/* Holders keep it only for a few file reads and writes; the kernel drops it on death. */
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			rc = -errno;
			close(fd);
			return rc;
		}
	}
	return fd;
}

void hostshare_unlock(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* The claims on key in one parsed journal: its last claim unless released after it. */
static int claims_of(const struct journal_parsed *p, const char *key, struct hostshare_claim *c)
{
	int found = 0;

	for (size_t i = 0; i < p->n; i++) {
		const struct journal_record *r = &p->recs[i];

		if (r->kind == JOURNAL_SYSCTL_RELEASED && !strcmp(r->fields[1], key))
			found = 0;
		else if (r->kind == JOURNAL_SYSCTL && !strcmp(r->fields[1], key))
			found = hostshare_from_record(c, r->nfields, r->fields) == 0;
	}
	return found;
}

int hostshare_scan(const char *key, const char *self_path, bool alive_only,
		   bool (*alive)(pid_t pid, uint64_t start_time), struct hostshare_claim **out)
{
	const char *dir = journal_registry_dir();
	char link[PATH_MAX], real[PATH_MAX], self_real[PATH_MAX] = "";
	struct hostshare_claim *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	*out = NULL;
	if (self_path && !realpath(self_path, self_real))
		self_real[0] = '\0';
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		struct journal_parsed *p = NULL;
		struct hostshare_claim c;
		struct stat st;
		char err[128];

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(link, sizeof link, "%s/%s", dir, e->d_name) >= (int)sizeof link ||
		    lstat(link, &st) < 0 || !S_ISLNK(st.st_mode) || st.st_uid != geteuid() ||
		    !realpath(link, real) || !strcmp(real, self_real))
			continue;
		if (journal_load(real, &p, err, sizeof err) < 0)
			continue;
		if (!p->ended && (!alive_only || (alive && alive(p->pid, p->start_time))) &&
		    claims_of(p, key, &c)) {
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 4;
				struct hostshare_claim *nv = realloc(v, ncap * sizeof *nv);

				if (!nv) {
					journal_parsed_free(&p);
					closedir(d);
					free(v);
					return -ENOMEM;
				}
				v = nv;
				cap = ncap;
			}
			v[n++] = c;
		}
		journal_parsed_free(&p);
	}
	closedir(d);
	*out = v;
	return (int)n;
}

int hostshare_claim_take(struct journal *j, const char *key, const char *need,
			 struct hostshare_claim *c, char *err, size_t errlen)
{
	struct hostshare_claim *others = NULL;
	char cur[HOSTSHARE_VALUE_MAX];
	int fd = hostshare_lock(), rc, n;

	if (fd < 0) {
		snprintf(err, errlen, "lock host sysctls: %s", strerror(-fd));
		return fd;
	}
	memset(c, 0, sizeof *c);
	snprintf(c->key, sizeof c->key, "%s", key);
	rc = sysctl_read(key, cur, sizeof cur);
	if (rc < 0) {
		snprintf(err, errlen, "read %s: %s", key, strerror(-rc));
		goto out;
	}
	n = hostshare_scan(key, j ? journal_path(j) : NULL, false, NULL, &others);
	if (n < 0) {
		rc = n;
		snprintf(err, errlen, "journal registry: %s", strerror(-rc));
		goto out;
	}
	rc = hostshare_take(c, cur, need, others, (size_t)n);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot claim %s from %s: %s", key, need, cur, strerror(-rc));
		goto out;
	}
	if (j) {
		int jr = journal_sysctl_claim(j, key, c->old_value, c->new_value, c->orig);

		if (jr < 0) {
			rc = jr;
			snprintf(err, errlen, "journal: %s", strerror(-rc));
			goto out;
		}
	}
	if (rc == 1) {
		rc = sysctl_write(key, c->new_value);
		if (rc < 0) {
			snprintf(err, errlen, "write %s=%s: %s", key, c->new_value, strerror(-rc));
			goto out;
		}
	}
	rc = 0;
out:
	free(others);
	hostshare_unlock(fd);
	return rc;
}

int hostshare_claim_release(struct journal *j, const char *self_path,
			    const struct hostshare_claim *c)
{
	struct hostshare_claim *live = NULL;
	char cur[HOSTSHARE_VALUE_MAX], out[HOSTSHARE_VALUE_MAX];
	int fd = hostshare_lock(), rc, n;

	if (fd < 0)
		return fd;
	rc = sysctl_read(c->key, cur, sizeof cur);
	if (rc < 0) {
		if (rc == -ENOENT)
			rc = 0;
		goto out;
	}
	n = hostshare_scan(c->key, self_path, true, cleanup_proc_alive, &live);
	if (n < 0) {
		rc = n;
		goto out;
	}
	rc = hostshare_release(c, cur, live, (size_t)n, out, sizeof out);
	if (rc == 1) {
		rc = sysctl_write(c->key, out);
		if (rc < 0)
			log_error("hostshare: restore %s=%s: %s", c->key, out, strerror(-rc));
	} else if (rc == 0 && !hostshare_is_list(c->key) && strcmp(cur, orig_of(c)) && n == 0) {
		log_warn("hostshare: %s is %s, not a value a run set; leaving it", c->key, cur);
	}
	if (rc > 0)
		rc = 0;
	/* After the write: a crash in between leaves a claim whose release is simply redone. */
	if (rc == 0 && j)
		journal_sysctl_released(j, c->key);
out:
	free(live);
	hostshare_unlock(fd);
	return rc;
}
