// Builds the React renderer into dist/: app.js (React, the AI SDK and the page, bundled with
// esbuild in production mode), index.html and app.css.
// `node build.mjs --outdir DIR` builds elsewhere.
import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({ options: { outdir: { type: "string", default: "dist" } } });
const outdir = resolve(here, values.outdir);

await rm(outdir, { recursive: true, force: true });
await mkdir(outdir, { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.tsx")],
  outfile: join(outdir, "app.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  tsconfig: join(here, "tsconfig.json"),
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  minify: true,
  sourcemap: "linked",
  legalComments: "none",
  logLevel: "warning",
});
for (const file of ["index.html", "app.css"]) {
  await copyFile(join(here, "src", file), join(outdir, file));
}
console.log(`built the React renderer into ${outdir}`);
