/* orchestrator/cpuneed: see cpuneed.h. */
#include "orchestrator/cpuneed.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "node/model.h"

static double thread_cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int cpuneed_step_cost(const struct scenario *sc, int reps, double *cost_s, size_t *nparams)
{
	struct model_spec spec = { .rows = 28, .cols = 28, .nclasses = 10, .channels = 32, .kernel = 5 };
	struct model *m = NULL;
	float *x = NULL, *grad = NULL;
	uint8_t *y = NULL;
	double *t = NULL, loss;
	size_t batch = sc->train.batch ? sc->train.batch : 64, dim;
	int rc = 0;

	spec.kind = sc->model.kind == SCENARIO_MODEL_MLP ? MODEL_MLP :
		    sc->model.kind == SCENARIO_MODEL_CNN ? MODEL_CNN : MODEL_SOFTMAX;
	spec.nhidden = (uint32_t)sc->model.n_hidden;
	for (size_t i = 0; i < sc->model.n_hidden && i < MODEL_MAX_HIDDEN; i++)
		spec.hidden[i] = sc->model.hidden[i];
	if (spec.kind != MODEL_SOFTMAX && spec.nhidden == 0) {
		spec.nhidden = 1;
		spec.hidden[0] = spec.kind == MODEL_MLP ? 256 : 128;
	}
	if (reps < 1)
		reps = 1;
	/* A node computes on one BLAS thread (node/model); so does the measurement. */
	model_blas_threads(1);
	m = model_new(&spec, 1);
	if (!m)
		return -ENOMEM;
	dim = model_input_dim(m);
	x = malloc(batch * dim * sizeof *x);
	y = malloc(batch);
	grad = malloc(model_nparams(m) * sizeof *grad);
	t = calloc((size_t)reps, sizeof *t);
	if (!x || !y || !grad || !t) {
		rc = -ENOMEM;
		goto out;
	}
	srand(1);
	for (size_t i = 0; i < batch * dim; i++)
		x[i] = (float)rand() / (float)RAND_MAX;
	for (size_t i = 0; i < batch; i++)
		y[i] = (uint8_t)(i % 10);
	for (int r = -1; r < reps && rc == 0; r++) {
		double t0 = thread_cpu_s();

		rc = model_gradient(m, x, y, batch, grad, &loss);
		if (r >= 0)
			t[r] = thread_cpu_s() - t0;
	}
	if (rc == 0) {
		qsort(t, (size_t)reps, sizeof *t, dbl_cmp);
		*cost_s = t[reps / 2];
		*nparams = model_nparams(m);
	}
out:
	free(x);
	free(y);
	free(grad);
	free(t);
	model_destroy(&m);
	return rc;
}

/* Mean extra delay per step (seconds) of a straggler's delay distribution (scenario.h). */
static double delay_mean_s(const struct scenario_straggler *st)
{
	if (!(st->set & SCENARIO_STRAG_DELAY))
		return 0;
	switch (st->delay_dist) {
	case SCENARIO_DIST_CONSTANT: return st->delay_a;
	case SCENARIO_DIST_UNIFORM: return (st->delay_a + st->delay_b) / 2;
	case SCENARIO_DIST_EXPONENTIAL: return st->delay_a;
	case SCENARIO_DIST_GAMMA: return st->delay_a * st->delay_b;
	case SCENARIO_DIST_NORMAL: return st->delay_a > 0 ? st->delay_a : 0;
	case SCENARIO_DIST_PARETO: return st->delay_b > 1 ? st->delay_a * st->delay_b / (st->delay_b - 1) : 0;
	default: return 0;
	}
}

/* Whether node i's link is shaped (so its packets go through the nfq emulator): any link key
 * set, a timeline change of it, or a trace (which reshapes every link). */
static bool shaped(const struct plan_run *run, size_t i)
{
	if (run->nodes[i].up.set || run->nodes[i].down.set || run->scenario->network.trace)
		return true;
	for (size_t e = 0; e < run->n_events; e++)
		if (run->events[e].node == i)
			return true;
	return false;
}

