#!/usr/bin/env python3
"""A loopback fault proxy for the client scenarios of doc/clients.md (scripts/test-clients.sh).

    python3 test/clients/faultproxy.py --socket /tmp/.s.PGSQL.5432 \
        --listen 127.0.0.1:55501 --control 127.0.0.1:55502

Every TCP connection accepted on --listen is forwarded to the server's Unix socket --socket.
Commands arrive on --control, one per line, each answered "ok" or "error <why>":

    hold    stop delivering server-to-client bytes (kept, in order); client-to-server still flows
    cut     stop delivering both ways: a partition (the sockets stay open, the bytes are kept)
    heal    deliver everything kept, then forward both ways again
    drop    close every proxied connection at once (kept bytes are discarded); the mode stays
    status  "ok conns=N mode=normal|hold|cut"

A connection accepted during hold or cut is subject to the mode like the others. A side that
closes while its direction is held is closed on the other side only once heal delivers what
came before. Prints "listening" on stdout once both ports accept. Python 3 standard library only.
"""
import argparse
import asyncio
import sys

MODES = ("normal", "hold", "cut")


class Direction:
    """One direction of one proxied connection: bytes read from one side, written to the other."""

    def __init__(self, proxy, conn, writer, name):
        self.proxy, self.conn, self.writer, self.name = proxy, conn, writer, name
        self.kept = []  # chunks not yet delivered, in order; None marks the end of the stream

    def deliverable(self):
        mode = self.proxy.mode
        if self.name == "c2s":
            return mode != "cut"
        return mode == "normal"

    def push(self, chunk):
        if self.kept or not self.deliverable():
            self.kept.append(chunk)
        else:
            self.deliver(chunk)

    def flush(self):
        kept, self.kept = self.kept, []
        for chunk in kept:
            self.deliver(chunk)

    def deliver(self, chunk):
        if chunk is None:
            self.conn.close()
        elif not self.writer.is_closing():
            self.writer.write(chunk)


class Conn:
    def __init__(self, proxy, c_reader, c_writer, s_reader, s_writer):
        self.proxy = proxy
        self.writers = (c_writer, s_writer)
        self.c2s = Direction(proxy, self, s_writer, "c2s")
        self.s2c = Direction(proxy, self, c_writer, "s2c")
        self.closed = False
        self.tasks = [asyncio.ensure_future(self.pump(c_reader, self.c2s)),
                      asyncio.ensure_future(self.pump(s_reader, self.s2c))]

    async def pump(self, reader, direction):
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                direction.push(chunk)
                if direction.deliverable() and not direction.kept:
                    await direction.writer.drain()
        except (ConnectionError, OSError):
            pass
        if not self.closed:
            direction.push(None)

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.proxy.conns.discard(self)
        for w in self.writers:
            try:
                w.transport.abort()
            except Exception:
                pass
        for t in self.tasks:
            if t is not asyncio.current_task():
                t.cancel()


class Proxy:
    def __init__(self, socket_path):
        self.socket_path = socket_path
        self.mode = "normal"
        self.conns = set()

    async def accept(self, c_reader, c_writer):
        try:
            s_reader, s_writer = await asyncio.open_unix_connection(self.socket_path)
        except OSError:
            c_writer.transport.abort()
            return
        self.conns.add(Conn(self, c_reader, c_writer, s_reader, s_writer))

    def command(self, line):
        cmd = line.strip().lower()
        if cmd in ("hold", "cut"):
            self.mode = cmd
        elif cmd == "heal":
            self.mode = "normal"
            for conn in list(self.conns):
                conn.c2s.flush()
                conn.s2c.flush()
        elif cmd == "drop":
            for conn in list(self.conns):
                conn.close()
        elif cmd == "status":
            return "ok conns=%d mode=%s" % (len(self.conns), self.mode)
        else:
            return "error unknown command %r (hold, cut, heal, drop, status)" % cmd
        return "ok"

    async def control(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                writer.write((self.command(line.decode(errors="replace")) + "\n").encode())
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        writer.close()


def host_port(text):
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True, help="the server's Unix socket, .../.s.PGSQL.NNNN")
    ap.add_argument("--listen", required=True, type=host_port, help="HOST:PORT the clients connect to")
    ap.add_argument("--control", required=True, type=host_port, help="HOST:PORT of the command port")
    args = ap.parse_args()
    proxy = Proxy(args.socket)
    listen = await asyncio.start_server(proxy.accept, *args.listen)
    control = await asyncio.start_server(proxy.control, *args.control)
    print("listening", flush=True)
    async with listen, control:
        await asyncio.gather(listen.serve_forever(), control.serve_forever())


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
