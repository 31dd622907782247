import { createServer, connect as netConnect, type Socket } from 'node:net';

export interface LaggingProxy {
  /** The loopback port the standby's WAL receiver connects to. */
  readonly port: number;
  /** Cuts every connection and drops whatever it still holds back: the primary's machine is gone. */
  cut(): Promise<void>;
}

/**
 * A TCP forwarder to `targetPort` that hands on what the target sends only `delayMs` later:
 * put between a primary and its standby, it makes an asynchronous standby that far behind
 * (as one across regions, or busy, is). On loopback the standby is otherwise microseconds
 * behind, and a failover could not show what asynchronous replication loses.
 */
export async function laggingProxy(targetPort: number, delayMs: number): Promise<LaggingProxy> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const server = createServer((client) => {
    const upstream = netConnect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.on('data', (chunk: Buffer) => {
      // Timers of one delay fire in the order they were set: the stream keeps its order.
      const timer = setTimeout(() => {
        timers.delete(timer);
        if (!client.destroyed) client.write(chunk);
      }, delayMs);
      timers.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    async cut() {
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
