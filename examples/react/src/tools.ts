// The tools the page runs itself: declared to the service in every request's body (the
// front's `tools` field), called by the model, run in the browser, their outputs sent back
// with useChat's addToolOutput.

/** A tool declaration as the `/ai-sdk/` front reads it from the request body. */
export interface ToolDeclaration {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Record<string, unknown>;
}

/** What `local_time` answers: the browser's clock, in its own time zone. */
export interface LocalTime {
  /** The IANA time zone of the browser, e.g. "Europe/Paris". */
  readonly timeZone: string;
  /** The offset from UTC, e.g. "+01:00". */
  readonly utcOffset: string;
  /** The date and time in words, in the locale asked for (the browser's when none). */
  readonly localTime: string;
  /** The same instant as an ISO 8601 date and time in the local zone. */
  readonly iso: string;
}

/** A tool's answer: its output, or why it failed (sent as the call's error). */
export type ToolOutcome = { readonly output: unknown } | { readonly error: string };

const LOCAL_TIME: ToolDeclaration = {
  name: "local_time",
  description: "The current date and time where the user is (their browser's clock and time zone).",
  inputSchema: {
    type: "object",
    properties: {
      locale: {
        type: "string",
        description: "A BCP 47 language tag for the wording of the date, e.g. en-GB (the browser's own when absent).",
      },
    },
    additionalProperties: false,
  },
};

/** The declarations of every tool the page runs. */
export const PAGE_TOOLS: readonly ToolDeclaration[] = [LOCAL_TIME];

const pad = (value: number): string => String(Math.trunc(Math.abs(value))).padStart(2, "0");

/** The offset of `date`'s local time from UTC, as "+HH:MM". */
function utcOffset(date: Date): string {
  const minutes = -date.getTimezoneOffset();
  return `${minutes < 0 ? "-" : "+"}${pad(minutes / 60)}:${pad(minutes % 60)}`;
}

/** `date` in the local zone as ISO 8601 with its offset (seconds precision). */
function localIso(date: Date): string {
  const day = `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
  const time = `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
  return `${day}T${time}${utcOffset(date)}`;
}

/** "What time is it here": the browser's local time and time zone. */
export function localTime(input: unknown, now: Date = new Date()): LocalTime {
  const asked = typeof input === "object" && input !== null && "locale" in input ? input.locale : undefined;
  if (asked !== undefined && typeof asked !== "string") {
    throw new Error("locale must be a string");
  }
  const format = new Intl.DateTimeFormat(asked || undefined, { dateStyle: "full", timeStyle: "long" });
  return {
    timeZone: format.resolvedOptions().timeZone,
    utcOffset: utcOffset(now),
    localTime: format.format(now),
    iso: localIso(now),
  };
}

/** Run the page's tool `name` on `input`; an unknown tool or a failure is an error outcome. */
export function runPageTool(name: string, input: unknown): ToolOutcome {
  try {
    switch (name) {
      case LOCAL_TIME.name:
        return { output: localTime(input) };
      default:
        return { error: `The page has no tool named ${name}.` };
    }
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}
