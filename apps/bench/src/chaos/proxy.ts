import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Random } from '@idem/core';

export interface ProxyCounters {
  requests: number;
  /** Forwarded and answered by a server, then the reply was thrown away. */
  droppedReplies: number;
  /** Thrown away before reaching any server. */
  droppedRequests: number;
  /** No server answered (killed, restarting, none up): 502. */
  badGateway: number;
}

export interface FaultyProxy {
  url: string;
  counters: ProxyCounters;
  /** Turns the drops on or off (the kills are the orchestrator's). */
  setFaults(on: boolean): void;
  close(): Promise<void>;
}

export interface FaultyProxyOptions {
  /** The ports of the servers that are up right now; requests go round-robin. */
  backends: () => readonly number[];
  dropReplyRate: number;
  dropRequestRate: number;
  random: Random;
}

/**
 * A load balancer on 127.0.0.1 that loses messages: it reads each request whole, forwards
 * it to the next server that is up, reads the whole reply, and then, with
 * `dropReplyRate`, destroys the client's connection instead of answering — the server did
 * the work, the client cannot know. With `dropRequestRate` a request is cut off before it
 * reaches any server. A server that fails mid-request (SIGKILL) yields a 502.
 */
export async function startFaultyProxy(options: FaultyProxyOptions): Promise<FaultyProxy> {
  const counters: ProxyCounters = {
    requests: 0,
    droppedReplies: 0,
    droppedRequests: 0,
    badGateway: 0,
  };
  const agent = new Agent({ keepAlive: true, maxSockets: 128 });
  let faults = true;
  let turn = 0;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      counters.requests++;
      if (faults && options.random() < options.dropRequestRate) {
        counters.droppedRequests++;
        req.socket.destroy();
        return;
      }
      const backends = options.backends();
      const port = backends[turn++ % Math.max(1, backends.length)];
      const badGateway = () => {
        counters.badGateway++;
        if (res.headersSent || res.destroyed) return;
        res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' });
        res.end('bad gateway: no server answered');
      };
      if (port === undefined) {
        badGateway();
        return;
      }
      const upstream = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: req.method,
          path: req.url,
          headers: req.headers,
          agent,
          timeout: 30_000,
        },
        (reply) => {
          const body: Buffer[] = [];
          reply.on('data', (chunk: Buffer) => body.push(chunk));
          reply.on('error', badGateway);
          reply.on('end', () => {
            if (faults && options.random() < options.dropReplyRate) {
              counters.droppedReplies++;
              res.socket?.destroy();
              return;
            }
            const headers = { ...reply.headers };
            delete headers['transfer-encoding'];
            headers['content-length'] = String(Buffer.concat(body).length);
            res.writeHead(reply.statusCode ?? 502, headers);
            res.end(Buffer.concat(body));
          });
        },
      );
      upstream.on('error', badGateway);
      upstream.on('timeout', () => upstream.destroy(new Error('upstream timeout')));
      upstream.end(Buffer.concat(chunks));
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    counters,
    setFaults: (on) => {
      faults = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
