/* collectors/meta: see meta.h.
 *
 * The document is parsed by jansson. One step comes before it: jansson's integers are signed
 * 64-bit, and a seed is any unsigned 64-bit value, so an object member's value that is a bare
 * integer above INT64_MAX is turned into a string of its digits before parsing (the "seed"
 * reader accepts both forms). The same pass bounds the nesting depth, so hostile input is
 * refused before any tree is built. */
#include "collectors/meta.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/rfile.h"

/* strlcpy-like copy: truncates, always terminates. */
static void copy(char *dst, size_t dstlen, const char *src)
{
	size_t n = strnlen(src, dstlen - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Whether the n digits at s are a value in (INT64_MAX, UINT64_MAX]. */
static bool beyond_int64(const char *s, size_t n)
{
	char buf[24], *end;
	unsigned long long v;

	if (n < 19 || n > 20 || s[0] == '0')
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	return errno == 0 && *end == '\0' && v > (unsigned long long)INT64_MAX;
}

/* Copy json into a new buffer (*out, *outlen; NUL-terminated) with every member value that is
 * a bare integer beyond INT64_MAX quoted, checking the nesting depth on the way. Only the
 * lexical structure is tracked (strings and their escapes); jansson judges the rest. Returns 0,
 * -EINVAL (too deep; err filled) or -ENOMEM. */
static int quote_big_ints(const char *json, size_t len, char **out, size_t *outlen, char *err,
			  size_t errlen)
{
	char *b;
	size_t w = 0, depth = 0;
	char prev = '\0'; /* last non-blank byte outside strings */
	bool in_str = false;

	/* each quoted token is at least 19 bytes and gains 2 */
	b = malloc(len + len / 8 + 3);
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < len;) {
		char c = json[i];

		if (in_str) {
			b[w++] = c;
			i++;
			if (c == '\\' && i < len)
				b[w++] = json[i++];
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[') {
			if (++depth > META_MAX_DEPTH) {
				snprintf(err, errlen, "offset %zu: nested deeper than %d", i,
					 META_MAX_DEPTH);
				free(b);
				return -EINVAL;
			}
		} else if (c == '}' || c == ']') {
			if (depth)
				depth--;
		} else if (c >= '0' && c <= '9' && prev == ':') {
			size_t n = 0;

			while (i + n < len && json[i + n] >= '0' && json[i + n] <= '9')
				n++;
			bool whole = i + n == len || !strchr(".eE", json[i + n]) || json[i + n] == '\0';
			if (whole && beyond_int64(json + i, n)) {
				b[w++] = '"';
				memcpy(b + w, json + i, n);
				w += n;
				b[w++] = '"';
			} else {
				memcpy(b + w, json + i, n);
				w += n;
			}
			i += n;
			prev = '0';
			continue;
		}
		if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
			prev = c;
		b[w++] = c;
		i++;
	}
	b[w] = '\0';
	*out = b;
	*outlen = w;
	return 0;
}

/* A string member into dst (truncated); absent leaves dst as is. Returns false on a wrong type. */
static bool get_string(json_t *root, const char *key, char *dst, size_t dstlen, char *err,
		       size_t errlen)
{
	json_t *v = json_object_get(root, key);

	if (!v)
		return true;
	if (!json_is_string(v)) {
		snprintf(err, errlen, "\"%s\": not a string", key);
		return false;
	}
	copy(dst, dstlen, json_string_value(v));
	return true;
}

/* A sweep value as text: strings unquoted, numbers and booleans as JSON writes them, null
 * empty, lists and objects in compact JSON. */
static void value_text(json_t *v, char *dst, size_t dstlen)
{
	char *s;

	switch (json_typeof(v)) {
	case JSON_STRING:
		copy(dst, dstlen, json_string_value(v));
		break;
	case JSON_INTEGER:
		snprintf(dst, dstlen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL:
		snprintf(dst, dstlen, "%.15g", json_real_value(v));
		break;
	case JSON_TRUE:
		copy(dst, dstlen, "true");
		break;
	case JSON_FALSE:
		copy(dst, dstlen, "false");
		break;
	case JSON_NULL:
		dst[0] = '\0';
		break;
	default:
		s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		copy(dst, dstlen, s ? s : "");
		free(s);
		break;
	}
}

/* "host_guard": {runq_wait_mean, runq_wait_max, host_cpu_mean, host_cpu_max: fraction or
 * null, saturated: boolean}. Absent: has_guard false. Returns false with err filled. */
static bool read_guard(json_t *g, struct run_meta *out, char *err, size_t errlen)
{
	static const char *const keys[] = { "runq_wait_mean", "runq_wait_max", "host_cpu_mean",
					    "host_cpu_max" };
	double *dst[] = { &out->runq_wait_mean, &out->runq_wait_max, &out->host_cpu_mean,
			  &out->host_cpu_max };
	json_t *v;

	for (size_t i = 0; i < 4; i++)
		*dst[i] = NAN;
	if (!g)
		return true;
	if (!json_is_object(g)) {
		snprintf(err, errlen, "\"host_guard\": not an object");
		return false;
	}
	for (size_t i = 0; i < 4; i++) {
		v = json_object_get(g, keys[i]);
		if (!v || json_is_null(v))
			continue;
		if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1)) {
			snprintf(err, errlen, "\"host_guard\".\"%s\": not a fraction in [0,1]", keys[i]);
			return false;
		}
		*dst[i] = json_number_value(v);
	}
	v = json_object_get(g, "saturated");
	if (!json_is_boolean(v)) {
		snprintf(err, errlen, "\"host_guard\".\"saturated\": not a boolean");
		return false;
	}
	out->saturated = json_is_true(v);
	out->has_guard = true;
	return true;
}

/* Fill out from the parsed document. Returns false with err filled on a schema error. */
static bool read_root(json_t *root, struct run_meta *out, char *err, size_t errlen)
{
	json_t *v;
	const char *key;

	if (!json_is_object(root)) {
		snprintf(err, errlen, "not a JSON object");
		return false;
	}
	v = json_object_get(root, "run_id");
	if (!json_is_string(v) || json_string_length(v) == 0) {
		snprintf(err, errlen, "no \"run_id\" (a non-empty string)");
		return false;
	}
	copy(out->run_id, sizeof out->run_id, json_string_value(v));
	if (!get_string(root, "backend", out->backend, sizeof out->backend, err, errlen) ||
	    !get_string(root, "status", out->status, sizeof out->status, err, errlen) ||
	    !get_string(root, "mode", out->mode, sizeof out->mode, err, errlen))
		return false;
	v = json_object_get(root, "seed");
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		out->seed = (uint64_t)json_integer_value(v);
	} else if (json_is_string(v) && beyond_int64(json_string_value(v), json_string_length(v))) {
		out->seed = strtoull(json_string_value(v), NULL, 10);
	} else if (v) {
		snprintf(err, errlen, "\"seed\": not an unsigned 64-bit integer");
		return false;
	}
	v = json_object_get(root, "repeat");
	if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
		  json_integer_value(v) > INT32_MAX)) {
		snprintf(err, errlen, "\"repeat\": not an integer in 0..%d", INT32_MAX);
		return false;
	}
	out->repeat = v ? (int)json_integer_value(v) : 0;
	v = json_object_get(root, "target");
	if (v && (!json_is_number(v) || !isfinite(json_number_value(v)))) {
		snprintf(err, errlen, "\"target\": not a number");
		return false;
	}
	if (v) {
		out->has_target = true;
		out->target = json_number_value(v);
	}
	if (!read_guard(json_object_get(root, "host_guard"), out, err, errlen))
		return false;
	v = json_object_get(root, "sweep");
	if (v && !json_is_object(v)) {
		snprintf(err, errlen, "\"sweep\": not an object");
		return false;
	}
	json_t *val;
	json_object_foreach(v, key, val) {
		if (out->nsweep >= META_MAX_SWEEP) {
			snprintf(err, errlen, "\"sweep\": more than %d keys", META_MAX_SWEEP);
			return false;
		}
		copy(out->sweep_key[out->nsweep], META_KEY_LEN, key);
		value_text(val, out->sweep_val[out->nsweep], META_VAL_LEN);
		out->nsweep++;
	}
	return true;
}

