// ChatError as decoded from the grpc-status-details-bin trailer a server sends.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create, toBinary } from "@bufbuild/protobuf";
import { type Any, anyPack, DurationSchema } from "@bufbuild/protobuf/wkt";
import { base64Encode } from "@bufbuild/protobuf/wire";
import { ConnectError } from "@connectrpc/connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { ChatError, Code, grpcCodeName } from "@agentskit/chat-client";
import { ErrorInfoSchema, RetryInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../src/gen/google/rpc/status_pb.js";

function trailer(details: Any[], code = Code.Aborted): Headers {
  const status = create(StatusSchema, { code, message: "session busy", details });
  return new Headers({
    "grpc-status": String(code),
    "grpc-message": "session busy",
    "grpc-status-details-bin": base64Encode(toBinary(StatusSchema, status), "std_raw"),
  });
}

const busyInfo = create(ErrorInfoSchema, {
  reason: "ERROR_REASON_SESSION_BUSY",
  domain: "chat.agentskit.dev",
  metadata: { retry_after_ms: "250" },
});

test("a trailer's ErrorInfo and RetryInfo become reason, metadata and retry delay", () => {
  const retry = create(RetryInfoSchema, {
    retryDelay: create(DurationSchema, { seconds: 1n, nanos: 250_000_000 }),
  });
  const found = findTrailerError(
    trailer([anyPack(ErrorInfoSchema, busyInfo), anyPack(RetryInfoSchema, retry)]),
  );
  const error = ChatError.from(found);
  assert.ok(error instanceof ChatError && error instanceof Error);
  assert.equal(error.code, Code.Aborted);
  assert.equal(error.codeName, "ABORTED");
  assert.equal(error.reason, "ERROR_REASON_SESSION_BUSY");
  assert.equal(error.domain, "chat.agentskit.dev");
  assert.deepEqual(error.metadata, { retry_after_ms: "250" });
  assert.equal(error.retryDelayMs, 1250);
  assert.equal(error.retryAfterMs, 250, "the metadata hint comes first");
  assert.equal(error.rawMessage, "session busy");
  assert.equal(error.message, "ABORTED ERROR_REASON_SESSION_BUSY: session busy");
  assert.ok(error.cause instanceof ConnectError);
  assert.throws(() => {
    (error.metadata as Record<string, string>)["cursor"] = "1";
  }, TypeError);
});

test("without the metadata hint, retryAfterMs is the RetryInfo delay", () => {
  const info = create(ErrorInfoSchema, { reason: "ERROR_REASON_TURN_IN_PROGRESS" });
  const retry = create(RetryInfoSchema, {
    retryDelay: create(DurationSchema, { nanos: 40_000_000 }),
  });
  const error = ChatError.from(
    findTrailerError(trailer([anyPack(ErrorInfoSchema, info), anyPack(RetryInfoSchema, retry)])),
  );
  assert.equal(error.retryDelayMs, 40);
  assert.equal(error.retryAfterMs, 40);
  assert.equal(error.domain, undefined);
});

test("an error without details has no reason, metadata or delay", () => {
  const error = ChatError.from(findTrailerError(trailer([], Code.Unavailable)));
  assert.equal(error.codeName, "UNAVAILABLE");
  assert.equal(error.reason, undefined);
  assert.deepEqual(error.metadata, {});
  assert.equal(error.retryDelayMs, undefined);
  assert.equal(error.retryAfterMs, undefined);
  assert.equal(error.message, "UNAVAILABLE: session busy");
});

test("a malformed retry_after_ms is ignored rather than guessed", () => {
  const info = create(ErrorInfoSchema, { reason: "X", metadata: { retry_after_ms: "soon" } });
  const error = ChatError.from(findTrailerError(trailer([anyPack(ErrorInfoSchema, info)])));
  assert.equal(error.retryAfterMs, undefined);
});

test("anything thrown becomes a ChatError, once", () => {
  const error = ChatError.from(new Error("boom"));
  assert.equal(error.codeName, "UNKNOWN");
  assert.equal(ChatError.from(error), error);
  assert.equal(error.turnId, undefined);
  const ofTurn = ChatError.from(error, "t1");
  assert.equal(ofTurn.turnId, "t1");
  assert.equal(ofTurn.message, error.message, "the same error, now naming its turn");
  assert.equal(ChatError.from(ofTurn, "t1"), ofTurn);
  assert.equal(
    ChatError.from(new ConnectError("late", Code.DeadlineExceeded)).codeName,
    "DEADLINE_EXCEEDED",
  );
});

test("gRPC code names are the ones every gRPC library prints", () => {
  assert.equal(grpcCodeName(Code.Canceled), "CANCELLED");
  assert.equal(grpcCodeName(Code.NotFound), "NOT_FOUND");
  assert.equal(grpcCodeName(Code.Unauthenticated), "UNAUTHENTICATED");
  assert.equal(grpcCodeName(Code.ResourceExhausted), "RESOURCE_EXHAUSTED");
});
