//go:build tools

// Package tools names the Training Operator's main package, which
// scripts/k8s-cluster builds with `go build .../cmd/training-operator.v1`.
package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
