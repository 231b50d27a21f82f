"""Which server a journal's connection reached: after a failover another one answers, and a
transaction id given by the former means nothing to it."""

from __future__ import annotations

__all__ = ["SERVER"]

SERVER = (
    "concat_ws(' ', inet_server_addr(), inet_server_port(), "
    "(SELECT system_identifier FROM pg_control_system()), pg_postmaster_start_time())"
)
"""SQL naming the server instance a connection reached: its address, the cluster it belongs to,
and when its postmaster started. A standby promoted in a failover, or a primary restarted,
names itself otherwise than the server that was primary before."""
