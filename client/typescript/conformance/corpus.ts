// Reading the corpus files of tests/conformance.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

/** The corpus folder: the harness's variable, else tests/conformance of this checkout. */
export const CORPUS =
  process.env["AGENTSKIT_CHAT_CONFORMANCE_DIR"] ??
  fileURLToPath(new URL("../../../../tests/conformance/", import.meta.url));

/**
 * YAML of the corpus, integers read as `bigint` and floats as `number`, so that the matcher
 * tells `0` from `0.0` as the Python runner does.
 */
export function parseYaml(text: string): unknown {
  return parse(text, { intAsBigInt: true });
}

/** A YAML file of the corpus; see {@link parseYaml}. */
export function readYaml(path: string): unknown {
  return parseYaml(readFileSync(path, "utf8"));
}

/** A scenario file, as parsed. */
export interface Scenario {
  readonly name: string;
  readonly body: { [key: string]: unknown };
}

/** Every scenario of the corpus, sorted by name. */
export function loadScenarios(): Scenario[] {
  const directory = join(CORPUS, "scenarios");
  return readdirSync(directory)
    .filter((file) => file.endsWith(".yaml"))
    .sort()
    .map((file) => ({
      name: file.slice(0, -".yaml".length),
      body: readYaml(join(directory, file)) as Scenario["body"],
    }));
}
