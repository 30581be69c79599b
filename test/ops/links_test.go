package ops

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// TestManualLinksResolve: every relative link of the README and docs/
// names a file of the repository and, with an anchor, a heading of it, so
// moving a section between files cannot leave a reader at a dead end.
func TestManualLinksResolve(t *testing.T) {
	root := testenv.RepoRoot()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "README.md"))
	link := regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	fence := regexp.MustCompile("(?s)```.*?```")
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(raw), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				if info, serr := os.Stat(dest); serr == nil && info.IsDir() && anchor == "" {
					continue
				}
				t.Errorf("%s: link %s: %v", rel(root, f), target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !headingAnchors(string(body))[anchor] {
				t.Errorf("%s: link %s: no heading %q in %s", rel(root, f), target, anchor, rel(root, dest))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d links checked: the pattern is wrong", checked)
	}
}

func rel(root, path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}
