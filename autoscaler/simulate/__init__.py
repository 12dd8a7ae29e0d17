"""``autoscaler simulate``: the daemon's core in virtual time against a modelled workload.

The modules, in the order data flows: ``trace`` (demand over time, from a file) or
``prometheus`` (from a range query), ``options`` (the workload settings), ``workload`` (pods
and their lifecycle), ``load`` (demand to metric samples), ``engine`` (the loop around
``decide`` and ``record_scale_event``), ``report`` and ``plot`` (the results), ``command``
(running what ``autoscaler.commands.simulate`` parsed).
"""
