/* lib/ctl: the control plane between the orchestrator and its node processes.
 *
 * ZeroMQ over an ipc:// socket in the runtime directory (/run/stalenet, 0700, lib/rtdir; not the
 * run directory, which a user may own and could swap the socket in): filesystem sockets cross
 * network namespaces and are never shaped, so control traffic never distorts the experiment. The
 * orchestrator binds a ROUTER (ctl_server); each node connects a DEALER (ctl_client) whose identity
 * is its node name. Messages are single text frames:
 *   node -> orch   "ready"                      once, when the node can start
 *   node -> orch   "status STEP STATE WAITING"  STATE in {init,run,wait,done}; WAITING 0|1
 *   node -> orch   "done"                       the node finished its work and is exiting 0
 *   orch -> node   "start ORIGIN_NS"            all nodes are ready: begin; ORIGIN_NS becomes the
 *                                               run's t_s origin (lib/clock) in every process
 *   orch -> node   "stop"                       stop as soon as possible, flush traces, exit 0
 * On ipc:// both ends check the peer's SO_PEERCRED uid (through libzmq's "Peer-Address"
 * property) and drop messages from a uid other than their own.
 */
#ifndef STALENET_CTL_H
#define STALENET_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ctl_state { CTL_INIT = 0, CTL_RUN, CTL_WAIT, CTL_DONE };

struct ctl_client;

/* Connect to endpoint as node `name`. Returns NULL and logs on failure. */
struct ctl_client *ctl_client_open(const char *endpoint, const char *name);
void ctl_client_close(struct ctl_client **self);

/* Tell the orchestrator this node is ready, then block until "start" or "stop" arrives or
 * timeout_ms passes. Returns 0 on start, -ECANCELED on stop, -ETIMEDOUT. */
int ctl_client_ready_wait(struct ctl_client *self, int timeout_ms);

/* Report progress. Cheap (non-blocking send; rate-limit to ~every 50 ms is done inside). */
int ctl_client_status(struct ctl_client *self, int64_t step, enum ctl_state state, bool waiting);

/* A node's "status STEP STATE WAITING" message, parsed without I/O. The node is not trusted
 * (it runs the experiment's code and its messages reach a process running as root): the message
 * is taken only in exactly the form ctl_client_status writes, STEP 0..INT64_MAX in digits only,
 * STATE one of init|run|wait|done, WAITING 0 or 1, single spaces, nothing after. Returns 0 or
 * -EINVAL (out untouched). */
struct ctl_status {
	int64_t step;
	enum ctl_state state;
	bool waiting;
};
int ctl_parse_status(const char *msg, struct ctl_status *out);

/* STATE's word ("init", "run", "wait", "done"); "?" out of range. */
const char *ctl_state_name(enum ctl_state state);

/* Report that the node finished its work. */
int ctl_client_done(struct ctl_client *self);

/* Non-blocking: true once the orchestrator has said "stop" (also true after SIGTERM when the
 * node installed ctl_client_install_signals). */
bool ctl_client_should_stop(struct ctl_client *self);

/* The start received said the run began without this node: it was restarted or joins late. */
bool ctl_client_rejoined(const struct ctl_client *self);

/* SIGTERM/SIGINT set the stop flag seen by ctl_client_should_stop instead of killing. */
void ctl_client_install_signals(void);

/* --- orchestrator side ---------------------------------------------------------------- */

struct ctl_server;

/* Bind a ROUTER at endpoint (ipc://PATH: the socket file is created 0600, umask around the bind;
 * messages from peers of another uid are dropped). Returns NULL and logs on failure. */
struct ctl_server *ctl_server_open(const char *endpoint);
void ctl_server_close(struct ctl_server **self);

/* Wait up to timeout_ms (0 = poll, -1 = forever) for one message. Returns 1 and fills
 * node (sender name) and msg (text, NUL-terminated, truncated to the buffer), 0 on timeout,
 * -EINTR when a signal interrupted the wait, other -errno on failure. Messages from a peer of
 * another uid are dropped (counted by ctl_server_rejected) and the wait goes on. */
int ctl_server_recv(struct ctl_server *self, char *node, size_t nodelen, char *msg, size_t msglen,
		    int timeout_ms);

/* How many messages were dropped because their sender ran as another uid. */
uint64_t ctl_server_rejected(const struct ctl_server *self);

/* Send msg to node (by name). Messages to a node that is not connected are dropped. */
int ctl_server_send(struct ctl_server *self, const char *node, const char *msg);

/* Build the control endpoint of a run: ipc://RTDIR/ctl-<tag>-<hash of run_dir>.sock (RTDIR is
 * rtdir_path(), /run/stalenet for root), after making the runtime directory safe (rtdir_ensure).
 * Returns 0, -ENAMETOOLONG, or rtdir_ensure's error. */
int ctl_endpoint_for(const char *run_dir, const char *tag, char *out, size_t outlen);

#endif
