//go:build tools

// Package tools names CoreDNS's main package (the module's root), which
// scripts/k8s-cluster builds with `go build github.com/coredns/coredns`.
package tools

import _ "github.com/coredns/coredns"
