// Package docs holds the checks of the manual: every link of README.md and
// docs/*.md, and every docs/<page>.md#<anchor> the code and manifests name,
// reaches a file of the repository and a heading of it, so moving a
// section between files cannot leave a reader at a dead end.
package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository's top: go test runs a package in its folder.
const repoRoot = ".."

func TestManualLinksResolve(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatalf("list docs: %v", err)
	}
	files = append(files, filepath.Join(repoRoot, "README.md"))
	broken, checked, err := checkManual(files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
	t.Logf("%d links checked", checked)
	// The manual has well over a hundred links: far fewer means the
	// pattern stopped finding them, not that they are gone.
	if checked < 50 {
		t.Fatalf("only %d links checked: the link pattern is wrong", checked)
	}
}

func TestAnchorsNamedOutsideTheManualResolve(t *testing.T) {
	broken, checked, err := checkNamedAnchors(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
	t.Logf("%d anchors checked", checked)
	// The alert rules alone link the runbook's alert sections.
	if checked < 10 {
		t.Fatalf("only %d docs anchors found outside the manual: the pattern is wrong", checked)
	}
}

var (
	// mdLink is an inline link or image: [text](target) or
	// [text](target "title").
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// refLink is a reference definition: [name]: target.
	refLink = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	// fence is a fenced code block; inline is a code span. Links inside
	// either are text, not links.
	fence  = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
	inline = regexp.MustCompile("`[^`\n]*`")
	// namedAnchor is a docs page and anchor named in code or manifests.
	namedAnchor = regexp.MustCompile(`docs/([A-Za-z0-9_-]+\.md)#([A-Za-z0-9_-]+)`)
)

// checkManual checks the links of the given markdown files: the number of
// links checked and a line for each broken one.
func checkManual(files []string) (broken []string, checked int, err error) {
	headings := map[string]map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", f, err)
		}
		for _, target := range links(string(raw)) {
			if external(target) {
				continue
			}
			checked++
			if msg := resolve(f, target, headings); msg != "" {
				broken = append(broken, fmt.Sprintf("%s: link %s: %s", f, target, msg))
			}
		}
	}
	return broken, checked, nil
}

// links are the link targets of a markdown text, outside code.
func links(md string) []string {
	text := inline.ReplaceAllString(fence.ReplaceAllString(md, ""), "")
	var out []string
	for _, re := range []*regexp.Regexp{mdLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			out = append(out, strings.Trim(m[1], "<>"))
		}
	}
	return out
}

func external(target string) bool {
	u, err := url.Parse(target)
	return err == nil && u.Scheme != ""
}

// resolve says what is wrong with a relative link from the file from, or
// "" if it reaches an existing file and, with an anchor into markdown, one
// of its headings. headings caches each target's anchors.
func resolve(from, target string, headings map[string]map[string]bool) string {
	path, anchor, _ := strings.Cut(target, "#")
	path, err := url.PathUnescape(path)
	if err != nil {
		return fmt.Sprintf("bad escape: %v", err)
	}
	dest := from
	if path != "" {
		dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
	}
	info, err := os.Stat(dest)
	if err != nil {
		return "no such file"
	}
	if anchor == "" || info.IsDir() || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	anchors, ok := headings[dest]
	if !ok {
		raw, err := os.ReadFile(dest)
		if err != nil {
			return fmt.Sprintf("read: %v", err)
		}
		anchors = headingAnchors(string(raw))
		headings[dest] = anchors
	}
	if !anchors[anchor] {
		return fmt.Sprintf("no heading with the anchor %q in %s", anchor, dest)
	}
	return ""
}

// headingAnchors are the GitHub anchors of a markdown text's headings
// (ATX headings outside code blocks); a repeated heading's anchor gets
// -1, -2, ... as on GitHub.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	heading := regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	for _, line := range strings.Split(fence.ReplaceAllString(md, ""), "\n") {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// slug is GitHub's anchor of a heading's text: lower case, letters,
// digits, '-' and '_' kept, spaces turned to '-', the rest dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkNamedAnchors finds docs/<page>.md#<anchor> in the repository's code,
// scripts and manifests (the manual itself is checkManual's) and checks
// that each names a heading of that page.
func checkNamedAnchors(root string) (broken []string, checked int, err error) {
	headings := map[string]map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if skipDir(root, path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !namesAnchors(d.Name()) {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		for _, m := range namedAnchor.FindAllStringSubmatch(string(raw), -1) {
			checked++
			page := filepath.Join(root, "docs", m[1])
			if msg := resolve(page, "#"+m[2], headings); msg != "" {
				broken = append(broken, fmt.Sprintf("%s: %s: %s", path, m[0], msg))
			}
		}
		return nil
	})
	sort.Strings(broken)
	return broken, checked, err
}

// skipDir leaves out what git does not hold (the services' data, built
// binaries, installed node modules, hidden folders) and the manual's own
// folder, whose links checkManual checks and whose tests name pages that
// do not exist on purpose.
func skipDir(root, path, name string) bool {
	if path == root {
		return false
	}
	return strings.HasPrefix(name, ".") || name == "bin" || name == "node_modules" ||
		path == filepath.Join(root, "docs")
}

// namesAnchors: the kinds of file that name a docs anchor for a reader
// (the manual's own links are checked as links).
func namesAnchors(name string) bool {
	for _, ext := range []string{".go", ".yml", ".yaml", ".sh", ".json", ".toml"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return name == "Containerfile"
}
