"""``kubectl bootc``: the kubectl plugin (the ``kubectl-bootc`` executable).

- :mod:`.main`: the command line, subcommands, exit codes (imports only argparse up
  front: each subcommand loads what it needs);
- :mod:`.cluster`: kubeconfig and API access through ``kube.lite``, errors as one line;
- :mod:`.explain`: what a pool waits for and why a node is where it is, computed with
  the controller's own decisions (``bootc_operator.policy``): the only module here
  that calls them;
- :mod:`.render`: the status block, ``-o json|yaml`` data, Events;
- :mod:`.table`: the per-node table (shared with the demo's live view).
"""
