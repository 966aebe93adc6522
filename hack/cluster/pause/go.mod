module reconciler.local/cluster-build/pause

go 1.24.0
