// The tools the page runs itself. They are declared with every turn the page sends; when
// the model calls one, the page runs it in the browser and sends its result back.
import type { ToolDeclarationInput } from "@agentskit/chat-client";

const LOCAL_TIME = {
  name: "local_time",
  description:
    "What time it is where the user is: the current date and time of their browser, " +
    "in its time zone.",
  parameters: {
    type: "object",
    properties: {
      locale: {
        type: "string",
        description:
          "A BCP 47 language tag for the wording of the date, e.g. en-GB " +
          "(the browser's own when absent).",
      },
    },
    additionalProperties: false,
  },
} as const satisfies ToolDeclarationInput;

/** The declarations of every tool the page runs, sent with each turn. */
export const PAGE_TOOLS: readonly ToolDeclarationInput[] = [LOCAL_TIME];

/** Whether the page runs the tool `name` itself. */
export function isPageTool(name: string): boolean {
  return PAGE_TOOLS.some((tool) => tool.name === name);
}

/** What `local_time` answers: the browser's clock in its own time zone. */
export interface LocalTime {
  /** The browser's IANA time zone, e.g. "Europe/Paris". */
  readonly timeZone: string;
  /** The offset from UTC, e.g. "+01:00". */
  readonly utcOffset: string;
  /** The date and time in words, in the locale asked for (the browser's when none). */
  readonly localTime: string;
  /** The same instant in ISO 8601, in the local zone, to the second. */
  readonly iso: string;
}

const twoDigits = (value: number): string => String(Math.trunc(Math.abs(value))).padStart(2, "0");

/** The offset of `date`'s zone from UTC as "+HH:MM". */
function offsetOf(date: Date): string {
  const minutes = -date.getTimezoneOffset();
  const sign = minutes < 0 ? "-" : "+";
  return `${sign}${twoDigits(minutes / 60)}:${twoDigits(minutes % 60)}`;
}

/** `date` as ISO 8601 in the local zone, with its offset. */
function localIso(date: Date): string {
  const day = [date.getFullYear(), twoDigits(date.getMonth() + 1), twoDigits(date.getDate())];
  const time = [date.getHours(), date.getMinutes(), date.getSeconds()].map(twoDigits);
  return `${day.join("-")}T${time.join(":")}${offsetOf(date)}`;
}

/** The browser's local time; `locale` words the date (the browser's locale when absent). */
export function localTime(locale: string | undefined, now: Date = new Date()): LocalTime {
  const format = new Intl.DateTimeFormat(locale || undefined, {
    dateStyle: "full",
    timeStyle: "long",
  });
  return {
    timeZone: format.resolvedOptions().timeZone,
    utcOffset: offsetOf(now),
    localTime: format.format(now),
    iso: localIso(now),
  };
}

/** A call the page could not run: its message goes to the model as the call's result. */
export class PageToolError extends Error {
  override readonly name = "PageToolError";
}

/** The arguments of a call as an object (JSON text; empty text reads as no arguments). */
function argumentsOf(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = text.trim() ? JSON.parse(text) : {};
  } catch {
    throw new PageToolError("The arguments are not JSON.");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new PageToolError("The arguments are not a JSON object.");
  }
  return value as Record<string, unknown>;
}

/** Run the page's tool `name` with `args` (JSON text); its result as the model reads it. */
export function runPageTool(name: string, args: string): string {
  try {
    if (name !== LOCAL_TIME.name) {
      throw new PageToolError(`The page has no tool named ${name}.`);
    }
    const { locale } = argumentsOf(args);
    if (locale !== undefined && typeof locale !== "string") {
      throw new PageToolError("locale must be a string.");
    }
    return JSON.stringify(localTime(locale));
  } catch (error) {
    // What went wrong, never the arguments: the model reads it and may call again.
    const message =
      error instanceof PageToolError
        ? error.message
        : error instanceof RangeError
          ? "locale is not a language tag the browser knows."
          : "The tool failed.";
    return JSON.stringify({ error: message });
  }
}
