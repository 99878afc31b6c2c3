//go:build tools

// Package tools names Kueue's controller manager, which scripts/k8s-cluster
// builds with `go build sigs.k8s.io/kueue/cmd/kueue`.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
