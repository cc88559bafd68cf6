// The Node.js transport: native gRPC over HTTP/2, plaintext or TLS.
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

/** TLS settings of a connection; certificates and key in PEM. */
export interface TlsConfig {
  /** CA certificates that verify the server; the system's roots when omitted. */
  readonly rootCertificates?: string | Uint8Array | undefined;
  /** The client's certificate chain, for servers that require mTLS. */
  readonly clientCertificate?: string | Uint8Array | undefined;
  /** The private key of `clientCertificate`. */
  readonly clientPrivateKey?: string | Uint8Array | undefined;
  /** The name to verify the server's certificate against, when it is not the target host. */
  readonly serverName?: string | undefined;
}

/** Options of {@link createNodeTransport}. */
export interface NodeTransportOptions {
  /**
   * `true` for TLS verified against the system's roots, or a {@link TlsConfig}; plaintext
   * when omitted or `false`.
   */
  readonly tls?: boolean | TlsConfig | undefined;
  /** Connect interceptors applied to every call. */
  readonly interceptors?: Interceptor[] | undefined;
}

/**
 * A transport speaking native gRPC (HTTP/2) to `target`, a `host:port` such as
 * `"127.0.0.1:50051"`. Any other Connect `Transport` (for example a gRPC-web transport in
 * a browser) works with `ChatClient` as well.
 */
export function createNodeTransport(target: string, options: NodeTransportOptions = {}): Transport {
  if (!target || /[\s/]/.test(target)) {
    throw new TypeError("target must be host:port");
  }
  const tls = options.tls === true ? {} : options.tls || undefined;
  if (
    tls !== undefined &&
    (tls.clientCertificate === undefined) !== (tls.clientPrivateKey === undefined)
  ) {
    throw new TypeError("clientCertificate and clientPrivateKey go together");
  }
  const common = { interceptors: options.interceptors ?? [] };
  if (tls === undefined) {
    return createGrpcTransport({ ...common, baseUrl: `http://${target}` });
  }
  return createGrpcTransport({
    ...common,
    baseUrl: `https://${target}`,
    nodeOptions: {
      ca: pem(tls.rootCertificates),
      cert: pem(tls.clientCertificate),
      key: pem(tls.clientPrivateKey),
      servername: tls.serverName,
    },
  });
}

function pem(value: string | Uint8Array | undefined): string | Buffer | undefined {
  return value === undefined || typeof value === "string" ? value : Buffer.from(value);
}
