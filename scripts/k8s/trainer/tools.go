//go:build tools

// Package tools names Kubeflow Trainer's controller manager, which
// scripts/k8s-cluster builds with `go build .../cmd/trainer-controller-manager`.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
