package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// profileCPU fetches a CPU profile of seconds from a Go pprof endpoint
// into path (scenario 3 with Options.ProfileDir: the API's and worker's
// over the burst and drain).
func profileCPU(ctx context.Context, baseURL string, seconds int, path string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", baseURL, seconds), nil)
	if err != nil {
		return fmt.Errorf("profile %s: %w", baseURL, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", baseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", baseURL, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("profile dir: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	return nil
}

// profileBurst starts the API's and worker's CPU profiles for scenario 3
// (when asked for); wait returns once both are written, with a note each.
func (r *runner) profileBurst(ctx context.Context, worker *Proc, seconds int) (wait func() []string) {
	if r.o.ProfileDir == "" || r.pprofURL == "" {
		return func() []string { return nil }
	}
	type done struct {
		name string
		err  error
	}
	ch := make(chan done, 2)
	for name, url := range map[string]string{"api": r.pprofURL, "worker": worker.URL} {
		go func() {
			path := filepath.Join(r.o.ProfileDir, name+".pprof")
			ch <- done{name, profileCPU(ctx, url, seconds, path)}
		}()
	}
	return func() []string {
		var notes []string
		for range 2 {
			d := <-ch
			if d.err != nil {
				notes = append(notes, fmt.Sprintf("%s CPU profile: %v", d.name, d.err))
			} else {
				notes = append(notes, fmt.Sprintf("%s CPU profile over the first %d s: %s", d.name, seconds, filepath.Join(r.o.ProfileDir, d.name+".pprof")))
			}
		}
		return notes
	}
}
