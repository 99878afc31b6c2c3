//go:build tools

// Package tools names the JobSet controller's main package (the module's
// root), which scripts/k8s-cluster builds with `go build sigs.k8s.io/jobset`.
package tools

import _ "sigs.k8s.io/jobset"
