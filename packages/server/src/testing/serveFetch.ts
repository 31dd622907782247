import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running {@link serveFetch} server. */
export interface FetchServer {
  /** Base URL, e.g. `http://127.0.0.1:54321`. */
  url: string;
  close(): Promise<void>;
}

/**
 * Serves a Fetch-API handler (such as tRPC's `fetchRequestHandler`) on a real node:http
 * server on 127.0.0.1 and a free port: a minimal adapter for tests and examples, so calls
 * cross a real socket (header parsing, status codes, response headers). Not a production
 * server: bodies are buffered whole.
 */
export async function serveFetch(
  handler: (request: Request) => Promise<Response> | Response,
): Promise<FetchServer> {
  const server = createServer((req, res) => {
    respond(req, res, handler).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String(error));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        // Idle keep-alive sockets would otherwise hold close() open for seconds.
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

async function respond(
  req: IncomingMessage,
  res: ServerResponse,
  handler: (request: Request) => Promise<Response> | Response,
) {
  const headers = new Headers();
  // rawHeaders alternates names and values: [name, value, name, value, …].
  let name: string | undefined;
  for (const part of req.rawHeaders) {
    if (name === undefined) {
      name = part;
    } else {
      headers.append(name, part);
      name = undefined;
    }
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
    method: req.method ?? 'GET',
    headers,
    ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
  });
  const response = await handler(request);
  const body = Buffer.from(await response.arrayBuffer());
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(body);
}
