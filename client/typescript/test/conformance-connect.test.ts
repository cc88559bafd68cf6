// The conformance corpus through the TypeScript client over the Connect protocol (JSON,
// HTTP/1.1) on the live server's HTTP listener: one test per scenario file.
import { testCorpus } from "../conformance/protocols.js";

testCorpus("connect");
