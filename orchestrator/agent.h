/* orchestrator/agent: `stalenet agent`, the orchestrator's deputy on another host.
 *
 * The orchestrator starts it over ssh (orchestrator/agentlink) and talks to it on the ssh
 * channel's stdin/stdout in short text lines, so nothing but fixed words and numbers ever
 * crosses; the remote command line itself is fixed ("PATH agent"), never built from the
 * scenario. Protocol version AGENT_PROTO:
 *   agent -> on start    "stalenet-agent PROTO VERSION COMMIT EUID HOSTNAME"
 *   "time T1"         -> "time T1 T2 T3"   T2: the agent's CLOCK_MONOTONIC (ns) when the line
 *                                           was read, T3 just before the answer is written
 *                                           (also while nodes run: the clock refresh)
 *   "build PREFIX VNI LOCAL NODES REMOTES CC MTU [PIN]"
 *                     -> "ok SWITCH_NETNS NODE_MTU UNDERLAY_IF UNDERLAY_MTU" or "fail WHY":
 *                        this host's share of the testbed (orchestrator/testbed: NODES, a comma
 *                        list of NAME:INDEX, node INDEX of the run at subnet + INDEX + 1, MTU lowered
 *                        by the VXLAN overhead), joined to the other hosts (REMOTES, a comma
 *                        list of underlay addresses or "-") by VXLAN segment VNI from LOCAL
 *                        (orchestrator/overlay), TCP congestion control CC in the nodes
 *                        (the scenario's network.cc), node MTU MTU (0: the underlay's
 *                        less the encapsulation; a larger one than that fits is refused),
 *                        the addresses of nodes 0 .. PIN-1 pinned as neighbours in every node
 *                        (the run's nodes on every host; absent: this host's nodes);
 *                        journalled in RTDIR/agent-PREFIX/journal
 *   "probe ADDR COUNT" -> "probe ADDR GOT MIN_NS MEDIAN_NS": COUNT UDP round trips over the
 *                        underlay to the agent of the host at ADDR (after a build; each agent
 *                        answers probes from its build's REMOTES only) -> the underlay's base
 *                        one-way delay, MIN_NS / 2, for delay compensation
 *   "teardown"        -> "ok": that share removed (also when the connection ends in any way)
 *   "conf NAME KEY VALUE" -> "ok" or "fail WHY": one key of node NAME's configuration (NAME a
 *                        node of the build; run.dir and ctl.endpoint are replaced by this
 *                        host's own: RTDIR/agent-PREFIX/run and a control socket beside it)
 *   "shape NAME up|down TOKEN..." -> "ok kernel|nfq" or "fail WHY": node NAME's link in that direction
 *                        shaped as on one host (netem/link_shaper; TOKENs as link_params_format
 *                        writes them); kernel netem, or stalenet-linkd on NFQUEUE started by the
 *                        agent (rules journalled) when the kernel has no netem
 *   "shaper auto|kernel|nfq" -> "ok" or "fail WHY": the backend of this build's shaping (before its
 *                        first "shape"; auto: kernel netem when the kernel has it, else nfq)
 *   "shapepeers NAME up|down TAG ADDRS UNDERLAY_US TOKEN..." -> "ok" or "fail WHY": within node
 *                        NAME's shaped direction, the packets to (up) or from (down) the node
 *                        addresses ADDRS (comma list) in a class TAG of their own with the
 *                        direction's parameters TOKENs less UNDERLAY_US of delay (nfq only):
 *                        the paths across hosts
 *   "reshape NAME up|down TOKEN..." -> no answer; "ev NAME reshaped DIR ok" (or "fail WHY"): a
 *                        shaped direction changed in place during the run (timeline, trace), its
 *                        per-peer classes with it (their delay the new one less the underlay's)
 *   "unconf NAME"     -> "ok" or "fail WHY": node NAME's configuration dropped (between phases)
 *   "limit NAME NEED CPU CPUS MEMORY" -> "ok" or "fail WHY": node NAME's cgroup on this host
 *                        (orchestrator/cgroup; NEED the run's CGROUP_* bits, CPU cores or 0, CPUS a
 *                        CPU list or "-", MEMORY bytes or 0), joined by the node at its launch
 *   "launch NAME"     -> no answer line; events follow. The agent starts stalenet-node (beside
 *                        itself) in NAME's namespace with its configuration (orchestrator/launch,
 *                        journalled), serves the nodes' control socket and relays:
 *                          "ev NAME launched PID", "ev NAME ready", "ev NAME status STEP STATE W",
 *                          "ev NAME done", "ev NAME exit STATUS" (waitpid status, then
 *                          " oom_killed" when its cgroup's OOM killer took it; -1 and a
 *                          reason when it could not be started)
 *   "send NAME MSG"   -> no answer: MSG ("start ORIGIN", "stop") to node NAME's control socket;
 *                        ORIGIN is on this host's clock (the orchestrator maps it)
 *   "kill NAME"       -> no answer: SIGKILL to node NAME (its exit comes as an event)
 *   "fetch"           -> "file REL" then "l LINE" per complete line that file gained since
 *                        it was last sent, for every text file of the nodes' run directory
 *                        (top level, nodes/, logs/; orchestrator/hostfiles' list), then every
 *                        other file the nodes wrote (saved parameters, SQLite stores) that
 *                        changed since it was last sent, whole: "whole REL", "b DATA" lines
 *                        (base64), "end SIZE" (orchestrator/agentfile), then "fetched". While
 *                        nodes run the agent sends the text files' "file"/"l" lines unasked
 *                        every 0.5 s (streaming). A text file that shrank or was replaced (a
 *                        node's .conf rewritten between phases) is sent whole instead, up to
 *                        its last complete line, and the orchestrator's copy replaced.
 *   "cleanup"         -> "ok|fail journals N replayed N live N ended N failed N": this host's
 *                        `stalenet cleanup` (journals of dead runs and dead agents replayed)
 *   "quit"            -> "bye", then the agent exits 0 (also on end of input)
 *   anything else     -> "error MESSAGE", then the agent exits 2
 * The clock exchange is the NTP-style one of lib/clocksync: the orchestrator stamps T1 and T4.
 * Events may come between any two answers once nodes are launched; the orchestrator sends no
 * answered request (other than "fetch" after every node exited) while they run. When the
 * connection ends, running nodes are killed and the share torn down. */
#ifndef STALENET_AGENT_H
#define STALENET_AGENT_H

#define AGENT_PROTO    5     /* 5: whole files ("whole", "b", "end") */
#define AGENT_LINE_MAX 4096     /* one protocol line, newline included */
#define AGENT_PROBE_PORT 4790   /* UDP, on each host's underlay address: the underlay probe */

/* Serve the protocol on in_fd/out_fd until "quit" or end of input. Returns 0, -EPROTO after
 * a bad request (answered with an error line), or -errno of the I/O. */
int agent_serve(int in_fd, int out_fd);

#endif
