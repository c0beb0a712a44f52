/* netem/linkd: the userspace link emulator behind the nfq backend (the engine of stalenet-linkd).
 *
 * One process serves every namespace: for each shaped direction it opens an NFQUEUE netlink
 * socket inside the receiving namespace (setns in, open, setns back) and binds queue N there; an
 * iptables rule at that namespace's PREROUTING (added by link_shaper) sends the packets arriving
 * on the interface to the queue. Each packet gets netem's decisions (netem_model); held packets sit
 * in one min-heap of release times, the next one the timeout of the serving thread's epoll_pwait2
 * (nanoseconds; no timer to re-arm per release); verdicts are written out of
 * order, batched into one sendto per queue per wake-up (a run of in-order releases as one batch
 * verdict). Only the headers are copied, and segmentation-offloaded packets come whole, unless
 * corrupt or duplicate needs the bytes (then whole, segmented packets; netem/linkd_pkt); a lossy
 * link draws each wire segment's loss on arrival and sends a packet that loses some on to its
 * split queue, which takes it segmented and drops just those. A packet's delay runs from the
 * kernel's receive stamp (NFQA_TIMESTAMP; the emulator keeps a socket asking for stamps so the
 * kernel takes them), not from when it was read, and it is handed back early by the measured time
 * its verdict takes to deliver it (netem/linkd_comp). Duplicates are re-injected through a raw IPv4 socket in
 * the receiving namespace at their own release time (NFQUEUE cannot clone a packet).
 *
 * Control: a unix SOCK_SEQPACKET socket; one text request, one text reply, in the protocol of
 * netem/linkd_ctl (set, del, stats, ping; parsed there, executed here). The reply to `stats` for
 * every link (~1 MB for 4096) goes out in messages of whole lines as the socket takes them
 * (EPOLLOUT; the packet loop never blocks on a slow reader) and ends with an `end` line; the
 * orchestrator reads all links with this one request (linkd_request_all). The socket file is
 * created 0600 (umask around bind) and a connection from another uid than the emulator's own
 * (SO_PEERCRED) is closed unanswered; linkd_request likewise refuses a server of another uid.
 * The configuration file holds `set` lines (# comments); SIGHUP re-reads it (links absent from
 * the file are removed). */
#ifndef STALENET_LINKD_H
#define STALENET_LINKD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/link_params.h"
#include "netem/linkd_ctl.h"

struct linkd;


/* A new emulator with its control socket at ctl_path (NULL = none; an existing socket file is
 * replaced; the file is born 0600; put it in the runtime directory, lib/rtdir). Returns NULL and
 * logs on failure. */
struct linkd *linkd_new(const char *ctl_path);
/* Unbind every queue (held packets are dropped by the kernel), close everything, *self = NULL. */
void linkd_destroy(struct linkd **self);

/* Add a link or change its parameters in place (same name; netns/ifname/queue must match).
 * Not thread-safe: call before linkd_run or from the control socket. Returns 0 or -errno. */
int linkd_set(struct linkd *self, const char *name, const char *netns, const char *ifname,
	      uint16_t queue, const struct link_params *p);
int linkd_del(struct linkd *self, const char *name);
int linkd_counters(const struct linkd *self, const char *name, struct linkd_counters *out);

/* Execute one control request line; the reply (NUL-terminated) goes to reply. Returns 0 when the
 * request succeeded; a stats reply that does not fit replylen is "err reply too long", -ENOBUFS. */
int linkd_handle(struct linkd *self, const char *request, char *reply, size_t replylen);

/* How many control connections were closed because their peer ran as another uid. */
uint64_t linkd_ctl_rejected(const struct linkd *self);

/* Read a configuration file of `set` lines and apply it; links not in it are removed.
 * Returns 0 or -errno (the first failing line is logged with its number). */
int linkd_load_config(struct linkd *self, const char *path);

/* Periodic counters: append "t_s,name,packets,bytes,dropped,held,dup,corrupt,reordered" rows
 * to path every period_ms (t_s from lib/clock's run origin). Returns 0 or -errno. */
int linkd_counters_every(struct linkd *self, const char *path, int period_ms);

/* Handle SIGHUP (re-read config_path) and SIGTERM/SIGINT (stop) through a signalfd. The caller
 * must have blocked those signals in every thread. Returns 0 or -errno. */
int linkd_watch_signals(struct linkd *self, const char *config_path);

/* Scheduling of the thread that calls linkd_run: SCHED_FIFO at this priority (1-99), or the
 * normal scheduler with 0. The default, 10, keeps held packets leaving on time while the nodes
 * being shaped load every core (the kernel's real-time throttling still leaves them 5%); where
 * the caller may not raise its priority linkd_run logs it once and runs normally. */
void linkd_set_rt_priority(struct linkd *self, int prio);

