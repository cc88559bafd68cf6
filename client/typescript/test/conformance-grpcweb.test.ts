// The conformance corpus through the TypeScript client over gRPC-Web (binary, HTTP/2) on
// the live server's HTTP listener: one test per scenario file.
import { testCorpus } from "../conformance/protocols.js";

testCorpus("grpcweb");
