// Command galera-check is the development stack's side of
// internal/testkit/galera (scripts/galera.sh), so that the stack and the
// tests run one health check and one HAProxy configuration:
//
//	galera-check serve LISTEN=NODE...
//	    serves, at each LISTEN, the health check of the node at NODE (200
//	    while it is Synced in the primary component, 503 otherwise)
//	galera-check config LISTEN STATS NAME=NODE,CHECK...
//	    prints HAProxy's configuration: listening at LISTEN, its admin
//	    socket at STATS, the nodes in order of preference
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/testkit/galera"
)

const usage = "usage: galera-check serve LISTEN=NODE... | galera-check config LISTEN STATS NAME=NODE,CHECK..."

func main() {
	var err error
	switch {
	case len(os.Args) >= 3 && os.Args[1] == "serve":
		err = serve(os.Args[2:])
	case len(os.Args) >= 5 && os.Args[1] == "config":
		err = config(os.Args[2], os.Args[3], os.Args[4:])
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		slog.Error("galera-check", "err", err)
		os.Exit(1)
	}
}

// serve serves each pair's check until one of them fails.
func serve(pairs []string) error {
	errs := make(chan error, len(pairs))
	for _, pair := range pairs {
		listen, node, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("%q is not LISTEN=NODE", pair)
		}
		db, err := galera.OpenCheck(node)
		if err != nil {
			return err
		}
		srv := &http.Server{Addr: listen, Handler: galera.CheckHandler(db), ReadHeaderTimeout: 2 * time.Second}
		slog.Info("galera-check serving", "listen", listen, "node", node)
		go func() { errs <- fmt.Errorf("check of %s at %s: %w", node, listen, srv.ListenAndServe()) }()
	}
	err := <-errs
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// config prints HAProxy's configuration.
func config(listen, stats string, nodes []string) error {
	servers := make([]galera.HAProxyServer, len(nodes))
	for i, n := range nodes {
		name, rest, ok1 := strings.Cut(n, "=")
		addr, check, ok2 := strings.Cut(rest, ",")
		if !ok1 || !ok2 {
			return fmt.Errorf("%q is not NAME=NODE,CHECK", n)
		}
		servers[i] = galera.HAProxyServer{Name: name, Addr: addr, Check: check}
	}
	_, err := fmt.Print(galera.HAProxyConfig(listen, stats, servers))
	if err != nil {
		return fmt.Errorf("print the configuration: %w", err)
	}
	return nil
}