/* How held packets are released. TIMER: the wait ends a measured wake-up lateness early
 * (an average: a late wake-up still releases late). SPIN: the timer is armed margin_ns early and
 * the serving thread then polls the clock (and its queues) until the release time, so a packet
 * leaves at its time unless the timer came more than the margin late; the margin starts at
 * margin_ns (the host's measured timer lateness, lib/timerlat) and grows to the p99 of the
 * wake-ups seen (+ 20 us) if they run later, up to LINKD_SPIN_MARGIN_MAX_NS. The poll costs CPU
 * only within the margin before a release; with nothing held the thread blocks. */
enum linkd_precision { LINKD_PRECISION_TIMER = 0, LINKD_PRECISION_SPIN };
#define LINKD_SPIN_MARGIN_MIN_NS 30000
#define LINKD_SPIN_MARGIN_MAX_NS 2000000 /* longer polls would starve the shaped nodes of CPU */
void linkd_set_precision(struct linkd *self, enum linkd_precision p, int64_t margin_ns);

/* Release compensation (netem/linkd_comp): held packets are handed back to the kernel earlier than
 * their release time by the measured time from a release decision to the packet's delivery (the
 * verdict write, inside which the kernel re-injects it), an average bounded by max_ns; 0 turns it
 * off. The default is on, bounded by LINKD_COMP_MAX_NS. Call before linkd_run. */
void linkd_set_compensation(struct linkd *self, int64_t max_ns);
/* The compensation in use now, in ns (safe from another thread while linkd_run serves). */
int64_t linkd_compensation_ns(const struct linkd *self);

/* Timer mode's release window, in ns (default LINKD_RELEASE_WINDOW_NS in netem/linkd.c, at most
 * 1 ms, 0 = off): held packets due within half of it of a wake-up leave together, so each leaves
 * within half a window of its time, early or late. Spin mode releases each at its time. Call
 * before linkd_run. */
void linkd_set_release_window(struct linkd *self, int64_t window_ns);

/* The read window of a busy link, in ns (default LINKD_COALESCE_NS in netem/linkd.c, at most
 * 1 ms, 0 = off): a link whose reads cannot be deferred by its delay but that carries at least
 * LINKD_COALESCE_PPS packets/s is read at most once a window, so each read finds several packets;
 * they wait in the socket up to the window. Off with the deferred reads. Call before linkd_run. */
void linkd_set_read_window(struct linkd *self, int64_t window_ns);

/* Deferred reads (on by default): a queue whose every packet is held at least a bound is not read
 * while nothing it could hold is near its release (netem/linkd.c, defer_reads); off, every queue
 * is read as packets arrive. Call before linkd_run. */
void linkd_set_defer_reads(struct linkd *self, bool on);

/* Deferred reads so far (safe from another thread while linkd_run serves): pauses taken, their
 * total length, and held packets read only after their release was due (their release decision
 * time had passed when they were read: a deferred read resumed too late, or the loop fell that far
 * behind); those leave at once, late. With them the read-window pauses and the system calls the
 * packet path made: reads and verdict writes. */
struct linkd_defer_stats {
	uint64_t pauses;
	int64_t pause_ns;
	uint64_t late_reads;
	uint64_t coalesced; /* read-window pauses of busy links (linkd_set_read_window) */
	uint64_t reads;     /* reads that returned packet messages (one recvmmsg each) */
	uint64_t writes;    /* verdict writes (one sendto each, however many verdicts) */
};
void linkd_defer_stats(const struct linkd *self, struct linkd_defer_stats *out);

/* Serve until linkd_stop. Returns 0, or -errno on a fatal error. */
int linkd_run(struct linkd *self);
/* Make linkd_run return soon. Safe from another thread or a signal handler. */
void linkd_stop(struct linkd *self);

/* Client side: send one request to the emulator at ctl_path and wait up to timeout_ms for the
 * reply. Returns 0 when the reply starts with "ok", -EIO for an "err" reply, -EPERM when the
 * socket's listener runs as another uid (nothing is sent), -errno otherwise. */
int linkd_request(const char *ctl_path, const char *request, char *reply, size_t replylen,
		  int timeout_ms);

/* The caller's interruption count (its signal handler's): from *count >= at on, the client
 * requests above stop waiting for their reply (checked every 50 ms) and return -ECANCELED; the
 * user asked to stop at once, and an emulator that does not answer must not hold that up.
 * NULL = never (the default). Not thread-safe: set once, before any request. */
void linkd_request_set_interrupt(const volatile sig_atomic_t *count, int at);

/* Like linkd_request for a reply of several messages (stats): reads until linkd_ctl_reply_done,
 * all within timeout_ms, and hands the whole NUL-terminated reply to the caller (*reply, free()
 * it; *len bytes) also on -EIO. Returns 0 for an "ok" reply, -EIO for "err", -errno otherwise. */
int linkd_request_all(const char *ctl_path, const char *request, char **reply, size_t *len,
		      int timeout_ms);

#endif
