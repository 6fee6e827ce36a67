"""``ray start --address=127.0.0.1:PORT ...`` for a second node on this machine, on loopback.

Run with ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (Ray's loopback mode, in which Ray keeps
127.0.0.1 as the node's address instead of this machine's first interface), where the
CLI refuses to add a node to a cluster ("Multi-node Ray clusters are not supported on
Windows and OSX"). This lifts that one refusal in this process only, keeping localhost
resolving to 127.0.0.1; the processes the node starts inherit the loopback mode from the
environment. See tests/helpers/ray_cluster.py.
"""

import sys

import ray._private.ray_constants as constants
import ray._private.services as services

constants.ENABLE_RAY_CLUSTER = True  # the CLI's multi-node check reads this
services.get_node_ip_address = lambda address=None: "127.0.0.1"  # localhost stays loopback

from ray.scripts.scripts import main  # noqa: E402

sys.argv = ["ray", *sys.argv[1:]]
main()
