// The corpus's matching rules (tests/conformance/README.md, "Matching `expect`").

/**
 * A JSON value as observations and scenario files hold them. Scenario files are read with
 * integers as `bigint` (see corpus.ts), so that an integer and a float stay apart as they
 * do for the Python runner: `0` is a default that matches an absent key, `0.0` is not.
 */
export type Json =
  | null
  | boolean
  | number
  | bigint
  | string
  | Json[]
  | { [key: string]: Json };

const ABSENT = Symbol("absent");
type Actual = Json | undefined | typeof ABSENT;

/** Every way `actual` falls short of `expected`; empty when it matches. */
export function match(expected: unknown, actual: Actual, path = ""): string[] {
  const where = path || "observation";
  if (expected === "absent") {
    return actual === ABSENT ? [] : [`${where}: expected absent, got ${show(actual)}`];
  }
  if (actual === ABSENT || actual === undefined) {
    if (expected === "present" || !isDefault(expected)) {
      return [`${where}: missing (expected ${show(expected)})`];
    }
    return [];
  }
  if (expected === "present") {
    return [];
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) {
      return [`${where}: expected a list, got ${show(actual)}`];
    }
    if (expected.length !== actual.length) {
      return [`${where}: expected ${expected.length} items, got ${actual.length}: ${show(actual)}`];
    }
    return expected.flatMap((item, index) => match(item, actual[index], `${where}.${index}`));
  }
  if (isObject(expected)) {
    if (!isObject(actual)) {
      return [`${where}: expected an object, got ${show(actual)}`];
    }
    const problems: string[] = [];
    for (const [key, value] of Object.entries(expected)) {
      if (path === "" && key === "events") {
        problems.push(...matchEvents(value, actual["events"]));
        continue;
      }
      const child = path ? `${path}.${key}` : key;
      problems.push(...match(value, key in actual ? actual[key] : ABSENT, child));
    }
    return problems;
  }
  return scalarEqual(expected, actual)
    ? []
    : [`${where}: expected ${show(expected)}, got ${show(actual)}`];
}

/** The value at a dot-separated path, as a string; undefined when nothing is there. */
export function lookup(observation: Json, path: string): string | undefined {
  let value: Json | undefined = observation;
  for (const part of path.split(".")) {
    if (Array.isArray(value) && /^\d+$/.test(part) && Number(part) < value.length) {
      value = value[Number(part)];
    } else if (isObject(value) && part in value) {
      value = value[part];
    } else {
      return undefined;
    }
  }
  return typeof value === "string" ? value : show(value);
}

function matchEvents(pattern: unknown, kinds: Json | undefined): string[] {
  if (!Array.isArray(pattern) || !pattern.every((item) => typeof item === "string")) {
    return [`events: the pattern must be a list of kinds, got ${show(pattern)}`];
  }
  const seen = Array.isArray(kinds) ? kinds : [];
  const regex = pattern
    .map((item) => {
      if (item.endsWith("+")) return `(?:${escape(item.slice(0, -1))},)+`;
      if (item.endsWith("*")) return `(?:${escape(item.slice(0, -1))},)*`;
      return `${escape(item)},`;
    })
    .join("");
  const text = seen.map((kind) => `${String(kind)},`).join("");
  return new RegExp(`^${regex}$`).test(text)
    ? []
    : [`events: expected ${show(pattern)}, got ${show(seen)}`];
}

/** A default proto JSON omits: `false`, the integer `0`, `""`, `[]` or `{}`. */
function isDefault(value: unknown): boolean {
  if (value === false || value === 0n || value === "") return true;
  if (Array.isArray(value)) return value.length === 0;
  return isObject(value) && Object.keys(value).length === 0;
}

function scalarEqual(expected: unknown, actual: Json): boolean {
  if (typeof expected === "boolean" || typeof actual === "boolean") {
    return expected === actual;
  }
  if (isNumber(expected) && isNumber(actual)) {
    return Number(expected) === Number(actual);
  }
  if (isNumber(expected) && typeof actual === "string") {
    return written(expected) === actual; // proto JSON writes int64 as strings
  }
  if (typeof expected === "string" && isNumber(actual)) {
    return expected === String(actual); // a captured cursor against a number
  }
  return expected === actual;
}

function isNumber(value: unknown): value is number | bigint {
  return typeof value === "number" || typeof value === "bigint";
}

/** A scenario's number as text: an integer in digits, a float with its fraction (`2.0`). */
function written(value: number | bigint): string {
  return typeof value === "number" && Number.isInteger(value) ? value.toFixed(1) : String(value);
}

/** A value for a message: JSON, with bigints in digits. */
export function show(value: unknown): string {
  if (value === ABSENT) return "nothing";
  return JSON.stringify(value, (_key, item: unknown) =>
    typeof item === "bigint" ? Number(item) : item,
  ) ?? String(value);
}

function isObject(value: unknown): value is { [key: string]: Json } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
