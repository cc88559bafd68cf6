// The conformance corpus (tests/conformance) through the TypeScript client over native gRPC:
// one test per scenario file, against the live server the harness starts.
import { testCorpus } from "../conformance/protocols.js";

testCorpus("grpc");
