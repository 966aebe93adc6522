// pause holds a pod's namespaces for the real node's kubelet (the sandbox's
// one process): it sleeps until told to stop and, as the pod's init when the
// pod shares its process namespace, reaps the orphans it inherits. Built here
// (hack/cluster/build.sh kubelet) because no registry serves the usual image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	child := make(chan os.Signal, 16)
	signal.Notify(child, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-child:
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
