package galera

import (
	"fmt"
	"strings"
)

// HAProxyServer is one node as HAProxy knows it: its name, its client
// address and its check agent's.
type HAProxyServer struct {
	Name, Addr, Check string
}

// HAProxyConfig is HAProxy's configuration for a cluster: one listener at
// listen in TCP mode; the first server takes every connection while its
// check answers 200, the others are backups and only the first of them
// that is up takes over, so every client writes to one node. A node
// marked down has its sessions closed at once (its clients reconnect to
// the next one instead of waiting on a dead peer); when the first server
// is up again, the backups' sessions are closed so that writes move back
// to one node. stats is the admin socket's path.
func HAProxyConfig(listen, stats string, servers []HAProxyServer) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
    log stdout format raw local0 info
    maxconn 4096
    stats socket %s mode 600 level admin

defaults
    mode tcp
    log global
    option tcplog
    timeout connect %dms
    timeout check %dms
    # Pooled connections idle for long; the clients' pools retire them first.
    timeout client 1h
    timeout server 1h

listen mysql
    bind %s
    option httpchk GET /
    http-check expect status 200
    default-server inter %dms fall 2 rise 2 on-marked-down shutdown-sessions on-marked-up shutdown-backup-sessions
`, stats, CheckTimeout.Milliseconds(), CheckTimeout.Milliseconds(), listen, CheckInterval.Milliseconds())
	for i, s := range servers {
		host, port, _ := strings.Cut(s.Check, ":")
		backup := ""
		if i > 0 {
			backup = " backup"
		}
		fmt.Fprintf(&b, "    server %s %s check addr %s port %s%s\n", s.Name, s.Addr, host, port, backup)
	}
	return b.String()
}
