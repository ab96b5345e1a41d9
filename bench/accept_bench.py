"""How connections that arrive at once spread over two worker processes.

``toolrelay serve --workers N`` runs uvicorn's workers on one listening socket
that they share; each worker's event loop (uvloop) accepts every pending
connection when it wakes. This bench isolates that mechanism from the gateway:
two uvloop processes accept on one shared socket, then on a socket each bound
with ``SO_REUSEPORT`` (the kernel spreads connections over them by a hash), and
a client opens ``--connections`` connections at once, as a load balancer's
pool or a load generator does; each trial counts the connections each process
accepted. Everything stays on 127.0.0.1, every wait is bounded.

    .venv/bin/python bench/accept_bench.py [--trials 8] [--connections 32]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import socket
import statistics
import time
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

import uvloop

_HOLD_SECONDS = 5.0


def _listener(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def _serve(shared: socket.socket | None, port: int, accepted: Synchronized, ready: Event) -> None:
    async def main() -> None:
        async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with accepted.get_lock():
                accepted.value += 1
            await reader.read()  # until the client closes
            writer.close()

        server = await asyncio.start_server(hold, sock=shared or _listener(port))
        ready.set()
        async with server:
            await asyncio.sleep(_HOLD_SECONDS)

    uvloop.run(main())


def trial(reuse_port: bool, connections: int) -> list[int]:
    """Connections each of two processes accepted, of ``connections`` opened at once."""
    shared = None
    if reuse_port:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
    else:
        shared = socket.socket()
        shared.bind(("127.0.0.1", 0))
        shared.listen(128)
        port = shared.getsockname()[1]
    context = multiprocessing.get_context("fork")
    counts = [context.Value("i", 0) for _ in range(2)]
    readies = [context.Event() for _ in range(2)]
    workers = [
        context.Process(target=_serve, args=(shared, port, count, ready))
        for count, ready in zip(counts, readies, strict=True)
    ]
    for worker in workers:
        worker.start()
    try:
        for ready in readies:
            assert ready.wait(10), "a worker did not start"
        clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
        deadline = time.monotonic() + 3
        while sum(c.value for c in counts) < connections and time.monotonic() < deadline:
            time.sleep(0.02)
        result = [c.value for c in counts]
        for client in clients:
            client.close()
    finally:
        for worker in workers:
            worker.terminate()
            worker.join(5)
        if shared is not None:
            shared.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    for reuse_port, name in ((False, "one shared socket"), (True, "SO_REUSEPORT, one each")):
        splits = [trial(reuse_port, args.connections) for _ in range(args.trials)]
        fewer = [min(split) for split in splits]
        print(
            f"{name}: "
            + ", ".join(f"{a}+{b}" for a, b in splits)
            + f"; the less busy worker's share: median {statistics.median(fewer)}, "
            f"least {min(fewer)} of {args.connections}"
        )


if __name__ == "__main__":
    main()
