//go:build tools

// Package tools names Volcano's programs, which scripts/k8s-cluster builds
// with `go build volcano.sh/volcano/cmd/...`.
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
	_ "volcano.sh/volcano/cmd/webhook-manager"
)
