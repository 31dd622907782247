import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';

export interface TcpProxy {
  /** The local port clients connect to; reserved even while the proxy is stopped. */
  port: number;
  /** Starts forwarding to the target. */
  start(): Promise<void>;
  /** Stops listening and cuts every open connection: "the server went down". */
  stop(): Promise<void>;
}

/**
 * A TCP forwarder on 127.0.0.1 to simulate a broker outage without touching the real
 * broker: stopped, nothing listens on `port`; started, it forwards to the target.
 */
export async function tcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  return {
    port,
    async start() {
      if (server) return;
      const listening = createServer((client) => {
        const upstream = netConnect(targetPort, targetHost);
        sockets.add(client);
        sockets.add(upstream);
        const cut = () => {
          client.destroy();
          upstream.destroy();
          sockets.delete(client);
          sockets.delete(upstream);
        };
        for (const socket of [client, upstream]) {
          socket.on('error', cut);
          socket.on('close', cut);
        }
        client.pipe(upstream);
        upstream.pipe(client);
      });
      await new Promise<void>((resolve, reject) => {
        listening.once('error', reject);
        listening.listen(port, '127.0.0.1', () => resolve());
      });
      server = listening;
    },
    async stop() {
      const listening = server;
      server = undefined;
      if (!listening) return;
      const closed = new Promise<void>((resolve) => listening.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      await closed;
    },
  };
}

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (!address || typeof address === 'string') throw new Error('no port');
  return address.port;
}
