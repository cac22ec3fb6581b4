// evaluate.js evaluates GoogleSQL expressions with Google's ZetaSQL
// reference implementation, as packaged by @fivetrandevelopers/zetasql (a
// prebuilt local gRPC server), with maximum language features. Each
// expression must be of type STRING (or NULL).
//
// Usage: node evaluate.js <node_modules dir> < request.json
//
// request.json: {"exprs": ["...", ...]}. Writes one JSON line per
// expression, in order: {"value": "..."}, {"value": null} or
// {"error": "..."}.
'use strict';
const path = require('path');
const { start, read } = require('./server.js');

const modules = process.argv[2];
const z = require(path.join(modules, '@fivetrandevelopers/zetasql'));

async function main() {
  const req = JSON.parse(await read(process.stdin));
  const { client, stop } = await start(z, modules);
  try {
    const lo = (await new z.LanguageOptions().enableMaximumLanguageFeatures()).serialize();
    const options = { languageOptions: lo, errorMessageMode: 'ERROR_MESSAGE_ONE_LINE' };
    for (const sql of req.exprs) {
      const out = await new Promise(resolve => z.ZetaSQLClient.API.evaluate({ sql, options }, (err, res) => {
        if (err) resolve({ error: err.details || err.message });
        else if (res.value && res.value.value === 'stringValue') resolve({ value: res.value.stringValue });
        else if (res.value && res.value.value) resolve({ error: 'not a STRING: ' + JSON.stringify(res.value) });
        else resolve({ value: null });
      }));
      process.stdout.write(JSON.stringify(out) + '\n');
    }
  } finally {
    stop();
  }
}

main().then(() => process.exit(0), e => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(2); });
