#!/usr/bin/env python3
"""Fans out I/O-style Python work on a blitz pool.

Python callables hold the GIL while they compute but release it while they
sleep or wait on a socket, so a pool of many workers overlaps the waits:

  1. sleep:  pool.map over requests that each time.sleep(latency);
  2. socket: pool.spawn of requests to a local TCP server that answers each
             after `latency` (real connects, sends and receives);
  3. CPU:    pure-Python arithmetic, for contrast: it holds the GIL, so the
             pool runs it one call at a time (no speedup).

    python3 examples/python/io_fanout.py [--threads N] [--requests N]
        [--latency S] [--quick]
"""
import argparse
import socket
import socketserver
import threading
import time

import _locate  # noqa: F401  (makes the checkout's blitz importable)
import blitz


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    request_queue_size = 256   # the default backlog (5) would drop concurrent connects


class SlowEcho(socketserver.BaseRequestHandler):
    latency = 0.0

    def handle(self):
        data = self.request.recv(64)
        time.sleep(self.latency)   # the server "thinks"
        self.request.sendall(data.upper())


def request(address, i):
    with socket.create_connection(address, timeout=60) as conn:
        conn.sendall(f"request {i}".encode())
        return conn.recv(64).decode()


def sleepy(i, latency):
    time.sleep(latency)
    return i


def cpu_bound(i):
    return sum(k * k for k in range(200_000)) + i


def timed(fn, runs=1):
    """(result, wall, cpu) of the fastest of `runs` calls of fn."""
    best = None
    for _ in range(runs):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        result = fn()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        if best is None or wall < best[1]:
            best = (result, wall, cpu)
    return best


def check(same, what):
    if not same:
        raise SystemExit(f"FAILED: {what} gave different results in the pool")


def report(title, sequential, parallel, workers):
    (_, seq_wall, _), (_, par_wall, par_cpu) = sequential, parallel
    print(f"{title}")
    print(f"  {'sequential':<24}{seq_wall:7.3f} s")
    print(f"  {f'pool ({workers} workers)':<24}{par_wall:7.3f} s   CPU/wall {par_cpu / par_wall:4.2f}   "
          f"speedup {seq_wall / par_wall:5.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=16, help="workers")
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--latency", type=float, default=0.04, help="seconds per request")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.latency = 8, 0.005
    n, latency = args.requests, args.latency

    with blitz.Pool(args.threads, name="io") as pool:
        overlap = min(n, pool.num_threads)
        print(f"libblitz {blitz.library_version()}, {pool.num_threads} workers, "
              f"{n} requests of {latency * 1000:.0f} ms; ideal speedup {overlap}x\n")

        # 1. sleep, through pool.map
        seq = timed(lambda: [sleepy(i, latency) for i in range(n)])
        par = timed(lambda: pool.map(lambda i: sleepy(i, latency), range(n)))
        check(seq[0] == par[0] == list(range(n)), "pool.map of sleeps")
        report(f"time.sleep({latency}) x {n}, pool.map:", seq, par, pool.num_threads)

        # 2. socket round trips, through pool.spawn
        SlowEcho.latency = latency
        with Server(("127.0.0.1", 0), SlowEcho) as server:
            threading.Thread(target=server.serve_forever, daemon=True).start()
            address = server.server_address
            seq = timed(lambda: [request(address, i) for i in range(n)])
            par = timed(lambda: [t.result() for t in [pool.spawn(request, address, i) for i in range(n)]])
            server.shutdown()
        check(seq[0] == par[0] == [f"REQUEST {i}" for i in range(n)], "the TCP round trips")
        report(f"TCP round trips to a server answering in {latency}s x {n}, pool.spawn:", seq, par, pool.num_threads)

        # 3. CPU-bound Python: the GIL serialises it
        items = range(min(n, 16))
        seq = timed(lambda: [cpu_bound(i) for i in items], runs=3)
        par = timed(lambda: pool.map(cpu_bound, items), runs=3)
        check(seq[0] == par[0], "the arithmetic")
        report(f"pure-Python arithmetic x {len(items)} (holds the GIL), pool.map, best of 3:",
               seq, par, pool.num_threads)
        print("\nWaits overlap (the GIL is released while a callable sleeps or waits on a socket);"
              "\nPython computation does not: for parallel speed pass a C function (blitz.RANGE_FN).")


if __name__ == "__main__":
    main()
