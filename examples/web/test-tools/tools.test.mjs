// Tool calls in the renderer, in headless Chromium against a live service (tests/web starts
// it, see tests/web/test_renderer_tools.py).
//
// Environment:
//   AGENTSKIT_WEB_URL                  the renderer served by the service itself
//   AGENTSKIT_WEB_TOKEN                bearer token of the service
//   AGENTSKIT_WEB_ARTIFACTS            directory of the screenshot
//   AGENTSKIT_WEB_CHROMIUM             the browser (default /usr/bin/chromium)
//   AGENTSKIT_WEB_TOOLS_DEFINITION     definition whose model may call the page's tools
//   AGENTSKIT_WEB_APPROVAL_DEFINITION  definition that marks local_time for approval
//   AGENTSKIT_WEB_TIME_TEXT            input the model answers by calling local_time...
//   AGENTSKIT_WEB_TIME_ARGUMENTS       ...with these arguments (JSON text)
//   AGENTSKIT_WEB_TOOLS_ANSWER         the model's answer to a tool result, in slow chunks
//   AGENTSKIT_WEB_DENY_REASON          the reason typed for a denial
import assert from "node:assert/strict";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  assert.ok(value, `${name} is not set`);
  return value;
};

const TIMEOUT = 30_000; // generous: the machine may be busy
// The page runs local_time itself; the browser's clock and zone are fixed so that its answer
// is known: 14:30 UTC on 4 December 2026 is 15:30 in Paris (UTC+01:00).
const NOW = new Date("2026-12-04T14:30:00Z");
let browser;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.AGENTSKIT_WEB_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    timeout: 60_000,
  });
});

after(async () => {
  await browser?.close();
});

/**
 * Record, in `window.seen`, what the page shows as it changes: every text of the streaming
 * reply while it is busy (`replies`), and every status each tool card shows, by call id
 * (`statuses`). An init script: it records in every document, from before the renderer runs.
 */
function recordChanges() {
  window.seen = { replies: [], statuses: {} };
  const changed = () => {
    const reply = document.getElementById("streaming-reply");
    const text = reply?.getAttribute("aria-busy") === "true" ? reply.textContent : "";
    if (text && window.seen.replies.at(-1) !== text) {
      window.seen.replies.push(text);
    }
    for (const card of document.querySelectorAll(".tool-card")) {
      const statuses = (window.seen.statuses[card.dataset.toolCallId] ??= []);
      const status = card.querySelector(".tool-status")?.textContent;
      if (status && statuses.at(-1) !== status) {
        statuses.push(status);
      }
    }
  };
  new MutationObserver(changed).observe(document, {
    subtree: true,
    childList: true,
    characterData: true,
  });
}

/**
 * A page of the renderer (of session `sessionId` when given), its console errors and page
 * errors collected in `problems`.
 */
