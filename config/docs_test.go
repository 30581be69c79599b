package config

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every variable config.go reads is in docs/configuration.md's table,
// and every variable the table lists is read: the manual cannot drift from
// the code. (OTEL_* are OpenTelemetry's and TEMPORAL_API_KEY and
// TEMPORAL_TLS the Temporal SDK's envconfig's, read in internal/conn.)
func TestEveryVariableIsDocumented(t *testing.T) {
	src, err := os.ReadFile("config.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	name := regexp.MustCompile(`"((?:SECKILL|REDIS|MYSQL|TEMPORAL|API|ADMIN|WORKER|LOG)_[A-Z0-9_]+)"`)
	var read []string
	for _, m := range name.FindAllStringSubmatch(string(src), -1) {
		if !slices.Contains(read, m[1]) {
			read = append(read, m[1])
		}
	}
	if len(read) < 30 {
		t.Fatalf("found only %d variables in config.go: the pattern is wrong", len(read))
	}
	for _, v := range read {
		if !strings.Contains(section, "`"+v+"`") {
			t.Errorf("%s is read by config.go but not in docs/configuration.md", v)
		}
	}
	row := regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]+)`")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		sdk := strings.HasPrefix(m[1], "OTEL_") || m[1] == "TEMPORAL_API_KEY" || m[1] == "TEMPORAL_TLS"
		if !slices.Contains(read, m[1]) && !sdk {
			t.Errorf("docs/configuration.md lists %s, which config.go does not read", m[1])
		}
	}
}
