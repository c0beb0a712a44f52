/* lib/kv: see kv.h. Linear search: node configs hold a few hundred keys at most, read once. */
#include "lib/kv.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/safefile.h"
#include "lib/rfile.h"

struct kv_entry {
	char *key;
	char *value;
};

struct kv {
	struct kv_entry *e;
	size_t n, cap;
};

struct kv *kv_new(void)
{
	return calloc(1, sizeof(struct kv));
}

void kv_destroy(struct kv **self)
{
	if (!self || !*self)
		return;
	for (size_t i = 0; i < (*self)->n; i++) {
		free((*self)->e[i].key);
		free((*self)->e[i].value);
	}
	free((*self)->e);
	free(*self);
	*self = NULL;
}

static bool key_ok(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (*k == '=' || isspace((unsigned char)*k))
			return false;
	return true;
}

int kv_set(struct kv *self, const char *key, const char *value)
{
	char *v;

	if (!key_ok(key) || strchr(value, '\n'))
		return -EINVAL;
	v = strdup(value);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < self->n; i++) {
		if (!strcmp(self->e[i].key, key)) {
			free(self->e[i].value);
			self->e[i].value = v;
			return 0;
		}
	}
	if (self->n == self->cap) {
		size_t cap = self->cap ? self->cap * 2 : 32;
		struct kv_entry *e = realloc(self->e, cap * sizeof *e);
		if (!e) {
			free(v);
			return -ENOMEM;
		}
		self->e = e;
		self->cap = cap;
	}
	self->e[self->n].key = strdup(key);
	if (!self->e[self->n].key) {
		free(v);
		return -ENOMEM;
	}
	self->e[self->n++].value = v;
	return 0;
}

int kv_setf(struct kv *self, const char *key, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof buf)
		return -E2BIG;
	return kv_set(self, key, buf);
}

const char *kv_get(const struct kv *self, const char *key)
{
	for (size_t i = self->n; i-- > 0;)
		if (!strcmp(self->e[i].key, key))
			return self->e[i].value;
	return NULL;
}

int kv_get_i64(const struct kv *self, const char *key, int64_t def, int64_t *out)
{
	const char *v = kv_get(self, key);
	char *end;
	long long x;

	if (!v) {
		*out = def;
		return 0;
	}
	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || end == v || *end) {
		log_error("config key %s: '%s' is not an integer", key, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int kv_get_u64(const struct kv *self, const char *key, uint64_t def, uint64_t *out)
{
	const char *v = kv_get(self, key);
	char *end;
	unsigned long long x;

	if (!v) {
		*out = def;
		return 0;
	}
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || end == v || *end || *v == '-') {
		log_error("config key %s: '%s' is not an unsigned integer", key, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int kv_get_double(const struct kv *self, const char *key, double def, double *out)
{
	const char *v = kv_get(self, key);
	char *end;
	double x;

	if (!v) {
		*out = def;
		return 0;
	}
	errno = 0;
	x = strtod(v, &end);
	if (errno || end == v || *end) {
		log_error("config key %s: '%s' is not a number", key, v);
		return -EINVAL;
	}
	*out = x;
	return 0;
}

int kv_get_bool(const struct kv *self, const char *key, bool def, bool *out)
{
	const char *v = kv_get(self, key);

	if (!v) {
		*out = def;
		return 0;
	}
	if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes")) {
		*out = true;
		return 0;
	}
	if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")) {
		*out = false;
		return 0;
	}
	log_error("config key %s: '%s' is not a boolean", key, v);
	return -EINVAL;
}

size_t kv_count(const struct kv *self)
{
	return self->n;
}

void kv_entry(const struct kv *self, size_t i, const char **key, const char **value)
{
	*key = self->e[i].key;
	*value = self->e[i].value;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

struct kv *kv_parse(const char *buf, size_t len, const char *name, char *err, size_t errlen)
{
	struct kv *self = NULL;
	char *line = NULL;
	size_t pos = 0;
	unsigned lineno = 0;

	if (memchr(buf, '\0', len)) {
		snprintf(err, errlen, "%s: contains a NUL byte", name);
		return NULL;
	}
	self = kv_new();
	line = malloc(len + 1);
	if (!self || !line) {
		snprintf(err, errlen, "%s: out of memory", name);
		goto fail;
	}
	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (buf + pos)) : len - pos;
		char *s, *eq;

		memcpy(line, buf + pos, n);
		line[n] = '\0';
		pos += n + 1;
		lineno++;
		s = trim(line);
		if (!*s || *s == '#')
			continue;
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%u: expected 'key = value'", name, lineno);
			goto fail;
		}
		*eq = '\0';
		if (kv_set(self, trim(s), trim(eq + 1)) < 0) {
			snprintf(err, errlen, "%s:%u: invalid key '%s'", name, lineno, trim(s));
			goto fail;
		}
	}
	free(line);
	return self;
fail:
	free(line);
	kv_destroy(&self);
	return NULL;
}

struct kv *kv_load(const char *path, char *err, size_t errlen)
{
	struct kv *self = NULL;
	char *buf = NULL;
	size_t len = 0;

	/* a regular file within the cap: a FIFO or device is refused, not waited on */
	if (rfile_read(path, KV_MAX_BYTES, &buf, &len, err, errlen) < 0)
		return NULL;
	self = kv_parse(buf, len, path, err, errlen);
	free(buf);
	return self;
}

int kv_write(const struct kv *self, FILE *f)
{
	for (size_t i = 0; i < self->n; i++)
		if (fprintf(f, "%s = %s\n", self->e[i].key, self->e[i].value) < 0)
			return -EIO;
	return 0;
}

int kv_save(const struct kv *self, const char *path)
{
	struct safefile_tmp t;
	FILE *f;
	int rc;

	/* An unpredictable temporary name, renamed over path (lib/safefile). */
	f = safefile_replace_begin(&t, path, 0644);
	if (!f)
		return -errno;
	rc = kv_write(self, f);
	if (rc < 0) {
		safefile_replace_abort(&t);
		return rc;
	}
	return safefile_replace_commit(&t);
}
