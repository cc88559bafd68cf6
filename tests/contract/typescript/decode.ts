// Reads a google.rpc.Status (base64 in ./input.ts, written by the test) with the code
// protoc-gen-es generated from proto/, and prints what a TypeScript client learns from it.
import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { base64Decode } from "@bufbuild/protobuf/wire";
import { ChatService, ErrorReasonSchema } from "./gen/agentskit/chat/v1/chat_pb.js";
import { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "./gen/google/rpc/status_pb.js";
import { STATUS } from "./input.js";

const status = fromBinary(StatusSchema, base64Decode(STATUS));
const report = {
  code: status.code,
  reason: "",
  known_reason: false,
  domain: "",
  metadata: {} as Record<string, string>,
  retry_delay_ms: 0,
  methods: ChatService.methods.map((method) => method.name),
};
for (const detail of status.details) {
  const info = anyUnpack(detail, ErrorInfoSchema);
  if (info !== undefined) {
    report.reason = info.reason;
    report.known_reason = ErrorReasonSchema.values.some((value) => value.name === info.reason);
    report.domain = info.domain;
    report.metadata = info.metadata;
  }
  const retry = anyUnpack(detail, RetryInfoSchema);
  if (retry?.retryDelay !== undefined) {
    const delay = retry.retryDelay;
    report.retry_delay_ms = Number(delay.seconds) * 1000 + delay.nanos / 1_000_000;
  }
}
console.log(JSON.stringify(report));
