// Command pause is the pod sandbox's process (what registry.k8s.io/pause
// runs): it holds the pod's namespaces, reaps orphans as PID 1, and exits at
// once on SIGINT or SIGTERM. No registry is reachable from these machines, so
// scripts/k8s-cluster builds it and puts it on the node as the sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
