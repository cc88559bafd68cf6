// Revisions through the client's options, against an in-memory server: the requests the
// server receives and the revision fields the caller reads.
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createRouterTransport } from "@connectrpc/connect";
import {
  ChatClient,
  ChatError,
  type MigrationBlocked,
  type ServedRevision,
} from "@agentskit/chat-client";
import {
  ChatService,
  type CreateSessionRequest,
  DefinitionSchema,
  type GetDefinitionRequest,
  MigrationBlockedSchema,
  SessionSchema,
} from "../src/gen/agentskit/chat/v1/chat_pb.js";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb.js";

const SERVED = [
  { revision: 1n, weight: 0, migratesFrom: [] },
  { revision: 2n, weight: 100, migratesFrom: [1n] },
];

/** A server serving revisions 1 and 2 of `support`; it keeps every request it received. */
function revisionServer(): {
  client: ChatClient;
  created: CreateSessionRequest[];
  described: GetDefinitionRequest[];
} {
  const created: CreateSessionRequest[] = [];
  const described: GetDefinitionRequest[] = [];
  const transport = createRouterTransport(({ service }) => {
    service(ChatService, {
      getDefinition(request) {
        described.push(request);
        return {
          definition: create(DefinitionSchema, {
            id: request.definitionId,
            revision: request.revision ?? 2n,
            servedRevisions: SERVED,
          }),
        };
      },
      createSession(request) {
        created.push(request);
        const revision = request.definitionRevision ?? 2n;
        if (revision > 2n) {
          const info = {
            reason: "ERROR_REASON_REVISION_MISMATCH",
            domain: "chat.agentskit.dev",
            metadata: { definition_revision: String(revision) },
          };
          throw new ConnectError("Revision not served.", Code.FailedPrecondition, undefined, [
            { desc: ErrorInfoSchema, value: info },
          ]);
        }
        return {
          session: create(SessionSchema, {
            sessionId: "s1",
            definitionId: request.definitionId,
            definitionRevision: revision,
            migrationBlocked:
              revision === 1n
                ? create(MigrationBlockedSchema, { revision: 2n, code: "replay" })
                : undefined,
          }),
        };
      },
    });
  });
  return { client: new ChatClient(transport), created, described };
}

test("createSession pins a revision only when asked to", async () => {
  const { client, created } = revisionServer();
  const pinned = await client.createSession("support", { revision: 1 });
  const rolledOut = await client.createSession("support");
  const big = await client.createSession("support", { revision: 2n });

  assert.deepEqual(
    created.map((request) => request.definitionRevision),
    [1n, undefined, 2n],
  );
  assert.equal(pinned.definitionRevision, 1n);
  assert.equal(rolledOut.definitionRevision, 2n);
  assert.equal(big.definitionRevision, 2n);
});

test("a session says why it stayed on its revision", async () => {
  const { client } = revisionServer();
  const stayed = await client.createSession("support", { revision: 1 });
  const blocked: MigrationBlocked | undefined = stayed.migrationBlocked;
  assert.equal(blocked?.revision, 2n);
  assert.equal(blocked?.code, "replay");
  assert.equal((await client.createSession("support")).migrationBlocked, undefined);
});

test("getDefinition asks for a revision and lists the served ones", async () => {
  const { client, described } = revisionServer();
  const newest = await client.getDefinition("support");
  const first = await client.getDefinition("support", { revision: 1 });
  const zero = await client.getDefinition("support", { revision: 0n });

  assert.deepEqual(
    described.map((request) => request.revision),
    [undefined, 1n, 0n],
  );
  assert.equal(newest.revision, 2n);
  assert.equal(first.revision, 1n);
  assert.equal(zero.revision, 0n);
  const served: ServedRevision[] = newest.servedRevisions;
  assert.deepEqual(
    served.map(({ revision, weight, migratesFrom }) => ({ revision, weight, migratesFrom })),
    SERVED,
  );
});

test("an unserved revision is REVISION_MISMATCH, naming the revision", async () => {
  const { client } = revisionServer();
  await assert.rejects(client.createSession("support", { revision: 9 }), (error) => {
    assert.ok(error instanceof ChatError);
    assert.equal(error.codeName, "FAILED_PRECONDITION");
    assert.equal(error.reason, "ERROR_REASON_REVISION_MISMATCH");
    assert.deepEqual(error.metadata, { definition_revision: "9" });
    return true;
  });
});

test("a revision that is not an integer is refused before anything is sent", async () => {
  const { client, created, described } = revisionServer();
  await assert.rejects(client.createSession("support", { revision: 1.5 }), RangeError);
  await assert.rejects(client.getDefinition("support", { revision: Number.NaN }), RangeError);
  assert.equal(created.length + described.length, 0);
});
