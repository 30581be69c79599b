package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// MustBinary builds cmd/seckill once per test binary and returns its path.
func MustBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		binPath, buildErr = BuildSeckill(ctx, RepoRoot(), "seckill")
	})
	if buildErr != nil {
		tb.Fatalf("testenv: %v", buildErr)
	}
	return binPath
}

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// BinDir is where test binaries go: the repository's .data/test/bin, one
// file per name. A temp dir per test binary would leave a binary behind per
// package and run, until the disk fills.
func BinDir() string { return filepath.Join(RepoRoot(), ".data", "test", "bin") }

// BuildSeckill builds ./cmd/seckill of the source tree src into BinDir/name.
// It writes a temp file beside it and renames it, so that packages building
// at once never start a half-written binary (a running one keeps its file).
func BuildSeckill(ctx context.Context, src, name string) (string, error) {
	dir := BinDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("test binaries' dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp.Name(), "./cmd/seckill")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/seckill in %s: %w\n%s", src, err, out)
	}
	path := filepath.Join(dir, name)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("build %s: %w", name, err)
	}
	return path, nil
}
