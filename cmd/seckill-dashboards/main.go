// Command seckill-dashboards writes seckill's Grafana dashboards
// (internal/dashboards) as JSON files: go run ./cmd/seckill-dashboards
// -out deploy/grafana (go tool task dashboards).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seckill/seckill/internal/dashboards"
)

func main() {
	out := flag.String("out", "deploy/grafana", "folder the dashboards' JSON files are written to")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "seckill-dashboards:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := dashboards.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
		fmt.Println("wrote", p)
	}
	return nil
}
