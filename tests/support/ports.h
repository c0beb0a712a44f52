/* Ports for tests that start servers on 127.0.0.1. A port picked by formula (a base plus the
 * pid) can be taken already: by another test running at the same time, or by an outgoing
 * connection, since the kernel picks those from ip_local_port_range. Then the server fails to
 * bind while its clients wait for it until their budget ends. support_free_ports picks a run of
 * ports below that range that nothing holds now. Plain C, no Criterion: usable in children. */
#ifndef STALENET_TESTS_SUPPORT_PORTS_H
#define STALENET_TESTS_SUPPORT_PORTS_H

/* The first of count consecutive ports, each free for TCP and UDP on every address right now
 * (a trial bind succeeds) and all below the kernel's ephemeral range. The search starts at a
 * place drawn from the pid, so tests running side by side start apart. Call it once per test
 * and keep the result: a second call after the servers bound returns other ports. -1 when
 * none is found (count < 1 or too large, or every candidate taken). */
int support_free_ports(int count);

#endif
