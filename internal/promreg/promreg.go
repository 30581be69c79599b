// Package promreg registers Prometheus collectors that several servers of
// one process (or one test) may register on the same registry.
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg; when reg already holds an equal collector
// of c's type (a second server on one registry), that one is returned.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register metrics: %w", err)
	}
	return c, nil
}
