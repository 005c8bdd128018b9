# Cluster setup (NCCL InfiniBand / TCPXO, caches). Owned by the cluster-profiles work.
# Contract: lk_cluster_setup is called once, after the clone and before the Python setup,
# in the entrypoint's shell (so exports reach the user command).

lk_cluster_setup() { :; }
