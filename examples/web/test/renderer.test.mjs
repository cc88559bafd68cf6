// The renderer in headless Chromium against a live service (tests/web starts it).
//
// Environment:
//   AGENTSKIT_WEB_URL             the renderer served by the service itself (same origin)
//   AGENTSKIT_WEB_CROSS_URL       the renderer on an origin the service allows (?server=)
//   AGENTSKIT_WEB_DISALLOWED_URL  the renderer on an origin the service does not allow
//   AGENTSKIT_WEB_TOKEN           bearer token of the service
//   AGENTSKIT_WEB_DEFINITION      definition with a few routes, the fake model for the rest
//   AGENTSKIT_WEB_ARTIFACTS       directory of the screenshot
//   AGENTSKIT_WEB_CHROMIUM        the browser (default /usr/bin/chromium)
//   AGENTSKIT_WEB_STREAM_TEXT, AGENTSKIT_WEB_STALL_TEXT, AGENTSKIT_WEB_STORY_TEXT,
//   AGENTSKIT_WEB_FAIL_TEXT       inputs the fake model answers slowly, never, at once, with 500
//   AGENTSKIT_WEB_SLOW_TEXT       input the fake model answers in many slow chunks...
//   AGENTSKIT_WEB_SLOW_ANSWER     ...with this answer
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
    executablePath: process.env.AGENTSKIT_WEB_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
    timeout: 60_000,
  });
});

after(async () => {
  await browser?.close();
});

/** A fresh page on `base` (with the token unless `token` is false), its console collected. */
async function openPage(base = env("AGENTSKIT_WEB_URL"), params = {}, token = true) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const consoleMessages = [];
  page.on("console", (message) => consoleMessages.push(message.text()));
  const url = new URL(base);
  if (token) {
    url.searchParams.set("token", env("AGENTSKIT_WEB_TOKEN"));
  }
  for (const [name, value] of Object.entries(params)) {
    url.searchParams.set(name, value);
  }
  await page.goto(url.href);
  return { page, context, consoleMessages };
}

