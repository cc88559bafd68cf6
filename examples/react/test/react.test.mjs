// The React renderer in headless Chromium against a live service (tests/web/test_react.py
// starts it, with the renderer on its HTTP listener).
//
// Environment:
//   AGENTSKIT_REACT_URL          the renderer served by the service itself
//   AGENTSKIT_REACT_CROSS_URL    the renderer on an origin the service allows (?server=)
//   AGENTSKIT_REACT_TOKEN        bearer token of the service
//   AGENTSKIT_REACT_DEFINITION   definition with a few routes, the fake model for the rest
//   AGENTSKIT_REACT_ARTIFACTS    directory of the screenshot
//   AGENTSKIT_REACT_CHROMIUM     the browser (default /usr/bin/chromium)
//   AGENTSKIT_REACT_STREAM_TEXT, AGENTSKIT_REACT_STREAM_ANSWER   input answered in slow deltas
//   AGENTSKIT_REACT_STORY_TEXT, AGENTSKIT_REACT_STORY_ANSWER     input answered at once
//   AGENTSKIT_REACT_STALL_TEXT   input answered with one delta, then nothing
//   AGENTSKIT_REACT_FAIL_TEXT    input the fake model answers with a 500
//   AGENTSKIT_REACT_SLOW_TEXT, AGENTSKIT_REACT_SLOW_ANSWER       input answered in many slow chunks
//   AGENTSKIT_REACT_MARKUP_TEXT, AGENTSKIT_REACT_MARKUP_ANSWER   HTML in an input and its answer
//   AGENTSKIT_REACT_TOOLS_DEFINITION     definition whose model may call the page's tools
//   AGENTSKIT_REACT_APPROVAL_DEFINITION  definition that marks local_time for approval
//   AGENTSKIT_REACT_TIME_TEXT, AGENTSKIT_REACT_TIME_ARGUMENTS, AGENTSKIT_REACT_TIME_ANSWER
//       input the model answers by calling local_time with those arguments (JSON), and the
//       answer once it has the result (on either definition)
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
let browser;

before(async () => {
  browser = await chromium.launch({
    executablePath: process.env.AGENTSKIT_REACT_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    timeout: 60_000,
  });
});

after(async () => {
  await browser?.close();
});

/**
 * The renderer at `base` (with the token unless `token` is false), its console errors and
 * warnings and its page errors collected in `problems`. `init` runs in every document the
 * page loads, before the renderer.
 */
