/* collectors/schema: the one trace schema of a run directory, and a checker for it.
 *
 * docs/traces.md is the prose version of the tables in schema.c: file names, exact headers,
 * column types and units. Writers use the TRACE_HEADER_* strings below with collectors/csv so a
 * header can never drift from what the checker, the summary and the plots expect. */
#ifndef STALENET_SCHEMA_H
#define STALENET_SCHEMA_H

#include <stddef.h>

#define TRACE_HEADER_NODE \
	"t_s,node,step,compute_s,wait_s,staleness,model_version,loss,bytes_tx,bytes_rx,bad_frames"
#define TRACE_HEADER_SERVER \
	"t_s,node,worker,worker_step,staleness,model_version,updates,dropped,live,waiting"
#define TRACE_HEADER_EVAL "t_s,node,updates,epoch,samples,test_accuracy,test_loss,train_loss"
#define TRACE_HEADER_PROGRESS \
	"t_s,alive,waiting,min_step,median_step,max_step,runq_wait_frac,host_cpu_frac"
/* progress.csv before the host-saturation guard: still a valid trace. */
#define TRACE_HEADER_PROGRESS_V1 "t_s,alive,waiting,min_step,median_step,max_step"
#define TRACE_HEADER_LINKS \
	"t_s,node,direction,packets,bytes,dropped,backlog_pkts,held_pkts,late_mean_ms,late_p99_ms,late_max_ms"
#define TRACE_HEADER_LINKCHECK \
	"node,direction,probes,cfg_delay_ms,cfg_jitter_ms,cfg_loss,rtt_mean_ms,rtt_sd_ms,loss,late_p99_ms,verdict"
/* The headers before release lateness was measured: still accepted by the checker. */
#define TRACE_HEADER_LINKS_V1 "t_s,node,direction,packets,bytes,dropped,backlog_pkts,held_pkts"
#define TRACE_HEADER_LINKCHECK_V1 \
	"node,direction,probes,cfg_delay_ms,cfg_jitter_ms,cfg_loss,rtt_mean_ms,rtt_sd_ms,loss,verdict"
#define TRACE_HEADER_EVENTS "t_s,event,target,detail"
#define TRACE_HEADER_PARTITION "node,class,samples"
#define TRACE_HEADER_FLEET \
	"t_s,device,version,strategy,bytes_tx,bytes_stored,encode_s,apply_s,verify_ok,registry_lag_s,chain_len"
#define TRACE_HEADER_FLEET_REPAIR \
	"t_s,device,holders,offered,pulled,bytes_summary,bytes_pulled,rejected,divergent,latest,repair_s"
/* topology fleet: the end-of-run verification pass, one row per stored version (docs/traces.md) */
#define TRACE_HEADER_RECOVER "device,version,strategy,chain,recover_s,verify_ok"

/* p2p with combine ensemble: peer 0's final combination, one row per member (docs/traces.md) */
#define TRACE_HEADER_ENSEMBLE "t_s,node,member,clock,state"

/* stalenet simulate: one row per worker at the end of the run (docs/traces.md) */
#define TRACE_HEADER_WORKERS "node,final_step,compute_s,wait_s,staleness_mean,staleness_max"

/* Check every known trace file of run_dir (nodes/NAME.csv, eval.csv, progress.csv, links.csv,
 * linkcheck.csv, events.csv, partition.csv, workers.csv, fleet.csv, fleet_repair.csv, recover.csv,
 * ensemble.csv; a nodes/NAME.csv whose header is
 * TRACE_HEADER_SERVER is a parameter server's trace): exact header, type and range of every field,
 * t_s non-decreasing per node (per file where there is no node column), and the node column
 * of nodes/<name>.csv equal to <name>. Absent files are fine, but a run dir with none of them
 * is not. Returns 0; -EINVAL with the first problem ("path:line: column c: what") in err; or
 * -errno when a file cannot be read. */
int trace_schema_check_dir(const char *run_dir, char *err, size_t errlen);

/* Check one file against the schema of the named kind ("node", "server", "eval", "progress", "links",
 * "linkcheck", "events", "partition", "fleet", "fleet_repair", "recover", "workers", "ensemble"). Same returns as trace_schema_check_dir; -ENOENT when the
 * file does not exist, -EINVAL for an unknown kind. */
int trace_schema_check_file(const char *path, const char *kind, char *err, size_t errlen);

#endif