/** A page with a new session of the test definition, at its initial state. */
async function newSession(base, params = {}) {
  const opened = await openPage(base, params);
  const { page } = opened;
  await page.locator(`#definition option[value="${env("AGENTSKIT_WEB_DEFINITION")}"]`).waitFor({
    state: "attached",
  });
  await page.selectOption("#definition", env("AGENTSKIT_WEB_DEFINITION"));
  await page.getByRole("button", { name: "Start a new session" }).click();
  await page.locator("#chat").waitFor({ state: "visible" });
  await assertText(page.locator("#state-name"), "idle");
  return opened;
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

/** Send `text` from the message box and wait until the turn is over. */
async function send(page, text) {
  await page.getByLabel("Message", { exact: true }).fill(text);
  await page.getByLabel("Message", { exact: true }).press("Enter");
  await turnOver(page);
}

/** Wait until no turn runs (the renderer has also reloaded the session by then). */
async function turnOver(page) {
  await page.waitForFunction(
    () => document.body.dataset.turn === "idle" && !document.querySelector("[data-streaming]"),
    undefined,
    { timeout: TIMEOUT },
  );
}

/** The messages shown, oldest first: role, content, badges. */
function messages(page) {
  return page.$$eval("#messages > li", (items) =>
    items.map((item) => ({
      id: item.dataset.messageId,
      role: item.dataset.role,
      content: item.querySelector(".content")?.textContent ?? "",
      route: item.querySelector('[data-badge="route"]')?.textContent ?? null,
      transition: item.querySelector('[data-badge="transition"]')?.textContent ?? null,
      replayed: item.querySelector('[data-badge="replayed"]') !== null,
    })),
  );
}

/**
 * Record, in `window.partials`, every text the streaming reply shows while it is still busy
 * (as the DOM changes). Installed as an init script, it records in every document the page
 * loads, from before the renderer runs.
 */
function recordPartials() {
  window.partials = [];
  new MutationObserver(() => {
    const reply = document.getElementById("streaming-reply");
    if (reply?.getAttribute("aria-busy") === "true" && reply.textContent) {
      const last = window.partials.at(-1);
      if (last !== reply.textContent) {
        window.partials.push(reply.textContent);
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
}

/** Assert that `partials` grew towards `answer`: each one a longer prefix of it. */
function assertGrowingPrefixes(partials, answer) {
  for (const [index, partial] of partials.entries()) {
    assert.ok(answer.startsWith(partial), `not a prefix of the answer: ${JSON.stringify(partial)}`);
    assert.ok(index === 0 || partial.length > partials[index - 1].length, partial);
  }
}

const RUNNING_TURN = "agentskit-chat.running-turn";

async function noError(page) {
  assert.equal(await page.locator("#error").isHidden(), true, await page.locator("#error").textContent());
}

test("a deterministic turn shows its route badge and the new state", async () => {
  const { page, context } = await newSession();
  await page.locator('#commands [data-command="/start"]').click();
  await turnOver(page);
  await noError(page);
  const shown = await messages(page);
  assert.deepEqual(
    shown.map(({ role, content, route, transition, replayed }) => ({
      role,
      content,
      route,
      transition,
      replayed,
    })),
    [
      { role: "user", content: "/start", route: null, transition: null, replayed: false },
      {
        role: "assistant",
        content: "What is your name?",
        route: "start",
        transition: "idle → collecting",
        replayed: false,
      },
    ],
  );
  await assertText(page.locator("#state-name"), "collecting");
  // The new state's actions and the commands its routes offer.
  assert.deepEqual(await page.locator("#actions li").allTextContents(), ["give_name", "cancel"]);
  assert.deepEqual(await page.locator("#commands button").allTextContents(), ["/cancel"]);
  await context.close();
});

test("every control is labelled and the conversation is usable from the keyboard", async () => {
  const { page, context } = await newSession();
  const input = page.getByLabel("Message", { exact: true });
  await input.focus();
  await page.keyboard.type("/start");
  await page.keyboard.press("Enter");
  await turnOver(page);
  await noError(page);
  const unlabelled = await page.$$eval("input, select, textarea", (fields) =>
    fields.filter((field) => field.labels.length === 0).map((field) => field.outerHTML),
  );
  assert.deepEqual(unlabelled, []);
  const unnamed = await page.$$eval("button", (buttons) =>
    buttons.filter((button) => !button.textContent.trim()).map((button) => button.outerHTML),
  );
  assert.deepEqual(unnamed, []);
  assert.equal(await page.locator("#status").getAttribute("aria-live"), "polite");
  // Tab from the message box reaches Send (Stop is disabled between turns).
  await input.focus();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement?.id), "send");
  // A command button works from the keyboard too.
  await page.locator('#commands [data-command="/cancel"]').focus();
  await page.keyboard.press("Enter");
  await turnOver(page);
  await assertText(page.locator("#state-name"), "idle");
  await context.close();
});

/** Run an agentic turn that streams slowly; check that each delta showed before the end. */
async function streamsDeltas(page) {
  // Every text the streaming reply shows while it is still busy, as the DOM changes.
  await page.evaluate(recordPartials);
  const input = page.getByLabel("Message", { exact: true });
  await input.fill(env("AGENTSKIT_WEB_STREAM_TEXT"));
  await input.press("Enter");
  // Between two deltas: part of the reply is shown, the turn still runs, Stop is offered.
  await page.waitForFunction(() => {
    const reply = document.getElementById("streaming-reply");
    return (
      reply?.getAttribute("aria-busy") === "true" &&
      reply.textContent !== "" &&
      !document.getElementById("stop").disabled &&
      document.getElementById("send").disabled
    );
  });
  await turnOver(page);
  await noError(page);
  const shown = await messages(page);
  const answer = shown.at(-1);
  assert.equal(answer.role, "assistant");
  assert.equal(answer.route, "model");
  assert.equal(answer.transition, "idle → idle");
  const partials = await page.evaluate(() => window.partials);
  // Each delta showed while the turn still ran: a growing prefix of the final answer.
  assert.ok(partials.length >= 2, `texts seen while streaming: ${JSON.stringify(partials)}`);
  for (const [index, partial] of partials.entries()) {
    assert.ok(answer.content.startsWith(partial), partial);
    assert.ok(index === 0 || partial.length > partials[index - 1].length, partial);
  }
  assert.notEqual(partials[0], answer.content);
}

test("an agentic turn streams its deltas before it completes", async () => {
  const { page, context } = await newSession();
  await streamsDeltas(page);
  await context.close();
});

test("the same turns run over gRPC-Web", async () => {
  const { page, context } = await newSession(undefined, { protocol: "grpc-web" });
  await assertText(page.locator("#server-url"), /\(grpc-web\)$/);
  await page.locator('#commands [data-command="/start"]').click();
  await turnOver(page);
  await noError(page);
  const answer = (await messages(page)).at(-1);
  assert.equal(answer.route, "start");
  assert.equal(answer.transition, "idle → collecting");
  await assertText(page.locator("#state-name"), "collecting");
  await page.locator('#commands [data-command="/cancel"]').click();
  await turnOver(page);
  await streamsDeltas(page);
  await context.close();
});

test("retry replays the recorded answer and says so", async () => {
  const { page, context } = await newSession();
  await send(page, "/start");
  const [user] = await messages(page);
  await page.locator(`li[data-message-id="${user.id}"] [data-control="retry"]`).click();
  await turnOver(page);
  await noError(page);
  const shown = await messages(page);
  assert.equal(shown.length, 2);
  assert.equal(shown[1].content, "What is your name?");
  assert.equal(shown[1].route, "start");
  assert.equal(shown[1].replayed, true);
  await assertText(page.locator("#state-name"), "collecting");
  await context.close();
});

test("edit changes a message and answers it again, dropping the later ones", async () => {
  const { page, context } = await newSession();
  await send(page, "/start");
  await send(page, "/name Ada");
  await send(page, "/restart");
  assert.equal((await messages(page)).length, 6);
  const named = (await messages(page))[2];
  assert.equal(named.content, "/name Ada");
  await page.locator(`li[data-message-id="${named.id}"] [data-control="edit"]`).click();
  const box = page.getByLabel("Edit message");
  await box.fill("/name Grace");
  await page.getByRole("button", { name: "Save and send" }).click();
  await turnOver(page);
  await noError(page);
  const shown = await messages(page);
  assert.deepEqual(
    shown.map((message) => message.content),
    ["/start", "What is your name?", "/name Grace", "Welcome, Grace."],
  );
  assert.equal(shown[2].id, named.id);
  assert.equal(shown[3].transition, "collecting → complete");
  await assertText(page.locator("#state-name"), "complete");
  await context.close();
});

test("regenerate asks the model again for the same message", async () => {
  const { page, context } = await newSession();
  await send(page, env("AGENTSKIT_WEB_STORY_TEXT"));
  const [user, first] = await messages(page);
  assert.equal(first.route, "model");
  await page.locator(`li[data-message-id="${first.id}"] [data-control="regenerate"]`).click();
  await turnOver(page);
  await noError(page);
  const shown = await messages(page);
  assert.equal(shown.length, 2);
  assert.equal(shown[0].id, user.id);
  assert.notEqual(shown[1].id, first.id);
  assert.equal(shown[1].content, first.content);
  assert.equal(shown[1].route, "model");
  await context.close();
});

test("truncate keeps the messages up to the chosen one; a reload resumes the session", async () => {
  const { page, context } = await newSession();
  await send(page, "/start");
  await send(page, "/cancel");
  const shown = await messages(page);
  assert.equal(shown.length, 4);
  await page.locator(`li[data-message-id="${shown[1].id}"] [data-control="truncate"]`).click();
  await page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 2);
  await noError(page);
  // The session id is in the address: a reload shows the stored, truncated history.
  assert.match(page.url(), /[?&]session=/);
  await page.reload();
  await page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 2);
  assert.deepEqual(
    (await messages(page)).map((message) => message.id),
    shown.slice(0, 2).map((message) => message.id),
  );
  // Truncation runs no turn: the next one reconciles the state from what is left.
  await send(page, "/cancel");
  await noError(page);
  await assertText(page.locator("#state-name"), "idle");
  await context.close();
});

test("Stop aborts the turn and frees the session for the next one", async () => {
  const { page, context } = await newSession();
  const input = page.getByLabel("Message", { exact: true });
  await input.fill(env("AGENTSKIT_WEB_STALL_TEXT"));
  await input.press("Enter");
  await page.waitForFunction(
    () => (document.getElementById("streaming-reply")?.textContent ?? "") !== "",
  );
  await page.getByRole("button", { name: "Stop" }).click();
  await turnOver(page);
  await assertText(page.locator("#status"), "Stopped.");
  await noError(page);
  await send(page, "/start");
  await noError(page);
  const shown = await messages(page);
  assert.equal(shown.at(-1).content, "What is your name?");
  await assertText(page.locator("#state-name"), "collecting");
  await context.close();
});

test("a failed turn says why and offers the message again", async () => {
  const { page, context } = await newSession();
  const text = env("AGENTSKIT_WEB_FAIL_TEXT");
  const input = page.getByLabel("Message", { exact: true });
  await input.fill(text);
  await input.press("Enter");
  await turnOver(page);
  await page.locator("#error").waitFor({ state: "visible" });
  assert.match(await page.locator("#error").textContent(), /^The turn failed \(\w+\): \S/);
  // Nothing was committed: the history is still empty and the text is back in the box.
  assert.deepEqual(await messages(page), []);
  assert.equal(await input.inputValue(), text);
  await assertText(page.locator("#state-name"), "idle");
  await context.close();
});

test("an allowed origin reaches the service across origins", async () => {
  const { page, context } = await newSession(env("AGENTSKIT_WEB_CROSS_URL"));
  await send(page, "/start");
  await noError(page);
  assert.equal((await messages(page)).at(-1).route, "start");
  await context.close();
});

test("without a token the page shows the service's decoded refusal", async () => {
  // Connect on the same origin; gRPC-Web across origins, whose details travel in an
  // exposed header (grpc-status-details-bin) the page can only read when CORS allows it.
  for (const [base, params] of [
    [env("AGENTSKIT_WEB_URL"), {}],
    [env("AGENTSKIT_WEB_CROSS_URL"), { protocol: "grpc-web" }],
  ]) {
    const { page, context } = await openPage(base, params, false);
    await page.locator("#error").waitFor({ state: "visible" });
    assert.match(
      await page.locator("#error").textContent(),
      /^Could not load the definitions: UNAUTHENTICATED \(ERROR_REASON_UNAUTHENTICATED\): \S/,
    );
    await context.close();
  }
});

test("the browser refuses the service to an origin it does not allow", async () => {
  const { page, context, consoleMessages } = await openPage(env("AGENTSKIT_WEB_DISALLOWED_URL"));
  await page.locator("#error").waitFor({ state: "visible" });
  assert.match(await page.locator("#error").textContent(), /^Could not load the definitions: /);
  assert.equal(await page.locator("#definition option").count(), 0);
  const server = new URL(env("AGENTSKIT_WEB_DISALLOWED_URL")).searchParams.get("server");
  const outcome = await page.evaluate(async (base) => {
    try {
      const response = await fetch(`${base}/agentskit.chat.v1.ChatService/ListDefinitions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      return `answered ${response.status}`;
    } catch (error) {
      return `${error.name}: ${error.message}`;
    }
  }, server);
  assert.match(outcome, /^TypeError: /);
  assert.ok(
    consoleMessages.some((text) => /CORS policy/.test(text)),
    `console: ${JSON.stringify(consoleMessages)}`,
  );
  await context.close();
});

test("a conversation with every kind of badge (saved as a screenshot)", async () => {
  const { page, context } = await newSession();
  await send(page, "/start");
  await send(page, env("AGENTSKIT_WEB_STORY_TEXT"));
  await send(page, "/name Ada");
  const named = (await messages(page))[4];
  await page.locator(`li[data-message-id="${named.id}"] [data-control="retry"]`).click();
  await turnOver(page);
  await noError(page);
  const shown = await messages(page);
  assert.deepEqual(
    shown.filter((message) => message.role === "assistant").map((m) => [m.route, m.replayed]),
    [
      ["start", false],
      ["model", false],
      ["name", true],
    ],
  );
  await assertText(page.locator("#state-name"), "complete");
  const directory = env("AGENTSKIT_WEB_ARTIFACTS");
  await mkdir(directory, { recursive: true });
  await page.screenshot({ path: join(directory, "web-renderer.png"), fullPage: true });
  await context.close();
});

test("a reload mid-answer reattaches to the turn and shows the answer once", async () => {
  const { page, context } = await newSession();
  await page.addInitScript(recordPartials);
  const input = page.getByLabel("Message", { exact: true });
  await input.fill(env("AGENTSKIT_WEB_SLOW_TEXT"));
  await input.press("Enter");
  // Part of the answer is shown, and the tab keeps the turn and its last sequence.
  await page.waitForFunction((key) => {
    const reply = document.getElementById("streaming-reply");
    const kept = JSON.parse(sessionStorage.getItem(key) ?? "null");
    return reply?.getAttribute("aria-busy") === "true" && kept?.text && reply.textContent !== "";
  }, RUNNING_TURN);
  const before = await page.evaluate(
    (key) => JSON.parse(sessionStorage.getItem(key)),
    RUNNING_TURN,
  );
  assert.match(before.turnId, /^[0-9a-f]{32}$/);
  // Started, decision and at least one delta.
  assert.ok(BigInt(before.sequence) >= 3n, `kept: ${JSON.stringify(before)}`);
  await page.reload();
  // The tab forgets the turn once it ended (the page starts idle: wait for that first).
  await page.waitForFunction((key) => sessionStorage.getItem(key) === null, RUNNING_TURN);
  await turnOver(page);
  await noError(page);
  const answer = env("AGENTSKIT_WEB_SLOW_ANSWER");
  const shown = await messages(page);
  assert.deepEqual(
    shown.map(({ role, content, route }) => ({ role, content, route })),
    [
      { role: "user", content: env("AGENTSKIT_WEB_SLOW_TEXT"), route: null },
      { role: "assistant", content: answer, route: "model" },
    ],
  );
  // The reloaded page showed the answer streaming again: first what the page had shown,
  // then the rest, never a piece twice.
  const partials = await page.evaluate(() => window.partials);
  assert.ok(partials.length >= 1, "the reloaded page did not show the answer streaming");
  assert.ok(partials[0].startsWith(before.text), JSON.stringify(partials[0]));
  assertGrowingPrefixes(partials, answer);
  // The next turn runs.
  await send(page, "/start");
  await noError(page);
  assert.equal((await messages(page)).length, 4);
  await context.close();
});

test("a second window on the session shows its turns as they stream, each once", async () => {
  const first = await newSession();
  const sessionId = (await first.page.locator("#session-id").textContent()).trim();
  const second = await openPage(undefined, { session: sessionId });
  for (const { page } of [first, second]) {
    await page.waitForFunction(() => document.body.dataset.watch === "live");
  }
  await first.page.evaluate(recordPartials);
  await second.page.evaluate(recordPartials);
  const input = first.page.getByLabel("Message", { exact: true });
  await input.fill(env("AGENTSKIT_WEB_SLOW_TEXT"));
  await input.press("Enter");
  // The second window shows the turn running: a message sent elsewhere, the answer growing.
  await second.page.waitForFunction(() => {
    const reply = document.getElementById("streaming-reply");
    return (
      reply?.getAttribute("aria-busy") === "true" &&
      reply.textContent !== "" &&
      document.querySelector("#messages li.user.pending.remote") !== null &&
      document.body.dataset.turn === "running"
    );
  });
  await turnOver(first.page);
  await turnOver(second.page);
  const answer = env("AGENTSKIT_WEB_SLOW_ANSWER");
  const expected = [
    { role: "user", content: env("AGENTSKIT_WEB_SLOW_TEXT") },
    { role: "assistant", content: answer },
  ];
  for (const { page } of [first, second]) {
    await noError(page);
    assert.deepEqual(
      (await messages(page)).map(({ role, content }) => ({ role, content })),
      expected,
    );
  }
  assert.deepEqual(await messages(second.page), await messages(first.page));
  // Both showed the answer growing, never a piece twice (the first one skips its own turn
  // in the session watch).
  for (const { page } of [first, second]) {
    const partials = await page.evaluate(() => window.partials);
    assert.ok(partials.length >= 2, `texts seen while streaming: ${JSON.stringify(partials)}`);
    assertGrowingPrefixes(partials, answer);
    assert.notEqual(partials[0], answer);
  }
  // The other way round: a turn of the second window shows in the first one.
  await send(second.page, "/start");
  await first.page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 4);
  await turnOver(first.page);
  await assertText(first.page.locator("#state-name"), "collecting");
  assert.deepEqual(await messages(first.page), await messages(second.page));
  await noError(first.page);
  await first.context.close();
  await second.context.close();
});

test("Stop in a second window cancels the turn of the first one", async () => {
  const first = await newSession();
  const sessionId = (await first.page.locator("#session-id").textContent()).trim();
  const second = await openPage(undefined, { session: sessionId });
  for (const { page } of [first, second]) {
    await page.waitForFunction(() => document.body.dataset.watch === "live");
  }
  const text = env("AGENTSKIT_WEB_STALL_TEXT");
  const input = first.page.getByLabel("Message", { exact: true });
  await input.fill(text);
  await input.press("Enter");
  await second.page.waitForFunction(
    () =>
      (document.getElementById("streaming-reply")?.textContent ?? "") !== "" &&
      !document.getElementById("stop").disabled,
  );
  await second.page.getByRole("button", { name: "Stop" }).click();
  // The turn stopped for both: nothing committed, the text offered again where it was sent.
  await turnOver(first.page);
  await turnOver(second.page);
  await assertText(first.page.locator("#status"), "Stopped.");
  assert.equal(await input.inputValue(), text);
  for (const { page } of [first, second]) {
    await noError(page);
    assert.deepEqual(await messages(page), []);
  }
  // The session is free: the next turn runs, and shows in both.
  await send(first.page, "/start");
  await noError(first.page);
  await second.page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 2);
  await assertText(second.page.locator("#state-name"), "collecting");
  await first.context.close();
  await second.context.close();
});

test("a window whose session watch broke watches again and shows what it missed", async () => {
  const first = await newSession();
  const sessionId = (await first.page.locator("#session-id").textContent()).trim();
  // The second window's first watch hangs until the first window's turn is over, then
  // fails as a dropped connection does; the next ones go through.
  let release;
  const over = new Promise((resolve) => {
    release = resolve;
  });
  let watches = 0;
  let watching;
  const watched = new Promise((resolve) => {
    watching = resolve;
  });
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  await context.route("**/agentskit.chat.v1.ChatService/WatchSession", async (route) => {
    watches += 1;
    if (watches === 1) {
      watching();
      await over;
      await route.abort("connectionreset");
    } else {
      await route.continue();
    }
  });
  const page = await context.newPage();
  page.setDefaultTimeout(TIMEOUT);
  const url = new URL(env("AGENTSKIT_WEB_URL"));
  url.searchParams.set("token", env("AGENTSKIT_WEB_TOKEN"));
  url.searchParams.set("session", sessionId);
  await page.goto(url.href);
  await page.locator("#chat").waitFor({ state: "visible" });
  await watched;
  await send(first.page, "/start");
  await noError(first.page);
  assert.equal(watches, 1);
  assert.deepEqual(await messages(page), []);
  release();
  // Watching again after the cursor it had, it sees the session moved and reloads it.
  await page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 2);
  await page.waitForFunction(() => document.body.dataset.watch === "live");
  assert.ok(watches >= 2);
  await assertText(page.locator("#state-name"), "collecting");
  assert.deepEqual(await messages(page), await messages(first.page));
  await noError(page);
  // And follows the next turns live.
  await send(first.page, "/cancel");
  await page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 4);
  await assertText(page.locator("#state-name"), "idle");
  await first.context.close();
  await context.close();
});

test("a hidden window stops watching and catches up once shown again", async () => {
  const first = await newSession();
  const sessionId = (await first.page.locator("#session-id").textContent()).trim();
  const second = await openPage(undefined, { session: sessionId });
  const { page } = second;
  await page.waitForFunction(() => document.body.dataset.watch === "live");
  const show = (state) =>
    page.evaluate((visibility) => {
      Object.defineProperty(document, "visibilityState", { value: visibility, configurable: true });
      document.dispatchEvent(new Event("visibilitychange"));
    }, state);
  await show("hidden");
  await page.waitForFunction(() => document.body.dataset.watch === "paused");
  await send(first.page, "/start");
  await noError(first.page);
  assert.deepEqual(await messages(page), []);
  await show("visible");
  await page.waitForFunction(() => document.querySelectorAll("#messages > li").length === 2);
  await page.waitForFunction(() => document.body.dataset.watch === "live");
  assert.deepEqual(await messages(page), await messages(first.page));
  await assertText(page.locator("#state-name"), "collecting");
  await noError(page);
  await first.context.close();
  await second.context.close();
});
