/* orchestrator/scenset: `--set key.path=value` overrides applied to a scenario tree before it is
 * converted, so an override is validated exactly like the file.
 *
 * Design:
 * - The value is parsed as YAML and carries its origin ("--set a.b=1") instead of a position, so
 *   an error in it names the --set that gave it.
 * - `sweep.<key>` edits ONE key of the sweep mapping, dots included (sweep keys are key paths).
 * - A --set of a value the sweep also sets would be silently overwritten in every run (or would
 *   overwrite part of every run's sweep value): it is refused, naming both and the way out. */
#include "orchestrator/scenset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_SWEEP_PREFIX "sweep."

/* The value of one --set (parsed as YAML; empty = an empty plain scalar), its origin set. */
static struct yamltree_node *set_value(const char *val, const char *origin, char *err, size_t errlen)
{
	struct yamltree_node *v = NULL;
	if (*val) {
		char verr[256];
		v = yamltree_parse(val, strlen(val), "value", false, verr, sizeof verr);
		if (!v) {
			snprintf(err, errlen, "%s: error: value: %s", origin, verr);
			return NULL;
		}
	} else if ((v = calloc(1, sizeof *v))) {
		v->kind = YAMLTREE_SCALAR;
		v->plain = true;
		if (!(v->scalar = strdup(""))) {
			yamltree_free(v);
			v = NULL;
		}
	}
	if (!v || yamltree_set_origin(v, origin)) {
		yamltree_free(v);
		snprintf(err, errlen, "%s: error: out of memory", origin);
		return NULL;
	}
	return v;
}

/* `sweep.<key>=VALUE`: after "sweep." the rest is ONE key of the sweep mapping, dots included
 * (sweep keys are key paths themselves), so it cannot go through yamltree_set_path. The entry
 * is replaced where it is (a zip group names it, so it keeps its place) or added at the end.
 * Takes ownership of v on success. */
static int set_sweep_key(struct yamltree_node *root, const char *key, struct yamltree_node *v, const char *origin,
			 char *err, size_t errlen)
{
	struct yamltree_node *sw = yamltree_get(root, "sweep");
	const char *why = NULL;
	if (!strncmp(key, "zip.", 4) || !strncmp(key, "repeat.", 7)) {
		snprintf(err, errlen, "%s: error: sweep.%.*s is set whole (e.g. --set 'sweep.zip=[[a, b]]', "
			 "--set sweep.repeat=3)", origin, (int)strcspn(key, "."), key);
		return -EINVAL;
	}
	if (!sw) {
		struct yamltree_node *fresh = calloc(1, sizeof *fresh);
		if (!fresh || yamltree_set_origin(fresh, origin)) {
			yamltree_free(fresh);
			snprintf(err, errlen, "%s: error: out of memory", origin);
			return -ENOMEM;
		}
		fresh->kind = YAMLTREE_MAP;
		if (yamltree_set_path(root, "sweep", fresh, 0, 0, &why)) {
			yamltree_free(fresh);
			snprintf(err, errlen, "%s: error: %s", origin, why);
			return -EINVAL;
		}
		sw = fresh;
	}
	if (sw->kind != YAMLTREE_MAP) {
		snprintf(err, errlen, "%s: error: sweep is %s, not a mapping of keys to lists", origin,
			 yamltree_kind_name(sw->kind));
		return -EINVAL;
	}
	for (size_t i = 0; i < sw->n; i++)
		if (!strcmp(sw->items[i].key, key)) {
			yamltree_free(sw->items[i].value);
			sw->items[i].value = v;
			return 0;
		}
	char *k = strdup(key);
	if (!k)
		goto oom;
	if (sw->n == sw->cap) {
		size_t cap = sw->cap ? sw->cap * 2 : 4;
		struct yamltree_entry *it = realloc(sw->items, cap * sizeof *it);
		if (!it) {
			free(k);
			goto oom;
		}
		sw->items = it;
		sw->cap = cap;
	}
	sw->items[sw->n++] = (struct yamltree_entry){ k, 0, 0, v };
	return 0;
oom:
	snprintf(err, errlen, "%s: error: out of memory", origin);
	return -ENOMEM;
}

int scenset_apply(struct yamltree_node *root, const char *assignment, char *err, size_t errlen)
{
	const char *eq = strchr(assignment, '=');
	char origin[512], key[256];
	const char *why = NULL;
	snprintf(origin, sizeof origin, "--set %s", assignment);
	if (!eq || eq == assignment || (size_t)(eq - assignment) >= sizeof key) {
		snprintf(err, errlen, "%s: error: expected key.path=value", origin);
		return -EINVAL;
	}
	memcpy(key, assignment, (size_t)(eq - assignment));
	key[eq - assignment] = 0;
	struct yamltree_node *v = set_value(eq + 1, origin, err, errlen);
	if (!v)
		return -EINVAL;
	const size_t plen = strlen(SET_SWEEP_PREFIX);
	int rc;
	if (!strncmp(key, SET_SWEEP_PREFIX, plen) && key[plen]) {
		rc = set_sweep_key(root, key + plen, v, origin, err, errlen);
	} else {
		rc = yamltree_set_path(root, key, v, 0, 0, &why);
		if (rc)
			snprintf(err, errlen, "%s: error: %s", origin, why);
	}
	if (rc)
		yamltree_free(v);
	return rc;
}

