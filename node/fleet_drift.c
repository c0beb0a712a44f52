/* node/fleet_drift: see fleet_drift.h. */
#include "node/fleet_drift.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "node/data.h"
#include "node/engine_common.h"

int fleet_drift_parse(const char *s, struct fleet_drift *out)
{
	memset(out, 0, sizeof *out);
	if (!s)
		return 0;
	while (*s) {
		struct fleet_drift_entry *e;
		char *end;

		if (out->n == FLEET_DRIFT_MAX)
			return -EINVAL;
		e = &out->e[out->n];
		if (*s != 't' && *s != 's')
			return -EINVAL;
		e->by_steps = *s == 's';
		s++;
		errno = 0;
		if (e->by_steps) {
			long long v = strtoll(s, &end, 10);

			if (errno || end == s || v < 0)
				return -EINVAL;
			e->at_steps = v;
		} else {
			double v = strtod(s, &end);

			if (errno || end == s || !isfinite(v) || v < 0)
				return -EINVAL;
			e->at_s = v;
		}
		if (*end != ':')
			return -EINVAL;
		s = end + 1;
		for (;;) {
			unsigned long c;

			errno = 0;
			c = strtoul(s, &end, 10);
			if (errno || end == s || *s < '0' || *s > '9' || c >= FLEET_DRIFT_CLASSES)
				return -EINVAL;
			e->classes |= (uint16_t)(1u << c);
			s = end;
			if (*s != ',')
				break;
			s++;
		}
		if (*s == ';')
			s++;
		else if (*s)
			return -EINVAL;
		if (!e->classes)
			return -EINVAL;
		out->n++;
	}
	return 0;
}

uint16_t fleet_drift_due(struct fleet_drift *d, double now_s, int64_t steps)
{
	const struct fleet_drift_entry *e;

	if (d->next >= d->n)
		return 0;
	e = &d->e[d->next];
	if (e->by_steps ? steps < e->at_steps : now_s < e->at_s)
		return 0;
	d->next++;
	return e->classes;
}

int fleet_drift_select(const uint8_t *labels, uint32_t nlabels, uint32_t index, uint32_t ndev,
		       uint16_t classes, uint16_t held, uint32_t **idx, size_t *nidx)
{
	uint16_t want = classes & (uint16_t)~held;
	size_t n = 0;
	uint32_t *v;

	*idx = NULL;
	*nidx = 0;
	if (!want || ndev == 0)
		return 0;
	for (uint32_t p = index; p < nlabels; p += ndev)
		n += labels[p] < FLEET_DRIFT_CLASSES && (want >> labels[p] & 1);
	if (!n)
		return 0;
	if (!(v = malloc(n * sizeof *v)))
		return -ENOMEM;
	n = 0;
	for (uint32_t p = index; p < nlabels; p += ndev)
		if (labels[p] < FLEET_DRIFT_CLASSES && (want >> labels[p] & 1))
			v[n++] = p;
	*idx = v;
	*nidx = n;
	return 0;
}

int fleet_drift_apply(struct engine_work *w, const struct engine_conf *c, uint16_t classes,
		      size_t *added)
{
	char img[PATH_MAX], lbl[PATH_MAX];
	uint8_t *labels = NULL;
	uint32_t nlabels = 0, *idx = NULL;
	uint16_t held = 0;
	size_t nidx = 0;
	int rc;

	*added = 0;
	for (uint32_t i = 0; i < w->train->n; i++)
		if (w->train->labels[i] < FLEET_DRIFT_CLASSES)
			held |= (uint16_t)(1u << w->train->labels[i]);
	rc = data_paths(c->data_dir, DATA_TRAIN, img, lbl, sizeof img);
	rc = rc ? rc : data_read_labels(lbl, &labels, &nlabels);
	if (rc)
		goto out;
	if (c->train_limit > 0 && (uint64_t)c->train_limit < nlabels)
		nlabels = (uint32_t)c->train_limit;
	if ((rc = fleet_drift_select(labels, nlabels, c->index, c->n, classes, held, &idx, &nidx)) < 0)
		goto out;
	if (nidx && (rc = engine_work_add_samples(w, img, lbl, idx, nidx)) == 0)
		*added = nidx;
out:
	if (rc < 0)
		log_error("engine_fleet: drift of %s: %s", c->name ? c->name : "a device", strerror(-rc));
	free(labels);
	free(idx);
	return rc;
}