void cpuneed_estimate(const struct plan_run *run, double step_cost_s, size_t nparams, bool nfq,
		      int host_cores, struct cpuneed *out)
{
	double steps_per_s = 0, shaped_steps_per_s = 0, server_rtt_s = 0, bytes_per_step = 2.0 * 4.0 * (double)nparams;
	double msg_s = CPUNEED_MSG_FLOOR_S + bytes_per_step * CPUNEED_MSG_S_PER_BYTE;
	size_t servers = 0;

	memset(out, 0, sizeof *out);
	out->step_cost_s = step_cost_s;
	out->host_cores = host_cores;
	for (size_t i = 0; i < run->n_nodes; i++)
		if (run->nodes[i].role == SCENARIO_ROLE_SERVER) {
			servers++;
			server_rtt_s = (run->nodes[i].up.delay_us + run->nodes[i].down.delay_us) / 1e6;
		}
	for (size_t i = 0; i < run->n_nodes; i++) {
		const struct plan_node *nd = &run->nodes[i];
		double slow = 1, busy, len, d;

		if (nd->role != SCENARIO_ROLE_WORKER && nd->role != SCENARIO_ROLE_PEER &&
		    nd->role != SCENARIO_ROLE_CENTRAL)
			continue;
		if (nd->straggler.set & SCENARIO_STRAG_SLOWDOWN)
			slow = nd->straggler.slowdown;
		/* on a core: the gradient and the messages (copies, checksums, the TCP stack);
		 * asleep: the straggler's delay and the links' round trip */
		busy = step_cost_s * slow + (nd->role == SCENARIO_ROLE_CENTRAL ? 0 : msg_s);
		len = busy + delay_mean_s(&nd->straggler);
		if (nd->role != SCENARIO_ROLE_CENTRAL)
			len += (nd->up.delay_us + nd->down.delay_us) / 1e6 + server_rtt_s;
		if (busy <= 0 || len <= 0)
			continue;
		d = busy / len;
		/* a limited node (resources cpu) cannot use more than its share */
		if ((nd->resources.set & SCENARIO_RES_CPU) && d > nd->resources.cpu)
			d = nd->resources.cpu;
		out->workers_cores += d;
		steps_per_s += d / busy;
		if (shaped(run, i))
			shaped_steps_per_s += d / busy;
	}
	/* the parameter servers handle each step's messages too, at most a core each */
	if (servers) {
		out->servers_cores = steps_per_s * msg_s;
		if (out->servers_cores > (double)servers)
			out->servers_cores = (double)servers;
		out->workers_cores += out->servers_cores;
	}
	if (nfq) {
		/* Each step of a worker on a shaped link pushes a gradient and pulls a model (a
		 * peer exchanges as much), each packet crossing two directions (sender up,
		 * receiver down); an unshaped link never reaches the emulator. */
		out->emulator_cores = shaped_steps_per_s * 2 * ceil(bytes_per_step / CPUNEED_PACKET_BYTES) * CPUNEED_NFQ_PACKET_S;
	}
	out->need_cores = out->workers_cores + out->emulator_cores;
	out->over = out->need_cores > (double)host_cores;
}

void cpuneed_print(FILE *out, const char *run_id, const struct cpuneed *e)
{
	fprintf(out, "cpu %s: model step %.2f ms (measured here), nodes need %.2f cores (servers %.2f), "
		     "+%.2f for the nfq emulator, of %d\n",
		run_id, e->step_cost_s * 1e3, e->workers_cores, e->servers_cores, e->emulator_cores,
		e->host_cores);
	if (e->workers_cores > (double)e->host_cores)
		fprintf(out, "warning: %s wants %.1f cores and the host has %d: nodes will wait for a core "
			     "and their timing will reflect the host (fewer workers, or resources: limits)\n",
			run_id, e->workers_cores, e->host_cores);
	else if (e->over)
		fprintf(out, "warning: %s wants %.1f cores with the nfq backend and the host has %d: "
			     "use the kernel backend, fewer workers or resources: limits\n",
			run_id, e->need_cores, e->host_cores);
}
