package schema

import (
	"regexp"
	"strings"
	"testing"

	"vitess.io/vitess/go/vt/sqlparser"
)

// mariaDBOnly are DDL forms MySQL 8 refuses.
var mariaDBOnly = regexp.MustCompile(`(?i)\bPERSISTENT\b|\bSET\s+STATEMENT\b|\bNOT\s+ATOMIC\b|\b(ADD|DROP)\s+(COLUMN|INDEX|KEY|UNIQUE\s+KEY)\s+IF\s+(NOT\s+)?EXISTS\b|\bCREATE\s+TRIGGER\s+IF\s+NOT\s+EXISTS\b`)

// Every statement of the MySQL 8 migrations parses as MySQL 8.0 (vitess's
// parser of its grammar), but the triggers, which that parser does not
// know: their SELECT and INSERT are parsed alone.
// Every MySQL 8 form replaces a MariaDB file the parser refuses.
func TestMySQL8MigrationsParse(t *testing.T) {
	p, err := sqlparser.New(sqlparser.Options{MySQLServerVersion: "8.0.36"})
	if err != nil {
		t.Fatal(err)
	}
	trigger := regexp.MustCompile(`(?is)^CREATE TRIGGER \w+ BEFORE INSERT ON \w+ FOR EACH ROW (?:BEGIN IF NOT EXISTS \((SELECT .*?)\) THEN )?(INSERT INTO .*?\))(?:; END IF; END)?$`)
	ms, err := MigrationsFor(FlavorMySQL8)
	if err != nil {
		t.Fatal(err)
	}
	overridden := 0
	for _, m := range ms {
		if mariaDBOnly.MatchString(sqlComment.ReplaceAllString(m.SQL, "")) {
			t.Errorf("migration %s (MySQL 8): MariaDB-only DDL %q", m.Version, mariaDBOnly.FindString(m.SQL))
		}
		if strings.HasPrefix(strings.TrimSpace(m.SQL), "-- MySQL 8 form") || strings.Contains(m.SQL, "\n-- MySQL 8 form") {
			overridden++
		}
		for _, stmt := range splitStatements(m.SQL) {
			parts := []string{stmt}
			if sub := trigger.FindStringSubmatch(stmt); sub != nil {
				parts = nil
				for _, s := range sub[1:] {
					if s != "" {
						parts = append(parts, strings.ReplaceAll(s, "NEW.", ""))
					}
				}
			}
			for _, s := range parts {
				if _, err := p.ParseStrictDDL(s); err != nil {
					t.Errorf("migration %s (MySQL 8): %v\n%s", m.Version, err, s)
				}
			}
		}
	}
	if overridden == 0 {
		t.Error("no MySQL 8 form read")
	}
	// Each MySQL 8 form is needed: MySQL's grammar refuses a statement of
	// the MariaDB file it replaces.
	mariadb, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range mariadb {
		if m.SQL == ms[i].SQL {
			continue
		}
		refused := false
		for _, stmt := range splitStatements(m.SQL) {
			_, err := p.ParseStrictDDL(stmt)
			refused = refused || err != nil
		}
		if !refused {
			t.Errorf("migration %s: MySQL 8 takes the MariaDB file as it is; its MySQL 8 form is not needed", m.Version)
		}
	}
}
