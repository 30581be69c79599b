package galera

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// State is what a node says of itself (SHOW STATUS LIKE 'wsrep_%').
type State struct {
	Ready       bool   // wsrep_ready: it accepts queries
	Primary     bool   // wsrep_cluster_status: its component has quorum
	Local       string // wsrep_local_state_comment: Synced, Donor/Desynced, Joining...
	ClusterSize int    // wsrep_cluster_size: members of its component
}

// Writable: the node takes writes that the cluster keeps.
func (s State) Writable() bool { return s.Ready && s.Primary && s.Local == "Synced" }

func (s State) String() string {
	return fmt.Sprintf("ready %v, primary %v, %s, cluster size %d", s.Ready, s.Primary, s.Local, s.ClusterSize)
}

// ReadState reads the node db is connected to.
func ReadState(ctx context.Context, db *sql.DB) (State, error) {
	rows, err := db.QueryContext(ctx, "SHOW STATUS WHERE Variable_name IN "+
		"('wsrep_ready', 'wsrep_cluster_status', 'wsrep_local_state_comment', 'wsrep_cluster_size')")
	if err != nil {
		return State{}, fmt.Errorf("wsrep status: %w", err)
	}
	defer rows.Close()
	var s State
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return State{}, fmt.Errorf("wsrep status: %w", err)
		}
		switch name {
		case "wsrep_ready":
			s.Ready = value == "ON"
		case "wsrep_cluster_status":
			s.Primary = value == "Primary"
		case "wsrep_local_state_comment":
			s.Local = value
		case "wsrep_cluster_size":
			if s.ClusterSize, err = strconv.Atoi(value); err != nil {
				return State{}, fmt.Errorf("wsrep_cluster_size %q: %w", value, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return State{}, fmt.Errorf("wsrep status: %w", err)
	}
	return s, nil
}

// CheckHandler is HAProxy's health check of the node db reaches: 200
// while it is Writable, 503 otherwise (up but desynced, joining, out of
// the primary component, or not answering within CheckTimeout), the state
// in the body. A node that merely accepts connections is not enough: a
// node cut off from the others accepts them and refuses every query.
func CheckHandler(db *sql.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
		defer cancel()
		s, err := ReadState(ctx, db)
		switch {
		case err != nil:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "down: %v\n", err)
		case !s.Writable():
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not writable: %s\n", s)
		default:
			fmt.Fprintf(w, "writable: %s\n", s)
		}
	})
}

// CheckDSN is the check's connection to a node at addr: root, and every
// step bounded well under HAProxy's check timeout.
func CheckDSN(addr string) string {
	return "root@tcp(" + addr + ")/?timeout=800ms&readTimeout=800ms&writeTimeout=800ms"
}

// OpenCheck opens the check's pool to the node at addr: one connection
// (a pool of idle connections to a dead node would hide nothing, but
// there is no use for more).
func OpenCheck(addr string) (*sql.DB, error) {
	db, err := sql.Open("mysql", CheckDSN(addr))
	if err != nil {
		return nil, fmt.Errorf("galera check: %w", err)
	}
	db.SetMaxOpenConns(2)
	db.SetConnMaxIdleTime(30 * time.Second)
	return db, nil
}