async function openPage(sessionId) {
  const context = await browser.newContext({
    viewport: { width: 1100, height: 900 },
    timezoneId: "Europe/Paris",
    locale: "en-GB",
  });
  await context.clock.setFixedTime(NOW);
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") {
      problems.push(`${message.type()}: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.addInitScript(recordChanges);
  const url = new URL(env("AGENTSKIT_WEB_URL"));
  url.searchParams.set("token", env("AGENTSKIT_WEB_TOKEN"));
  if (sessionId !== undefined) {
    url.searchParams.set("session", sessionId);
  }
  await page.goto(url.href);
  return { page, context, problems };
}

/** A page with a new session of `definition`. */
async function newSession(definition) {
  const opened = await openPage();
  const { page } = opened;
  await page.locator(`#definition option[value="${definition}"]`).waitFor({ state: "attached" });
  await page.selectOption("#definition", definition);
  await page.getByRole("button", { name: "Start a new session" }).click();
  await page.locator("#chat").waitFor({ state: "visible" });
  return opened;
}

/** Close the page, which must have shown no error. */
async function finish({ page, context, problems }) {
  const error = page.locator("#error");
  assert.equal(await error.isHidden(), true, await error.textContent());
  assert.deepEqual(problems, []);
  await context.close();
}

/** Send `text` from the message box. */
async function send(page, text) {
  await page.getByLabel("Message", { exact: true }).fill(text);
  await page.getByLabel("Message", { exact: true }).press("Enter");
}

/** Wait until no turn runs and the newest message is an answer reading `content`. */
async function answered(page, content) {
  await page.waitForFunction(
    (content) => {
      const last = document.querySelector("#messages > li:last-child");
      return (
        document.body.dataset.turn === "idle" &&
        last?.dataset.role === "assistant" &&
        last.dataset.streaming === undefined &&
        last.querySelector(":scope > .content")?.textContent === content
      );
    },
    content,
    { timeout: TIMEOUT },
  );
}

/** Wait until no turn runs and the card of the newest call reads `status`. */
async function cardStatus(page, status) {
  await page.waitForFunction(
    (status) =>
      document.body.dataset.turn === "idle" &&
      !document.querySelector("[data-streaming]") &&
      [...document.querySelectorAll("#messages .tool-card")].at(-1)?.dataset.status === status,
    status,
    { timeout: TIMEOUT },
  );
}

/** The messages shown, oldest first: role, text, and the tool cards each shows. */
function messages(page) {
  return page.$$eval("#messages > li", (items) =>
    items.map((item) => ({
      role: item.dataset.role,
      content: item.querySelector(":scope > .content")?.textContent ?? null,
      route: item.querySelector('[data-badge="route"]')?.textContent ?? null,
      cards: [...item.querySelectorAll(".tool-card")].map((card) => ({
        name: card.querySelector(".tool-name")?.textContent ?? null,
        status: card.querySelector(".tool-status")?.textContent ?? null,
        arguments: card.querySelector(".tool-args")?.textContent ?? null,
        result: card.querySelector(".tool-result")?.textContent ?? null,
        buttons: [...card.querySelectorAll("button")].map((button) => button.textContent),
        label: document.getElementById(card.getAttribute("aria-labelledby"))?.textContent ?? null,
      })),
    })),
  );
}

/** The local_time result the page gives on the fixed clock, as its card shows it. */
async function expectedResult(page) {
  const localTime = await page.evaluate(() =>
    new Intl.DateTimeFormat("en-GB", { dateStyle: "full", timeStyle: "long" }).format(new Date()),
  );
  assert.match(localTime, /15:30:00/);
  const iso = "2026-12-04T15:30:00+01:00";
  return JSON.stringify({ timeZone: "Europe/Paris", utcOffset: "+01:00", localTime, iso }, null, 2);
}

const prettyArguments = () =>
  JSON.stringify(JSON.parse(env("AGENTSKIT_WEB_TIME_ARGUMENTS")), null, 2);
/** The user's question, as shown. */
const question = () => ({
  role: "user",
  content: env("AGENTSKIT_WEB_TIME_TEXT"),
  route: null,
  cards: [],
});
/** The model's answer to a tool result, as shown. */
const answer = () => ({
  role: "assistant",
  content: env("AGENTSKIT_WEB_TOOLS_ANSWER"),
  route: "model",
  cards: [],
});

/** The answer that made one call of local_time, its card reading `status` and `result`. */
function callingAnswer(status, result, buttons = []) {
  const card = { name: "local_time", status, arguments: prettyArguments(), result, buttons };
  const label = `Tool local_time ${status}`;
  return { role: "assistant", content: null, route: "model", cards: [{ ...card, label }] };
}

/** Assert that the reply streamed: growing prefixes of `text` showed before it completed. */
async function assertStreamed(page, text) {
  const replies = await page.evaluate(() => window.seen.replies);
  assert.ok(replies.length >= 2, `texts seen while streaming: ${JSON.stringify(replies)}`);
  for (const [index, reply] of replies.entries()) {
    assert.ok(text.startsWith(reply), `not a prefix of the answer: ${JSON.stringify(reply)}`);
    assert.ok(index === 0 || reply.length > replies[index - 1].length, reply);
  }
  assert.notEqual(replies[0], text);
}

/** The statuses each call's card showed, in order, in the current document. */
const statuses = (page) => page.evaluate(() => Object.values(window.seen.statuses));

/** Reload the page and wait until the session's history shows again. */
async function reload(page) {
  await page.reload();
  await page.locator("#chat").waitFor({ state: "visible" });
  await page.waitForFunction(() => document.querySelectorAll("#messages > li").length > 0);
}

/** Screenshot of the page into the artifacts as `name`. */
async function screenshot(page, name) {
  const directory = env("AGENTSKIT_WEB_ARTIFACTS");
  await mkdir(directory, { recursive: true });
  await page.screenshot({ path: join(directory, name), fullPage: true });
}

test("a call of local_time shows as a card, runs in the page, and the answer streams", async () => {
  const opened = await newSession(env("AGENTSKIT_WEB_TOOLS_DEFINITION"));
  const { page } = opened;
  await send(page, env("AGENTSKIT_WEB_TIME_TEXT"));
  await answered(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  const done = callingAnswer("done", await expectedResult(page));
  assert.deepEqual(await messages(page), [question(), done, answer()]);
  await assertStreamed(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  // The card showed the call as the model wrote it, then waiting for the page's result.
  const [shown, ...others] = await statuses(page);
  assert.deepEqual(others, []);
  assert.deepEqual(shown, ["running", "waiting for result", "done"]);
  // A reload shows the stored call and result as the same card, and runs nothing again.
  await reload(page);
  await answered(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  assert.deepEqual(await messages(page), [question(), done, answer()]);
  assert.deepEqual(await statuses(page), [["done"]]);
  await finish(opened);
});

/** Ask for the time in a session of the approval definition: the call waits for approval. */
async function askApproval(page) {
  await send(page, env("AGENTSKIT_WEB_TIME_TEXT"));
  await cardStatus(page, "waiting for approval");
  const [card] = (await messages(page)).at(-1).cards;
  assert.deepEqual(card, {
    name: "local_time",
    status: "waiting for approval",
    arguments: prettyArguments(),
    result: null,
    buttons: ["Approve", "Deny"],
    label: "Tool local_time waiting for approval",
  });
  const decision = page.getByRole("group", { name: "Run local_time?" });
  assert.equal(await decision.count(), 1);
  assert.equal(await decision.getByRole("button", { name: "Approve" }).isEnabled(), true);
  return decision;
}

/** Approve the waiting call: it runs in the browser and the answer goes on. */
async function approve(page) {
  const decision = await askApproval(page);
  await decision.getByRole("button", { name: "Approve" }).click();
  await answered(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
}

test("Approve lets the waiting call run in the browser and the answer goes on", async () => {
  const opened = await newSession(env("AGENTSKIT_WEB_APPROVAL_DEFINITION"));
  const { page } = opened;
  await askApproval(page);
  // A reload while the call waits asks again (what it waits for is the turn's record).
  await reload(page);
  await cardStatus(page, "waiting for approval");
  assert.deepEqual(await messages(page), [
    question(),
    callingAnswer("waiting for approval", null, ["Approve", "Deny"]),
  ]);
  await screenshot(page, "web-tool-approval.png");
  const decision = page.getByRole("group", { name: "Run local_time?" });
  await decision.getByRole("button", { name: "Approve" }).click();
  await answered(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  const done = callingAnswer("done", await expectedResult(page));
  assert.deepEqual(await messages(page), [question(), done, answer()]);
  await assertStreamed(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  // Since the reload: the call waited, was approved, then ran.
  const [shown] = await statuses(page);
  assert.deepEqual(shown, ["waiting for approval", "approved", "done"]);
  await finish(opened);
});

test("Deny sends its reason, the call never runs; a reload keeps the cards", async () => {
  const opened = await newSession(env("AGENTSKIT_WEB_APPROVAL_DEFINITION"));
  const { page } = opened;
  await approve(page);
  const decision = await askApproval(page);
  await decision.getByLabel("Reason to deny (optional)").fill(env("AGENTSKIT_WEB_DENY_REASON"));
  await decision.getByRole("button", { name: "Deny" }).click();
  await answered(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  const done = callingAnswer("done", await expectedResult(page));
  const denied = callingAnswer("denied", `Denied: ${env("AGENTSKIT_WEB_DENY_REASON")}`);
  const expected = [question(), done, answer(), question(), denied, answer()];
  assert.deepEqual(await messages(page), expected);
  const [, deniedShown] = await statuses(page);
  assert.deepEqual(deniedShown, ["running", "waiting for approval", "denied"]);
  await reload(page);
  await answered(page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  assert.deepEqual(await messages(page), expected);
  await page.getByLabel("Message", { exact: true }).blur();
  await screenshot(page, "web-tools.png");
  await finish(opened);
});

test("a second window shows the first one's calls as cards and leaves them to it", async () => {
  const first = await newSession(env("AGENTSKIT_WEB_TOOLS_DEFINITION"));
  const sessionId = await first.page.locator("#session-id").textContent();
  const second = await openPage(sessionId);
  await second.page.locator("#chat").waitFor({ state: "visible" });
  await second.page.waitForFunction(() => document.body.dataset.watch === "live");
  await send(first.page, env("AGENTSKIT_WEB_TIME_TEXT"));
  await answered(first.page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  await answered(second.page, env("AGENTSKIT_WEB_TOOLS_ANSWER"));
  const expected = [question(), callingAnswer("done", await expectedResult(first.page)), answer()];
  assert.deepEqual(await messages(first.page), expected);
  assert.deepEqual(await messages(second.page), expected);
  // The second window saw the call wait for the first one's result: it ran nothing itself
  // (a result it sent too would be refused, and say so).
  const [shown] = await statuses(second.page);
  assert.ok(shown.includes("waiting for result"), JSON.stringify(shown));
  await finish(second);
  await finish(first);
});
