package schema

import (
	"regexp"
	"strings"
	"testing"
)

// Migrations are expand/contract: every process applies them at start, so
// during a rolling deploy the previous release's code runs on the new
// schema. An expand migration only adds (tables, nullable or defaulted
// columns, indexes); it never drops, renames or retypes what the previous
// release reads or writes. A contract migration (drop, rename, retype,
// truncate) ships only in a release after the one whose code stopped using
// what it removes, and says so in a first-line header:
//
//	-- contract: <what goes>; unused since <release>
//
// This test holds the rule: without the header, a destructive statement
// fails it.

var destructive = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bDROP\s+(TABLE|COLUMN|INDEX|KEY|PRIMARY|FOREIGN|CONSTRAINT)\b`),
	regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+\w+\s+DROP\s+\w+`),
	regexp.MustCompile(`(?i)\bRENAME\b`),
	regexp.MustCompile(`(?i)\b(CHANGE|MODIFY)\s+(COLUMN\s+)?\w+`),
	regexp.MustCompile(`(?i)\bTRUNCATE\b`),
}

// A column the previous release does not know must not make its INSERTs
// fail: NOT NULL needs a DEFAULT.
var addNotNullNoDefault = regexp.MustCompile(`(?i)\bADD\s+(COLUMN\s+)?\w+\s+[^,;]*\bNOT\s+NULL\b[^,;]*`)

var sqlComment = regexp.MustCompile(`(?m)--[^\n]*$`)

func TestMigrationsAreExpandOnlyUnlessMarkedContract(t *testing.T) {
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations")
	}
	for _, m := range ms {
		contract := strings.HasPrefix(strings.TrimSpace(m.SQL), "-- contract:")
		body := sqlComment.ReplaceAllString(m.SQL, "")
		for _, re := range destructive {
			if loc := re.FindString(body); loc != "" && !contract {
				t.Errorf("migration %s: %q is a contract step; ship it in its own later release with a '-- contract:' header (see this test's comment)", m.Version, loc)
			}
		}
		if m.Version <= baselineVersion {
			continue // the first release created its tables whole
		}
		for _, add := range addNotNullNoDefault.FindAllString(body, -1) {
			if !regexp.MustCompile(`(?i)\bDEFAULT\b`).MatchString(add) {
				t.Errorf("migration %s: %q adds a NOT NULL column without DEFAULT: the previous release's INSERTs would fail", m.Version, strings.TrimSpace(add))
			}
		}
	}
}

// baselineVersion is the last migration written before the rule: its
// tables were created whole, with nobody running older code.
const baselineVersion = "0001_init"

// The checks catch what they are for.
func TestExpandRuleCatchesDestructiveStatements(t *testing.T) {
	for _, stmt := range []string{
		"ALTER TABLE sales DROP COLUMN mode;",
		"ALTER TABLE orders RENAME COLUMN status TO state;",
		"ALTER TABLE orders MODIFY COLUMN amount_cents INT;",
		"DROP TABLE refunds;",
	} {
		hit := false
		for _, re := range destructive {
			hit = hit || re.MatchString(stmt)
		}
		if !hit {
			t.Errorf("%q not recognised as a contract step", stmt)
		}
	}
	if !addNotNullNoDefault.MatchString("ALTER TABLE sales ADD COLUMN x INT NOT NULL;") {
		t.Error("NOT NULL without DEFAULT not recognised")
	}
}
