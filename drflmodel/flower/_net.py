"""Which sockets a set of processes listens on (Linux ``/proc``; used to check that every Flower
and Ray listener of a drflmodel run is on the loopback interface)."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from pathlib import Path

__all__ = ["descendants", "listening_sockets", "is_loopback", "free_port"]

_TABLES = {"tcp": socket.AF_INET, "tcp6": socket.AF_INET6, "udp": socket.AF_INET, "udp6": socket.AF_INET6}
_LISTEN, _UDP_UNCONNECTED = "0A", "07"


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (from ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [int(pid)]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo.extend(children.get(p, []))
    return out


def _address(hex_addr: str, family) -> str:
    raw = bytes.fromhex(hex_addr)
    if family == socket.AF_INET:
        return socket.inet_ntop(family, raw[::-1])
    return socket.inet_ntop(family, b"".join(struct.pack("<I", w) for w in struct.unpack(">4I", raw)))


def is_loopback(address: str) -> bool:
    """Whether ``address`` is on the loopback interface (IPv4-mapped IPv6 addresses such as
    ``::ffff:127.0.0.1``, which gRPC uses for a ``127.0.0.1`` bind, included)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def listening_sockets(pids) -> list[dict]:
    """Listening TCP sockets and unconnected UDP sockets owned by ``pids``:
    ``[{"proto", "address", "port", "pid", "name", "loopback"}]``."""
    inode_pid: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inode_pid[target[8:-1]] = pid
        except OSError:
            continue
    out = []
    for proto, family in _TABLES.items():
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, state, inode = parts[1], parts[3], parts[9]
            if inode not in inode_pid or state not in (_LISTEN, _UDP_UNCONNECTED):
                continue
            if proto.startswith("tcp") and state != _LISTEN:
                continue
            host, port = local.split(":")
            pid = inode_pid[inode]
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                name = "?"
            address = _address(host, family)
            out.append({"proto": proto, "address": address, "port": int(port, 16), "pid": pid,
                        "name": name, "loopback": is_loopback(address)})
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
