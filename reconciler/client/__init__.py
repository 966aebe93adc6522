"""Talking to the apiserver: the only package that imports an HTTP client.

`kube` is the client the engine and the leader elector use; `transport`,
`kubeconfig` and `protowire` are its parts, imported by nothing else."""