/* 0 when the key paths a and b do not overlap; else 1 (equal), 2 (a holds b), 3 (b holds a). */
static int path_overlap(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la == lb)
		return !strcmp(a, b);
	if (la < lb)
		return !strncmp(a, b, la) && b[la] == '.' ? 2 : 0;
	return !strncmp(a, b, lb) && a[lb] == '.' ? 3 : 0;
}

/* The other keys of key's zip group, "a, b", into buf ("" when key is not zipped). */
static void zip_partners(const struct yamltree_node *sw, const char *key, char *buf, size_t len)
{
	const struct yamltree_node *zip = yamltree_get(sw, "zip");
	buf[0] = 0;
	if (!zip || zip->kind != YAMLTREE_SEQ || !zip->n)
		return;
	bool nested = zip->items[0].value->kind == YAMLTREE_SEQ;
	for (size_t g = 0; g < (nested ? zip->n : 1); g++) {
		const struct yamltree_node *grp = nested ? zip->items[g].value : zip;
		bool member = false;
		if (grp->kind != YAMLTREE_SEQ)
			continue;
		for (size_t k = 0; k < grp->n; k++)
			member |= grp->items[k].value->kind == YAMLTREE_SCALAR && !strcmp(grp->items[k].value->scalar, key);
		if (!member)
			continue;
		size_t pos = 0;
		for (size_t k = 0; k < grp->n && pos < len; k++)
			if (grp->items[k].value->kind == YAMLTREE_SCALAR && strcmp(grp->items[k].value->scalar, key))
				pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", pos ? ", " : "",
							grp->items[k].value->scalar);
		return;
	}
}

/* A --set of a value that the sweep also sets would be silently overwritten in every run (or
 * overwrite part of every run's sweep value): refuse it, naming both and the way out. Sets of
 * sweep.* edit the sweep itself and are never in conflict. */
int scenset_check_conflicts(const struct yamltree_node *root, const char *const *sets, size_t n_sets,
			    const char *file, char *err, size_t errlen)
{
	const struct yamltree_node *sw = yamltree_get(root, "sweep");
	const size_t plen = strlen(SET_SWEEP_PREFIX);
	if (!sw || sw->kind != YAMLTREE_MAP)
		return 0;
	for (size_t i = 0; i < n_sets; i++) {
		const char *eq = strchr(sets[i], '=');
		char key[256];
		if (!eq || (size_t)(eq - sets[i]) >= sizeof key)
			continue;
		memcpy(key, sets[i], (size_t)(eq - sets[i]));
		key[eq - sets[i]] = 0;
		if (!strcmp(key, "sweep") || !strncmp(key, SET_SWEEP_PREFIX, plen))
			continue;
		for (size_t j = 0; j < sw->n; j++) {
			const struct yamltree_entry *e = &sw->items[j];
			int how;
			if (!strcmp(e->key, "repeat") || !strcmp(e->key, "zip") || !(how = path_overlap(key, e->key)))
				continue;
			char where[600], what[600], values[200], zipped[300];
			int need = yamltree_flow(e->value, values, sizeof values);
			if (need < 0 || (size_t)need >= sizeof values)
				snprintf(values, sizeof values, "[...]");
			if (e->line)
				snprintf(where, sizeof where, "%s:%u:%u", file, e->line, e->col ? e->col : 1);
			else
				snprintf(where, sizeof where, "%s", e->value->origin ? e->value->origin : file);
			if (how == 1)
				snprintf(what, sizeof what, "the sweep sets it for every run");
			else if (how == 2)
				snprintf(what, sizeof what, "the sweep sets %s, inside it, for every run", e->key);
			else
				snprintf(what, sizeof what, "the sweep sets %s, which holds it, for every run", e->key);
			zip_partners(sw, e->key, zipped, sizeof zipped);
			snprintf(err, errlen, "%s: error: --set %s conflicts with the sweep key %s: %s; to change what "
				 "the sweep sets use --set 'sweep.%s=%s' with the values you want%s%s%s, or remove %s "
				 "from the sweep", where, sets[i], e->key, what, e->key, values,
				 zipped[0] ? " (zipped with " : "", zipped, zipped[0] ? ": keep the list's length)" : "",
				 e->key);
			return -EINVAL;
		}
	}
	return 0;
}
