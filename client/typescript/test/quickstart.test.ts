// The README's snippet (examples/quickstart.ts) runs as written against the live server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { SKIP_WITHOUT_SERVER, TARGET, TOKEN } from "../conformance/live.js";

const QUICKSTART = fileURLToPath(new URL("../examples/quickstart.js", import.meta.url));

function quickstart(env: Record<string, string | undefined>) {
  return promisify(execFile)(process.execPath, [QUICKSTART], {
    env: { PATH: process.env["PATH"], AGENTSKIT_CHAT_TARGET: TARGET, ...env },
    timeout: 60_000,
  });
}

test(
  "the quickstart creates a session and streams a turn",
  { skip: SKIP_WITHOUT_SERVER },
  async () => {
    const { stdout } = await quickstart({ AGENTSKIT_CHAT_TOKEN: TOKEN });
    assert.match(stdout, /^session s-\w+ in state idle\n.+\ncompleted in state idle\n$/);
  },
);

test(
  "the quickstart names the reason of a refused call",
  { skip: SKIP_WITHOUT_SERVER },
  async () => {
    const refused = await quickstart({}).then(
      () => assert.fail("the quickstart succeeded without a token"),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
    assert.equal(refused.code, 1);
    assert.equal(refused.stdout, "");
    assert.match(refused.stderr, /^UNAUTHENTICATED ERROR_REASON_UNAUTHENTICATED: /);
  },
);