int meta_parse(const char *json, size_t len, struct run_meta *out, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root = NULL;
	char *text = NULL;
	size_t tlen = 0;
	int rc;

	memset(out, 0, sizeof *out);
	if (errlen)
		err[0] = '\0';
	if (len > META_MAX_BYTES) {
		snprintf(err, errlen, "larger than %d bytes", META_MAX_BYTES);
		return -EINVAL;
	}
	rc = quote_big_ints(json, len, &text, &tlen, err, errlen);
	if (rc == -ENOMEM)
		snprintf(err, errlen, "out of memory");
	if (rc < 0)
		goto out;
	root = json_loadb(text, tlen, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		/* jerr.position counts bytes of the quoted copy; close enough to find the spot */
		snprintf(err, errlen, "offset %d: %s", jerr.position, jerr.text);
		rc = -EINVAL;
		goto out;
	}
	if (!read_root(root, out, err, errlen)) {
		rc = -EINVAL;
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		memset(out, 0, sizeof *out);
	json_decref(root);
	free(text);
	return rc;
}

/* The target accuracy from RUN_DIR/scenario.yaml's top-level "target:" line, if there is one
 * (meta.json of older runs lacks it). An absent file is no error; one that is not a regular
 * file or too large is. */
static int scenario_target(const char *run_dir, struct run_meta *out, char *err, size_t errlen)
{
	char path[4096], *buf = NULL;
	size_t len = 0;
	int rc;

	snprintf(path, sizeof path, "%s/scenario.yaml", run_dir);
	rc = rfile_read(path, META_SCENARIO_MAX_BYTES, &buf, &len, err, errlen);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	for (char *line = buf, *nl; line && line < buf + len; line = nl ? nl + 1 : NULL) {
		char *end;
		double v;

		nl = strchr(line, '\n');
		if (strncmp(line, "target:", 7) != 0)
			continue;
		v = strtod(line + 7, &end);
		if (end != line + 7 && isfinite(v)) {
			out->has_target = true;
			out->target = v;
		}
		break;
	}
	free(buf);
	return 0;
}

int meta_load_dir(const char *run_dir, struct run_meta *out, char *err, size_t errlen)
{
	char path[4096], msg[256];
	char *buf = NULL;
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof *out);
	snprintf(path, sizeof path, "%s/meta.json", run_dir);
	rc = rfile_read(path, META_MAX_BYTES, &buf, &n, err, errlen);
	if (rc < 0)
		goto out;
	rc = meta_parse(buf, n, out, msg, sizeof msg);
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, msg);
		goto out;
	}
	if (!out->has_target)
		rc = scenario_target(run_dir, out, err, errlen);
out:
	if (rc < 0)
		memset(out, 0, sizeof *out);
	free(buf);
	return rc;
}

const char *meta_sweep_value(const struct run_meta *m, const char *key)
{
	for (size_t i = 0; i < m->nsweep; i++)
		if (strcmp(m->sweep_key[i], key) == 0)
			return m->sweep_val[i];
	return NULL;
}

const char *meta_sweep_label(const struct run_meta *m, char *buf, size_t buflen)
{
	size_t used = 0;

	if (buflen)
		buf[0] = '\0';
	for (size_t i = 0; i < m->nsweep && used < buflen; i++) {
		int n = snprintf(buf + used, buflen - used, "%s%s=%s", i ? ", " : "",
				 m->sweep_key[i], m->sweep_val[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return buf;
}
