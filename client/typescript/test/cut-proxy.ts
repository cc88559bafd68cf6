// A TCP proxy in front of a server whose connections a test cuts mid-stream.
import { connect, createServer, type Server, type Socket } from "node:net";

/** A loopback TCP proxy to `target`; `cut()` drops every connection through it. */
export class CutProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #port = 0;
  /** Connections accepted so far. */
  accepted = 0;

  private constructor(targetPort: number, targetHost: string) {
    this.#server = createServer((downstream) => {
      this.accepted += 1;
      const upstream = connect(targetPort, targetHost);
      for (const socket of [downstream, upstream]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => socket.destroy());
      }
      downstream.pipe(upstream);
      upstream.pipe(downstream);
      downstream.on("close", () => upstream.destroy());
      upstream.on("close", () => downstream.destroy());
    });
  }

  /** A proxy listening on a free loopback port, forwarding to `host:port`. */
  static async start(target: string): Promise<CutProxy> {
    const separator = target.lastIndexOf(":");
    const host = target.slice(0, separator).replace(/^\[|\]$/g, "");
    const proxy = new CutProxy(Number(target.slice(separator + 1)), host);
    await new Promise<void>((resolve) => proxy.#server.listen(0, "127.0.0.1", resolve));
    const address = proxy.#server.address();
    proxy.#port = typeof address === "object" && address !== null ? address.port : 0;
    return proxy;
  }

  /** `host:port` of the proxy. */
  get target(): string {
    return `127.0.0.1:${this.#port}`;
  }

  /** `http://host:port` of the proxy. */
  get url(): string {
    return `http://${this.target}`;
  }

  /** Drop every open connection, the client's side with a TCP reset. */
  cut(): void {
    for (const socket of this.#sockets) {
      socket.resetAndDestroy();
    }
    this.#sockets.clear();
  }

  /** Stop accepting and drop every connection. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
