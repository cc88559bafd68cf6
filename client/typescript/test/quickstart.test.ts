// The README's snippet (examples/quickstart.ts) runs as written against the live server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { SKIP_WITHOUT_SERVER, TARGET, TOKEN } from "../conformance/live.js";

const QUICKSTART = fileURLToPath(new URL("../examples/quickstart.js", import.meta.url));

test(
  "the quickstart creates a session and streams a turn",
  { skip: SKIP_WITHOUT_SERVER },
  async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [QUICKSTART], {
      env: { ...process.env, AGENTSKIT_CHAT_TARGET: TARGET, AGENTSKIT_CHAT_TOKEN: TOKEN },
      timeout: 60_000,
    });
    assert.equal(stdout, "What is your name?\n[collecting]\n");
  },
);
