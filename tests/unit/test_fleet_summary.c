/* collectors/fleet_summary: the fleet columns of a run computed from hand-written traces
 * (every field checked against numbers worked out by hand), a sweep's union of keys, a run
 * without fleet.csv left out, recover.csv absent -> its fields empty. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "collectors/fleet_summary.h"
#include "collectors/schema.h"
#include "tests/support/files.h"

static char dir[256];

static void put(const char *run, const char *name, const char *text)
{
	char p[1024];

	snprintf(p, sizeof p, "%s/%s", dir, run);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/%s/nodes", dir, run);
	mkdir(p, 0755);
	snprintf(p, sizeof p, "%s/%s/%s", dir, run, name);
	support_write_file(p, text);
}

static void setup(void)
{
	cr_assert_not_null(support_tmpdir(dir, sizeof dir, "fleetsum"));
}

static void teardown(void)
{
	support_rm_rf(dir);
}

/* Two devices over 36 s; device1's second row rejected; recover.csv with one failure. */
static void fleet_run(const char *run, const char *strategy)
{
	char meta[512];

	snprintf(meta, sizeof meta, "{\"run_id\": \"%s\", \"status\": \"complete\", "
		 "\"sweep\": {\"fleet.strategy\": \"%s\"}}", run, strategy);
	put(run, "meta.json", meta);
	put(run, "fleet.csv", TRACE_HEADER_FLEET "\n"
	    "1.0,device0,1,delta,1000,900,0.001,0.01,1,0.5,1\n"
	    "2.0,device1,1,delta,3000,2800,0.001,0.01,1,1.5,1\n"
	    "3.0,device1,2,replay,200,0,0.001,0.01,0,0.2,0\n"
	    "4.0,device1,2,delta,2000,2000,0.001,0.01,1,4.0,2\n");
	put(run, "events.csv", TRACE_HEADER_EVENTS "\n0,start,all,\n36,stop,all,stop.time reached\n");
	put(run, "recover.csv", TRACE_HEADER_RECOVER "\n"
	    "device0,1,delta,1,0.002,1\ndevice1,1,delta,1,0.004,1\ndevice1,2,delta,2,0.006,0\n");
	put(run, "nodes/device0.csv", TRACE_HEADER_NODE "\n0.5,device0,5,0.1,0,,0,1.0,0,0,0\n"
	    "1.5,device0,10,0.1,0,,0,1.0,0,0,0\n"); /* its v1 (stored) has no row */
	put(run, "nodes/device1.csv", TRACE_HEADER_NODE "\n1.0,device1,10,0.1,0,,2,1.0,0,0,0\n"
	    "4.0,device1,20,0.1,0,,4,1.0,0,0,0\n"); /* made 4, 2 stored */
	put(run, "nodes/device2.csv", TRACE_HEADER_NODE "\n"); /* a device that never synced */
}

Test(fleet_summary, compute_by_hand, .init = setup, .fini = teardown)
{
	struct fleet_summary_row r;
	char err[256], p[512];

	fleet_run("a", "delta");
	snprintf(p, sizeof p, "%s/a", dir);
	cr_assert_eq(fleet_summary_compute(p, &r, err, sizeof err), 1, "%s", err);
	cr_assert_eq(r.devices, 3);
	cr_assert_float_eq(r.duration_s, 36.0, 1e-12);
	cr_assert_eq(r.versions_made, 5);
	cr_assert_eq(r.versions, 3);
	cr_assert_eq(r.rejected, 1);
	cr_assert_eq(r.bytes_tx, 6200);
	/* 6200 bytes over 3 devices * 36 s = 0.03 device-hours */
	cr_assert_float_eq(r.bytes_per_device_hour, 6200.0 / 0.03, 1e-6);
	cr_assert_eq(r.bytes_stored, 5700);
	cr_assert_float_eq(r.stored_per_version, 1900.0, 1e-9);
	cr_assert_float_eq(r.lag_mean_s, 2.0, 1e-12); /* (0.5 + 1.5 + 4.0) / 3: the rejected row is out */
	cr_assert_float_eq(r.lag_max_s, 4.0, 1e-12);
	cr_assert(r.has_recover);
	cr_assert_eq(r.recover_versions, 3);
	cr_assert_eq(r.recover_failed, 1);
	cr_assert_float_eq(r.recover_s_mean, 0.004, 1e-12);
	cr_assert_float_eq(r.recover_s_max, 0.006, 1e-12);
}

Test(fleet_summary, rebuild_sweep, .init = setup, .fini = teardown)
{
	char err[256], p[512], *text;
	size_t len;

	fleet_run("a", "delta");
	fleet_run("b", "sparse");
	snprintf(p, sizeof p, "%s/b/recover.csv", dir);
	remove(p);
	snprintf(p, sizeof p, "%s/b/events.csv", dir);
	remove(p); /* duration: the last fleet.csv t_s */
	put("c", "meta.json", "{\"run_id\": \"c\", \"status\": \"complete\"}"); /* not a fleet run */
	cr_assert_eq(fleet_summary_rebuild(dir, err, sizeof err), 2, "%s", err);
	snprintf(p, sizeof p, "%s/fleet_summary.csv", dir);
	text = support_read_file(p, &len);
	cr_assert_not_null(text);
	cr_assert_str_eq(text,
		"fleet.strategy," FLEET_SUMMARY_HEADER "\n"
		"delta,a,3,36.000,5,3,1,6200,206667,5700,1900.0,2.000,4.000,3,1,0.004000,0.006000,complete\n"
		"sparse,b,3,4.000,5,3,1,6200,1860000,5700,1900.0,2.000,4.000,,,,,complete\n");
	free(text);
	/* a run directory of its own; a directory without fleet runs writes nothing */
	snprintf(p, sizeof p, "%s/a", dir);
	cr_assert_eq(fleet_summary_rebuild(p, err, sizeof err), 1, "%s", err);
	snprintf(p, sizeof p, "%s/c", dir);
	cr_assert_eq(fleet_summary_rebuild(p, err, sizeof err), 0, "%s", err);
	snprintf(p, sizeof p, "%s/c/fleet_summary.csv", dir);
	cr_assert_null(support_read_file(p, &len));
}

Test(fleet_summary, bad_fleet_csv, .init = setup, .fini = teardown)
{
	struct fleet_summary_row r;
	char err[256], p[512];

	put("a", "meta.json", "{\"run_id\": \"a\"}");
	put("a", "fleet.csv", "t_s,device\n1,device0\n");
	snprintf(p, sizeof p, "%s/a", dir);
	cr_assert_lt(fleet_summary_compute(p, &r, err, sizeof err), 0);
	cr_assert(strstr(err, "not a fleet trace"), "%s", err);
}
