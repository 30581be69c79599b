// Package ops holds the operators' checks: the Prometheus alert rules in
// deploy/prometheus and the commands of docs/runbook.md are tested here
// against the real processes and services, so they stay true.
package ops
