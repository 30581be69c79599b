package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// startTemporalServer runs the production-shaped Temporal through
// scripts/temporal-server.sh: prepare (its PostgreSQL and schemas), then
// the server itself as the run's Temporal process (the script execs it,
// so a kill or a freeze hits the server), then register (the namespace
// and search attributes). PostgreSQL is not a fault target.
func (d *Deployment) startTemporalServer(ctx context.Context) error {
	base, err := freePortBlock()
	if err != nil {
		return err
	}
	// PostgreSQL runs as the postgres user: the work dir (a private temp
	// dir by default) must let it through.
	if err := os.Chmod(d.Dir, 0o755); err != nil {
		return fmt.Errorf("temporal server: %w", err)
	}
	dir := filepath.Join(d.Dir, "temporal-server")
	port := strconv.Itoa(base)
	if err := d.script(ctx, 10*time.Minute, "prepare", dir, port); err != nil {
		return err
	}
	addr := net.JoinHostPort("127.0.0.1", port)
	d.TemporalAddr = addr
	var tc client.Client
	dial := func(ctx context.Context) error {
		if tc != nil {
			return nil
		}
		c, err := client.DialContext(ctx, client.Options{HostPort: addr, Logger: quietLogger{}})
		if err != nil {
			return err
		}
		tc = c
		return nil
	}
	d.Temporal = &Proc{Name: "temporal", Bin: "bash", Args: []string{d.serverScript, "run", dir, port},
		LogPath: logPath(d.Dir, "temporal"),
		Ready: func(ctx context.Context) error {
			if err := dial(ctx); err != nil {
				return err
			}
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}}
	if err := d.Temporal.Start(ctx, 2*time.Minute); err != nil {
		return err
	}
	if err := d.script(ctx, 3*time.Minute, "register", dir, port); err != nil {
		return err
	}
	d.Temporal.Ready = func(ctx context.Context) error {
		_, err := tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "SaleId = 1"})
		return err
	}
	if err := d.Temporal.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	d.TC = tc
	d.stopPostgres = func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.script(sctx, time.Minute, "stop", dir, port) // the server is stopped already: its PostgreSQL
	}
	return nil
}

// script runs scripts/temporal-server.sh ACTION DIR PORT, its output in
// the Temporal log.
func (d *Deployment) script(ctx context.Context, within time.Duration, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{d.serverScript}, args...)...)
	cmd.Env = append(cmd.Environ(), "SECKILL_TEMPORAL_BIN="+d.temporalBin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("temporal-server.sh %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freePortBlock finds a base port P whose block is free: the server takes
// P..P+3, P+10, P+20 and P+100..P+103, its PostgreSQL P-1800.
func freePortBlock() (int, error) {
	offsets := []int{0, 1, 2, 3, 10, 20, 100, 101, 102, 103, -1800}
	for range 50 {
		base := 22000 + rand.IntN(8000)
		free := true
		for _, o := range offsets {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+o)))
			if err != nil {
				free = false
				break
			}
			_ = ln.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no free block of ports for the Temporal server")
}
