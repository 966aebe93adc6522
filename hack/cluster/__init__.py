"""The local control plane: build.sh builds it, cluster.py runs it."""
