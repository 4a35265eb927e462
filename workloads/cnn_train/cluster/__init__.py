"""cnn_train's parameter-server cluster, one concept per module; stdlib only to import.

- ``addresses``: the host:port lists of --ps-hosts and --worker-hosts;
- ``wire``: the messages between a worker and the parameter server, over one TCP connection;
- ``server``: the parameter-server process (numpy only, no framework);
- ``client``: a worker's side of each training step;
- ``launcher``: a whole cluster as local processes (--mode ps, --mode distributed --launch-local),
  summed into one record.
"""
