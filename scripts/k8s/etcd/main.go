// Command etcd is etcd's own server main (etcdmain), built here because
// Debian's etcd-server (3.4) is older than Kubernetes 1.37 accepts.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