async function openPage({ init, base = env("AGENTSKIT_REACT_URL"), token = true, clock, contextOptions = {} } = {}) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 860 }, ...contextOptions });
  if (clock !== undefined) {
    await context.clock.setFixedTime(clock);
  }
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const problems = [];
  page.on("console", (message) => {
    if (message.type() === "error" || message.type() === "warning") {
      problems.push(`${message.type()}: ${message.text()}`);
    }
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  if (init !== undefined) {
    await page.addInitScript(init);
  }
  const url = new URL(base);
  if (token) {
    url.searchParams.set("token", env("AGENTSKIT_REACT_TOKEN"));
  }
  await page.goto(url.href);
  return { page, context, problems };
}

/**
 * A page (see openPage, which takes `options` too) with a new chat of `definition` (the
 * test definition by default), at its initial state.
 */
async function newChat(init, base, { definition = env("AGENTSKIT_REACT_DEFINITION"), ...options } = {}) {
  const opened = await openPage({ init, base, ...options });
  const { page } = opened;
  await page.locator(`#definition option[value="${definition}"]`).waitFor({ state: "attached" });
  await page.selectOption("#definition", definition);
  await page.getByRole("button", { name: "Start a new chat" }).click();
  await page.locator("#chat").waitFor({ state: "visible" });
  await assertText(page.locator("#state-name"), "idle");
  return opened;
}

/** Close the page's context once it showed no console error, warning or page error. */
async function finish({ context, problems }) {
  await context.close();
  assert.deepEqual(problems, []);
}

/** Wait until `locator`'s text equals `expected` (or matches it, for a RegExp). */
async function assertText(locator, expected) {
  await locator.waitFor({ state: "attached" });
  const deadline = Date.now() + TIMEOUT;
  let last;
  while (Date.now() < deadline) {
    last = (await locator.textContent())?.trim();
    if (expected instanceof RegExp ? expected.test(last ?? "") : last === expected) {
      return;
    }
    await locator.page().waitForTimeout(50);
  }
  assert.fail(`expected ${locator} to read ${expected}, it reads ${JSON.stringify(last)}`);
}

/** Send `text` from the message box and wait until the answer is over. */
async function send(page, text) {
  await settled(page, async () => {
    await page.getByLabel("Message", { exact: true }).fill(text);
    await page.getByLabel("Message", { exact: true }).press("Enter");
  });
}

/** How many requests of useChat the page has seen end. */
const finished = (page) => page.evaluate(() => Number(document.body.dataset.finished ?? "0"));

/** Do `action`, then wait until the request it makes has ended and useChat is idle again. */
async function settled(page, action) {
  const before = await finished(page);
  await action();
  await page.waitForFunction(
    (count) =>
      Number(document.body.dataset.finished ?? "0") > count &&
      ["ready", "error"].includes(document.body.dataset.status ?? ""),
    before,
    { timeout: TIMEOUT },
  );
}

/** The messages shown, oldest first: id, role, text, badges. */
function messages(page) {
  return page.$$eval("#messages > li", (items) =>
    items.map((item) => ({
      id: item.dataset.messageId,
      role: item.dataset.role,
      content: item.querySelector(".content")?.textContent ?? "",
      kind: item.querySelector('[data-badge="kind"]')?.textContent ?? null,
      route: item.querySelector('[data-badge="route"]')?.textContent ?? null,
      transition: item.querySelector('[data-badge="transition"]')?.textContent ?? null,
      replayed: item.querySelector('[data-badge="replayed"]') !== null,
    })),
  );
}

/** The messages without their ids. */
async function shown(page) {
  return (await messages(page)).map(({ id: _id, ...rest }) => rest);
}

const user = (content) => ({ role: "user", content, kind: null, route: null, transition: null, replayed: false });
const answer = (content, kind, route = null, transition = null) => ({
  role: "assistant",
  content,
  kind,
  route,
  transition,
  replayed: false,
});

async function noError(page) {
  const shown = await page.locator("#error").allTextContents();
  assert.deepEqual(shown, []);
}

/**
 * Record, in `window.partials`, every text the streaming answer shows while it is busy (as
 * the DOM changes), from before the renderer runs.
 */
function recordPartials() {
  window.partials = [];
  new MutationObserver(() => {
    const busy = document.querySelector('#messages > li[aria-busy="true"] .content');
    if (busy?.textContent && window.partials.at(-1) !== busy.textContent) {
      window.partials.push(busy.textContent);
    }
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
}

test("a deterministic turn shows its decision badges and the new state", async () => {
  const opened = await newChat();
  const { page } = opened;
  // Before any turn, the definition's initial state and the commands it offers.
  assert.deepEqual(await page.locator("#actions li").allTextContents(), ["start"]);
  assert.deepEqual(await page.locator("#commands button").allTextContents(), ["/start"]);
  await send(page, "/start");
  await noError(page);
  assert.deepEqual(await shown(page), [
    user("/start"),
    answer("What is your name?", "deterministic", "start", "idle → collecting"),
  ]);
  await assertText(page.locator("#state-name"), "collecting");
  assert.deepEqual(await page.locator("#actions li").allTextContents(), ["give_name", "cancel"]);
  assert.deepEqual(await page.locator("#commands button").allTextContents(), ["/cancel"]);
  await finish(opened);
});

test("a command button of the state sends its command, and a reload keeps the chat", async () => {
  const opened = await newChat();
  const { page } = opened;
  await settled(page, () => page.locator('#commands [data-command="/start"]').click());
  await assertText(page.locator("#state-name"), "collecting");
  await settled(page, () => page.locator('#commands [data-command="/cancel"]').click());
  await assertText(page.locator("#state-name"), "idle");
  await noError(page);
  assert.deepEqual(await shown(page), [
    user("/start"),
    answer("What is your name?", "deterministic", "start", "idle → collecting"),
    user("/cancel"),
    answer("Cancelled.", "deterministic", "cancel", "collecting → idle"),
  ]);
  assert.deepEqual(await page.locator("#commands button").allTextContents(), ["/start"]);
  // A reload with no turn running reopens the chat as it was (the reconnect answers 204).
  const before = await messages(page);
  await page.reload();
  await page.locator("#chat").waitFor({ state: "visible" });
  await page.waitForFunction(() => document.body.dataset.status === "ready");
  await noError(page);
  assert.deepEqual(await messages(page), before);
  await assertText(page.locator("#state-name"), "idle");
  assert.deepEqual(await page.locator("#commands button").allTextContents(), ["/start"]);
  await finish(opened);
});

test("an agentic answer streams in, delta by delta", async () => {
  const opened = await newChat(recordPartials);
  const { page } = opened;
  await send(page, env("AGENTSKIT_REACT_STREAM_TEXT"));
  await noError(page);
  const full = env("AGENTSKIT_REACT_STREAM_ANSWER");
  assert.deepEqual(await shown(page), [user(env("AGENTSKIT_REACT_STREAM_TEXT")), answer(full, "agentic")]);
  const partials = await page.evaluate(() => window.partials);
  assert.ok(partials.length >= 2, `partials: ${JSON.stringify(partials)}`);
  for (const [index, partial] of partials.entries()) {
    assert.ok(full.startsWith(partial), `not a prefix of the answer: ${JSON.stringify(partial)}`);
    assert.ok(index === 0 || partial.length > partials[index - 1].length, partial);
  }
  await assertText(page.locator("#state-name"), "idle");
  await finish(opened);
});

test("regenerate replaces the last answer with a new one", async () => {
  const opened = await newChat();
  const { page } = opened;
  const story = env("AGENTSKIT_REACT_STORY_TEXT");
  await send(page, story);
  const [, first] = await messages(page);
  assert.equal(first.content, env("AGENTSKIT_REACT_STORY_ANSWER"));
  await settled(page, () => page.getByRole("button", { name: "Regenerate" }).click());
  await noError(page);
  assert.deepEqual(await shown(page), [user(story), answer(env("AGENTSKIT_REACT_STORY_ANSWER"), "agentic")]);
  const [, second] = await messages(page);
  assert.notEqual(second.id, first.id, "the regenerated answer is a new message");
  await finish(opened);
});

test("markup in a message or an answer is shown as text, never run", async () => {
  const opened = await newChat();
  const { page } = opened;
  await send(page, env("AGENTSKIT_REACT_MARKUP_TEXT"));
  await noError(page);
  assert.deepEqual(await shown(page), [
    user(env("AGENTSKIT_REACT_MARKUP_TEXT")),
    answer(env("AGENTSKIT_REACT_MARKUP_ANSWER"), "agentic"),
  ]);
  assert.equal(await page.locator("#messages img, #messages i, #messages b").count(), 0);
  assert.equal(await page.evaluate(() => window.injected), undefined);
  await finish(opened);
});

test("a failed turn shows its error, and the chat goes on", async () => {
  const opened = await newChat();
  const { page } = opened;
  await send(page, env("AGENTSKIT_REACT_FAIL_TEXT"));
  await page.locator("#error").waitFor({ state: "visible" });
  const error = (await page.locator("#error").textContent()) ?? "";
  assert.match(error, /^The turn failed: \S/);
  assert.ok(!error.includes(env("AGENTSKIT_REACT_FAIL_TEXT")), error);
  assert.equal(await page.locator("#error").getAttribute("role"), "alert");
  assert.equal(await page.evaluate(() => document.body.dataset.status), "error");
  const fail = env("AGENTSKIT_REACT_FAIL_TEXT");
  assert.deepEqual(await shown(page), [user(fail), answer("", "agentic")]);
  assert.equal(await page.locator('#messages [data-role="assistant"] .reply-note').textContent(), "No answer.");
  // The next message goes without the failed turn's empty answer.
  await send(page, "/start");
  await noError(page);
  assert.deepEqual(await shown(page), [
    user(fail),
    user("/start"),
    answer("What is your name?", "deterministic", "start", "idle → collecting"),
  ]);
  await assertText(page.locator("#state-name"), "collecting");
  await finish(opened);
});

test("stop ends an answer where it is", async () => {
  const opened = await newChat();
  const { page } = opened;
  await page.getByLabel("Message", { exact: true }).fill(env("AGENTSKIT_REACT_STALL_TEXT"));
  await page.getByRole("button", { name: "Send" }).click();
  await assertText(page.locator('#messages > li[data-role="assistant"] .content'), "Let me think");
  await settled(page, () => page.getByRole("button", { name: "Stop" }).click());
  await noError(page);
  // Send is back once the service has answered the cancel, Stop is off.
  await page.waitForFunction(() => !document.getElementById("send").disabled);
  assert.equal(await page.getByRole("button", { name: "Stop" }).isDisabled(), true);
  const [, stopped] = await shown(page);
  assert.equal(stopped.content, "Let me think");
  // The turn itself was cancelled, not only left behind: the chat runs none now.
  const chatId = await page.locator("#chat-id").textContent();
  const running = await page.evaluate(
    async ({ chatId, definition, token }) =>
      (await fetch(`/ai-sdk/${definition}/${chatId}/stream`, { headers: { authorization: `Bearer ${token}` } }))
        .status,
    { chatId, definition: env("AGENTSKIT_REACT_DEFINITION"), token: env("AGENTSKIT_REACT_TOKEN") },
  );
  assert.equal(running, 204);
  // The chat goes on after it.
  await send(page, "/start");
  await noError(page);
  await assertText(page.locator("#state-name"), "collecting");
  await finish(opened);
});

test("a reload in the middle of an answer reattaches to it and loses nothing", async () => {
  const opened = await newChat(recordPartials);
  const { page } = opened;
  const slow = env("AGENTSKIT_REACT_SLOW_TEXT");
  await page.getByLabel("Message", { exact: true }).fill(slow);
  await page.getByLabel("Message", { exact: true }).press("Enter");
  await assertText(page.locator('#messages > li[data-role="assistant"] .content'), /^Part 1 /);
  const chatId = await page.locator("#chat-id").textContent();
  await page.reload();
  await page.locator("#chat").waitFor({ state: "visible" });
  assert.equal(await page.locator("#chat-id").textContent(), chatId);
  await assertText(page.locator('#messages > li[data-role="assistant"] .content'), env("AGENTSKIT_REACT_SLOW_ANSWER"));
  await page.waitForFunction(() => document.body.dataset.status === "ready");
  await noError(page);
  assert.deepEqual(await shown(page), [user(slow), answer(env("AGENTSKIT_REACT_SLOW_ANSWER"), "agentic")]);
  // The reloaded page showed the answer growing too, not only at its end.
  const partials = await page.evaluate(() => window.partials);
  assert.ok(partials.length >= 2, `partials after the reload: ${JSON.stringify(partials)}`);
  await finish(opened);
});

test("a page on another origin the service allows chats across origins", async () => {
  const opened = await newChat(recordPartials, env("AGENTSKIT_REACT_CROSS_URL"));
  const { page } = opened;
  assert.notEqual(new URL(page.url()).origin, new URL(env("AGENTSKIT_REACT_URL")).origin);
  await settled(page, () => page.locator('#commands [data-command="/start"]').click());
  await send(page, env("AGENTSKIT_REACT_STREAM_TEXT"));
  await noError(page);
  assert.deepEqual(await shown(page), [
    user("/start"),
    answer("What is your name?", "deterministic", "start", "idle → collecting"),
    user(env("AGENTSKIT_REACT_STREAM_TEXT")),
    answer(env("AGENTSKIT_REACT_STREAM_ANSWER"), "agentic"),
  ]);
  assert.ok((await page.evaluate(() => window.partials)).length >= 2);
  await finish(opened);
});

test("a page without a token shows the service's refusal", async () => {
  const { page, context, problems } = await openPage({ token: false });
  await assertText(page.locator("#load-error"), "listing the definitions failed: HTTP 401 (unauthenticated)");
  assert.equal(await page.locator("#load-error").getAttribute("role"), "alert");
  assert.equal(await page.getByRole("button", { name: "Start a new chat" }).isDisabled(), true);
  await context.close();
  // The browser logs the refused request itself, and nothing else.
  assert.equal(problems.length, 1, JSON.stringify(problems));
  assert.match(problems[0], /401/);
});

test("every control is labelled and the chat is usable from the keyboard", async () => {
  const opened = await newChat();
  const { page } = opened;
  await page.getByLabel("Message", { exact: true }).focus();
  await page.keyboard.type("/start");
  await settled(page, () => page.keyboard.press("Enter"));
  await assertText(page.locator("#state-name"), "collecting");
  const unlabelled = await page.$$eval("input, select, textarea", (fields) =>
    fields.filter((field) => field.labels.length === 0).map((field) => field.outerHTML),
  );
  assert.deepEqual(unlabelled, []);
  const unnamed = await page.$$eval("button", (buttons) =>
    buttons.filter((button) => !button.textContent.trim()).map((button) => button.outerHTML),
  );
  assert.deepEqual(unnamed, []);
  assert.equal(await page.locator("#status").getAttribute("aria-live"), "polite");
  assert.equal(await page.locator("#messages").getAttribute("aria-label"), "Messages");
  assert.equal(
    await page.locator('#messages [data-role="assistant"] .badges').getAttribute("aria-label"),
    "How the service answered",
  );
  await finish(opened);
});

test("a conversation with routes, transitions, the model and a replay (saved as a screenshot)", async () => {
  const opened = await newChat();
  const { page } = opened;
  await send(page, "/start");
  await send(page, env("AGENTSKIT_REACT_STORY_TEXT"));
  await send(page, "/name Ada");
  await noError(page);
  assert.deepEqual(await shown(page), [
    user("/start"),
    answer("What is your name?", "deterministic", "start", "idle → collecting"),
    user(env("AGENTSKIT_REACT_STORY_TEXT")),
    answer(env("AGENTSKIT_REACT_STORY_ANSWER"), "agentic"),
    user("/name Ada"),
    answer("Welcome, Ada.", "deterministic", "name", "collecting → complete"),
  ]);
  // Regenerating a routed answer replays its recorded decision.
  await settled(page, () => page.getByRole("button", { name: "Regenerate" }).click());
  await noError(page);
  assert.deepEqual((await shown(page)).at(-1), {
    ...answer("Welcome, Ada.", "deterministic", "name", "collecting → complete"),
    replayed: true,
  });
  await assertText(page.locator("#state-name"), "complete");
  await page.getByLabel("Message", { exact: true }).blur();
  const directory = env("AGENTSKIT_REACT_ARTIFACTS");
  await mkdir(directory, { recursive: true });
  await page.screenshot({ path: join(directory, "react-renderer.png"), fullPage: true });
  await finish(opened);
});

// Tool calls. The page runs `local_time` itself; the browser's clock and zone are fixed so
// that its answer is known: 14:30 UTC on 4 December 2026 is 15:30 in Paris (UTC+01:00).
const NOW = new Date("2026-12-04T14:30:00Z");
const CLOCK = { clock: NOW, contextOptions: { timezoneId: "Europe/Paris", locale: "en-GB" } };

/** Send `text` and wait until `requests` requests of useChat have ended and it is idle. */
async function sendExpecting(page, text, requests) {
  const before = await finished(page);
  await page.getByLabel("Message", { exact: true }).fill(text);
  await page.getByLabel("Message", { exact: true }).press("Enter");
  await requestsEnded(page, before + requests);
}

/** Wait until `count` requests of useChat have ended in all, and it is idle. */
async function requestsEnded(page, count) {
  await page.waitForFunction(
    (count) =>
      Number(document.body.dataset.finished ?? "0") >= count &&
      ["ready", "error"].includes(document.body.dataset.status ?? ""),
    count,
    { timeout: TIMEOUT },
  );
}

/** The tool cards shown, oldest first. */
function toolCards(page) {
  return page.$$eval("#messages .tool-card", (cards) =>
    cards.map((card) => ({
      name: card.querySelector(".tool-name")?.textContent ?? null,
      status: card.querySelector(".tool-status")?.textContent ?? null,
      arguments: card.querySelector(".tool-args")?.textContent ?? null,
      result: card.querySelector(".tool-result")?.textContent ?? null,
      buttons: [...card.querySelectorAll("button")].map((button) => button.textContent),
      label: card.getAttribute("aria-labelledby")
        ? document.getElementById(card.getAttribute("aria-labelledby"))?.textContent ?? null
        : null,
    })),
  );
}

/** The local_time answer the page gives with the fixed clock (its wording from the browser). */
async function expectedTime(page) {
  const localTime = await page.evaluate(() =>
    new Intl.DateTimeFormat("en-GB", { dateStyle: "full", timeStyle: "long" }).format(new Date()),
  );
  assert.match(localTime, /15:30:00/);
  return { timeZone: "Europe/Paris", utcOffset: "+01:00", localTime, iso: "2026-12-04T15:30:00+01:00" };
}

const prettyArguments = () => JSON.stringify(JSON.parse(env("AGENTSKIT_REACT_TIME_ARGUMENTS")), null, 2);

/** Screenshot of the page into the artifacts as `name`. */
async function screenshot(page, name) {
  await page.getByLabel("Message", { exact: true }).blur();
  const directory = env("AGENTSKIT_REACT_ARTIFACTS");
  await mkdir(directory, { recursive: true });
  await page.screenshot({ path: join(directory, name), fullPage: true });
}

test("a tool call runs in the browser, its card shows it done, and the answer goes on (saved as a screenshot)", async () => {
  const opened = await newChat(undefined, undefined, { definition: env("AGENTSKIT_REACT_TOOLS_DEFINITION"), ...CLOCK });
  const { page } = opened;
  const question = env("AGENTSKIT_REACT_TIME_TEXT");
  // The call's answer, then the continuation once the page has sent the tool's output.
  await sendExpecting(page, question, 2);
  await noError(page);
  const [card, ...others] = await toolCards(page);
  assert.deepEqual(others, []);
  const { result, ...shownCard } = card;
  assert.deepEqual(shownCard, {
    name: "local_time",
    status: "done",
    arguments: prettyArguments(),
    buttons: [],
    label: "Tool local_time done",
  });
  assert.equal(result, JSON.stringify(await expectedTime(page), null, 2));
  // One answer: the call and, after it, the model's reply to the result.
  assert.deepEqual(await shown(page), [user(question), answer(env("AGENTSKIT_REACT_TIME_ANSWER"), "agentic")]);
  const order = await page.$$eval('#messages [data-role="assistant"] > :is(.tool-card, .content)', (parts) =>
    parts.map((part) => part.className),
  );
  assert.deepEqual(order, ["tool-card", "content"]);
  // The chat goes on after the round.
  await send(page, env("AGENTSKIT_REACT_STORY_TEXT"));
  await noError(page);
  assert.equal((await shown(page)).at(-1).content, env("AGENTSKIT_REACT_STORY_ANSWER"));
  await screenshot(page, "react-tool-call.png");
  await finish(opened);
});

/** A new chat of the approval definition, its question asked: the call waits for approval. */
async function approvalAsked() {
  const opened = await newChat(undefined, undefined, { definition: env("AGENTSKIT_REACT_APPROVAL_DEFINITION"), ...CLOCK });
  const { page } = opened;
  await sendExpecting(page, env("AGENTSKIT_REACT_TIME_TEXT"), 1);
  await noError(page);
  assert.deepEqual(await toolCards(page), [
    {
      name: "local_time",
      status: "waiting for approval",
      arguments: prettyArguments(),
      result: null,
      buttons: ["Approve", "Deny"],
      label: "Tool local_time waiting for approval",
    },
  ]);
  assert.equal(await page.getByRole("group", { name: "Run local_time?" }).count(), 1);
  // Nothing more is sent until the user answers.
  assert.equal(await finished(page), 1);
  assert.deepEqual(await shown(page), [user(env("AGENTSKIT_REACT_TIME_TEXT")), answer("", "agentic")]);
  assert.equal(await page.locator('#messages [data-role="assistant"] .reply-note').count(), 0);
  return opened;
}

test("Approve runs the waiting call in the browser and the answer goes on (saved as screenshots)", async () => {
  const opened = await approvalAsked();
  const { page } = opened;
  await screenshot(page, "react-approval-request.png");
  const before = await finished(page);
  await page.getByRole("button", { name: "Approve" }).click();
  // The approval (the call comes back to run), then the continuation with its output.
  await requestsEnded(page, before + 2);
  await noError(page);
  const [card, ...others] = await toolCards(page);
  assert.deepEqual(others, []);
  assert.equal(card.status, "done");
  assert.deepEqual(card.buttons, []);
  assert.equal(card.result, JSON.stringify(await expectedTime(page), null, 2));
  assert.deepEqual(await shown(page), [
    user(env("AGENTSKIT_REACT_TIME_TEXT")),
    answer(env("AGENTSKIT_REACT_TIME_ANSWER"), "agentic"),
  ]);
  await screenshot(page, "react-approved.png");
  await finish(opened);
});

test("Deny answers the call as denied, never runs it, and the answer goes on (saved as a screenshot)", async () => {
  const opened = await approvalAsked();
  const { page } = opened;
  const before = await finished(page);
  await page.getByRole("button", { name: "Deny" }).click();
  await requestsEnded(page, before + 1);
  await noError(page);
  assert.deepEqual(await toolCards(page), [
    {
      name: "local_time",
      status: "denied",
      arguments: prettyArguments(),
      result: "Denied.",
      buttons: [],
      label: "Tool local_time denied",
    },
  ]);
  assert.deepEqual(await shown(page), [
    user(env("AGENTSKIT_REACT_TIME_TEXT")),
    answer(env("AGENTSKIT_REACT_TIME_ANSWER"), "agentic"),
  ]);
  // No request follows the answer.
  assert.equal(await finished(page), before + 1);
  await screenshot(page, "react-denied.png");
  await finish(opened);
});
