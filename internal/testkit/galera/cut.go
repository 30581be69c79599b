package galera

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A node's network is cut by the cgroup its process runs in: each node is
// started in a cgroup (v2) of its own, and an nftables rule drops every
// packet a socket of that cgroup sends, its client port's, its group
// communication's and the connections it opened to its peers alike. The
// process keeps running and sees its peers go silent, as they see it;
// nothing else on the machine is touched. Ports alone would not do: a
// node's links to its peers use the peers' ports and a port of the
// kernel's choosing.

// nftCgroupBase is where nft resolves a cgroupv2 path from.
const nftCgroupBase = "/sys/fs/cgroup"

// cgroup2Mount is where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "", fmt.Errorf("cgroup2 mount: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 3 && fields[2] == "cgroup2" {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("cgroup2 mount: %w", err)
	}
	return "", errors.New("no cgroup2 hierarchy is mounted")
}

// newCgroup creates a cgroup named name at the top of the v2 hierarchy
// and returns its directory.
func newCgroup(name string) (string, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	if mount != nftCgroupBase && !strings.HasPrefix(mount, nftCgroupBase+"/") {
		return "", fmt.Errorf("the cgroup2 hierarchy is at %s, outside %s where nft finds cgroups", mount, nftCgroupBase)
	}
	dir := filepath.Join(mount, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cgroup %s: %w", dir, err)
	}
	return dir, nil
}

// removeCgroup removes a cgroup once its processes are gone.
func removeCgroup(dir string) {
	for range 50 {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inCgroup wraps a command so that it runs in the cgroup at dir: a shell
// moves itself there and becomes the command (exec keeps its pid).
func inCgroup(dir, bin string, args []string) (string, []string) {
	if dir == "" {
		return bin, args
	}
	return "/bin/sh", append([]string{"-c", `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`, "sh", dir, bin}, args...)
}

// cutRules drops every packet the cgroup at dir sends.
func cutRules(table, dir string) (string, error) {
	mount, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(mount, dir)
	if err != nil {
		return "", fmt.Errorf("cut: %w", err)
	}
	fromBase, err := filepath.Rel(nftCgroupBase, dir)
	if err != nil {
		return "", fmt.Errorf("cut: %w", err)
	}
	level := strings.Count(rel, "/") + 1
	return fmt.Sprintf("table inet %s {\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n"+
		"\t\tsocket cgroupv2 level %d %q drop\n\t}\n}\n", table, level, fromBase), nil
}

// nft runs nft with script on its input.
func nft(ctx context.Context, script string, args ...string) error {
	cmd := exec.CommandContext(ctx, "nft", args...)
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// applyCut installs the rules cutting the cgroup at dir.
func applyCut(ctx context.Context, table, dir string) error {
	if _, err := exec.LookPath("nft"); err != nil {
		return fmt.Errorf("cut: %w (Debian's nftables)", err)
	}
	rules, err := cutRules(table, dir)
	if err != nil {
		return err
	}
	return nft(ctx, rules, "-f", "-")
}

// removeCut deletes a cut's table.
func removeCut(ctx context.Context, table string) error {
	return nft(ctx, "", "delete", "table", "inet", table)
}
